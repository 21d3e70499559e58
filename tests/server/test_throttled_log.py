"""A repeated failure is logged once, then counted once per interval."""

from __future__ import annotations

from minibroker.throttled_log import ThrottledLog


def test_the_first_is_logged_then_one_line_per_interval_counts_the_rest() -> None:
    throttle = ThrottledLog(10.0)
    assert throttle.occurred(100.0) == 1
    assert [throttle.occurred(100.0 + i / 10) for i in range(1, 50)] == [None] * 49
    assert throttle.occurred(110.0) == 50  # the 49 unlogged and this one
    assert throttle.occurred(111.0) is None
    assert throttle.unlogged() == 1 and throttle.unlogged() == 0
    assert throttle.occurred(200.0) == 1  # after a quiet spell: logged at once
