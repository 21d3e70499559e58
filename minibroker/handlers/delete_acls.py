"""DeleteAcls (key 31), versions 0-3.

Deletes, per filter, every ACL it selects (state/acl.py) and lists them. Needs ALTER on
the cluster (else CLUSTER_AUTHORIZATION_FAILED for every filter); with ACLs off every
filter gets SECURITY_DISABLED; an invalid filter gets INVALID_REQUEST. Worked out in
pieces (ACLS_PER_PIECE ACLs read or deleted, or CREATIONS_PER_PIECE filters, per piece);
an ACL another request deletes meanwhile is listed by the request that deleted it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import (
    ACLS_PER_PIECE,
    CREATIONS_PER_PIECE,
    Entries,
    filter_of,
    refusal,
)
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, Steps, api
from minibroker.state.acl import InvalidAcl, Operation


@api(31, "DeleteAcls", 0, 3)
def handle(ctx: RequestContext, request: Any) -> Steps:
    return Steps(_delete(ctx, request))


def _delete(ctx: RequestContext, request: Any) -> Generator[None, None, Any]:
    refused = refusal(ctx, Operation.ALTER)
    results = Entries(ctx)
    for index, selection in enumerate(request.filters):
        if index and not index % CREATIONS_PER_PIECE:
            yield
        code, message = refused or (ErrorCode.none, None)
        matching = results.sibling()
        if refused is None:
            try:
                pieces = ctx.cluster.acls.delete_in_pieces(filter_of(selection), ACLS_PER_PIECE)
            except InvalidAcl as exc:
                code, message = ErrorCode.invalid_request, str(exc)
            else:
                for piece in pieces:
                    for binding in piece:
                        matching.matching_acl(binding)
                    yield
        result = ctx.make(
            "DeleteAclsFilterResult", error_code=code, error_message=message, matching_acls=()
        )
        results.items.append(matching.holding(result, "matching_acls"))
    return results.response("filter_results", throttle_time=NO_THROTTLE)
