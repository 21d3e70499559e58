"""ListPartitionReassignments (key 46), version 0.

The moves under way (AlterPartitionReassignments): each partition's current replicas
(its target ones, then those it is leaving), the replicas being added and those being
removed. Null topics list every move; named partitions without a move (or that do not
exist) are left out, as Kafka leaves them. Needs DESCRIBE on the cluster with ACLs on,
else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import CLUSTER_NAME, Operation, ResourceType


def _moving(ctx: RequestContext, name: str, indexes: Iterable[int] | None) -> Any:
    topic = ctx.cluster.topics.get(name)
    if topic is None:
        return None
    chosen = range(len(topic.partitions)) if indexes is None else indexes
    partitions = tuple(
        ctx.make(
            "OngoingPartitionReassignment",
            partition_index=p.index,
            replicas=tuple(p.replicas),
            adding_replicas=tuple(p.adding),
            removing_replicas=tuple(p.removing),
        )
        for index in chosen
        if 0 <= index < len(topic.partitions)
        and (p := topic.partitions[index]).adding + p.removing
        and (name, index) in ctx.cluster.replicas.ongoing
    )
    return (
        ctx.make("OngoingTopicReassignment", name=name, partitions=partitions)
        if partitions
        else None
    )


@api(46, "ListPartitionReassignments", 0, 0)
def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.allows(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return ctx.response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message="Cluster authorization failed.",
            topics=(),
        )
    if request.topics is None:
        names = sorted({name for name, _ in ctx.cluster.replicas.ongoing})
        found = [_moving(ctx, name, None) for name in names]
    else:
        found = [_moving(ctx, t.name, t.partition_indexes) for t in request.topics]
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(t for t in found if t is not None),
    )
