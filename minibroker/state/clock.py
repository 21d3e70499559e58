"""Time sources. State code asks a Clock; tests pass a FakeClock and move it by hand.

A broker runs on a BrokerClock: real time (or the clock it was given) plus however far a
test has moved it forward with `broker.clock.advance(seconds)`. Moving it expires at once
everything the broker times (session and rebalance timeouts, the initial rebalance
delay, offsets retention) and stamps later records with the moved wall time; clients
keep their own, real, time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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


class BrokerClock:
    """The clock a broker runs on: `base` (the system clock by default) moved forward by
    every `advance`. Thread-safe to advance from a test while the broker runs elsewhere."""

    def __init__(self, base: Clock | None = None) -> None:
        self.base: Clock = base if base is not None else SystemClock()
        # The system clock's functions themselves, one call less on the busy paths.
        self._monotonic = (
            time.monotonic if isinstance(self.base, SystemClock) else self.base.monotonic
        )
        self.advanced = 0.0  # seconds added by advance()
        # Called after each advance (the running broker wakes its timers here).
        self.on_advance: list[Callable[[], None]] = []

    def wall_ms(self) -> int:
        return self.base.wall_ms() + round(self.advanced * 1000)

    def monotonic(self) -> float:
        return self._monotonic() + self.advanced

    def advance(self, seconds: float) -> None:
        """Move the broker's time `seconds` forward; what falls due in them happens now."""
        if not seconds >= 0:
            raise ValueError(f"the broker's clock only moves forward, not by {seconds!r} s")
        self.advanced += seconds
        for callback in list(self.on_advance):
            callback()
