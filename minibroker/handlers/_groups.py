"""Helpers shared by the group handlers: coordinator checks and waiting on a slot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from minibroker.handlers.registry import Pending, RequestContext
from minibroker.state.groups import Slot

T = TypeVar("T")
SAFETY_MARGIN_SECONDS = 5.0


def is_coordinator(ctx: RequestContext, group_id: str) -> bool:
    return ctx.cluster.coordinator_for(group_id) == ctx.node_id


def answer_when_filled(
    ctx: RequestContext,
    slot: Slot[T],
    respond: Callable[[T], Any],
    give_up: Callable[[], Any],
    wait_seconds: float,
) -> Any:
    """Respond now if the slot is filled, else wait for it (the coordinator fills it)."""
    ctx.cluster.notify_append()  # other members' slots may have been filled just now
    if slot.result is not None:
        return respond(slot.result)

    def poll(final: bool) -> Any:
        if slot.result is not None:
            return respond(slot.result)
        return give_up() if final else None

    deadline = ctx.cluster.clock.monotonic() + wait_seconds + SAFETY_MARGIN_SECONDS
    return Pending(deadline=deadline, poll=poll)
