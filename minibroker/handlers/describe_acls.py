"""DescribeAcls (key 29), versions 0-3.

Lists the ACLs a filter selects (state/acl.py: ANY or a null field selects everything; a
MATCH pattern every ACL that applies to the named resource), grouped by resource pattern.
Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED); with ACLs off the
answer is SECURITY_DISABLED. v0 filters LITERAL patterns only.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import filter_of, refusal
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import AclBinding, InvalidAcl, Operation


@api(29, "DescribeAcls", 0, 3)
def handle(ctx: RequestContext, request: Any) -> Any:
    refused = refusal(ctx, Operation.DESCRIBE)
    if refused is None:
        try:
            found = ctx.cluster.acls.describe(filter_of(request))
        except InvalidAcl as exc:
            refused = ErrorCode.invalid_request, str(exc)
    if refused is not None:
        code, message = refused
        return ctx.response(
            throttle_time=NO_THROTTLE, error_code=code, error_message=message, resources=()
        )
    by_resource: dict[tuple[int, str, int], list[AclBinding]] = {}
    for binding in found:
        key = (binding.resource_type, binding.resource_name, binding.pattern_type)
        by_resource.setdefault(key, []).append(binding)
    resources = tuple(
        ctx.make(
            "DescribeAclsResource",
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern_type,
            acls=tuple(
                ctx.make(
                    "AclDescription",
                    principal=b.principal,
                    host=b.host,
                    operation=b.operation,
                    permission_type=b.permission,
                )
                for b in bindings
            ),
        )
        for (resource_type, name, pattern_type), bindings in by_resource.items()
    )
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        resources=resources,
    )
