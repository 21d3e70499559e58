"""AddPartitionsToTxn (key 24), versions 0-5.

v0-3 (clients) add one transactional id's partitions to its transaction; v4+ (the form
brokers send) carry a batch of transactional ids, each either added or, with verify_only,
checked: a partition not in the open transaction is TRANSACTION_ABORTABLE, at v4 as at v5
(Kafka 4.4 answers both so). Clients of transaction version 2 do not send it for their
partitions: Produce v12 adds them. The rules: state/transaction_rules.py. Partitions
are checked first: one that does not exist is UNKNOWN_TOPIC_OR_PARTITION and the
request's others OPERATION_NOT_ATTEMPTED, nothing added. Only the transactional id's
coordinator answers (NOT_COORDINATOR elsewhere).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers._transactions import is_transaction_coordinator, versioned
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import transaction_rules as rules
from minibroker.state.acl import Operation, ResourceType

FENCED_FROM_VERSION = 2
FIRST_BATCHED_VERSION = 4


def _results(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    topics: Any,
    verify_only: bool,
) -> dict[tuple[str, int], int]:
    wanted = [(topic.name, index) for topic in topics for index in topic.partitions]
    if not transactional_id:
        return dict.fromkeys(wanted, rules.INVALID_REQUEST)
    if not ctx.allows(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(wanted, int(ErrorCode.transactional_id_authorization_failed))
    denied = {
        (name, index)
        for name, index in wanted
        if not ctx.allows(Operation.WRITE, ResourceType.TOPIC, name)
    }
    if denied:
        untried = dict.fromkeys(wanted, rules.OPERATION_NOT_ATTEMPTED)
        return {**untried, **dict.fromkeys(denied, int(ErrorCode.topic_authorization_failed))}
    if not is_transaction_coordinator(ctx, transactional_id):
        return dict.fromkeys(wanted, rules.NOT_COORDINATOR)
    missing = {
        (name, index)
        for name, index in wanted
        if (found := ctx.cluster.topics.get(name)) is None or not 0 <= index < len(found.partitions)
    }
    if missing:
        untried = dict.fromkeys(wanted, rules.OPERATION_NOT_ATTEMPTED)
        return {**untried, **dict.fromkeys(missing, rules.UNKNOWN_TOPIC_OR_PARTITION)}
    coordinator = ctx.cluster.transactions
    if verify_only:
        return coordinator.verify_partitions(transactional_id, producer_id, epoch, wanted)
    code = coordinator.add_partitions(
        ctx.cluster.clock.monotonic(), transactional_id, producer_id, epoch, wanted
    )
    return dict.fromkeys(wanted, code)


def _topic_results(ctx: RequestContext, codes: dict[tuple[str, int], int]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (name, index), code in codes.items():
        by_topic.setdefault(name, []).append(
            ctx.make(
                "AddPartitionsToTxnPartitionResult",
                partition_index=index,
                partition_error_code=versioned(code, ctx.version, FENCED_FROM_VERSION),
            )
        )
    return tuple(
        ctx.make("AddPartitionsToTxnTopicResult", name=name, results_by_partition=tuple(results))
        for name, results in by_topic.items()
    )


@api(24, "AddPartitionsToTxn", 0, 5)
def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.version < FIRST_BATCHED_VERSION:
        codes = _results(
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            request.v3_and_below_topics,
            verify_only=False,
        )
        return ctx.response(
            throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=_topic_results(ctx, codes)
        )
    results = tuple(
        ctx.make(
            "AddPartitionsToTxnResult",
            transactional_id=txn.transactional_id,
            topic_results=_topic_results(
                ctx,
                _results(
                    ctx,
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    txn.topics,
                    verify_only=txn.verify_only,
                ),
            ),
        )
        for txn in request.transactions
    )
    return ctx.response(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results_by_transaction=results
    )
