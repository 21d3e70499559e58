"""AddOffsetsToTxn (key 25), versions 0-4.

Adds a consumer group's offsets to the transaction (its TxnOffsetCommits then wait for the
transaction's end), with AddPartitionsToTxn's rules (state/transaction_rules.py). Only the
transactional id's coordinator answers (NOT_COORDINATOR elsewhere).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers._transactions import is_transaction_coordinator, versioned
from minibroker.handlers.registry import RequestContext, api

FENCED_FROM_VERSION = 2


@api(25, "AddOffsetsToTxn", 0, 4)
def handle(ctx: RequestContext, request: Any) -> Any:
    if not request.transactional_id or not request.group_id:
        code: int = ErrorCode.invalid_request
    elif not is_transaction_coordinator(ctx, request.transactional_id):
        code = ErrorCode.not_coordinator
    else:
        code = ctx.cluster.transactions.add_offsets(
            ctx.cluster.clock.monotonic(),
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.group_id,
        )
    return ctx.response(
        throttle_time=NO_THROTTLE, error_code=versioned(code, ctx.version, FENCED_FROM_VERSION)
    )
