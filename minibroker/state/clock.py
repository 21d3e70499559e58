"""Time sources. State code asks a Clock; tests pass a FakeClock and move it by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the epoch, for record timestamps."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps, for deadlines."""
        ...


class SystemClock:
    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic: float = 0.0) -> None:
        self._wall_ms = wall_ms
        self._monotonic = monotonic

    def wall_ms(self) -> int:
        return self._wall_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        self._monotonic += seconds
        self._wall_ms += int(seconds * 1000)
