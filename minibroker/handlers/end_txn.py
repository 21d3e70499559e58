"""EndTxn (key 26), versions 0-5.

Commits or aborts the open transaction: a marker in each of its partitions and its
groups' pending offsets committed or dropped, all before the answer (Kafka writes the
markers after answering; here they are in place when the client hears back). v0-4 are
transaction version 1: the epoch stays. v5 is version 2 (KIP-890 part 2): every end, and
an abort with nothing open, moves the epoch on (a new producer id after epoch 32766), and
the answer carries the producer id and epoch the client goes on with (-1 and -1 with an
error). Rules: state/transaction_rules.py. Only the transactional id's coordinator
answers.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers._transactions import is_transaction_coordinator, versioned
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.transactions import InitResult

FENCED_FROM_VERSION = 2
EPOCH_BUMP_VERSION = 5


def _end(ctx: RequestContext, request: Any) -> InitResult:
    if not request.transactional_id:
        return InitResult(ErrorCode.invalid_request)
    if not is_transaction_coordinator(ctx, request.transactional_id):
        return InitResult(ErrorCode.not_coordinator)
    coordinator, now = ctx.cluster.transactions, ctx.cluster.clock.monotonic()
    ids = (request.transactional_id, request.producer_id, request.producer_epoch)
    if ctx.version >= EPOCH_BUMP_VERSION:
        return coordinator.end_bumping_epoch(now, *ids, commit=request.committed)
    return InitResult(coordinator.end(now, *ids, commit=request.committed))


@api(26, "EndTxn", 0, 5)
def handle(ctx: RequestContext, request: Any) -> Any:
    result = _end(ctx, request)
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=versioned(result.error, ctx.version, FENCED_FROM_VERSION),
        producer_id=result.producer_id,
        producer_epoch=result.epoch,
    )
