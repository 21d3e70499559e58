"""ShareGroupDescribe (key 77), version 1: share groups described.

For each group: its state (Empty, Stable), group epoch, assignment epoch and assignor
("simple"), and each member's epoch, rack, client, subscription and assignment (by topic
id and name). DESCRIBE on the group is needed (GROUP_AUTHORIZATION_FAILED); a group
reading a topic the client may not describe is TOPIC_AUTHORIZATION_FAILED with no
members, as Kafka answers. A group not here, or not a share group, is GROUP_ID_NOT_FOUND.
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
from minibroker.state.acl import OPERATIONS_NOT_REQUESTED, Operation, ResourceType
from minibroker.state.share_groups import ASSIGNOR_NAME, Assignment

TOPICS_HIDDEN = "The group has described topic(s) that the client is not authorized to describe."


def _assignment(ctx: RequestContext, assigned: Assignment) -> tuple[Any, set[str]]:
    parts, names = [], set()
    for topic_id, partitions in sorted(assigned.items(), key=lambda i: str(i[0])):
        topic = ctx.cluster.topics.by_id(topic_id)
        name = topic.name if topic is not None else ""
        names.add(name)
        parts.append(
            ctx.make(
                "TopicPartitions",
                topic_id=topic_id,
                topic_name=name,
                partitions=tuple(sorted(partitions)),
            )
        )
    return ctx.make("Assignment", topic_partitions=tuple(parts)), names


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

    groups = ctx.cluster.share_groups.groups
    refusal = describe_refusal(ctx, group_id, groups, "share")
    if refusal is not None:
        return failed(*refusal)
    group = groups[group_id]
    members = []
    topics: set[str] = set()
    for m in group.members.values():
        assignment, names = _assignment(ctx, m.assigned)
        topics |= names
        members.append(
            ctx.make(
                "Member",
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=f"/{m.client_host}",
                subscribed_topic_names=m.subscribed_names,
                assignment=assignment,
            )
        )
    if ctx.cluster.acls.enabled and not all(
        ctx.allows(Operation.DESCRIBE, ResourceType.TOPIC, t) for t in topics
    ):
        return failed(ErrorCode.topic_authorization_failed, TOPICS_HIDDEN)
    return ctx.make(
        "DescribedGroup",
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=ASSIGNOR_NAME,
        members=tuple(members),
        authorized_operations=authorized_operations(
            ctx, ResourceType.GROUP, group_id, include_operations
        ),
    )


@api(77, "ShareGroupDescribe", 1, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    return ctx.response(
        throttle_time=NO_THROTTLE,
        groups=tuple(
            _described(ctx, g, request.include_authorized_operations) for g in request.group_ids
        ),
    )
