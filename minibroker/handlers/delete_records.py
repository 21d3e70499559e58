"""DeleteRecords (key 21), versions 0-2.

Moves each partition's log start offset up to the offset asked for (-1: the high
watermark) and answers it as the low watermark. Batches that end before it are dropped;
the one holding it is kept whole (state/log.py). Afterwards, like on Kafka, a fetch
below the log start offset gets OFFSET_OUT_OF_RANGE (consumers then apply their
auto.offset.reset), ListOffsets earliest answers the new start, and a timestamp lookup
never answers an offset below it. An offset above the high watermark (or below -1) is
OFFSET_OUT_OF_RANGE; one below the current start changes nothing.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, led_partition
from minibroker.handlers.registry import RequestContext, api

TO_HIGH_WATERMARK = -1


@api(21, "DeleteRecords", 0, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    topics = []
    for wanted_topic in request.topics or ():
        topic = ctx.cluster.topics.get(wanted_topic.name)
        partitions = []
        for wanted in wanted_topic.partitions or ():
            low_watermark = -1
            partition, code = led_partition(ctx, topic, wanted.partition_index)
            if partition is not None:
                log = partition.log
                target = log.high_watermark if wanted.offset == TO_HIGH_WATERMARK else wanted.offset
                if not 0 <= target <= log.high_watermark:
                    code = ErrorCode.offset_out_of_range
                else:
                    low_watermark = log.delete_before(target)
            partitions.append(
                ctx.make(
                    "DeleteRecordsPartitionResult",
                    partition_index=wanted.partition_index,
                    low_watermark=low_watermark,
                    error_code=code,
                )
            )
        topics.append(
            ctx.make(
                "DeleteRecordsTopicResult", name=wanted_topic.name, partitions=tuple(partitions)
            )
        )
    return ctx.response(throttle_time=NO_THROTTLE, topics=tuple(topics))
