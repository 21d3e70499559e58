"""OffsetFetch (key 9), versions 0-9 (0 through protocol/legacy.py).

v1-7 ask for one group, v8+ for a batch of groups. A null topic list (v2+) returns every
committed offset of the group. Partitions without a commit report offset -1.
v9+ may name a consumer-protocol member and its epoch: an unknown member is
UNKNOWN_MEMBER_ID, another epoch STALE_MEMBER_EPOCH (without them anyone may fetch).
With require_stable (v7+), a partition whose transactional commit (TxnOffsetCommit) still
waits for its transaction's end is UNSTABLE_OFFSET_COMMIT with offset -1, as Kafka
answers; the client asks again. A share group's id is GROUP_ID_NOT_FOUND (share groups
keep no committed offsets; DescribeShareGroupOffsets tells where they are).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules
from minibroker.state.acl import Operation, ResourceType

GROUP_AUTHORIZATION_FAILED = 30


def _topics(
    ctx: RequestContext,
    group_id: str,
    wanted: Any,
    batched: bool,
    require_stable: bool,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[int, Any]:
    if not ctx.allows(Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return GROUP_AUTHORIZATION_FAILED, ()
    if not is_coordinator(ctx, group_id):
        return rules.NOT_COORDINATOR, ()
    if group_id in ctx.cluster.share_groups.groups:
        return rules.GROUP_ID_NOT_FOUND, ()
    member_id, member_epoch = member
    if member_id or member_epoch >= 0:
        code = ctx.cluster.consumer_groups.check_member(group_id, member_id, member_epoch)
        if code != rules.NONE:
            return code, ()
    indexes_field = "partition_indexes"
    keys = (
        None
        if wanted is None
        else [(t.name, index) for t in wanted for index in getattr(t, indexes_field)]
    )
    committed = ctx.cluster.groups.committed(group_id, keys)
    by_topic: dict[str, list[Any]] = {}
    groups = ctx.cluster.groups
    for (topic, partition), stored in committed.items():
        code = ErrorCode.none
        if ctx.screened and ctx.injected_error(topic, partition) is not None:
            if wanted is None:
                continue  # every committed offset asked for: those of hidden topics left out
            code, stored = ErrorCode.topic_authorization_failed, None
        elif require_stable and groups.has_pending(group_id, (topic, partition)):
            code, stored = ErrorCode.unstable_offset_commit, None
        by_topic.setdefault(topic, []).append(
            ctx.make(
                "OffsetFetchResponsePartitions" if batched else "OffsetFetchResponsePartition",
                partition_index=partition,
                committed_offset=stored.offset if stored else -1,
                committed_leader_epoch=stored.leader_epoch if stored else -1,
                metadata=(stored.metadata if stored else "") or "",
                error_code=code,
            )
        )
    topics = tuple(
        ctx.make(
            "OffsetFetchResponseTopics" if batched else "OffsetFetchResponseTopic",
            name=name,
            partitions=tuple(sorted(parts, key=lambda p: p.partition_index)),
        )
        for name, parts in sorted(by_topic.items())
    )
    return rules.NONE, topics


@api(9, "OffsetFetch", 0, 9)
def handle(ctx: RequestContext, request: Any) -> Any:
    require_stable = bool(getattr(request, "require_stable", False))
    if hasattr(request, "groups"):
        groups = []
        for wanted in request.groups:
            code, topics = _topics(
                ctx,
                wanted.group_id,
                wanted.topics,
                batched=True,
                require_stable=require_stable,
                member=(getattr(wanted, "member_id", None), getattr(wanted, "member_epoch", -1)),
            )
            groups.append(
                ctx.make(
                    "OffsetFetchResponseGroup",
                    group_id=wanted.group_id,
                    topics=topics,
                    error_code=error(code),
                )
            )
        return ctx.response(throttle_time=NO_THROTTLE, groups=tuple(groups))
    code, topics = _topics(
        ctx, request.group_id, request.topics, batched=False, require_stable=require_stable
    )
    if code != rules.NONE and ctx.version < 2 and request.topics:
        # v1 has no top-level error code: the group's error goes on every partition asked for.
        topics = tuple(
            ctx.make(
                "OffsetFetchResponseTopic",
                name=wanted.name,
                partitions=tuple(
                    ctx.make(
                        "OffsetFetchResponsePartition",
                        partition_index=index,
                        committed_offset=-1,
                        metadata="",
                        error_code=error(code),
                    )
                    for index in wanted.partition_indexes
                ),
            )
            for wanted in request.topics
        )
    return ctx.response(throttle_time=NO_THROTTLE, topics=topics, error_code=error(code))
