"""ConsumerGroupHeartbeat (key 68), versions 0-1: Kafka 4's consumer group protocol.

Joins (epoch 0), keeps alive, reconciles and leaves (epoch -1; -2 for a static member
that will come back) a member of a consumer-protocol group; the answer carries the
member's epoch, the heartbeat interval and, when it changed or the request was a full
one, the member's assignment by topic id. The rules are in state/consumer_group_rules.py.
v0 lets the coordinator name a joining member; v1 (Kafka 4.0+) has the client name it,
and adds regex subscriptions.
A share group's id is GROUP_ID_NOT_FOUND, as Kafka answers.
Not done: rack-aware assignment (rack ids are kept and described only).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error, millis
from minibroker.handlers._groups import heartbeat_assignment, is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import consumer_group_rules as rules
from minibroker.state.acl import Operation, ResourceType
from minibroker.state.consumer_groups import as_assignment


@api(68, "ConsumerGroupHeartbeat", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    consumer_groups = ctx.cluster.consumer_groups

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
    if not is_coordinator(ctx, request.group_id):
        return refuse(int(ErrorCode.not_coordinator))
    if request.group_id in ctx.cluster.share_groups.groups:
        return refuse(
            int(ErrorCode.group_id_not_found), f"Group {request.group_id} is not a consumer group."
        )
    owned = request.topic_partitions
    outcome = consumer_groups.heartbeat(
        ctx.cluster.clock.monotonic(),
        version=ctx.version,
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=millis(request.rebalance_timeout),
        subscribed_names=request.subscribed_topic_names,
        subscribed_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=None if owned is None else as_assignment((t.topic_id, t.partitions) for t in owned),
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
        # A member that left (epoch -1, or -2 for a static member) is told no interval.
        heartbeat_interval=datetime.timedelta(
            milliseconds=0
            if outcome.member_epoch < 0
            else consumer_groups.heartbeat_interval_ms(request.group_id)
        ),
        assignment=heartbeat_assignment(ctx, outcome.assignment),
    )
