"""AlterClientQuotas (key 49), versions 0-1.

Sets and removes client quotas (the rules: state/quotas.py); one result per entity, in
the order first named. validate_only checks without changing.
Needs ALTER_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every entry).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.alter_user_scram_credentials import CLUSTER_REFUSED
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import CLUSTER_NAME, Operation, ResourceType
from minibroker.state.quotas import QuotaOp, make_entity


@api(49, "AlterClientQuotas", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    changes = [
        (
            make_entity((e.entity_type, e.entity_name) for e in entry.entity),
            [QuotaOp(op.key, float(op.value), bool(op.remove)) for op in entry.ops],
        )
        for entry in request.entries
    ]
    if ctx.allows(Operation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        outcomes = ctx.cluster.client_quotas.alter(changes, bool(request.validate_only))
    else:
        refused = (int(ErrorCode.cluster_authorization_failed), CLUSTER_REFUSED)
        outcomes = {entity: refused for entity, _ in changes}
    results = tuple(
        ctx.make(
            "EntryData",
            error_code=ErrorCode(code),
            error_message=message,
            entity=tuple(
                ctx.make("EntityData", entity_type=entity_type, entity_name=name)
                for entity_type, name in entity
            ),
        )
        for entity, (code, message) in outcomes.items()
    )
    return ctx.response(throttle_time=NO_THROTTLE, entries=results)
