"""EndTxn (key 26), versions 0-4.

Commits or aborts the open transaction: a marker in each of its partitions and its
groups' pending offsets committed or dropped, all before the answer (Kafka writes the
markers after answering; here they are in place when the client hears back). Rules:
state/transaction_rules.py. Only the transactional id's coordinator answers.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers._transactions import is_transaction_coordinator, versioned
from minibroker.handlers.registry import RequestContext, api

FENCED_FROM_VERSION = 2


@api(26, "EndTxn", 0, 4)
def handle(ctx: RequestContext, request: Any) -> Any:
    if not request.transactional_id:
        code: int = ErrorCode.invalid_request
    elif not is_transaction_coordinator(ctx, request.transactional_id):
        code = ErrorCode.not_coordinator
    else:
        code = ctx.cluster.transactions.end(
            ctx.cluster.clock.monotonic(),
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            commit=request.committed,
        )
    return ctx.response(
        throttle_time=NO_THROTTLE, error_code=versioned(code, ctx.version, FENCED_FROM_VERSION)
    )
