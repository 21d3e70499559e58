"""OffsetCommit (key 8), versions 0-9 (0-1 through protocol/legacy.py).

Commits from members are checked against the group's generation and member id; a
generation of -1 commits for a group without members (consumers that assign partitions
themselves), creating it if need be, and group id "" is accepted (old simple consumers).
A generation >= 0 for an unknown group is ILLEGAL_GENERATION. Offsets of unknown
partitions are UNKNOWN_TOPIC_OR_PARTITION; metadata over 4096 bytes is
OFFSET_METADATA_TOO_LARGE.
Committed offsets are kept in memory, not written to __consumer_offsets; those of Empty
groups expire after offsets.retention.minutes (group_rules: Offset expiry).
To a consumer-protocol group (Kafka 4), a member commits with its member epoch:
STALE_MEMBER_EPOCH for another epoch, UNSUPPORTED_VERSION below v9
(state/consumer_group_rules.py).
A share group's id is GROUP_ID_NOT_FOUND on every partition, as Kafka answers.
Not done: the retention_time_ms of v2-v4 (the broker's retention applies).
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers._groups import commit_answer, is_coordinator, requested_offsets
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import group_rules as rules
from minibroker.state.acl import Operation, ResourceType

GROUP_AUTHORIZATION_FAILED = 30


@api(8, "OffsetCommit", 0, 9)
def handle(ctx: RequestContext, request: Any) -> Any:
    offsets = requested_offsets(request)
    if not ctx.allows(Operation.READ, ResourceType.GROUP, request.group_id):
        refused = {(t, p): GROUP_AUTHORIZATION_FAILED for t, p, *_ in offsets}
        return commit_answer(ctx, request, refused, "OffsetCommit")
    injected = {
        (t, p): int(code) for t, p, *_ in offsets if (code := ctx.injected_error(t, p)) is not None
    }
    offsets = [o for o in offsets if (o[0], o[1]) not in injected]
    if not is_coordinator(ctx, request.group_id):
        codes = {(t, p): rules.NOT_COORDINATOR for t, p, *_ in offsets}
    elif request.group_id in ctx.cluster.share_groups.groups:
        codes = {(t, p): rules.GROUP_ID_NOT_FOUND for t, p, *_ in offsets}
    elif request.group_id in ctx.cluster.consumer_groups.groups:
        codes = ctx.cluster.consumer_groups.commit(
            ctx.cluster.clock.monotonic(),
            version=ctx.version,
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.generation_id_or_member_epoch,
            offsets=offsets,
        )
    else:
        codes = ctx.cluster.groups.commit(
            ctx.cluster.clock.monotonic(),
            group_id=request.group_id,
            generation=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=offsets,
        )
    return commit_answer(ctx, request, {**codes, **injected}, "OffsetCommit")
