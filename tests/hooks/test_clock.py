"""Time sources: the system clock's units, and the fake clock tests move by hand."""

from __future__ import annotations

import time

from minibroker.state.clock import FakeClock, SystemClock


def test_system_wall_clock_is_whole_milliseconds_since_the_epoch() -> None:
    before = time.time_ns() // 1_000_000
    now = SystemClock().wall_ms()
    after = time.time_ns() // 1_000_000
    assert isinstance(now, int)
    assert before <= now <= after


def test_fake_clock_starts_at_a_fixed_time() -> None:
    clock = FakeClock()
    assert clock.wall_ms() == 1_700_000_000_000
    assert clock.monotonic() == 0.0
    other = FakeClock(wall_ms=5, monotonic=2.5)
    assert (other.wall_ms(), other.monotonic()) == (5, 2.5)


def test_fake_clock_advances_both_clocks_together() -> None:
    clock = FakeClock(wall_ms=10_000, monotonic=100.0)
    clock.advance(1.5)
    clock.advance(2)
    assert clock.monotonic() == 103.5
    assert clock.wall_ms() == 13_500
