"""The per-connection bookkeeping behind the server's budgets and timeouts (no sockets)."""

from __future__ import annotations

import pytest

from minibroker.config import BrokerConfig
from minibroker.limits import SHRINK_AFTER_SECONDS, ConnectionMeter, MemoryBudget, Verdict

CONFIG = BrokerConfig(partial_request_timeout_ms=2_000, connections_max_idle_ms=10_000)


def test_a_fresh_connection_is_kept() -> None:
    assert ConnectionMeter(opened_at=100.0).verdict(100.5, CONFIG) is Verdict.KEEP


def test_a_frame_that_stops_midway_times_out_from_its_first_byte() -> None:
    meter = ConnectionMeter(opened_at=0.0)
    meter.received(1.0, partial=True)
    meter.received(2.5, partial=True)  # more bytes, same frame: the clock does not restart
    assert meter.verdict(2.9, CONFIG) is Verdict.KEEP
    assert meter.verdict(3.1, CONFIG) is Verdict.CLOSE_PARTIAL


def test_a_completed_frame_clears_the_partial_clock() -> None:
    meter = ConnectionMeter(opened_at=0.0)
    meter.received(1.0, partial=True)
    meter.received(2.0, partial=False)
    assert meter.verdict(5.0, CONFIG) is Verdict.SHRINK


def test_idle_connections_shrink_then_close() -> None:
    meter = ConnectionMeter(opened_at=0.0)
    meter.received(1.0, partial=False)
    assert meter.verdict(1.0 + SHRINK_AFTER_SECONDS / 2, CONFIG) is Verdict.KEEP
    assert meter.verdict(1.0 + SHRINK_AFTER_SECONDS * 2, CONFIG) is Verdict.SHRINK
    assert meter.verdict(11.5, CONFIG) is Verdict.CLOSE_IDLE


def test_a_request_in_progress_is_never_idle() -> None:
    meter = ConnectionMeter(opened_at=0.0, busy=True)
    assert meter.verdict(3_600.0, CONFIG) is Verdict.KEEP


def test_the_budget_sums_what_every_connection_holds() -> None:
    budget = MemoryBudget(limit=100)
    first, second = ConnectionMeter(opened_at=0.0), ConnectionMeter(opened_at=0.0)
    budget.update(first, 60)
    budget.update(second, 30)
    assert budget.total == 90 and not budget.exhausted
    budget.update(second, 50)
    assert budget.total == 110 and budget.exhausted
    budget.release(first)
    assert budget.total == 50 and not budget.exhausted
    assert first.held == 0


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ValueError):
        MemoryBudget(0)
