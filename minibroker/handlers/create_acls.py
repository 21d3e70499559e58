"""CreateAcls (key 30), versions 0-3.

Stores each ACL (state/acl.py), or answers INVALID_REQUEST saying why it cannot be
stored (an ANY or UNKNOWN type, an empty name, a principal that is not TYPE:NAME, ...).
Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED); with ACLs off every
creation gets SECURITY_DISABLED. v0 has no pattern type: its ACLs are LITERAL.
Bounds (no such bounds in Kafka): the first max_acls_per_request creations of a request
are served, the rest get POLICY_VIOLATION; so does every creation once the cluster holds
max_acls ACLs. Worked out in pieces (CREATIONS_PER_PIECE creations each).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import CREATIONS_PER_PIECE, Entries, binding_of, refusal
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, Steps, api
from minibroker.state.acl import AclLimitReached, InvalidAcl, Operation


@api(30, "CreateAcls", 0, 3)
def handle(ctx: RequestContext, request: Any) -> Steps:
    return Steps(_create(ctx, request))


def _create(ctx: RequestContext, request: Any) -> Generator[None, None, Any]:
    refused = refusal(ctx, Operation.ALTER)
    acls = ctx.cluster.acls
    creations = request.creations
    limit = 0 if refused is not None else ctx.cluster.config.max_acls_per_request
    results = Entries(ctx)
    # Results repeat (success, max_acls reached): each is encoded once.
    encoded: dict[tuple[ErrorCode, str | None], Any] = {}

    def result(code: ErrorCode, message: str | None) -> Any:
        found = encoded.get((code, message))
        if found is None:
            found = results.encode(
                ctx.make("AclCreationResult", error_code=code, error_message=message)
            )
            if code != ErrorCode.invalid_request:  # not one message per creation
                encoded[code, message] = found
        return found

    for index, creation in enumerate(creations[:limit]):
        if index and not index % CREATIONS_PER_PIECE:
            yield
        code, message = ErrorCode.none, None
        try:
            acls.add(binding_of(creation))
        except InvalidAcl as exc:
            code, message = ErrorCode.invalid_request, str(exc)
        except AclLimitReached as exc:
            code, message = ErrorCode.policy_violation, str(exc)
        results.items.append(result(code, message))
    if len(creations) > limit:
        code, message = refused or (
            ErrorCode.policy_violation,
            f"one CreateAcls request may create at most {limit:,} ACLs (max_acls_per_request)",
        )
        # The same answer for every creation left: one list of references, no piece work.
        results.items += [result(code, message)] * (len(creations) - limit)
    return results.response("results", throttle_time=NO_THROTTLE)
