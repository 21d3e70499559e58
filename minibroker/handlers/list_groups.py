"""ListGroups (key 16), versions 0-5.

Groups coordinated by this broker, filtered by state (v4+) and type (v5+; every group
here is "classic").
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
    for group in ctx.cluster.groups.groups.values():
        if ctx.cluster.coordinator_for(group.group_id) != ctx.node_id:
            continue
        if not every_group and not ctx.allows(
            Operation.DESCRIBE, ResourceType.GROUP, group.group_id
        ):
            continue
        if states and group.state.value.lower() not in states:
            continue
        if types and "classic" not in types:
            continue
        listed.append(
            ctx.make(
                "ListedGroup",
                group_id=group.group_id,
                protocol_type=group.protocol_type or "",
                group_state=group.state.value,
                group_type="classic",
            )
        )
    return ctx.response(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=tuple(listed))
