"""Heartbeat (key 12), versions 0-4.

Keeps a member alive. REBALANCE_IN_PROGRESS tells it to rejoin; ILLEGAL_GENERATION and
UNKNOWN_MEMBER_ID that it was fenced out; FENCED_INSTANCE_ID that a newer instance of
the same static member took its place. A classic member of a Kafka 4 consumer-protocol
group gets REBALANCE_IN_PROGRESS when it must rejoin to catch up with the group's epoch,
give up partitions, or collect partitions released to it.
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules


@api(12, "Heartbeat", 0, 4)
def handle(ctx: RequestContext, request: Any) -> Any:
    if not is_coordinator(ctx, request.group_id):
        return ctx.response(throttle_time=NO_THROTTLE, error_code=error(rules.NOT_COORDINATOR))
    if request.group_id in ctx.cluster.consumer_groups.groups:
        # A classic member of a consumer-protocol group (a mixed group).
        code = ctx.cluster.consumer_groups.classic_heartbeat(
            ctx.cluster.clock.monotonic(),
            group_id=request.group_id,
            member_id=request.member_id,
            instance_id=getattr(request, "group_instance_id", None),
            generation=request.generation_id,
        )
        return ctx.response(throttle_time=NO_THROTTLE, error_code=error(code))
    code = ctx.cluster.groups.heartbeat(
        ctx.cluster.clock.monotonic(),
        group_id=request.group_id,
        generation=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    return ctx.response(throttle_time=NO_THROTTLE, error_code=error(code))
