"""ElectLeaders (key 43), versions 0-2.

Every partition's leader here is its preferred replica and is always available, so no
election is ever needed: as Kafka answers in that case, each partition named gets
ELECTION_NOT_NEEDED, for preferred and unclean elections alike, and a request for all
partitions (null topic_partitions) gets an empty list (Kafka leaves out the partitions
it did not elect). Unknown partitions are UNKNOWN_TOPIC_OR_PARTITION. The top-level
error code (v1+) is NONE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api


@api(43, "ElectLeaders", 0, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    for wanted in request.topic_partitions or ():
        topic = ctx.cluster.topics.get(wanted.topic)
        partitions = []
        for index in wanted.partitions or ():
            if topic is None or not 0 <= index < len(topic.partitions):
                code = ErrorCode.unknown_topic_or_partition
                message = f"{wanted.topic}-{index} does not exist"
            else:
                code = ErrorCode.election_not_needed
                message = "the preferred replica already leads this partition"
            partitions.append(
                ctx.make(
                    "PartitionResult", partition_id=index, error_code=code, error_message=message
                )
            )
        results.append(
            ctx.make(
                "ReplicaElectionResult", topic=wanted.topic, partition_result=tuple(partitions)
            )
        )
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        replica_election_results=tuple(results),
    )
