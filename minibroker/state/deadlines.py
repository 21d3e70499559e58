"""Deadlines of many timers in one min-heap, with lazy re-arming. Sans-IO.

A timer is named by (owner, key) -- a group id and what the deadline is for -- and has
at most one live heap entry; `live` records that entry's deadline per owner, and an
entry that does not match it is stale and dropped when it surfaces. Arming pushes only
when the new deadline is earlier than the live entry's (or there is none); a deadline
that moves later, as on every heartbeat, keeps its entry, and when the entry surfaces
the caller's `actual` says where the deadline really is now and it is pushed again
there. So arming costs O(log n) at most, `next_deadline` peeks (amortised O(1)), and
`due` pops only what is due. Stale entries are swept out once they are half the heap.

Both group coordinators keep their timers here: the classic one's sessions, pending
member ids, join phases and offset expiry; the consumer protocol's sessions and
revocation timeouts.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

MIN_STALE_SWEEP = 1024  # stale entries tolerated before a sweep is considered

# (owner, key, the entry's deadline) -> the timer's real deadline now, or None when it
# no longer applies.
Actual = Callable[[str, K, float], float | None]


class Deadlines(Generic[K]):
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, K]] = []
        self._sequence = 0
        self._stale = 0  # entries known to be stale (their timer moved or went)
        # owner -> key -> the deadline of that timer's live entry
        self.live: dict[str, dict[K, float]] = {}

    def __len__(self) -> int:
        return len(self._heap)

    def arm(self, owner: str, key: K, deadline: float) -> None:
        """Make sure the timer has an entry no later than `deadline`."""
        timers = self.live.setdefault(owner, {})
        scheduled = timers.get(key)
        if scheduled is not None and scheduled <= deadline:
            return  # that entry comes up first and is re-pushed if the deadline moved
        timers[key] = deadline
        self._sequence += 1
        heapq.heappush(self._heap, (deadline, self._sequence, owner, key))
        if scheduled is not None:
            self._note_stale(1)  # the later entry

    def armed(self, owner: str, key: K) -> bool:
        return key in self.live.get(owner, ())

    def forget(self, owner: str, key: K) -> None:
        """The timer no longer applies; its entry goes stale."""
        timers = self.live.get(owner)
        if timers is not None and timers.pop(key, None) is not None:
            self._note_stale(1)
            if not timers:
                del self.live[owner]

    def forget_owner(self, owner: str) -> None:
        """Every timer of the owner no longer applies."""
        self._note_stale(len(self.live.pop(owner, ())))

    def next_deadline(self, actual: Actual[K]) -> float | None:
        """The earliest live deadline, or None; entries that surface early are pushed
        again at their real deadline on the way."""
        heap = self._heap
        while heap:
            deadline, _, owner, key = heap[0]
            live = self._is_live(deadline, owner, key)
            real = actual(owner, key, deadline) if live else None
            if live and real == deadline:
                return deadline
            heapq.heappop(heap)
            if not live:
                self._stale = max(0, self._stale - 1)
                continue
            self._unset(owner, key)
            if real is not None:
                self.arm(owner, key, real)
        return None

    def due(self, now: float, actual: Actual[K]) -> list[tuple[str, K]]:
        """Pop every timer whose real deadline has come, in deadline order; a timer whose
        deadline moved later is pushed again there, one that no longer applies dropped."""
        heap = self._heap
        fired: list[tuple[str, K]] = []
        while heap and heap[0][0] <= now:
            deadline, _, owner, key = heapq.heappop(heap)
            if not self._is_live(deadline, owner, key):
                self._stale = max(0, self._stale - 1)
                continue
            self._unset(owner, key)
            real = actual(owner, key, deadline)
            if real is None:
                continue
            if real > now:
                self.arm(owner, key, real)
            else:
                fired.append((owner, key))
        return fired

    def _is_live(self, deadline: float, owner: str, key: K) -> bool:
        timers = self.live.get(owner)
        return timers is not None and timers.get(key) == deadline

    def _unset(self, owner: str, key: K) -> None:
        timers = self.live[owner]
        del timers[key]
        if not timers:
            del self.live[owner]

    def _note_stale(self, count: int) -> None:
        self._stale += count
        if self._stale > MIN_STALE_SWEEP and 2 * self._stale > len(self._heap):
            self._compact()

    def _compact(self) -> None:
        """Sweep stale entries once they are half the heap: amortised O(1) each."""
        # In place: callers may be holding the list while they push.
        self._heap[:] = [e for e in self._heap if self._is_live(e[0], e[2], e[3])]
        heapq.heapify(self._heap)
        self._stale = 0
