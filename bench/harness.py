"""What the benchmarks share: the broker child process, client-side measurements, samples
and their statistics, and the command line and results file every `python -m bench.X` has.

Where each broker runs: throughput, latency and memory are measured with the broker in a
child process (bench/runner.py) and the clients here. In-process, minibroker's event loop
would share one GIL with the client's Python calls, while the librdkafka mock runs in C
threads; separate processes keep the comparison about the brokers.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

ROOT = Path(__file__).resolve().parent.parent


VALUE = b"v" * 100


QUIET = {"log_level": 3}


WARM_UP_MESSAGES = 10_000


# librdkafka stops fetching a partition for fetch.queue.backoff.ms (default 1000) once its
# local queue holds queued.min.messages; at these rates that pause, not the broker, sets
# the consume rate. The throughput consumer shortens it; the default is measured too.
CONSUME_TUNED = {"fetch.queue.backoff.ms": 10}


WATERMARK_TIMEOUT_S = 30.0


NOT_READY = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
}


class ServerProcess:
    """A broker in a child process (bench/runner.py), steered over its stdin/stdout."""

    def __init__(self, kind: str, settings: dict[str, str] | None = None) -> None:
        self.kind = kind
        extra = [f"{key}={value}" for key, value in (settings or {}).items()]
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.runner", "serve", kind, *extra],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self._readline()
        if not line.startswith("READY "):
            raise RuntimeError(f"{kind} runner did not start: {line!r}")
        _, self.bootstrap, broker_pid = line.split()
        self.pid = int(broker_pid)  # the broker's process: the runner or a child of it

    def cpu_seconds(self) -> float:
        """CPU time of every thread of the broker process so far (schedstat, ns)."""
        total = 0
        for status in Path(f"/proc/{self.pid}/task").glob("*/schedstat"):
            with contextlib.suppress(OSError, ValueError, IndexError):  # a thread ended
                total += int(status.read_text().split()[0])
        return total / 1e9

    def _readline(self) -> str:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.kind} runner exited (code {self._process.poll()})")
        return line.strip()

    def command(self, text: str) -> str:
        assert self._process.stdin is not None
        self._process.stdin.write(text + "\n")
        self._process.stdin.flush()
        return self._readline()

    def create_topic(self, name: str, partitions: int) -> None:
        if self.command(f"topic {name} {partitions}") != "OK":
            raise RuntimeError(f"cannot create {name}")

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.command("stats"))
        return result

    def close(self) -> None:
        assert self._process.stdin is not None
        try:
            self._process.stdin.write("quit\n")
            self._process.stdin.close()
            self._process.wait(10)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()


@contextmanager
def server(kind: str, settings: dict[str, str] | None = None) -> Iterator[ServerProcess]:
    """A broker in a child process; `settings` are broker settings added to a Kafka's."""
    process = ServerProcess(kind, settings)
    try:
        yield process
    finally:
        process.close()


def produce(bootstrap: str, topic: str, count: int, value: bytes = VALUE) -> float:
    """Seconds to produce `count` values and have every one acknowledged (acks=all)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **QUIET})
    producer.list_topics(topic, timeout=10)  # connect and learn leaders before timing
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.001)
    if producer.flush(60) != 0:
        raise RuntimeError("messages left undelivered after 60 s")
    return time.perf_counter() - started


def _consumer(bootstrap: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            **QUIET,
            **extra,
        }
    )


def _watermarks(consumer: Consumer, partition: TopicPartition) -> tuple[int, int]:
    """(low, high) offsets, asking again while the broker says it is not ready for them:
    a real Kafka may still be taking leadership of a new topic's partitions."""
    deadline = time.monotonic() + WATERMARK_TIMEOUT_S
    while True:
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=10)
            return low, high
        except KafkaException as error:
            if error.args[0].code() not in NOT_READY or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def stored_range(bootstrap: str, topic: str, partitions: int) -> tuple[int, int]:
    """(messages held, messages ever written) from the partitions' offsets."""
    consumer = _consumer(bootstrap)
    try:
        held = written = 0
        for index in range(partitions):
            low, high = _watermarks(consumer, TopicPartition(topic, index))
            held += high - low
            written += high
        return held, written
    finally:
        consumer.close()


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    cap_s: float,
    settings: dict[str, Any],
) -> tuple[int, float]:
    """Read every partition from its beginning: (messages received, seconds)."""
    consumer = _consumer(bootstrap, **settings)
    try:
        received = 0
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
        while received < expected and time.perf_counter() - started < cap_s:
            # consume() waits out its timeout until it has the count asked for: ask for no
            # more than is missing, or the last call adds 0.5 s of idle time to the rate
            for message in consumer.consume(min(10_000, expected - received), 0.5):
                if message.error() is None:
                    received += 1
        return received, time.perf_counter() - started
    finally:
        consumer.close()


def latency(bootstrap: str, topic: str, count: int, cap_s: float) -> list[float]:
    """Milliseconds from produce() to the consumer receiving that message, one at a time."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **QUIET})
    consumer = _consumer(bootstrap)
    try:
        producer.produce(topic, b"warm-up")
        producer.flush(10)
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, high)])
        consumer.poll(0.2)  # let the first fetch reach the broker
        samples: list[float] = []
        deadline = time.perf_counter() + cap_s
        for sequence in range(count):
            if time.perf_counter() > deadline:
                break
            value = sequence.to_bytes(4, "big") + VALUE
            started = time.perf_counter()
            producer.produce(topic, value)
            producer.poll(0)
            while time.perf_counter() < deadline:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None and message.value() == value:
                    samples.append((time.perf_counter() - started) * 1000)
                    break
        return samples
    finally:
        consumer.close()
        producer.flush(10)


def startup_ms(kind: str, probe: str) -> tuple[float, float]:
    """(cold, warm) start-to-Metadata milliseconds, measured in a fresh interpreter."""
    output = subprocess.run(
        [sys.executable, "-m", "bench.runner", "startup", kind, probe],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    cold, warm = output.strip().splitlines()[-1].split()
    return float(cold), float(warm)


@dataclass
class Samples:
    """Values per metric and side; None stands for a run that hit its cap."""

    values: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, metric: str, side: str, value: float | None) -> None:
        self.values.setdefault(metric, {}).setdefault(side, []).append(value)

    def median(self, metric: str, side: str) -> float | None:
        """None when nothing was measured or a run was capped."""
        found = self.values.get(metric, {}).get(side, [])
        if not found or any(v is None for v in found):
            return None
        return statistics.median(v for v in found if v is not None)

    def capped(self, metric: str, side: str) -> int:
        return sum(1 for v in self.values.get(metric, {}).get(side, []) if v is None)

    def count(self, metric: str, side: str) -> int:
        return len(self.values.get(metric, {}).get(side, []))


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass(frozen=True)
class Pass:
    """One timed produce or consume pass: messages moved, wall time, CPU seconds."""

    count: int
    seconds: float
    broker_cpu: float
    client_cpu: float

    @property
    def rate(self) -> float:
        return self.count / self.seconds


def warm_up(broker: ServerProcess, partitions: int) -> None:
    # first requests of a kind load code on both sides; keep that out of the rates
    broker.create_topic("warm-up", partitions)
    produce(broker.bootstrap, "warm-up", WARM_UP_MESSAGES)


def timed_produce(
    broker: ServerProcess, topic: str, partitions: int, count: int, value: bytes = VALUE
) -> Pass:
    """Produce `count` values into a fresh topic and check that every one was written."""
    broker.create_topic(topic, partitions)
    broker_cpu, client_cpu = broker.cpu_seconds(), time.process_time()
    seconds = produce(broker.bootstrap, topic, count, value)
    done = Pass(count, seconds, broker.cpu_seconds() - broker_cpu, time.process_time() - client_cpu)
    _, written = stored_range(broker.bootstrap, topic, partitions)
    if written != count:
        raise RuntimeError(f"{broker.kind}: {written} written, expected {count}")
    return done


def timed_consume(
    broker: ServerProcess,
    topic: str,
    partitions: int,
    cap_s: float,
    settings: dict[str, Any],
) -> tuple[int, Pass]:
    """(messages the broker held, the pass reading them): the mock drops old data, so
    only what it still held is expected and only what arrived is counted."""
    held, _ = stored_range(broker.bootstrap, topic, partitions)
    broker_cpu, client_cpu = broker.cpu_seconds(), time.process_time()
    received, seconds = consume(broker.bootstrap, topic, partitions, held, cap_s, settings)
    done = Pass(
        received, seconds, broker.cpu_seconds() - broker_cpu, time.process_time() - client_cpu
    )
    return held, done


def measure_memory(kind: str, partitions: int, messages: int, samples: Samples) -> None:
    """RSS of a fresh broker before and after `messages` x 100 B are produced to it."""
    with server(kind) as broker:
        broker.create_topic("memory", partitions)
        time.sleep(0.2)
        baseline = broker.stats()
        produce(broker.bootstrap, "memory", messages)
        after = broker.stats()
        held, _ = stored_range(broker.bootstrap, "memory", partitions)
    samples.add("mem_baseline_mib", kind, baseline["rss_kb"] / 1024)
    samples.add("mem_peak_mib", kind, after["hwm_kb"] / 1024)
    samples.add("mem_held", kind, held)
    if after["stored_bytes"] is not None:
        stored = after["stored_bytes"]
        samples.add("mem_stored_mib", kind, stored / 2**20)
        samples.add("mem_ratio", kind, after["hwm_kb"] * 1024 / stored)
        samples.add(
            "mem_growth_ratio", kind, (after["hwm_kb"] - baseline["rss_kb"]) * 1024 / stored
        )


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "msg/s":
        return f"{value:,.0f} msg/s"
    if unit == "ms":
        if value >= 1000:
            return f"{value:,.0f} ms"
        return f"{value:.1f} ms" if value >= 1 else f"{value:.2f} ms"
    if unit == "MiB":
        return f"{value:,.0f} MiB"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:,.0f}"


def load_average() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def client_version() -> str:
    import confluent_kafka

    client, library = confluent_kafka.version(), confluent_kafka.libversion()
    client_text = client[0] if isinstance(client, tuple) else client
    return f"{client_text} (librdkafka {library[0]})"


# --- the command line and the results file ---


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def bench_parser(
    module: str, doc: str, quick: str | None, runs: str | None = None
) -> argparse.ArgumentParser:
    """`python -m bench.MODULE` with, given their help, --quick and --runs."""
    parser = argparse.ArgumentParser(
        prog=f"python -m bench.{module}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)
    if runs is not None:
        parser.add_argument("--runs", type=int, help=runs)
    return parser


P = TypeVar("P")


def chosen_plan(quick: bool, full: P, small: P, **changes: int | None) -> P:
    """FULL or QUICK, with the counts given on the command line (at least 1) in place."""
    plan = small if quick else full
    given = {name: max(1, value) for name, value in changes.items() if value is not None}
    return dataclasses.replace(plan, **given)  # type: ignore[type-var]


@dataclass
class Timed(Generic[P]):
    """What `measure` returned, how long it took and the load average before and after."""

    result: P
    elapsed: float
    load: tuple[str, str]


def timed(measure: Callable[[], P]) -> Timed[P]:
    load_before = load_average()
    started = time.perf_counter()
    result = measure()
    elapsed = time.perf_counter() - started
    return Timed(result, elapsed, (load_before, load_average()))


def run_heading(command: str, kind: str, elapsed: float | None = None) -> str:
    """ "`python -m bench.X`, full run, 2026-11-24, 112 s" (the results' first line)."""
    took = "" if elapsed is None else f", {elapsed:.0f} s"
    return f"`{command}`, {kind}, {time.strftime('%Y-%m-%d')}{took}"


def write_results(path: Path, text: str, elapsed: float | None = None) -> None:
    path.write_text(text)
    took = "" if elapsed is None else f" ({elapsed:.0f} s)"
    print(f"\nwritten to {path.relative_to(ROOT)}{took}")
