"""TxnOffsetCommit (key 28), versions 0-4.

Sent to the group's coordinator: the offsets wait in the group, pending for the
producer's transaction, until its commit marker makes them the group's committed offsets
(or its abort drops them); OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT for them meanwhile. v3+ carry the member id, instance id and
generation, checked as Kafka checks them (state/transaction_rules.py). Unknown partitions
are UNKNOWN_TOPIC_OR_PARTITION, metadata over 4096 bytes OFFSET_METADATA_TOO_LARGE.
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules
from minibroker.state.groups import UNKNOWN_MEMBER


@api(28, "TxnOffsetCommit", 0, 4)
def handle(ctx: RequestContext, request: Any) -> Any:
    offsets = [
        (
            topic.name,
            p.partition_index,
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata,
        )
        for topic in request.topics
        for p in topic.partitions
    ]
    if not request.group_id:
        codes = {(t, p): rules.INVALID_GROUP_ID for t, p, *_ in offsets}
    elif not is_coordinator(ctx, request.group_id):
        codes = {(t, p): rules.NOT_COORDINATOR for t, p, *_ in offsets}
    else:
        codes = ctx.cluster.groups.commit_transactional(
            ctx.cluster.clock.monotonic(),
            group_id=request.group_id,
            producer_id=request.producer_id,
            generation=getattr(request, "generation_id", -1),
            member_id=getattr(request, "member_id", UNKNOWN_MEMBER),
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=offsets,
        )
    topics = tuple(
        ctx.make(
            "TxnOffsetCommitResponseTopic",
            name=topic.name,
            partitions=tuple(
                ctx.make(
                    "TxnOffsetCommitResponsePartition",
                    partition_index=p.partition_index,
                    error_code=error(codes[(topic.name, p.partition_index)]),
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return ctx.response(throttle_time=NO_THROTTLE, topics=topics)
