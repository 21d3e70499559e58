"""Helpers shared by the group handlers: coordinator checks, waiting on a slot, and the
offsets an OffsetCommit or TxnOffsetCommit carries and the answer to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers.registry import Pending, RequestContext
from minibroker.state.cluster import CLOCK_ADVANCED, group_key
from minibroker.state.group_rules import Slot

T = TypeVar("T")
SAFETY_MARGIN_SECONDS = 5.0


def is_coordinator(ctx: RequestContext, group_id: str) -> bool:
    return ctx.cluster.coordinator_for(group_id) == ctx.node_id


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
