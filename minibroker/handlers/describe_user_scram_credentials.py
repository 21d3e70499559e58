"""DescribeUserScramCredentials (key 50), version 0.

Lists the SCRAM mechanisms and iteration counts of the users named, or of every user
with SCRAM credentials when none is named (state/credentials.py). A user named twice is
DUPLICATE_RESOURCE, one without SCRAM credentials RESOURCE_NOT_FOUND. Needs DESCRIBE on
the cluster, else CLUSTER_AUTHORIZATION_FAILED: for each user named, or for the request
when it names none.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.alter_user_scram_credentials import CLUSTER_REFUSED
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import CLUSTER_NAME, Operation, ResourceType


@api(50, "DescribeUserScramCredentials", 0, 0)
def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.allows(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        # Named users get the error each, the request none: librdkafka crashes on a
        # request-level refusal that leaves a user it asked for without a result.
        refused = ErrorCode.cluster_authorization_failed
        named = request.users or ()
        return ctx.response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none if named else refused,
            error_message=None if named else CLUSTER_REFUSED,
            results=tuple(
                ctx.make(
                    "DescribeUserScramCredentialsResult",
                    user=user.name,
                    error_code=refused,
                    error_message=CLUSTER_REFUSED,
                    credential_infos=(),
                )
                for user in named
            ),
        )
    known = ctx.cluster.credentials.scram_users()
    names = [user.name for user in request.users or ()] or list(known)
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        code, message, infos = ErrorCode.none, None, ()
        if counts[name] > 1:
            code = ErrorCode.duplicate_resource
            message = (
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {name}"
            )
        elif name not in known:
            code = ErrorCode.resource_not_found
            message = f"Attempt to describe a user credential that does not exist: {name}"
        else:
            infos = tuple(
                ctx.make("CredentialInfo", mechanism=mechanism, iterations=iterations)
                for mechanism, iterations in known[name].items()
            )
        results.append(
            ctx.make(
                "DescribeUserScramCredentialsResult",
                user=name,
                error_code=code,
                error_message=message,
                credential_infos=infos,
            )
        )
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )
