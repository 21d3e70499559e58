"""Requests waiting for a change, woken by what they wait on."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Hashable, Iterable


class WaiterIndex:
    """Long polls waiting for a change, indexed by what they wait on (a partition log,
    the group coordinator), so that a change wakes only the polls that wait on it.

    A change wakes its polls in their place in line: the order in which they first
    started waiting. A poll woken for nothing (another took the new records) waits again
    in the place it had, so that when new records are fewer than the polls waiting for
    them (the share fetches of one share group), the poll that has waited longest is
    served first and the work goes round, instead of to whichever poll a set lists
    first or whichever came back last."""

    def __init__(self) -> None:
        # key -> the polls waiting on it, with their place in line
        self._waiters: dict[Hashable, dict[asyncio.Future[None], int]] = {}
        self._places = itertools.count()

    def place_in_line(self) -> int:
        """A place behind every poll waiting now, for a poll that will wait (maybe more
        than once) to keep."""
        return next(self._places)

    def fire(self, key: Hashable) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for waiter in sorted(waiters, key=waiters.__getitem__):
                if not waiter.done():
                    waiter.set_result(None)

    def waiting(self, key: Hashable) -> int:
        return len(self._waiters.get(key, ()))

    async def wait(
        self, keys: Iterable[Hashable], timeout: float, place: int | None = None
    ) -> None:
        waiter = asyncio.get_running_loop().create_future()
        keys = tuple(keys)
        if place is None:
            place = self.place_in_line()
        for key in keys:
            self._waiters.setdefault(key, {})[waiter] = place
        try:
            # Not wait_for: in Python 3.11 it can swallow a cancellation that arrives as
            # the waiter fires (a clock advance then a stop), leaving a task that never ends.
            await asyncio.wait((waiter,), timeout=timeout)
        finally:
            if not waiter.done():
                waiter.cancel()
            for key in keys:
                registered = self._waiters.get(key)
                if registered is not None:
                    registered.pop(waiter, None)
                    if not registered:
                        del self._waiters[key]
