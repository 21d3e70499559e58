"""SyncGroup (key 14), versions 0-5.

The leader's request carries the assignment for every member; followers wait for it.
A request during PreparingRebalance gets REBALANCE_IN_PROGRESS, a stale generation
ILLEGAL_GENERATION.
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import answer_when_filled, is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules
from minibroker.state.group_rules import SyncOutcome


def _response(ctx: RequestContext, outcome: SyncOutcome) -> Any:
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=error(outcome.error),
        protocol_type=outcome.protocol_type,
        protocol_name=outcome.protocol_name,
        assignment=outcome.assignment,
    )


@api(14, "SyncGroup", 0, 5)
def handle(ctx: RequestContext, request: Any) -> Any:
    if not is_coordinator(ctx, request.group_id):
        return _response(ctx, SyncOutcome(error=rules.NOT_COORDINATOR))
    if request.group_id in ctx.cluster.consumer_groups.groups:
        # A classic member of a consumer-protocol group: the broker's assignment.
        return _response(
            ctx,
            ctx.cluster.consumer_groups.classic_sync(
                ctx.cluster.clock.monotonic(),
                group_id=request.group_id,
                member_id=request.member_id,
                instance_id=getattr(request, "group_instance_id", None),
                generation=request.generation_id,
                protocol_type=getattr(request, "protocol_type", None),
                protocol_name=getattr(request, "protocol_name", None),
            ),
        )
    groups = ctx.cluster.groups
    slot = groups.sync(
        ctx.cluster.clock.monotonic(),
        group_id=request.group_id,
        generation=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=[(a.member_id, a.assignment) for a in request.assignments],
    )
    group = groups.groups.get(request.group_id)
    member = group.members.get(request.member_id) if group else None
    wait = member.session_timeout_ms / 1000 if member else 0.0
    return answer_when_filled(
        ctx,
        request.group_id,
        slot,
        lambda outcome: _response(ctx, outcome),
        lambda: _response(ctx, SyncOutcome(error=rules.REBALANCE_IN_PROGRESS)),
        wait,
    )
