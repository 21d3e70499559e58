"""DescribeProducers (key 61), version 0.

For each partition asked for, the idempotent producers the partition holds state for
(state/producers.py), by producer id: producer id, epoch, the last sequence and the max
timestamp of the last batch appended, coordinator epoch -1 and the first offset of its
open transaction in the partition (-1 when none is open). A partition no idempotent
producer wrote to has none. As on Kafka, topics and partitions are answered in the order
asked (repeats included); an illegal topic name is INVALID_TOPIC_EXCEPTION and an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, both with a message, for each of its partitions; an unknown
partition of a known topic is UNKNOWN_TOPIC_OR_PARTITION and a partition led by another
broker NOT_LEADER_OR_FOLLOWER, both without one.
Not done: producer state expiry (producer.id.expiration.ms): state is kept while the
partition exists. On a LogAppendTime topic the last timestamp is the producer's, where
Kafka reports the append time.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.topic_errors import TopicError
from minibroker.state.topics import Topic, validate_topic_name

NO_COORDINATOR_EPOCH = -1
NO_TXN_START_OFFSET = -1
# Kafka's message for UNKNOWN_TOPIC_OR_PARTITION (Errors.java), sent with a topic error.
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


def _partition(
    ctx: RequestContext,
    index: int,
    code: ErrorCode,
    message: str | None = None,
    producers: tuple[Any, ...] = (),
) -> Any:
    return ctx.make(
        "PartitionResponse",
        partition_index=index,
        error_code=code,
        error_message=message,
        active_producers=producers,
    )


def _or_none(offset: int | None) -> int:
    return NO_TXN_START_OFFSET if offset is None else offset


def _described(ctx: RequestContext, topic: Topic, index: int) -> Any:
    if not 0 <= index < len(topic.partitions):
        return _partition(ctx, index, ErrorCode.unknown_topic_or_partition)
    partition = topic.partitions[index]
    if partition.leader != ctx.node_id:
        return _partition(ctx, index, ErrorCode.not_leader_or_follower)
    producers = tuple(
        ctx.make(
            "ProducerState",
            producer_id=state.producer_id,
            producer_epoch=state.epoch,
            last_sequence=state.last_sequence,
            last_timestamp=state.last_timestamp,
            coordinator_epoch=NO_COORDINATOR_EPOCH,
            current_txn_start_offset=_or_none(
                partition.log.open_transaction_start(state.producer_id)
            ),
        )
        for state in partition.producers.active()
    )
    return _partition(ctx, index, ErrorCode.none, producers=producers)


def _missing(name: str) -> tuple[ErrorCode, str]:
    """The error of a topic that does not exist (an illegal name never does)."""
    try:
        validate_topic_name(name)
    except TopicError as exc:
        return ErrorCode.invalid_topic_exception, exc.message
    return ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_MESSAGE


@api(61, "DescribeProducers", 0, 0)
def handle(ctx: RequestContext, request: Any) -> Any:
    topics = []
    for wanted in request.topics:
        topic = ctx.cluster.topics.get(wanted.name)
        if topic is not None:
            partitions = tuple(_described(ctx, topic, i) for i in wanted.partition_indexes)
        else:
            code, message = _missing(wanted.name)
            partitions = tuple(_partition(ctx, i, code, message) for i in wanted.partition_indexes)
        topics.append(ctx.make("TopicResponse", name=wanted.name, partitions=partitions))
    return ctx.response(throttle_time=NO_THROTTLE, topics=tuple(topics))
