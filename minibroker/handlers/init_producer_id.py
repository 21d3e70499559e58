"""InitProducerId (key 22), versions 0-5.

Gives an idempotent producer (no transactional id) a fresh id at epoch 0 on every call,
whatever id and epoch it presents, as Kafka does; the client bumps its own epoch between
calls (KIP-360). A transactional id goes to the transaction coordinator
(state/transaction_rules.py: InitProducerId): the same producer id at the next epoch,
fencing the previous producer and aborting its open transaction. Only the transactional
id's coordinator answers it (NOT_COORDINATOR elsewhere); "" is INVALID_REQUEST.
Not done: the two-phase commit fields of v6.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, millis
from minibroker.handlers._transactions import is_transaction_coordinator, versioned
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.transactions import InitResult

FENCED_FROM_VERSION = 4


def _transactional(ctx: RequestContext, request: Any) -> InitResult:
    transactional_id = request.transactional_id
    if not transactional_id:
        return InitResult(ErrorCode.invalid_request)
    if not is_transaction_coordinator(ctx, transactional_id):
        return InitResult(ErrorCode.not_coordinator)
    return ctx.cluster.transactions.init_producer_id(
        ctx.cluster.clock.monotonic(),
        transactional_id,
        millis(request.transaction_timeout),
        getattr(request, "producer_id", -1),
        getattr(request, "producer_epoch", -1),
    )


@api(22, "InitProducerId", 0, 5)
def handle(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        result = _transactional(ctx, request)
    else:
        producer_id, epoch = ctx.cluster.producer_ids.allocate()
        result = InitResult(ErrorCode.none, producer_id, epoch)
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=versioned(result.error, ctx.version, FENCED_FROM_VERSION),
        producer_id=result.producer_id,
        producer_epoch=result.epoch,
        ongoing_txn_producer_id=-1,
        ongoing_txn_producer_epoch=-1,
    )
