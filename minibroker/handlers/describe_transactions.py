"""DescribeTransactions (key 65), version 0.

Each transactional id's state as its coordinator holds it: state name, timeout, start
time of the open or last completed transaction (-1 from InitProducerId on), producer id
and epoch, and the partitions in the open transaction. An id this node does not
coordinate is NOT_COORDINATOR; one the coordinator does not know (never initialised, or
expired) TRANSACTIONAL_ID_NOT_FOUND.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers._transactions import is_transaction_coordinator
from minibroker.handlers.registry import RequestContext, api


def _wall_time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _state(ctx: RequestContext, transactional_id: str) -> Any:
    txn = None
    if not is_transaction_coordinator(ctx, transactional_id):
        code = ErrorCode.not_coordinator
    elif (txn := ctx.cluster.transactions.describe(transactional_id)) is None:
        code = ErrorCode.transactional_id_not_found
    else:
        code = ErrorCode.none
    topics: dict[str, list[int]] = {}
    for name, index in sorted(txn.partitions if txn else ()):
        topics.setdefault(name, []).append(index)
    return ctx.make(
        "TransactionState",
        error_code=code,
        transactional_id=transactional_id,
        transaction_state=txn.state.value if txn else "",
        transaction_timeout=datetime.timedelta(milliseconds=txn.timeout_ms if txn else 0),
        # An error answer carries the fields' defaults (zeros), as Kafka's does.
        transaction_start_time=_wall_time(txn.start_wall_ms if txn else 0),
        producer_id=txn.producer_id if txn else 0,
        producer_epoch=txn.epoch if txn else 0,
        topics=tuple(
            ctx.make("TopicData", topic=name, partitions=tuple(indexes))
            for name, indexes in topics.items()
        ),
    )


@api(65, "DescribeTransactions", 0, 0)
def handle(ctx: RequestContext, request: Any) -> Any:
    return ctx.response(
        throttle_time=NO_THROTTLE,
        transaction_states=tuple(_state(ctx, tid) for tid in request.transactional_ids),
    )
