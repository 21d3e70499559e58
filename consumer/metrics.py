"""Numbers a running consumer exposes: rates over a sliding window and snapshots."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


class Rate:
    """Events and bytes per second over the last `window` seconds, in 1/4 s buckets."""

    _RESOLUTION = 0.25

    def __init__(self, window: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window
        self._clock = clock
        self._buckets: deque[list[float]] = deque()  # [bucket start, count, bytes]
        self._started = clock()

    def add(self, count: int, size: int) -> None:
        now = self._clock()
        start = now - now % self._RESOLUTION
        if self._buckets and self._buckets[-1][0] == start:
            bucket = self._buckets[-1]
            bucket[1] += count
            bucket[2] += size
        else:
            self._buckets.append([start, count, size])
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._buckets and self._buckets[0][0] <= now - self._window - self._RESOLUTION:
            self._buckets.popleft()

    def per_second(self) -> tuple[float, float]:
        """(events/s, bytes/s); before a full window has passed, over the time so far."""
        now = self._clock()
        self._trim(now)
        span = min(self._window, max(now - self._started, self._RESOLUTION))
        cutoff = now - span
        count = sum(b[1] for b in self._buckets if b[0] + self._RESOLUTION > cutoff)
        size = sum(b[2] for b in self._buckets if b[0] + self._RESOLUTION > cutoff)
        return count / span, size / span


@dataclass(frozen=True)
class PartitionSnapshot:
    topic: str
    partition: int
    buffered: int
    """Records fetched and waiting for a handler."""
    buffered_bytes: int
    max_buffered: int
    """The largest `buffered` seen since the partition was assigned."""
    in_flight: int
    position: int | None
    """Offset after the last record whose handler finished (what a commit would store)."""
    committed: int | None
    highwater: int | None
    lag: int | None
    """highwater - position: records not yet processed."""
    processed: int
    fetch_paused: bool
    """Fetching is paused because the buffer is full or the partition is paused."""
    paused: bool
    """Paused by `Consumer.pause()`."""
    records_per_second: float
    bytes_per_second: float


@dataclass(frozen=True)
class ConsumerSnapshot:
    state: str
    group_id: str | None
    concurrency: int
    in_flight: int
    buffered: int
    processed: int
    retried: int
    dead_lettered: int
    refetched: int
    """Records dropped after a fetch because a buffer had no room; fetched again later."""
    commits: int
    records_per_second: float
    bytes_per_second: float
    paused_topics: tuple[str, ...]
    partitions: tuple[PartitionSnapshot, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def partition(self, topic: str, index: int) -> PartitionSnapshot:
        for snapshot in self.partitions:
            if snapshot.topic == topic and snapshot.partition == index:
                return snapshot
        raise KeyError((topic, index))
