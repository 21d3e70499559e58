"""AlterPartitionReassignments (key 45), versions 0-1.

Moves partitions to the replicas named (state/replicas.py): a move that adds replicas
stays under way (ListPartitionReassignments lists it) until they have caught up, then
the partition is on its new replicas and a leader that left them hands over. Null
replicas cancel the move under way (NO_REASSIGNMENT_IN_PROGRESS when there is none).
Unknown topics and partitions are UNKNOWN_TOPIC_OR_PARTITION; a replica list that is
empty, names an unknown broker or one broker twice is INVALID_REPLICA_ASSIGNMENT; with
allow_replication_factor_change false (v1), a change of the replica count is
INVALID_REPLICATION_FACTOR. Needs ALTER on the cluster with ACLs on, else every
partition and the top level answer CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import CLUSTER_NAME, Operation, ResourceType
from minibroker.state.topic_errors import TopicError


@api(45, "AlterPartitionReassignments", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    authorized = ctx.allows(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    allow_change = getattr(request, "allow_replication_factor_change", True)
    now = ctx.cluster.clock.monotonic()
    topics = []
    for wanted in request.topics:
        partitions = []
        for asked in wanted.partitions:
            code, message = ErrorCode.none, None
            if not authorized:
                code = ErrorCode.cluster_authorization_failed
                message = "Cluster authorization failed."
            else:
                try:
                    ctx.cluster.replicas.reassign(
                        wanted.name,
                        asked.partition_index,
                        asked.replicas,
                        now,
                        allow_replication_factor_change=allow_change,
                    )
                except TopicError as exc:
                    code, message = error(exc.error_code), exc.message or None
            partitions.append(
                ctx.make(
                    "ReassignablePartitionResponse",
                    partition_index=asked.partition_index,
                    error_code=code,
                    error_message=message,
                )
            )
        topics.append(
            ctx.make("ReassignableTopicResponse", name=wanted.name, partitions=tuple(partitions))
        )
    return ctx.response(
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=allow_change,
        error_code=ErrorCode.none if authorized else ErrorCode.cluster_authorization_failed,
        error_message=None if authorized else "Cluster authorization failed.",
        responses=tuple(topics),
    )
