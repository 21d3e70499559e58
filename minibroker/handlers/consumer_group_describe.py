"""ConsumerGroupDescribe (key 69), versions 0-1: consumer-protocol groups described.

For each group: its state, group epoch, target assignment epoch and assignor, and each
member's epoch, subscription, current assignment (with the partitions it has still to
revoke) and target assignment (by topic id and name).
A group that is not a consumer-protocol group, or not here, is GROUP_ID_NOT_FOUND.
Asked for (include_authorized_operations), a group described carries the client's
authorized operations on it (handlers/_acls.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import authorized_operations
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers._groups import describe_refusal
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import OPERATIONS_NOT_REQUESTED, ResourceType
from minibroker.state.consumer_group_rules import Assignment

CONSUMER_MEMBER_TYPE = 1  # v1: the member speaks the consumer protocol (0: classic)


def _assignment(ctx: RequestContext, assigned: Assignment) -> Any:
    parts = []
    for topic_id, partitions in sorted(assigned.items(), key=lambda i: str(i[0])):
        topic = ctx.cluster.topics.by_id(topic_id)
        parts.append(
            ctx.make(
                "TopicPartitions",
                topic_id=topic_id,
                topic_name=topic.name if topic is not None else "",
                partitions=tuple(sorted(partitions)),
            )
        )
    return ctx.make("Assignment", topic_partitions=tuple(parts))


def _owned(assigned: Assignment, revoking: Assignment) -> Assignment:
    """What a member holds: its assignment and what it has still to give up (Kafka
    describes a member that is revoking partitions as holding them until it has)."""
    held = dict(assigned)
    for topic_id, partitions in revoking.items():
        held[topic_id] = held.get(topic_id, frozenset()) | partitions
    return held


def _described(ctx: RequestContext, group_id: str, include_operations: bool) -> Any:
    def failed(code: ErrorCode, message: str | None) -> Any:
        return ctx.make(
            "DescribedGroup",
            error_code=code,
            error_message=message,
            group_id=group_id,
            group_state="",
            group_epoch=0,
            assignment_epoch=0,
            assignor_name="",
            members=(),
            authorized_operations=OPERATIONS_NOT_REQUESTED,
        )

    groups = ctx.cluster.consumer_groups.groups
    refusal = describe_refusal(ctx, group_id, groups, "consumer")
    if refusal is not None:
        return failed(*refusal)
    group = groups[group_id]
    members = tuple(
        ctx.make(
            "Member",
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=f"/{m.client_host}",
            subscribed_topic_names=m.subscribed_names,
            subscribed_topic_regex=m.subscribed_regex or "",  # Kafka: "" when none
            assignment=_assignment(ctx, _owned(m.assigned, m.pending_revocation)),
            target_assignment=_assignment(ctx, group.target.get(m.member_id, {})),
            member_type=CONSUMER_MEMBER_TYPE,
        )
        for m in group.members.values()
    )
    return ctx.make(
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor,
        members=members,
        authorized_operations=authorized_operations(
            ctx, ResourceType.GROUP, group_id, include_operations
        ),
    )


@api(69, "ConsumerGroupDescribe", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    return ctx.response(
        throttle_time=NO_THROTTLE,
        groups=tuple(
            _described(ctx, g, request.include_authorized_operations) for g in request.group_ids
        ),
    )
