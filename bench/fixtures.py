"""What a trivial Kafka test costs in fixture time, through the pytest plugin.

    python -m bench.fixtures [--tests N] [--runs N] [--before]

A suite of N tests (default 200), each `kafka_topic()` + `kafka_produce` of one record +
`kafka_consume` of it, is written to a temporary folder and run by pytest in a child
process, once per column:

- fresh broker: the tests take `kafka_broker` (a new embedded broker per test);
- session broker: the tests take `kafka_broker_session` (one broker, a topic per test);
- kafka-jvm: the fresh-broker file under `--kafka-backend=kafka-jvm` (Apache Kafka 4.4.0
  from the jar cache, shared by the session); skipped, saying why, without Java or jars;
- with `--before`: the fresh-broker file with the helper's producer made idempotent, as
  it was before (on fewer tests: each waits about half a second);
- the anchor: the same number of tests taking no fixture, what pytest itself costs.

A test's fixture cost is pytest's own setup + call + teardown durations for it (the test
body does nothing but call the fixtures); the medians are reported, with the ratios to
the fresh-broker column. Results go to stdout and bench/FIXTURES_RESULTS.md.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import bench_parser, client_version, load_average, write_results

RESULTS = Path(__file__).resolve().parent / "FIXTURES_RESULTS.md"
GOAL_MS = 20.0
BEFORE_TESTS = 20

CONFTEST = """
import json
import os

import pytest

from minibroker.testing.clients import KafkaHelper

_phases: dict[str, dict[str, float]] = {}


def pytest_runtest_logreport(report):
    _phases.setdefault(report.nodeid, {})[report.when] = report.duration


def pytest_sessionfinish(session):
    with open(os.environ["FIXTURE_BENCH_OUT"], "w") as out:
        json.dump(_phases, out)


if os.environ.get("FIXTURE_BENCH_IDEMPOTENT"):

    @pytest.fixture
    def kafka_helper(kafka_config, kafka_target):
        helper = KafkaHelper(
            lambda: kafka_config.bootstrap_servers,
            kafka_config,
            producer_settings={
                "enable.idempotence": True,
                "max.in.flight.requests.per.connection": 5,
            },
        )
        kafka_target.close_before_stop(helper.close)
        yield helper
        helper.close()
"""

TEST = """
import pytest


@pytest.mark.parametrize("n", range({count}))
def test_trivial(n, {broker}, kafka_topic, kafka_produce, kafka_consume):
    topic = kafka_topic()
    kafka_produce(topic, ["hello"])
    [record] = kafka_consume(topic, 1)
    assert record.value == "hello"
"""


BARE = """
import pytest


@pytest.mark.parametrize("n", range({count}))
def test_trivial(n):
    assert n >= 0
"""


@dataclass
class Column:
    name: str
    per_test_ms: list[float]  # setup + call + teardown of each test, in run order
    phase_ms: dict[str, list[float]]
    wall_s: float
    passed: int
    failed: int
    skipped: str | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.per_test_ms) if self.per_test_ms else float("nan")

    def phase_median(self, phase: str) -> float:
        values = self.phase_ms.get(phase, [])
        return statistics.median(values) if values else float("nan")

    def quantile(self, q: float) -> float:
        ordered = sorted(self.per_test_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def write_suite(folder: Path, count: int) -> None:
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    for broker, name in (
        ("kafka_broker", "test_fresh.py"),
        ("kafka_broker_session", "test_session.py"),
    ):
        (folder / name).write_text(TEST.format(count=count, broker=broker))
    (folder / "test_bare.py").write_text(BARE.format(count=count))


def run_suite(
    folder: Path,
    name: str,
    test_file: str,
    *,
    args: tuple[str, ...] = (),
    idempotent: bool = False,
    count: int | None = None,
) -> Column:
    out = folder / f"{name.replace(' ', '-')}.json"
    env = {**os.environ, "FIXTURE_BENCH_OUT": str(out)}
    env.pop("FIXTURE_BENCH_IDEMPOTENT", None)
    if idempotent:
        env["FIXTURE_BENCH_IDEMPOTENT"] = "1"
    selection = (
        [test_file] if count is None else [f"{test_file}::test_trivial[{n}]" for n in range(count)]
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, *selection]
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=1800
    )
    wall = time.perf_counter() - started
    if not out.exists():
        raise RuntimeError(
            f"{name}: pytest wrote no durations\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    phases: dict[str, dict[str, float]] = json.loads(out.read_text())
    per_test = [sum(p.values()) * 1000 for p in phases.values()]
    by_phase = {
        phase: [p[phase] * 1000 for p in phases.values() if phase in p]
        for phase in ("setup", "call", "teardown")
    }
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    passed = _count(tail, "passed")
    failed = _count(tail, "failed") + _count(tail, "error")
    skipped_all = passed == 0 and _count(tail, "skipped") > 0
    if skipped_all:
        return Column(name, [], {}, wall, 0, 0, skipped=_skip_reason(done.stdout))
    if failed:
        print(done.stdout[-4000:], file=sys.stderr)
    return Column(name, per_test, by_phase, wall, passed, failed)


def _count(summary: str, word: str) -> int:
    for part in summary.replace(",", " ,").split(","):
        bits = part.split()
        if len(bits) >= 2 and bits[1].startswith(word) and bits[0].isdigit():
            return int(bits[0])
    return 0


def _skip_reason(output: str) -> str:
    for line in output.splitlines():
        if "SKIPPED" in line:
            return line.split(":", 2)[-1].strip()
    return "every test skipped"


def kafka_jvm_missing() -> str | None:
    from minibroker.testing.real_kafka import unavailable_reason

    return unavailable_reason("4")


def fmt_ms(value: float) -> str:
    return "n/a" if value != value else f"{value:.1f} ms"


def report(
    columns: list[Column],
    count: int,
    runs: int,
    elapsed: float,
    loads: tuple[str, str],
    steps: dict[str, float],
) -> str:
    fresh = columns[0]
    lines = [
        "# pytest fixture benchmark",
        "",
        f"`python -m bench.fixtures`, {time.strftime('%Y-%m-%d')}, {elapsed:.0f} s. "
        f"A suite of {count} trivial tests (`kafka_topic()`, `kafka_produce` of one "
        "record, `kafka_consume` of it), run by pytest in a child process per column, "
        f"{runs} run(s) of every column, interleaved. Fixture cost per test = pytest's "
        "setup + call + teardown durations; medians over every test of every run (the "
        "wall time: median of the runs). Ratios are to the fresh-broker column.",
        "",
        "| column | tests (all runs) | fixture cost per test, median | p90 | "
        "setup / call / teardown, medians | pytest wall time | ratio | "
        "goal (<= 20 ms, fresh broker) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for column in columns:
        if column.skipped is not None:
            lines.append(f"| {column.name} | skipped: {column.skipped} | | | | | | |")
            continue
        ratio = column.median / fresh.median if fresh.median == fresh.median else float("nan")
        goal = ""
        if column is fresh:
            goal = "yes" if column.median <= GOAL_MS else "**no**"
        split = " / ".join(f"{column.phase_median(p):.1f}" for p in ("setup", "call", "teardown"))
        result = f"{column.passed}" + (f" ({column.failed} failed)" if column.failed else "")
        lines.append(
            f"| {column.name} | {result} | {fmt_ms(column.median)} | "
            f"{fmt_ms(column.quantile(0.9))} | {split} ms | {column.wall_s:.1f} s | "
            f"{ratio:.2f} | {goal} |"
        )
    lines += [
        "",
        f"Where a fresh-broker test's time goes: the fixtures' calls timed step by step in "
        f"one process without pytest, medians of {count} (ms; total "
        f"{sum(steps.values()):.1f} ms).",
        "",
        "| " + " | ".join(steps) + " |",
        "|" + "---|" * len(steps),
        "| " + " | ".join(f"{value:.2f}" for value in steps.values()) + " |",
        "",
        f"- Machine: {os.cpu_count()} CPUs shared with other work (load average {loads[0]} "
        f"at the start, {loads[1]} at the end), Python {platform.python_version()}, "
        f"{client_version()}.",
        "- The helpers' producer is librdkafka's, not idempotent, acks=all, one request in "
        "flight per connection (a retried batch keeps its place); the before column makes it "
        "idempotent (enable.idempotence=true, 5 in flight), as the helper did before: its "
        "first record waits about 500 ms for a producer id, on minibroker and Kafka alike.",
        "- The pytest-alone row is pytest's own cost per test (a test taking no fixture, "
        "same plugins loaded); the Kafka rows include it.",
        "- pytest wall time includes interpreter start, plugin loading and collection; under "
        "kafka-jvm it also includes starting Apache Kafka once (the first test's setup).",
    ]
    return "\n".join(lines) + "\n"


STEPS = (
    "broker start",
    "topic",
    "producer made",
    "produce one",
    "consumer made",
    "consumer metadata",
    "fetch one",
    "consumer close",
    "producer close",
    "broker stop",
)


def breakdown(iterations: int) -> dict[str, float]:
    """Where a fresh-broker test's time goes, step by step, without pytest (medians, ms):
    the same calls the fixtures make, timed in this process."""
    import confluent_kafka

    from minibroker import Broker
    from minibroker.testing.clients import KafkaHelper

    samples: dict[str, list[float]] = {step: [] for step in STEPS}
    for index in range(iterations + 3):  # the first few load codecs and warm caches
        marks = [time.perf_counter()]
        broker = Broker().start_in_thread()
        marks.append(time.perf_counter())
        broker.create_topic("t", 1)
        marks.append(time.perf_counter())
        helper = KafkaHelper(broker.bootstrap_servers)
        helper._producer_for_now()
        marks.append(time.perf_counter())
        helper.produce("t", ["hello"])
        marks.append(time.perf_counter())
        consumer = confluent_kafka.Consumer(
            helper.configs.confluent_consumer(
                **{"enable.auto.commit": False, "enable.partition.eof": True}
            )
        )
        marks.append(time.perf_counter())
        helper._wait_for_partitions(consumer, "t", time.monotonic() + 10)
        marks.append(time.perf_counter())
        consumer.assign([confluent_kafka.TopicPartition("t", 0, confluent_kafka.OFFSET_BEGINNING)])
        while not [m for m in consumer.consume(1, 0.2) if m.error() is None]:
            pass
        marks.append(time.perf_counter())
        consumer.close()
        marks.append(time.perf_counter())
        helper.close()
        marks.append(time.perf_counter())
        broker.stop_thread()
        marks.append(time.perf_counter())
        if index >= 3:
            for step, begin, end in zip(STEPS, marks[:-1], marks[1:], strict=True):
                samples[step].append((end - begin) * 1000)
    return {step: statistics.median(values) for step, values in samples.items()}


def merge(runs: list[Column]) -> Column:
    """One column from several runs of it: every test's cost pooled, the median wall time."""
    first = runs[0]
    if first.skipped is not None:
        return first
    return Column(
        first.name,
        [ms for run in runs for ms in run.per_test_ms],
        {p: [ms for run in runs for ms in run.phase_ms.get(p, [])] for p in first.phase_ms},
        statistics.median(run.wall_s for run in runs),
        sum(run.passed for run in runs),
        sum(run.failed for run in runs),
    )


def main() -> None:
    parser = bench_parser(
        "fixtures", __doc__ or "", quick=None, runs="runs of every column, interleaved (default 1)"
    )
    parser.add_argument("--tests", type=int, default=200, help="tests per column (default 200)")
    parser.add_argument(
        "--before",
        action="store_true",
        help=f"add the idempotent producer the helper used before ({BEFORE_TESTS} tests)",
    )
    parser.add_argument("--no-jvm", action="store_true", help="leave out the kafka-jvm column")
    options = parser.parse_args()
    count = max(1, options.tests)
    runs = max(1, options.runs or 1)
    loads = [load_average()]
    started = time.perf_counter()
    jvm = "kafka-jvm (Apache Kafka 4.4.0, shared)"
    missing = "left out (--no-jvm)" if options.no_jvm else kafka_jvm_missing()
    plan: list[tuple[str, str, dict[str, Any]]] = [
        ("fresh broker (kafka_broker)", "test_fresh.py", {}),
        ("no Kafka fixtures (pytest alone)", "test_bare.py", {}),
        ("session broker (kafka_broker_session)", "test_session.py", {}),
    ]
    if missing is None:
        plan.append((jvm, "test_fresh.py", {"args": ("--kafka-backend=kafka-jvm",)}))
    if options.before:
        before = {"idempotent": True, "count": min(count, BEFORE_TESTS)}
        plan.append(("fresh broker, idempotent producer (before)", "test_fresh.py", before))
    results: dict[str, list[Column]] = {name: [] for name, _, _ in plan}
    with tempfile.TemporaryDirectory(prefix="bench-fixtures-") as tmp:
        folder = Path(tmp)
        write_suite(folder, count)
        for run in range(runs):
            for name, test_file, extra in plan:
                print(f"run {run + 1}/{runs}: {name}", flush=True)
                results[name].append(run_suite(folder, name, test_file, **extra))
    steps = breakdown(options.tests)
    columns = [merge(results[name]) for name, _, _ in plan]
    if missing is not None:
        columns.insert(3, Column(jvm, [], {}, 0.0, 0, 0, skipped=missing))
    elapsed = time.perf_counter() - started
    loads.append(load_average())
    text = report(columns, count, runs, elapsed, (loads[0], loads[1]), steps)
    print(text)
    write_results(RESULTS, text, elapsed)


if __name__ == "__main__":
    main()
