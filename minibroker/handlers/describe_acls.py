"""DescribeAcls (key 29), versions 0-3.

Lists the ACLs a filter selects (state/acl.py: ANY or a null field selects everything; a
MATCH pattern every ACL that applies to the named resource), grouped by resource pattern.
Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED); with ACLs off the
answer is SECURITY_DISABLED. v0 filters LITERAL patterns only. Worked out in pieces
(ACLS_PER_PIECE ACLs read, then as many encoded, per piece): describing a million ACLs
slows other clients down instead of stopping them.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import ACLS_PER_PIECE, Entries, filter_of, refusal
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, Steps, api
from minibroker.state.acl import AclBinding, InvalidAcl, Operation


@api(29, "DescribeAcls", 0, 3)
def handle(ctx: RequestContext, request: Any) -> Any:
    refused = refusal(ctx, Operation.DESCRIBE)
    if refused is None:
        try:
            selection = filter_of(request)
        except InvalidAcl as exc:
            refused = ErrorCode.invalid_request, str(exc)
    if refused is not None:
        code, message = refused
        return ctx.response(
            throttle_time=NO_THROTTLE, error_code=code, error_message=message, resources=()
        )
    return Steps(_describe(ctx, ctx.cluster.acls.select(selection, ACLS_PER_PIECE)))


def _describe(ctx: RequestContext, pieces: Any) -> Generator[None, None, Any]:
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = {}
    for piece in pieces:
        for binding in piece:
            key = (binding.resource_type, binding.resource_name, binding.pattern_type)
            by_resource.setdefault(key, []).append(binding)
        yield
    resources = Entries(ctx)
    done = 0
    for (resource_type, name, pattern_type), bindings in by_resource.items():
        acls = Entries(ctx)
        for binding in bindings:
            done += 1
            if not done % ACLS_PER_PIECE:
                yield
            acls.append(
                ctx.make(
                    "AclDescription",
                    principal=binding.principal,
                    host=binding.host,
                    operation=binding.operation,
                    permission_type=binding.permission,
                )
            )
        resource = ctx.make(
            "DescribeAclsResource",
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern_type,
            acls=(),
        )
        resources.items.append(acls.holding(resource, "acls"))
    return resources.response(
        ctx,
        "resources",
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
    )
