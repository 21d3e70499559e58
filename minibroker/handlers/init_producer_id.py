"""InitProducerId (key 22), versions 0-5.

Gives an idempotent producer (no transactional id) a fresh id at epoch 0 on every call,
whatever id and epoch it presents, as Kafka does; the client bumps its own epoch between
calls (KIP-360). A transactional id keeps its producer id and gets the next epoch on each
call.
Not done: transactions themselves (no AddPartitionsToTxn / EndTxn yet); two-phase commit
fields of v6 are not served.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api


@api(22, "InitProducerId", 0, 5)
def handle(ctx: RequestContext, request: Any) -> Any:
    allocator = ctx.cluster.producer_ids
    if request.transactional_id is not None:
        producer_id, epoch = allocator.for_transactional_id(request.transactional_id)
    else:
        producer_id, epoch = allocator.allocate()
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=producer_id,
        producer_epoch=epoch,
        ongoing_txn_producer_id=-1,
        ongoing_txn_producer_epoch=-1,
    )
