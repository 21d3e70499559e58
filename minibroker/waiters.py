"""Requests waiting for a change, woken by what they wait on."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class WaiterIndex:
    """Long polls waiting for a change, indexed by what they wait on (a partition log,
    the group coordinator), so that a change wakes only the polls that wait on it."""

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}

    def fire(self, key: Hashable) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def waiting(self, key: Hashable) -> int:
        return len(self._waiters.get(key, ()))

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> None:
        waiter = asyncio.get_running_loop().create_future()
        keys = tuple(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(waiter)
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
                    registered.discard(waiter)
                    if not registered:
                        del self._waiters[key]
