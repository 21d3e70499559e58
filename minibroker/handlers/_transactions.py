"""Helpers shared by the transaction handlers: the coordinator check and the error code a
request's version knows for a fenced producer."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from minibroker.handlers.registry import RequestContext
from minibroker.state import transaction_rules as rules
from minibroker.state.cluster import TRANSACTION_KEY


def is_transaction_coordinator(ctx: RequestContext, transactional_id: str) -> bool:
    return ctx.cluster.coordinator_for(transactional_id, TRANSACTION_KEY) == ctx.node_id


def versioned(code: int, version: int, fenced_from: int) -> ErrorCode:
    """PRODUCER_FENCED as the request's version knows it: INVALID_PRODUCER_EPOCH before
    `fenced_from`, the version that added PRODUCER_FENCED (as Kafka answers)."""
    if code == rules.PRODUCER_FENCED and version < fenced_from:
        return ErrorCode(rules.INVALID_PRODUCER_EPOCH)
    return ErrorCode(code)
