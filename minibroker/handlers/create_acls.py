"""CreateAcls (key 30), versions 0-3.

Stores each ACL (state/acl.py), or answers INVALID_REQUEST saying why it cannot be
stored (an ANY or UNKNOWN type, an empty name, a principal that is not TYPE:NAME, ...).
Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED); with ACLs off every
creation gets SECURITY_DISABLED. v0 has no pattern type: its ACLs are LITERAL.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import binding_of, refusal
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import InvalidAcl, Operation


@api(30, "CreateAcls", 0, 3)
def handle(ctx: RequestContext, request: Any) -> Any:
    refused = refusal(ctx, Operation.ALTER)
    results = []
    for creation in request.creations:
        code, message = refused or (ErrorCode.none, None)
        if refused is None:
            try:
                ctx.cluster.acls.add(binding_of(creation))
            except InvalidAcl as exc:
                code, message = ErrorCode.invalid_request, str(exc)
        results.append(ctx.make("AclCreationResult", error_code=code, error_message=message))
    return ctx.response(throttle_time=NO_THROTTLE, results=tuple(results))
