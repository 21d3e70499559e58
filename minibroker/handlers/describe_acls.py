"""DescribeAcls (key 29), versions 0-3.

Lists the ACLs a filter selects (state/acl.py: ANY or a null field selects everything; a
MATCH pattern every ACL that applies to the named resource), grouped by resource pattern.
Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED); with ACLs off the
answer is SECURITY_DISABLED. v0 filters LITERAL patterns only. Worked out in pieces
(ACLS_PER_PIECE ACLs read and encoded, or resources listed, per piece).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
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


def _describe(
    ctx: RequestContext, pieces: Iterator[list[AclBinding]]
) -> Generator[None, None, Any]:
    resources = Entries(ctx)
    # Per resource pattern, first seen first: its ACLs' descriptions, joined in a
    # bytearray where the answer is spliced (a young object the collector never scans:
    # describing 100,000 ACLs then leaves it nothing to trace), listed for v0.
    described: dict[tuple[int, str, int], Any] = {}
    counts: dict[tuple[int, str, int], int] = {}
    for piece in pieces:
        for binding in piece:
            key = (int(binding.resource_type), binding.resource_name, int(binding.pattern_type))
            acls = described.get(key)
            if acls is None:
                acls = described[key] = bytearray() if resources.spliced else []
                counts[key] = 0
            counts[key] += 1
            if resources.spliced:
                acls += resources.description(binding)
            else:
                acls.append(resources.description(binding))
        yield
    for index, (resource, acls) in enumerate(described.items()):
        if index and not index % ACLS_PER_PIECE:
            yield
        resources.resource(resource, counts[resource], acls)
    return resources.response(
        "resources", throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None
    )
