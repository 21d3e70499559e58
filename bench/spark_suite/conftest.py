"""Timing for `python -m bench.spark --suite`: each query's wall time from start() to its
end and Spark's split of it (durationMs summed over its batches), and the spark
fixture's setup, appended as JSON lines to $BENCH_SPARK_SUITE_OUT."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

_starts: dict[str, float] = {}
_controller = False


def _record(entry: dict[str, Any]) -> None:
    out = os.environ.get("BENCH_SPARK_SUITE_OUT")
    if out:
        entry["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(out, "a") as handle:
            handle.write(json.dumps(entry) + "\n")


def _wrap_start(cls: Any) -> None:
    original = cls.start

    def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        query = original(self, *args, **kwargs)
        _starts[str(query.id)] = began
        return query

    cls.start = start


def _wrap_wait() -> None:
    from minibroker.testing.spark.session import StreamRunner

    original = StreamRunner.wait

    def wait(self: Any, query: Any, **kwargs: Any) -> Any:
        waited = time.perf_counter()
        try:
            return original(self, query, **kwargs)
        finally:
            ended = time.perf_counter()
            split: dict[str, int] = {}
            for progress in query.recentProgress:
                for name, ms in (progress["durationMs"] or {}).items():
                    split[name] = split.get(name, 0) + int(ms)
            _record(
                {
                    "kind": "query",
                    "wall": ended - _starts.pop(str(query.id), waited),
                    "batches": len(query.recentProgress),
                    "split": split,
                }
            )

    StreamRunner.wait = wait  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    global _controller
    _controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(
        config, "workerinput"
    )
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    _wrap_start(DataStreamWriter)
    try:
        from pyspark.sql.connect.streaming.readwriter import DataStreamWriter as Remote
    except ImportError:
        pass
    else:
        _wrap_start(Remote)
    _wrap_wait()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Iterator[Any]:
    began = time.perf_counter()
    try:
        return (yield)
    finally:
        if fixturedef.argname in ("spark", "kafka_broker", "_kafka_remote"):
            _record({"kind": "fixture", "name": fixturedef.argname,
                     "wall": time.perf_counter() - began})  # fmt: skip


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _controller:  # xdist's controller hears every worker's reports again
        return
    _record({"kind": "phase", "when": report.when, "wall": report.duration,
             "outcome": report.outcome, "test": report.nodeid})  # fmt: skip
