"""ListGroups (key 16), versions 0-5.

Groups coordinated by this broker, classic, consumer-protocol and share ones, filtered by
state (v4+) and type (v5+: "classic", "consumer" or "share"; states and types are matched
without case, as Kafka does). A share group is listed with protocol type "share".
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import CLUSTER_NAME, Operation, ResourceType


@api(16, "ListGroups", 0, 5)
def handle(ctx: RequestContext, request: Any) -> Any:
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    listed = []
    # With ACLs on: every group for DESCRIBE on the cluster, else those it may describe.
    every_group = ctx.allows(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    consumer_groups = ctx.cluster.consumer_groups.groups
    found = [
        (g.group_id, g.protocol_type or "", g.state.value, "classic")
        for g in ctx.cluster.groups.groups.values()
        if g.group_id not in consumer_groups
    ] + [(g.group_id, "consumer", g.state.value, "consumer") for g in consumer_groups.values()]
    found += [
        (g.group_id, "share", g.state, "share") for g in ctx.cluster.share_groups.groups.values()
    ]
    for group_id, protocol_type, state, group_type in found:
        if ctx.cluster.coordinator_for(group_id) != ctx.node_id:
            continue
        if not every_group and not ctx.allows(Operation.DESCRIBE, ResourceType.GROUP, group_id):
            continue
        if states and state.lower() not in states:
            continue
        if types and group_type not in types:
            continue
        listed.append(
            ctx.make(
                "ListedGroup",
                group_id=group_id,
                protocol_type=protocol_type,
                group_state=state,
                group_type=group_type,
            )
        )
    return ctx.response(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=tuple(listed))
