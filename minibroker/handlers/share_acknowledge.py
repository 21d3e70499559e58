"""ShareAcknowledge (key 79), versions 1-2 (Kafka 4.4's range).

Acknowledges records a share-group member holds acquired (state/share_partitions.py has
the rules) within its share session: epoch 0 is INVALID_SHARE_SESSION_EPOCH, no session
SHARE_SESSION_NOT_FOUND, -1 acknowledges and then closes the session, releasing what the
member still holds. Each partition answers with its own error (and Kafka 4.4's message):
INVALID_REQUEST for malformed batches or batches reaching past the records in flight,
INVALID_RECORD_STATE for records in flight the member does not hold acquired (nothing
of that partition applied; records before the start offset are skipped),
TOPIC_AUTHORIZATION_FAILED without READ on the
topic, UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER with current_leader and node_endpoints.
A group id and READ on it are checked first (INVALID_REQUEST, GROUP_AUTHORIZATION_FAILED),
then a member id of 1 to 36 characters (INVALID_REQUEST). v2: type 4 renews the
acquisition lock, in a request marked is_renew_ack.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers import _share
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.share_sessions import FINAL_EPOCH


def _error(ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=NO_THROTTLE,
        responses=(),
        node_endpoints=(),
    )


@api(79, "ShareAcknowledge", 1, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    group_id, member_id = request.group_id, request.member_id
    refused = _share.refusal(ctx, request)
    if refused is not None:
        return _error(ctx, *refused)
    renew_ack = bool(getattr(request, "is_renew_ack", False))
    sessions = ctx.cluster.share_partitions.sessions(ctx.node_id)
    step = sessions.acknowledge(group_id, member_id, request.share_session_epoch)
    if step.error != ErrorCode.none or step.session is None:
        return _error(ctx, step.error)
    leaders: set[int] = set()
    responses = []
    for ack_topic in request.topics:
        partitions = []
        for wanted in ack_topic.partitions:
            index = wanted.partition_index
            topic, code = _share.locate(ctx, ack_topic.topic_id, index)
            message = None
            if code == ErrorCode.none and topic is not None:
                code, message = _share.acknowledge(
                    ctx,
                    group_id,
                    member_id,
                    topic,
                    index,
                    wanted.acknowledgement_batches,
                    renew_ack,
                )
            leader, epoch = _share.leader_of(topic, index)
            if code == ErrorCode.not_leader_or_follower and leader >= 0:
                leaders.add(leader)
            partitions.append(
                ctx.make(
                    "PartitionData",
                    partition_index=index,
                    error_code=code,
                    error_message=message,
                    current_leader=ctx.make(
                        "LeaderIdAndEpoch", leader_id=leader, leader_epoch=epoch
                    ),
                )
            )
        responses.append(
            ctx.make(
                "ShareAcknowledgeTopicResponse",
                topic_id=ack_topic.topic_id,
                partitions=tuple(partitions),
            )
        )
    if request.share_session_epoch == FINAL_EPOCH:
        _share.close_session(ctx, step.session)
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        acquisition_lock_timeout=_share.lock_timeout(ctx, group_id),
        responses=tuple(responses),
        node_endpoints=_share.endpoints(ctx, leaders),
    )
