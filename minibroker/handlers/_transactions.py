"""Helpers shared by the transaction handlers: the coordinator check, the error code a
request's version knows for a fenced producer, and the implicit add of transaction
version 2."""

from __future__ import annotations

from collections.abc import Iterable

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


def add_implicitly(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    *,
    partitions: Iterable[tuple[str, int]] = (),
    groups: Iterable[str] = (),
) -> int:
    """Produce v12+ and TxnOffsetCommit v5+ add their partition or group to the
    transaction themselves (state/transaction_rules.py)."""
    return ctx.cluster.transactions.add_implicitly(
        ctx.cluster.clock.monotonic(),
        transactional_id,
        producer_id,
        epoch,
        partitions=partitions,
        groups=groups,
    )
