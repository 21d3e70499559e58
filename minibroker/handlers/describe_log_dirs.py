"""DescribeLogDirs (key 35), versions 0-4 (0 through protocol/legacy.py).

Each broker has one log directory holding every partition it leads: "<data dir>/logs"
with a data directory, else "/minibroker/<node id>". Its entry lists, per topic (by name)
and partition (by index), the partitions asked for (a null topic list: all of them) that
this broker holds, with partition_size the bytes stored in the partition's log (what
DeleteRecords dropped no longer counts), offset_lag 0 (no follower or future log lags)
and is_future_key false. Topics and partitions asked for that this broker does not hold,
or that do not exist, are simply absent, and so is a topic none of whose partitions was
asked for (Kafka 3.8+, KAFKA-16807). v4's total_bytes and usable_bytes are those of the
data directory's volume, or -1 when the logs live in memory, on no volume.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api

UNKNOWN_BYTES = -1


def log_dir(node_id: int) -> str:
    return f"/minibroker/{node_id}"


@api(35, "DescribeLogDirs", 0, 4)
def handle(ctx: RequestContext, request: Any) -> Any:
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {}
        for asked in request.topics:
            wanted.setdefault(asked.topic, set()).update(asked.partitions)
    topics = []
    for topic in sorted(ctx.cluster.topics, key=lambda t: t.name):
        indexes = None if wanted is None else wanted.get(topic.name)
        if wanted is not None and not indexes:
            continue
        partitions = tuple(
            ctx.make(
                "DescribeLogDirsPartition",
                partition_index=p.index,
                partition_size=p.log.size_bytes,
                offset_lag=0,
                is_future_key=False,
            )
            for p in topic.partitions
            if p.leader == ctx.node_id and (indexes is None or p.index in indexes)
        )
        if partitions:
            topics.append(ctx.make("DescribeLogDirsTopic", name=topic.name, partitions=partitions))
    storage = ctx.cluster.storage
    total = usable = UNKNOWN_BYTES
    if storage is not None:
        total, usable = storage.disk_usage()
    result = ctx.make(
        "DescribeLogDirsResult",
        error_code=ErrorCode.none,
        log_dir=log_dir(ctx.node_id) if storage is None else storage.log_dir,
        topics=tuple(topics),
        total_bytes=total,
        usable_bytes=usable,
    )
    return ctx.response(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=(result,))
