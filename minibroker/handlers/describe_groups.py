"""DescribeGroups (key 15), versions 0-6.

State, protocol and members (metadata of the chosen protocol and the current assignment).
An unknown group, or a consumer-protocol one (ConsumerGroupDescribe describes those), is
reported in state Dead (v6+: with GROUP_ID_NOT_FOUND; for a share group with Kafka's
message, "Group G is not a classic group.").
Asked for (v3+ include_authorized_operations), a group answered without an error carries
the client's authorized operations on it (handlers/_acls.py), as Kafka's does.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import authorized_operations
from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules
from minibroker.state.acl import OPERATIONS_NOT_REQUESTED, Operation, ResourceType


def _described(ctx: RequestContext, group_id: str, include_operations: bool) -> Any:
    operations = authorized_operations(ctx, ResourceType.GROUP, group_id, include_operations)

    def empty(code: int, state: str, message: str | None = None) -> Any:
        return ctx.make(
            "DescribedGroup",
            error_code=error(code),
            error_message=message,
            group_id=group_id,
            group_state=state,
            protocol_type="",
            protocol_data="",
            members=(),
            authorized_operations=operations if code == rules.NONE else OPERATIONS_NOT_REQUESTED,
        )

    if not ctx.allows(Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return empty(int(ErrorCode.group_authorization_failed), "")
    if not is_coordinator(ctx, group_id):
        return empty(rules.NOT_COORDINATOR, "")
    if group_id in ctx.cluster.share_groups.groups:
        if ctx.version < 6:
            return empty(rules.NONE, "Dead")
        return empty(rules.GROUP_ID_NOT_FOUND, "Dead", f"Group {group_id} is not a classic group.")
    group = ctx.cluster.groups.groups.get(group_id)
    if group is None or group_id in ctx.cluster.consumer_groups.groups:
        # A consumer-protocol group is not described here (ConsumerGroupDescribe is).
        return empty(rules.GROUP_ID_NOT_FOUND if ctx.version >= 6 else rules.NONE, "Dead")
    members = tuple(
        ctx.make(
            "DescribedGroupMember",
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=f"/{m.client_host}",  # Java's InetAddress.toString(), as Kafka sends
            member_metadata=m.metadata_for(group.protocol_name),
            member_assignment=m.assignment,
        )
        for m in group.members.values()
    )
    return ctx.make(
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=group.protocol_name or "",
        members=members,
        authorized_operations=operations,
    )


@api(15, "DescribeGroups", 0, 6)
def handle(ctx: RequestContext, request: Any) -> Any:
    include_operations = bool(getattr(request, "include_authorized_operations", False))
    return ctx.response(
        throttle_time=NO_THROTTLE,
        groups=tuple(_described(ctx, g, include_operations) for g in request.groups),
    )
