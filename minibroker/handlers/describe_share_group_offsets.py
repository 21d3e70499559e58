"""DescribeShareGroupOffsets (key 90), versions 0-1: where each share partition of a
share group starts, and (v1) its lag.

For the partitions asked for (or, with a null topic list, every partition whose share
state exists): the share-partition start offset, the partition's leader epoch and (v1)
the records from the start offset to the log end not yet acknowledged or archived
(`SharePartitionStore.lag`). A partition with no share state, or of a topic that does
not exist, has start offset -1 and lag -1, as Kafka answers (absence of data, not an
error). DESCRIBE on the group is needed (GROUP_AUTHORIZATION_FAILED); topics the client
may not describe are TOPIC_AUTHORIZATION_FAILED (or left out of a null-list answer).
Like Kafka, the group itself is not looked up: any group id is answered.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers._groups import is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import Operation, ResourceType

UNINITIALIZED = -1
NO_TOPIC_ID = uuid.UUID(int=0)


def _partition(ctx: RequestContext, index: int, start: int, epoch: int, lag: int) -> Any:
    values: dict[str, Any] = {
        "partition_index": index,
        "start_offset": start,
        "leader_epoch": epoch,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    if ctx.version >= 1:
        values["lag"] = lag
    return ctx.make("DescribeShareGroupOffsetsResponsePartition", **values)


def _described(ctx: RequestContext, group_id: str, wanted: Any) -> Any:
    def failed(code: ErrorCode) -> Any:
        return ctx.make(
            "DescribeShareGroupOffsetsResponseGroup",
            group_id=group_id,
            topics=(),
            error_code=code,
            error_message=None,
        )

    if not ctx.allows(Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return failed(ErrorCode.group_authorization_failed)
    if not is_coordinator(ctx, group_id):
        return failed(ErrorCode.not_coordinator)
    store = ctx.cluster.share_partitions
    started = store.initialized(group_id)
    if wanted is None:
        asked: dict[str, list[int]] = {}
        for topic_name, index in sorted(started):
            if ctx.allows(Operation.DESCRIBE, ResourceType.TOPIC, topic_name):
                asked.setdefault(topic_name, []).append(index)
    else:
        asked = {t.topic_name: list(t.partitions) for t in wanted}
    topics = []
    for name, indexes in asked.items():
        topic = ctx.cluster.topics.get(name)
        if not ctx.allows(Operation.DESCRIBE, ResourceType.TOPIC, name):
            partitions = tuple(
                ctx.make(
                    "DescribeShareGroupOffsetsResponsePartition",
                    partition_index=index,
                    start_offset=UNINITIALIZED,
                    leader_epoch=0,
                    error_code=ErrorCode.topic_authorization_failed,
                    error_message=None,
                )
                for index in indexes
            )
        else:
            rows = []
            for index in indexes:
                start = started.get((name, index)) if topic is not None else None
                if start is None or topic is None or index >= len(topic.partitions):
                    rows.append(_partition(ctx, index, UNINITIALIZED, 0, UNINITIALIZED))
                    continue
                lag = store.lag(group_id, name, index)
                epoch = topic.partitions[index].leader_epoch
                rows.append(
                    _partition(ctx, index, start, epoch, UNINITIALIZED if lag is None else lag)
                )
            partitions = tuple(rows)
        topics.append(
            ctx.make(
                "DescribeShareGroupOffsetsResponseTopic",
                topic_name=name,
                topic_id=topic.topic_id if topic is not None else NO_TOPIC_ID,
                partitions=partitions,
            )
        )
    return ctx.make(
        "DescribeShareGroupOffsetsResponseGroup",
        group_id=group_id,
        topics=tuple(topics),
        error_code=ErrorCode.none,
        error_message=None,
    )


@api(90, "DescribeShareGroupOffsets", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    return ctx.response(
        throttle_time=NO_THROTTLE,
        groups=tuple(_described(ctx, g.group_id, g.topics) for g in request.groups),
    )
