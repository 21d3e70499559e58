"""DeleteAcls (key 31), versions 0-3.

Deletes, per filter, every ACL it selects (state/acl.py) and lists them. Needs ALTER on
the cluster (else CLUSTER_AUTHORIZATION_FAILED for every filter); with ACLs off every
filter gets SECURITY_DISABLED; an invalid filter gets INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import filter_of, refusal
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import InvalidAcl, Operation


@api(31, "DeleteAcls", 0, 3)
def handle(ctx: RequestContext, request: Any) -> Any:
    refused = refusal(ctx, Operation.ALTER)
    results = []
    for selection in request.filters:
        code, message = refused or (ErrorCode.none, None)
        deleted = []
        if refused is None:
            try:
                deleted = ctx.cluster.acls.delete(filter_of(selection))
            except InvalidAcl as exc:
                code, message = ErrorCode.invalid_request, str(exc)
        matching = tuple(
            ctx.make(
                "DeleteAclsMatchingAcl",
                error_code=ErrorCode.none,
                error_message=None,
                resource_type=b.resource_type,
                resource_name=b.resource_name,
                pattern_type=b.pattern_type,
                principal=b.principal,
                host=b.host,
                operation=b.operation,
                permission_type=b.permission,
            )
            for b in deleted
        )
        results.append(
            ctx.make(
                "DeleteAclsFilterResult",
                error_code=code,
                error_message=message,
                matching_acls=matching,
            )
        )
    return ctx.response(throttle_time=NO_THROTTLE, filter_results=tuple(results))
