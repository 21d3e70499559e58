"""What ShareFetch and ShareAcknowledge share: partition lookup, leaders, the
acknowledgement checks of Kafka 4.4's KafkaApis, and applying acknowledgements."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers.registry import OPEN_SESSION, RequestContext
from minibroker.state.acl import Operation, ResourceType
from minibroker.state.cluster import ClusterState
from minibroker.state.share_partitions import ACK_RENEW
from minibroker.state.share_sessions import ShareSession
from minibroker.state.topics import Topic

FIRST_RENEW_VERSION = 2
MAX_MEMBER_ID_LENGTH = 36
NO_LEADER = (-1, -1)


def lock_timeout(ctx: RequestContext, group_id: str) -> datetime.timedelta:
    """The group's acquisition lock duration (the responses' acquisition_lock_timeout)."""
    ms = ctx.cluster.group_configs.int_value(group_id, "share.record.lock.duration.ms")
    return datetime.timedelta(milliseconds=ms)


def locate(
    ctx: RequestContext, topic_id: uuid.UUID | None, index: int
) -> tuple[Topic | None, ErrorCode]:
    """The topic of a requested partition if this node can serve it, else why not."""
    topic = None if topic_id is None else ctx.cluster.topics.by_id(topic_id)
    if topic is None:
        return None, ErrorCode.unknown_topic_id
    if ctx.screened:
        injected = ctx.injected_error(topic.name, index)
        if injected is not None:
            return topic, injected
    if not 0 <= index < len(topic.partitions):
        return topic, ErrorCode.unknown_topic_or_partition
    if topic.partitions[index].leader != ctx.node_id:
        return topic, ErrorCode.not_leader_or_follower
    return topic, ErrorCode.none


def leader_of(topic: Topic | None, index: int) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition, (-1, -1) when there is none."""
    if topic is None or not 0 <= index < len(topic.partitions):
        return NO_LEADER
    partition = topic.partitions[index]
    return partition.leader, partition.leader_epoch


def endpoints(ctx: RequestContext, leader_ids: set[int]) -> tuple[Any, ...]:
    """node_endpoints for the leaders named in NOT_LEADER_OR_FOLLOWER answers."""
    found = []
    for node_id in sorted(leader_ids):
        node = ctx.cluster.nodes.get(node_id)
        if node is None:
            continue
        host, port = ctx.endpoint(node)
        found.append(
            ctx.make("NodeEndpoint", node_id=node_id, host=host, port=port, rack=node.rack)
        )
    return tuple(found)


def invalid_ids(group_id: str | None, member_id: str | None) -> str | None:
    """Kafka's message for a group or member id it refuses (INVALID_REQUEST), or None:
    the group id must be set, the member id set and at most 36 characters."""
    if not group_id:
        return "Invalid group id in the request."
    if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
        return "Invalid member id in the request."
    return None


def refusal(ctx: RequestContext, request: Any) -> tuple[ErrorCode, str | None] | None:
    """Why a ShareFetch or ShareAcknowledge is refused whole before its session is
    looked at, in Kafka 4.4's order: no group id, the group's READ ACL, bad ids."""
    group_id, member_id = request.group_id, request.member_id
    if not group_id:
        return ErrorCode.invalid_request, invalid_ids(group_id, member_id)
    if not ctx.allows(Operation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    refused = invalid_ids(group_id, member_id)
    return None if refused is None else (ErrorCode.invalid_request, refused)


def malformed(ctx: RequestContext, batches: Sequence[Any], renew_ack: bool) -> bool:
    """Whether a partition's acknowledgement batches break Kafka 4.4's rules for their
    form (KafkaApis.validateAcknowledgementBatches): first after last, starting before
    the previous batch's last offset, no types, a type per offset that does not match the
    count, an unknown type (renew, 4, only at v2 and in a request marked is_renew_ack)."""
    highest = ACK_RENEW if ctx.version >= FIRST_RENEW_VERSION else ACK_RENEW - 1
    previous_last = -1
    for batch in batches:
        types = batch.acknowledge_types
        if batch.first_offset > batch.last_offset or batch.first_offset < previous_last:
            return True
        if not types:
            return True
        if len(types) > 1 and batch.last_offset - batch.first_offset != len(types) - 1:
            return True
        if any(not 0 <= kind <= highest for kind in types):
            return True
        if not renew_ack and ACK_RENEW in types:
            return True
        previous_last = batch.last_offset
    return False


def acknowledge(
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    topic: Topic,
    index: int,
    batches: Sequence[Any],
    renew_ack: bool,
) -> tuple[ErrorCode, str | None]:
    """Apply one partition's acknowledgements (already located): the error and its
    message."""
    if malformed(ctx, batches, renew_ack):
        return ErrorCode.invalid_request, None
    if not batches:
        return ErrorCode.none, None
    return ctx.cluster.share_partitions.acknowledge(
        group_id,
        topic.name,
        index,
        member_id,
        [(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in batches],
        ctx.cluster.clock.monotonic(),
    )


def close_session(ctx: RequestContext, session: ShareSession) -> None:
    """Epoch -1: the session closes and its member's acquired records are released."""
    ctx.cluster.share_partitions.sessions(ctx.node_id).close(session.group_id, session.member_id)
    _release(ctx.cluster, session)


def _release(cluster: ClusterState, session: ShareSession) -> None:
    names = []
    for topic_id, index in session.partitions:
        topic = cluster.topics.by_id(topic_id)
        if topic is not None:
            names.append((topic.name, index))
    cluster.share_partitions.release(session.group_id, session.member_id, names)


def end_with_connection(ctx: RequestContext) -> None:
    """Have the connection's close end the share sessions it opened on this node (and
    release their members' records), once per connection."""
    connection = ctx.session
    if connection is OPEN_SESSION:
        return  # no connection: sans-IO callers
    if any(getattr(c, "ends_share_sessions", False) for c in connection.on_close):
        return
    cluster, node_id = ctx.cluster, ctx.node_id

    def closed() -> None:
        for session in cluster.share_partitions.sessions(node_id).connection_closed(connection):
            _release(cluster, session)

    closed.ends_share_sessions = True  # type: ignore[attr-defined]
    connection.on_close.append(closed)


def max_sessions(ctx: RequestContext) -> int:
    """group.share.max.share.sessions (Kafka's default 2000)."""
    value = ctx.cluster.broker_configs.value("group.share.max.share.sessions", ctx.node_id)
    return int(value) if value is not None else ctx.cluster.config.group_share_max_share_sessions
