"""JoinGroup (key 11), versions 0-9.

Delegates to the group coordinator. v4+ members without an id get MEMBER_ID_REQUIRED and
a fresh id; the answer waits until the join phase ends (all members rejoined or the
rebalance timeout passed). Only the leader receives the member list.
v0 has no rebalance timeout: the session timeout is used, as Kafka does.
To a group of Kafka 4's consumer protocol with members, the member joins that group as a
classic member (state/consumer_group_rules.py: Mixed groups) and is answered at once,
with no member list: the broker assigns. A share group's id is INCONSISTENT_GROUP_PROTOCOL,
as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers._common import NO_THROTTLE, error, millis
from minibroker.handlers._groups import answer_when_filled, is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules
from minibroker.state.group_rules import JoinOutcome


def _response(ctx: RequestContext, outcome: JoinOutcome) -> Any:
    members = tuple(
        ctx.make(
            "JoinGroupResponseMember",
            member_id=member_id,
            group_instance_id=instance_id,
            metadata=metadata,
        )
        for member_id, instance_id, metadata in outcome.members
    )
    protocol_name = outcome.protocol_name
    if protocol_name is None and ctx.version < 7:
        protocol_name = ""  # nullable only from v7
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=error(outcome.error),
        generation_id=outcome.generation,
        protocol_type=outcome.protocol_type,
        protocol_name=protocol_name,
        leader=outcome.leader,
        skip_assignment=outcome.skip_assignment,
        member_id=outcome.member_id,
        members=members,
    )


@api(11, "JoinGroup", 0, 9)
def handle(ctx: RequestContext, request: Any) -> Any:
    if not is_coordinator(ctx, request.group_id):
        return _response(ctx, JoinOutcome(error=rules.NOT_COORDINATOR, member_id=request.member_id))
    if request.group_id in ctx.cluster.share_groups.groups:
        return _response(ctx, JoinOutcome(error=rules.INCONSISTENT_GROUP_PROTOCOL, member_id=""))
    session_ms = millis(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_ms = millis(rebalance) if rebalance is not None else session_ms
    consumer_groups = ctx.cluster.consumer_groups
    if consumer_groups.has_members(request.group_id):
        # A member of the classic protocol in a consumer-protocol group (a mixed group).
        outcome = consumer_groups.classic_join(
            ctx.cluster.clock.monotonic(),
            group_id=request.group_id,
            member_id=request.member_id,
            instance_id=getattr(request, "group_instance_id", None),
            client_id=ctx.header.client_id or "",
            client_host=ctx.client_host,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type=request.protocol_type,
            protocols=[(p.name, p.metadata) for p in request.protocols],
            version=ctx.version,
        )
        return _response(ctx, outcome)
    consumer_groups.forget(request.group_id)
    slot = ctx.cluster.groups.join(
        ctx.cluster.clock.monotonic(),
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols],
        require_known_member_id=ctx.version >= 4,
        version=ctx.version,
    )
    return answer_when_filled(
        ctx,
        request.group_id,
        slot,
        lambda outcome: _response(ctx, outcome),
        lambda: _response(
            ctx, JoinOutcome(error=rules.REBALANCE_IN_PROGRESS, member_id=request.member_id)
        ),
        rebalance_ms / 1000,
    )
