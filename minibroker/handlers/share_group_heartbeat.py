"""ShareGroupHeartbeat (key 76), version 1: share groups (KIP-932).

Joins (epoch 0, naming the subscribed topics), keeps alive and leaves (epoch -1) a
member of a share group; the answer carries the member's epoch, the heartbeat interval
and, on a join or when it changed, the member's partitions by topic id. The rules are in
state/share_groups.py. Checked first, as Kafka's KafkaApis does: READ on the group, the
member id (1 to 36 characters), DESCRIBE on every subscribed topic
(TOPIC_AUTHORIZATION_FAILED).
Not done: rack-aware assignment.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import heartbeat_assignment, is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import share_groups as rules
from minibroker.state.acl import Operation, ResourceType


@api(76, "ShareGroupHeartbeat", 1, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    share_groups = ctx.cluster.share_groups

    def refuse(code: int, message: str | None = None) -> Any:
        # As Kafka answers a refused heartbeat: the error alone, no member id, epoch 0.
        return ctx.response(
            throttle_time=NO_THROTTLE,
            error_code=error(code),
            error_message=message,
            member_id=None,
            member_epoch=0,
            heartbeat_interval=datetime.timedelta(0),
            assignment=None,
        )

    if not ctx.allows(Operation.READ, ResourceType.GROUP, request.group_id):
        return refuse(int(ErrorCode.group_authorization_failed))
    member_id = request.member_id or ""
    if not member_id or len(member_id) > rules.MAX_MEMBER_ID_LENGTH:
        return refuse(rules.INVALID_REQUEST)  # Kafka's answer carries no message
    topics = request.subscribed_topic_names
    if topics and not all(ctx.allows(Operation.DESCRIBE, ResourceType.TOPIC, t) for t in topics):
        return refuse(int(ErrorCode.topic_authorization_failed))
    invalid = rules.invalid_heartbeat(
        request.group_id, member_id, request.member_epoch, request.rack_id, topics
    )
    if invalid is not None:
        return refuse(rules.INVALID_REQUEST, invalid)
    if not is_coordinator(ctx, request.group_id):
        return refuse(int(ErrorCode.not_coordinator))
    outcome = share_groups.heartbeat(
        ctx.cluster.clock.monotonic(),
        group_id=request.group_id,
        member_id=member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_names=topics,
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
    )
    if outcome.error != rules.NONE:
        return refuse(outcome.error, outcome.message)
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        member_id=outcome.member_id,
        member_epoch=outcome.member_epoch,
        # A member that left is told no interval.
        heartbeat_interval=datetime.timedelta(
            milliseconds=0
            if outcome.member_epoch < 0
            else share_groups.heartbeat_interval_ms(request.group_id)
        ),
        assignment=heartbeat_assignment(ctx, outcome.assignment),
    )
