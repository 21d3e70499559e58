"""DescribeTopicPartitions (key 75), version 0.

Describes topics by name, or every topic when the request names none, a page at a time,
as Kafka 3.9's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache do: the
topics are taken in name order (Java's String order), starting at the cursor's topic
(its partition index there, 0 in every later topic), and at most
response_partition_limit partitions (clamped to 1-2000, Kafka's
max.request.partition.size.limit) are answered. When the limit stops inside a topic,
next_cursor names that topic and its first partition left out; when it is used up at the
end of a topic and more topics follow, it names the next topic at partition 0; null when
everything was answered. Each partition reports its leader, leader epoch, the leader as
the only replica and in-sync replica, no eligible leader replicas, no last known ELR and
no offline replicas. A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (an
illegal name INVALID_TOPIC_EXCEPTION), with no partitions and a zero topic id, and uses
none of the limit. A cursor whose partition index is negative, or whose topic is not
among the topics named, is INVALID_REQUEST for every topic named (Kafka's error
response: no partitions, no cursor).
Each topic the client may describe, existing or not, carries its authorized operations
on it (handlers/_acls.py; the request has no switch for them, and Kafka always fills
them in).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import authorized_operations
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import OPERATIONS_NOT_REQUESTED, Operation, ResourceType
from minibroker.state.cluster import OFFSETS_TOPIC, TRANSACTION_TOPIC
from minibroker.state.topic_errors import TopicError
from minibroker.state.topics import Topic, validate_topic_name

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit
ZERO_UUID = uuid.UUID(int=0)
INT32_SPAN = 2**32


def _java_order(name: str) -> bytes:
    """Sort key giving Java's String.compareTo order (UTF-16 code units)."""
    return name.encode("utf-16-be", "surrogatepass")


def _java_int(value: int) -> int:
    """`value` wrapped to a Java int, as Kafka's start index + limit overflows."""
    return (value + 2**31) % INT32_SPAN - 2**31


def _partitions(ctx: RequestContext, topic: Topic, start: int, limit: int) -> tuple[Any, int]:
    """Partitions start.. of `topic`, at most `limit` of them, and the index of the first
    one left out (-1 when none is)."""
    upper = min(len(topic.partitions), _java_int(start + limit))
    next_index = upper if upper < len(topic.partitions) else -1
    partitions = tuple(
        ctx.make(
            "DescribeTopicPartitionsResponsePartition",
            error_code=ErrorCode.none,
            partition_index=p.index,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=tuple(p.replicas),
            isr_nodes=tuple(p.isr),
            eligible_leader_replicas=(),
            last_known_elr=(),
            offline_replicas=tuple(p.offline_replicas),
        )
        for p in topic.partitions[start : max(upper, start)]
    )
    return partitions, next_index


def _topic_entry(
    ctx: RequestContext,
    name: str,
    code: ErrorCode,
    topic_id: uuid.UUID,
    internal: bool,
    partitions: tuple[Any, ...] = (),
    operations: int = OPERATIONS_NOT_REQUESTED,
) -> Any:
    return ctx.make(
        "DescribeTopicPartitionsResponseTopic",
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=internal,
        partitions=partitions,
        topic_authorized_operations=operations,
    )


def _missing_entry(ctx: RequestContext, name: str) -> Any:
    try:
        validate_topic_name(name)
        code = ErrorCode.unknown_topic_or_partition
    except TopicError:
        code = ErrorCode.invalid_topic_exception
    internal = name in (OFFSETS_TOPIC, TRANSACTION_TOPIC)
    operations = authorized_operations(ctx, ResourceType.TOPIC, name)
    return _topic_entry(ctx, name, code, ZERO_UUID, internal, (), operations)


def _invalid_request(ctx: RequestContext, request: Any) -> Any:
    """Kafka's error response: each topic named, with the error and nothing else."""
    topics = tuple(
        _topic_entry(ctx, wanted.name, ErrorCode.invalid_request, ZERO_UUID, False)
        for wanted in request.topics
    )
    return ctx.response(throttle_time=NO_THROTTLE, topics=topics, next_cursor=None)


@api(75, "DescribeTopicPartitions", 0, 0)
def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.cluster
    cursor = request.cursor
    fetch_all = not request.topics
    cursor_key = _java_order(cursor.topic_name) if cursor is not None else b""
    candidates = cluster.topics.names() if fetch_all else {t.name for t in request.topics}
    # With ACLs on, a topic needs DESCRIBE: listing all leaves it out, naming it is refused.
    hidden = {n for n in candidates if not ctx.allows(Operation.DESCRIBE, ResourceType.TOPIC, n)}
    names = sorted((n for n in candidates if _java_order(n) >= cursor_key), key=_java_order)
    if cursor is not None and (
        cursor.partition_index < 0 or (not fetch_all and cursor.topic_name not in candidates)
    ):
        return _invalid_request(ctx, request)
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
    entries: list[Any] = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            next_cursor = ctx.make("Cursor", topic_name=name, partition_index=0)
            break
        if name in hidden:
            if not fetch_all:
                code = ErrorCode.topic_authorization_failed
                entries.append(_topic_entry(ctx, name, code, ZERO_UUID, False))
            continue
        topic = cluster.topics.get(name)
        if topic is None:
            if not fetch_all:
                entries.append(_missing_entry(ctx, name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        partitions, next_index = _partitions(ctx, topic, start, remaining)
        entries.append(
            _topic_entry(
                ctx,
                name,
                ErrorCode.none,
                topic.topic_id,
                topic.internal,
                tuple(partitions),
                authorized_operations(ctx, ResourceType.TOPIC, name),
            )
        )
        if next_index != -1:
            next_cursor = ctx.make("Cursor", topic_name=name, partition_index=next_index)
            break
        remaining -= len(partitions)
    return ctx.response(throttle_time=NO_THROTTLE, topics=tuple(entries), next_cursor=next_cursor)
