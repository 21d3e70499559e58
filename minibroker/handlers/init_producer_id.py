"""InitProducerId (key 22), versions 0-5.

Gives an idempotent producer a fresh id at epoch 0. A producer that presents its current
id and epoch (v3+, KIP-360) gets the epoch bumped; a stale pair is INVALID_PRODUCER_EPOCH.
A transactional id keeps its producer id and gets the next epoch on each call.
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
    presented_id = getattr(request, "producer_id", -1)
    presented_epoch = getattr(request, "producer_epoch", -1)
    code = ErrorCode.none
    producer_id, epoch = -1, -1
    if request.transactional_id is not None:
        producer_id, epoch = allocator.for_transactional_id(request.transactional_id)
    elif presented_id != -1:
        bumped = allocator.bump(presented_id, presented_epoch)
        if bumped is None:
            code = ErrorCode.invalid_producer_epoch
        else:
            producer_id, epoch = bumped
    else:
        producer_id, epoch = allocator.allocate()
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
        ongoing_txn_producer_id=-1,
        ongoing_txn_producer_epoch=-1,
    )
