"""Metadata (key 3), versions 0-13.

A null topic list (v1+) asks for every topic; an empty list for none. Unknown topics
are created when both the broker (auto.create.topics.enable) and the request
(allow_auto_topic_creation, v4+) allow it, and reported UNKNOWN_TOPIC_OR_PARTITION
otherwise; auto-creation beyond max_partitions_per_request in one request gets
POLICY_VIOLATION. A topic with a non-zero id (v10+) is looked up by id, whatever its
name says (Java sends "" there); an unknown id is UNKNOWN_TOPIC_ID, with a null name
where the version allows one and "" before v12. A topic named twice (or by name and
by id) is answered once. With ACLs on, a topic needs DESCRIBE (and, to be created,
CREATE on it or on the cluster), else TOPIC_AUTHORIZATION_FAILED, whether it exists or
not; asked for every topic, the answer leaves out those the client may not describe.
Asked for (v8+ include_topic_authorized_operations), each topic the client may describe,
existing or not, carries its authorized operations on it; asked for
(v8-10 include_cluster_authorized_operations), the answer carries those on the cluster
(handlers/_acls.py), as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import authorized_operations, may_create_topic
from minibroker.handlers._common import NO_THROTTLE, CreationAllowance, error
from minibroker.handlers.registry import RequestContext, api
from minibroker.protocol.messages import SplicedResponse, StringVariants, encode_entity
from minibroker.state.acl import CLUSTER_NAME, OPERATIONS_NOT_REQUESTED, Operation, ResourceType
from minibroker.state.topic_errors import POLICY_VIOLATION, TopicError
from minibroker.state.topics import Topic

UNKNOWN_TOPIC_ID = 100
TOPIC_AUTHORIZATION_FAILED = 29
NULLABLE_NAME_VERSION = 12  # response topic names are nullable from v12


def _topic_entry(ctx: RequestContext, topic: Topic, operations: int) -> Any:
    partitions = tuple(
        ctx.make(
            "MetadataResponsePartition",
            error_code=ErrorCode.none,
            partition_index=p.index,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=tuple(p.replicas),
            isr_nodes=tuple(p.isr),
            offline_replicas=tuple(p.offline_replicas),
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
        topic_authorized_operations=operations,
    )


def _encoded_entry(ctx: RequestContext, topic: Topic, operations: int) -> bytes:
    """The topic's entry, encoded once per version, partition count and authorized
    operations."""
    key = (ctx.version, len(topic.partitions), operations)
    encoded = topic.encoded.get(key)
    if encoded is None:
        encoded = topic.encoded[key] = encode_entity(_topic_entry(ctx, topic, operations))
    return encoded


def _suffix_size(version: int) -> int:
    """Bytes of a response body after its topics array: cluster_authorized_operations
    (v8-10), error_code (v13+) and, for flexible versions (v9+), an empty tag section."""
    return (4 if 8 <= version <= 10 else 0) + (2 if version >= 13 else 0) + (version >= 9)


_ERROR_ENTRIES: dict[tuple[int, int, int], StringVariants] = {}


def _error_entry(
    ctx: RequestContext,
    name: str | None,
    code: int,
    topic_id: Any = None,
    operations: int = OPERATIONS_NOT_REQUESTED,
) -> bytes:
    """An entry for a topic that cannot be described; for a name, built from a template
    (a request may name 100,000 unknown topics)."""
    if name is not None and topic_id is None:
        key = (ctx.version, code, operations)
        variants = _ERROR_ENTRIES.get(key)
        if variants is None:
            template = _error_entity(ctx, "", code, None, operations)
            variants = _ERROR_ENTRIES[key] = StringVariants(template, "name")
        return variants.encode(name)
    return encode_entity(_error_entity(ctx, name, code, topic_id, operations))


def _error_entity(
    ctx: RequestContext, name: str | None, code: int, topic_id: Any, operations: int
) -> Any:
    return ctx.make(
        "MetadataResponseTopic",
        error_code=error(code),
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=operations,
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
    include_operations = bool(getattr(request, "include_topic_authorized_operations", False))

    def operations(name: str) -> int:
        return authorized_operations(ctx, ResourceType.TOPIC, name, include_operations)

    entries: list[bytes] = []
    allowance = CreationAllowance(cluster.config.max_partitions_per_request)
    if requested is None:
        # With ACLs on, a topic the client may not describe is left out.
        entries = [
            _encoded_entry(ctx, topic, operations(topic.name))
            for topic in cluster.topics
            if ctx.allows(Operation.DESCRIBE, ResourceType.TOPIC, topic.name)
        ]
    else:
        # Kafka answers each topic once, however often the request names it.
        answered: set[object] = set()
        for wanted in requested:
            name = wanted.name
            topic_id = getattr(wanted, "topic_id", None)
            if (topic_id is not None and topic_id.int != 0) or name is None:
                found = cluster.topics.by_id(topic_id) if topic_id is not None else None
                if (found.name if found is not None else topic_id) in answered:
                    continue
                if found is None:
                    answered.add(topic_id)
                    unknown_name = None if ctx.version >= NULLABLE_NAME_VERSION else ""
                    entries.append(_error_entry(ctx, unknown_name, UNKNOWN_TOPIC_ID, topic_id))
                elif not ctx.allows(Operation.DESCRIBE, ResourceType.TOPIC, found.name):
                    answered.add(found.name)
                    entries.append(_error_entry(ctx, found.name, TOPIC_AUTHORIZATION_FAILED))
                else:
                    answered.add(found.name)
                    entries.append(_encoded_entry(ctx, found, operations(found.name)))
                continue
            if name in answered:
                continue
            answered.add(name)
            topic = cluster.topics.get(name)
            if not ctx.allows(Operation.DESCRIBE, ResourceType.TOPIC, name) or (
                topic is None and allow_create and not may_create_topic(ctx, name)
            ):
                entries.append(_error_entry(ctx, name, TOPIC_AUTHORIZATION_FAILED))
                continue
            if topic is None and allow_create:
                if not allowance.take(cluster.config.num_partitions):
                    entries.append(
                        _error_entry(ctx, name, POLICY_VIOLATION, None, operations(name))
                    )
                    continue
                try:
                    topic = cluster.topics.create(name, cluster.config.num_partitions)
                except TopicError as exc:
                    entries.append(_error_entry(ctx, name, exc.error_code, None, operations(name)))
                    continue
            injected = ctx.injected_error(name, None)
            if injected is not None:
                entries.append(_error_entry(ctx, name, int(injected), None, operations(name)))
            elif topic is None:
                # UNKNOWN_TOPIC_OR_PARTITION
                entries.append(_error_entry(ctx, name, 3, None, operations(name)))
            else:
                entries.append(_encoded_entry(ctx, topic, operations(name)))
    brokers = tuple(
        ctx.make("MetadataResponseBroker", node_id=n.node_id, host=host, port=port, rack=n.rack)
        for n in sorted(cluster.nodes.values(), key=lambda n: n.node_id)
        for host, port in (ctx.endpoint(n),)
    )
    response = ctx.response(
        throttle_time=NO_THROTTLE,
        brokers=brokers,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=(),
        cluster_authorized_operations=authorized_operations(
            ctx,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
            asked=bool(getattr(request, "include_cluster_authorized_operations", False)),
        ),
        error_code=ErrorCode.none,
    )
    return SplicedResponse(response, entries, _suffix_size(ctx.version))
