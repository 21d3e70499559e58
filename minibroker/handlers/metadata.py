"""Metadata (key 3), versions 0-13.

A null topic list (v1+) asks for every topic; an empty list for none. Unknown topics
are created when both the broker (auto.create.topics.enable) and the request
(allow_auto_topic_creation, v4+) allow it, and reported UNKNOWN_TOPIC_OR_PARTITION
otherwise. Topics named by id only (v10+) are looked up by id.
Not done: authorized operations (reported as -2147483648, "not requested").
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.topics import Topic, TopicError

OPERATIONS_NOT_REQUESTED = -(2**31)


def _topic_entry(ctx: RequestContext, topic: Topic) -> Any:
    partitions = tuple(
        ctx.make(
            "MetadataResponsePartition",
            error_code=ErrorCode.none,
            partition_index=p.index,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=(p.leader,),
            isr_nodes=(p.leader,),
            offline_replicas=(),
        )
        for p in topic.partitions
    )
    return ctx.make(
        "MetadataResponseTopic",
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=partitions,
        topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


def _error_entry(ctx: RequestContext, name: str | None, code: int, topic_id: Any = None) -> Any:
    return ctx.make(
        "MetadataResponseTopic",
        error_code=error(code),
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


@api(3, "Metadata", 0, 13)
def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.cluster
    requested = request.topics
    if ctx.version == 0 and not requested:
        requested = None  # v0 has no null list: empty means all
    allow_create = cluster.config.auto_create_topics and getattr(
        request, "allow_auto_topic_creation", True
    )
    entries: list[Any] = []
    if requested is None:
        entries = [_topic_entry(ctx, topic) for topic in cluster.topics]
    else:
        for wanted in requested:
            name = wanted.name
            if name is None:
                found = cluster.topics.by_id(wanted.topic_id)
                if found is None:
                    entries.append(
                        _error_entry(ctx, None, 100, wanted.topic_id)
                    )  # UNKNOWN_TOPIC_ID
                else:
                    entries.append(_topic_entry(ctx, found))
                continue
            topic = cluster.topics.get(name)
            if topic is None and allow_create:
                try:
                    topic = cluster.topics.create(name, cluster.config.num_partitions)
                except TopicError as exc:
                    entries.append(_error_entry(ctx, name, exc.error_code))
                    continue
            if topic is None:
                entries.append(_error_entry(ctx, name, 3))  # UNKNOWN_TOPIC_OR_PARTITION
            else:
                entries.append(_topic_entry(ctx, topic))
    brokers = tuple(
        ctx.make("MetadataResponseBroker", node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
        for n in sorted(cluster.nodes.values(), key=lambda n: n.node_id)
    )
    return ctx.response(
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=tuple(entries),
        cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
        error_code=ErrorCode.none,
    )
