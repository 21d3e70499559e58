"""DeleteGroups (key 42), versions 0-2.

Only groups without members can be deleted (NON_EMPTY_GROUP otherwise); their committed
offsets go with them. Unknown groups are GROUP_ID_NOT_FOUND. Classic, consumer-protocol
and share groups alike; a share group's share-partition state goes with it (its group
configs stay, as Kafka keeps them).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules
from minibroker.state.acl import Operation, ResourceType


@api(42, "DeleteGroups", 0, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    for group_id in request.groups_names:
        if not ctx.allows(Operation.DELETE, ResourceType.GROUP, group_id):
            code = int(ErrorCode.group_authorization_failed)
        elif not is_coordinator(ctx, group_id):
            code = rules.NOT_COORDINATOR
        elif group_id in ctx.cluster.share_groups.groups:
            code = ctx.cluster.share_groups.delete(group_id)
            if code == rules.NONE:
                ctx.cluster.share_partitions.group_deleted(group_id)
        elif group_id in ctx.cluster.consumer_groups.groups:
            code = ctx.cluster.consumer_groups.delete_group(group_id)
        else:
            code = ctx.cluster.groups.delete_group(group_id)
        results.append(ctx.make("DeletableGroupResult", group_id=group_id, error_code=error(code)))
    return ctx.response(throttle_time=NO_THROTTLE, results=tuple(results))
