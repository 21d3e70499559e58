"""How `spark_stream.wait` tells the triggers apart and drains a running query, on
stand-ins for a StreamingQuery (the real thing: tests/spark/test_triggers.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from minibroker.testing.spark.streams import drain, ends_by_itself, trigger_name


class Query:
    """processAllAvailable blocks until `released`, then raises `failure` if set."""

    def __init__(self, failure: BaseException | None = None) -> None:
        self.released = threading.Event()
        self.failure = failure

    def processAllAvailable(self) -> None:
        self.released.wait(5)
        if self.failure is not None:
            raise self.failure


def test_drain_gives_up_after_the_timeout_and_returns_when_drained() -> None:
    query = Query()
    assert drain(query, 0.05) is False
    query.released.set()
    assert drain(query, 5) is True


def test_drain_raises_what_the_query_failed_with() -> None:
    query = Query(RuntimeError("the sink failed"))
    query.released.set()
    with pytest.raises(RuntimeError, match="the sink failed"):
        drain(query, 5)


class Trigger:
    def __init__(self, name: str) -> None:
        self.name = name

    def getClass(self) -> Any:
        name = self.name
        return type("Class", (), {"getSimpleName": staticmethod(lambda: name)})()


def jvm_query(trigger: str) -> Any:
    execution = type("Execution", (), {"trigger": staticmethod(lambda: Trigger(trigger))})()
    wrapper = type("Wrapper", (), {"streamingQuery": staticmethod(lambda: execution)})()
    return type("Query", (), {"_jsq": wrapper})()


@pytest.mark.parametrize(
    ("trigger", "ends"),
    [
        ("AvailableNowTrigger$", True),
        ("OneTimeTrigger$", True),
        ("ProcessingTimeTrigger", False),
        ("ContinuousTrigger", False),
    ],
)
def test_only_available_now_and_once_end_by_themselves(trigger: str, ends: bool) -> None:
    assert ends_by_itself(jvm_query(trigger)) is ends


def test_a_query_without_a_jvm_side_is_drained() -> None:
    assert trigger_name(object()) is None
    assert not ends_by_itself(object())
