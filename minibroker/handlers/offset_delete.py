"""OffsetDelete (key 47), version 0.

Deletes committed offsets of a group. A group with members keeps the offsets of topics
its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC). A group-level error (unknown group,
NON_EMPTY_GROUP; a share group's id, GROUP_ID_NOT_FOUND) comes with no topics, as
Kafka's does.
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules


@api(47, "OffsetDelete", 0, 0)
def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    if not is_coordinator(ctx, request.group_id):
        top, codes = rules.NOT_COORDINATOR, dict[tuple[str, int], int]()
    elif request.group_id in ctx.cluster.share_groups.groups:
        top, codes = rules.GROUP_ID_NOT_FOUND, {}
    else:
        consumer_group = ctx.cluster.consumer_groups.groups.get(request.group_id)
        top, codes = ctx.cluster.groups.delete_offsets(
            request.group_id,
            wanted,
            subscribed_elsewhere=consumer_group.subscribed_topics() if consumer_group else None,
        )
    if top != rules.NONE:
        # Kafka answers a group-level error with the error code alone.
        return ctx.response(error_code=error(top), throttle_time=NO_THROTTLE, topics=())
    topics = tuple(
        ctx.make(
            "OffsetDeleteResponseTopic",
            name=t.name,
            partitions=tuple(
                ctx.make(
                    "OffsetDeleteResponsePartition",
                    partition_index=p.partition_index,
                    error_code=error(codes[(t.name, p.partition_index)]),
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return ctx.response(error_code=error(top), throttle_time=NO_THROTTLE, topics=topics)
