"""ListOffsets (key 2), versions 0-10 (0 through protocol/legacy.py: its list of offsets
holds the one offset).

Special timestamps: -2 earliest, -1 latest, -3 the record with the largest timestamp
(v7+), -4 earliest local (= earliest; there is no tiered storage), -5 latest tiered
(= none, offset -1). Any other value finds the first record at or after that time,
decoding at most the one batch that holds it, streamed and capped at
`max_decompressed_batch_bytes`; a batch that cannot be decoded (codec library missing,
malformed, over the cap) is answered at batch granularity.
A partition named more than once in a request is not looked up: as Kafka does
(ListOffsetsRequest.duplicatePartitions, KafkaApis), every entry for it gets
INVALID_REQUEST with offset and timestamp -1. A null topics or partitions array (kio
reads one even where the schema forbids it; Kafka rejects such a request as malformed)
is answered as an empty one.
Isolation (v2+): a read_committed query sees offsets below the last stable offset only, a
read_uncommitted one below the high watermark: latest is that bound, and a record found
at or past it (by time, or the largest timestamp) is not found (-1), as on Kafka.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, led_partition
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.log import CorruptBatch, PartitionLog

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


def _lookup(log: PartitionLog, timestamp: int, limit: int, committed: bool) -> tuple[int, int]:
    """(offset, timestamp) for a ListOffsets query; (-1, -1) when nothing matches."""
    fetchable = log.last_stable_offset if committed else log.high_watermark
    if timestamp == LATEST:
        return fetchable, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp(max_decompressed_bytes=limit)
    else:
        found = log.offset_for_timestamp(timestamp, max_decompressed_bytes=limit)
    if found is None or found[0] >= fetchable:
        return -1, -1
    return found


@api(2, "ListOffsets", 0, 10)
def handle(ctx: RequestContext, request: Any) -> Any:
    limit = ctx.cluster.config.max_decompressed_batch_bytes
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    wanted_topics = request.topics or ()
    named = Counter(
        (wanted_topic.name, wanted.partition_index)
        for wanted_topic in wanted_topics
        for wanted in wanted_topic.partitions or ()
    )
    topics = []
    for wanted_topic in wanted_topics:
        topic = ctx.cluster.topics.get(wanted_topic.name)
        partitions = []
        for wanted in wanted_topic.partitions or ():
            code = ErrorCode.none
            offset = timestamp = epoch = -1
            if named[wanted_topic.name, wanted.partition_index] > 1:
                code = ErrorCode.invalid_request
            else:
                partition, code = led_partition(ctx, topic, wanted.partition_index)
                if partition is not None:
                    try:
                        offset, timestamp = _lookup(
                            partition.log, wanted.timestamp, limit, committed
                        )
                    except CorruptBatch:  # logged by the log; as Fetch answers it
                        code = ErrorCode.corrupt_message
                    # The epoch of the batch holding it (none found, none either).
                    if code == ErrorCode.none and offset >= 0:
                        epoch = partition.log.epoch_at(offset)
            partitions.append(
                ctx.make(
                    "ListOffsetsPartitionResponse",
                    partition_index=wanted.partition_index,
                    error_code=code,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(
            ctx.make(
                "ListOffsetsTopicResponse", name=wanted_topic.name, partitions=tuple(partitions)
            )
        )
    return ctx.response(throttle_time=NO_THROTTLE, topics=tuple(topics))
