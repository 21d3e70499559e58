"""Helpers shared by the group handlers: coordinator checks, waiting on a slot, the
offsets an OffsetCommit or TxnOffsetCommit carries and the answer to it, and what the
consumer-protocol and share-group heartbeats and describes answer alike."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers.registry import Pending, RequestContext
from minibroker.state.acl import Operation, ResourceType
from minibroker.state.cluster import CLOCK_ADVANCED, group_key
from minibroker.state.group_rules import Slot

T = TypeVar("T")
SAFETY_MARGIN_SECONDS = 5.0


def is_coordinator(ctx: RequestContext, group_id: str) -> bool:
    return ctx.cluster.coordinator_for(group_id) == ctx.node_id


def heartbeat_assignment(
    ctx: RequestContext, assignment: Mapping[uuid.UUID, Collection[int]] | None
) -> Any:
    """A heartbeat answer's Assignment (topic id -> partitions), or None for none."""
    if assignment is None:
        return None
    return ctx.make(
        "Assignment",
        topic_partitions=tuple(
            ctx.make("TopicPartitions", topic_id=topic_id, partitions=tuple(sorted(parts)))
            for topic_id, parts in sorted(assignment.items(), key=lambda i: str(i[0]))
        ),
    )


def describe_refusal(
    ctx: RequestContext, group_id: str, groups: Collection[str], kind: str
) -> tuple[ErrorCode, str | None] | None:
    """Why a ConsumerGroupDescribe or ShareGroupDescribe does not describe `group_id`
    (one of `groups`, of type `kind`), as Kafka answers; None when it does."""
    if not ctx.allows(Operation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    if not is_coordinator(ctx, group_id):
        return ErrorCode.not_coordinator, None
    if group_id in groups:
        return None
    if ctx.cluster.group_type(group_id) is not None:
        return ErrorCode.group_id_not_found, f"Group {group_id} is not a {kind} group."
    return ErrorCode.group_id_not_found, f"Group {group_id} not found."


def answer_when_filled(
    ctx: RequestContext,
    group_id: str,
    slot: Slot[T],
    respond: Callable[[T], Any],
    give_up: Callable[[], Any],
    wait_seconds: float,
) -> Any:
    """Respond now if the slot is filled, else wait for it: the coordinator fills it and
    announces the group (a clock advance may also make the wait's deadline pass)."""
    if slot.result is not None:
        return respond(slot.result)

    def poll(final: bool) -> Any:
        if slot.result is not None:
            return respond(slot.result)
        return give_up() if final else None

    deadline = ctx.cluster.clock.monotonic() + wait_seconds + SAFETY_MARGIN_SECONDS
    return Pending(deadline=deadline, poll=poll, wait_keys=(group_key(group_id), CLOCK_ADVANCED))


# (topic, partition, offset, leader epoch, metadata), as GroupCoordinator.commit takes them.
Offsets = list[tuple[str, int, int, int, str | None]]


def requested_offsets(request: Any) -> Offsets:
    """The offsets an OffsetCommit or TxnOffsetCommit request carries."""
    return [
        (
            topic.name,
            p.partition_index,
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata,
        )
        for topic in request.topics
        for p in topic.partitions
    ]


def commit_answer(
    ctx: RequestContext, request: Any, codes: dict[tuple[str, int], int], api_name: str
) -> Any:
    """The answer to an OffsetCommit or TxnOffsetCommit (`api_name`, which names their
    response structures): each partition asked for with its code, in the order asked."""
    topics = tuple(
        ctx.make(
            f"{api_name}ResponseTopic",
            name=topic.name,
            partitions=tuple(
                ctx.make(
                    f"{api_name}ResponsePartition",
                    partition_index=p.partition_index,
                    error_code=error(codes[(topic.name, p.partition_index)]),
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return ctx.response(throttle_time=NO_THROTTLE, topics=topics)
