"""DescribeClientQuotas (key 48), versions 0-1.

Lists the quota entities a filter matches, with their values (the rules:
state/quotas.py). A filter Kafka refuses fails the whole request, with no entries.
Needs DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.alter_user_scram_credentials import CLUSTER_REFUSED
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import CLUSTER_NAME, Operation, ResourceType
from minibroker.state.quotas import FilterError


@api(48, "DescribeClientQuotas", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.allows(Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return _failed(ctx, int(ErrorCode.cluster_authorization_failed), CLUSTER_REFUSED)
    components = [(c.entity_type, int(c.match_type), c.match) for c in request.components]
    try:
        found = ctx.cluster.client_quotas.describe(components, bool(request.strict))
    except FilterError as exc:
        return _failed(ctx, exc.code, exc.message)
    entries = tuple(
        ctx.make(
            "EntryData",
            entity=tuple(
                ctx.make("EntityData", entity_type=entity_type, entity_name=name)
                for entity_type, name in entity
            ),
            values=tuple(
                ctx.make("ValueData", key=key, value=value) for key, value in values.items()
            ),
        )
        for entity, values in found
    )
    return ctx.response(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, entries=entries
    )


def _failed(ctx: RequestContext, code: int, message: str) -> Any:
    return ctx.response(
        throttle_time=NO_THROTTLE, error_code=ErrorCode(code), error_message=message, entries=None
    )
