"""LeaveGroup (key 13), versions 0-5.

v0-2 name one member; v3+ a batch of members, by member id or static instance id,
each with its own error code (an unknown group too: UNKNOWN_MEMBER_ID per member under a
top-level NONE; v0-2 carry the member's code at top level). The remaining members
rebalance.
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules


@api(13, "LeaveGroup", 0, 5)
def handle(ctx: RequestContext, request: Any) -> Any:
    batched = hasattr(request, "members")
    wanted: list[tuple[str, str | None]] = (
        [(m.member_id, m.group_instance_id) for m in request.members]
        if batched
        else [(request.member_id, None)]
    )
    if not is_coordinator(ctx, request.group_id):
        top, results = rules.NOT_COORDINATOR, list[tuple[str, str | None, int]]()
    elif request.group_id in ctx.cluster.consumer_groups.groups:
        top = rules.NONE
        results = ctx.cluster.consumer_groups.classic_leave(
            ctx.cluster.clock.monotonic(), request.group_id, wanted
        )
    else:
        top, results = ctx.cluster.groups.leave(
            ctx.cluster.clock.monotonic(), group_id=request.group_id, members=wanted
        )
    if not batched and results:
        top = results[0][2] if top == rules.NONE else top
    members = (
        tuple(
            ctx.make(
                "MemberResponse",
                member_id=member_id,
                group_instance_id=instance_id,
                error_code=error(code),
            )
            for member_id, instance_id, code in results
        )
        if batched
        else ()
    )
    return ctx.response(throttle_time=NO_THROTTLE, error_code=error(top), members=members)
