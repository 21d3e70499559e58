"""ElectLeaders (key 43), versions 0-2.

A preferred election (type 0) hands each partition named back to its first replica, at
the next leader epoch: ELECTION_NOT_NEEDED when that replica leads it already,
PREFERRED_LEADER_NOT_AVAILABLE when its node is stopped. An unclean election (type 1)
is never needed here (a partition whose leader stops fails over at once), so each
partition gets ELECTION_NOT_NEEDED, as Kafka answers for a partition that has a leader.
A request for all partitions (null topic_partitions) lists only the partitions whose
answer is not ELECTION_NOT_NEEDED, as Kafka does. Unknown partitions are
UNKNOWN_TOPIC_OR_PARTITION. Needs ALTER on the cluster with ACLs on, else every
partition and the top level (v1+) answer CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import CLUSTER_NAME, Operation, ResourceType
from minibroker.state.topic_errors import TopicError

PREFERRED = 0
NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


def _elect(ctx: RequestContext, preferred: bool, topic_name: str, index: int) -> Any:
    code, message = ErrorCode.none, None
    topic = ctx.cluster.topics.get(topic_name)
    if not ctx.allows(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        code, message = ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    elif topic is None or not 0 <= index < len(topic.partitions):
        code = ErrorCode.unknown_topic_or_partition
        message = f"No such partition as {topic_name}-{index}"
    elif not preferred:
        code, message = ErrorCode.election_not_needed, NOT_NEEDED_MESSAGE
    else:
        try:
            ctx.cluster.replicas.elect_preferred(topic_name, index)
        except TopicError as exc:
            code, message = error(exc.error_code), exc.message
    return ctx.make("PartitionResult", partition_id=index, error_code=code, error_message=message)


@api(43, "ElectLeaders", 0, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    preferred = request.election_type == PREFERRED if ctx.version >= 1 else True
    results = []
    if request.topic_partitions is None:
        for topic in ctx.cluster.topics:
            elected = [_elect(ctx, preferred, topic.name, p.index) for p in topic.partitions]
            elected = [r for r in elected if r.error_code != ErrorCode.election_not_needed]
            if elected:
                results.append(
                    ctx.make(
                        "ReplicaElectionResult", topic=topic.name, partition_result=tuple(elected)
                    )
                )
    for wanted in request.topic_partitions or ():
        partitions = [_elect(ctx, preferred, wanted.topic, i) for i in wanted.partitions or ()]
        results.append(
            ctx.make(
                "ReplicaElectionResult", topic=wanted.topic, partition_result=tuple(partitions)
            )
        )
    authorized = ctx.allows(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none if authorized else ErrorCode.cluster_authorization_failed,
        replica_election_results=tuple(results),
    )
