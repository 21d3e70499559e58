"""AlterUserScramCredentials (key 51), version 0.

Sets and removes users' SCRAM credentials (the rules: state/credentials.py); one result
per user named. Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every
user). Users signed in keep their sessions; the new credentials count from the next
sign-in.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import CLUSTER_NAME, Operation, ResourceType
from minibroker.state.credentials import ScramChange

# Kafka's message for the error; librdkafka cannot take a refusal without one.
CLUSTER_REFUSED = "Cluster authorization failed."


@api(51, "AlterUserScramCredentials", 0, 0)
def handle(ctx: RequestContext, request: Any) -> Any:
    changes = [ScramChange(d.name, d.mechanism) for d in request.deletions] + [
        ScramChange(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in request.upsertions
    ]
    if ctx.allows(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        outcomes = ctx.cluster.credentials.alter_scram(changes)
    else:
        refused = (int(ErrorCode.cluster_authorization_failed), CLUSTER_REFUSED)
        outcomes = {change.user: refused for change in changes}
    results = tuple(
        ctx.make(
            "AlterUserScramCredentialsResult",
            user=user,
            error_code=ErrorCode(code),
            error_message=message,
        )
        for user, (code, message) in outcomes.items()
    )
    return ctx.response(throttle_time=NO_THROTTLE, results=results)
