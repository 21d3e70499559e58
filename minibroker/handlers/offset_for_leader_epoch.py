"""OffsetForLeaderEpoch (key 23), versions 0-4 (0-1 through protocol/legacy.py).

Clients ask for the end offset of a leader epoch to validate their position after a
leader change (KIP-320, KIP-101). The answer comes from the partition's leader epochs
as Kafka's leader epoch cache gives it: for the current epoch, the log end offset; for an
earlier one, the largest epoch up to it and the offset where the next began; for a later
one, Kafka's "undefined" answer (epoch -1, offset -1). A current leader
epoch (v2+) newer than the partition's is UNKNOWN_LEADER_EPOCH, an older one
FENCED_LEADER_EPOCH; -1 skips that check. Unknown partitions are
UNKNOWN_TOPIC_OR_PARTITION, partitions led elsewhere NOT_LEADER_OR_FOLLOWER.
Not done: follower requests (replica_id >= 0) are answered like a consumer's.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, led_partition
from minibroker.handlers.registry import RequestContext, api

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
NO_CURRENT_EPOCH = -1


@api(23, "OffsetForLeaderEpoch", 0, 4)
def handle(ctx: RequestContext, request: Any) -> Any:
    topics = []
    for wanted_topic in request.topics or ():
        topic = ctx.cluster.topics.get(wanted_topic.topic)
        partitions = []
        for wanted in wanted_topic.partitions or ():
            epoch, end_offset = UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            partition, code = led_partition(ctx, topic, wanted.partition)
            current = getattr(wanted, "current_leader_epoch", NO_CURRENT_EPOCH)
            if partition is not None:
                if current != NO_CURRENT_EPOCH and current > partition.leader_epoch:
                    code = ErrorCode.unknown_leader_epoch
                elif current != NO_CURRENT_EPOCH and current < partition.leader_epoch:
                    code = ErrorCode.fenced_leader_epoch
                else:
                    epoch, end_offset = partition.log.epoch_end(wanted.leader_epoch)
            partitions.append(
                ctx.make(
                    "EpochEndOffset",
                    error_code=code,
                    partition=wanted.partition,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics.append(
            ctx.make(
                "OffsetForLeaderTopicResult", topic=wanted_topic.topic, partitions=tuple(partitions)
            )
        )
    return ctx.response(throttle_time=NO_THROTTLE, topics=tuple(topics))
