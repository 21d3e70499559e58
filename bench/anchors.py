"""minibroker side by side with Apache Kafka and franz-go's kfake.

    python -m bench.anchors [--quick] [--runs N]

The anchors are the real thing and the nearest alternative: Apache Kafka 4.x (one KRaft
node from Kafka's own jars, minibroker.testing.real_kafka; `python -m minibroker jars kafka`
fetches them) and kfake, franz-go's in-memory fake cluster (bench/gobench, built from the
Go module proxy on first use). Every side is driven by the same client, confluent-kafka, with
the same settings, in the same run, sides interleaved run by run; each figure is the
median over the runs. The table is printed and written to bench/ANCHORS_RESULTS.md.

Where each broker runs: for throughput, latency, groups and memory, in a child process
(bench/runner.py; Kafka's JVM and kfake's Go program are children of it), the clients
here. Start-up is measured both as a test embeds the broker (minibroker in a fresh
interpreter, kfake in a fresh Go program; Kafka cannot be embedded) and as a new process.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.gobench import binary as go_binary
from bench.groups import HEARTBEAT_100, JOIN_PARTITIONS, first_assignment, join_one_more
from bench.harness import (
    CONSUME_TUNED,
    ROOT,
    Samples,
    ServerProcess,
    bench_parser,
    chosen_plan,
    client_version,
    fmt,
    latency,
    log,
    measure_memory,
    percentile,
    run_heading,
    server,
    startup_ms,
    timed,
    timed_consume,
    timed_produce,
    warm_up,
    write_results,
)
from bench.runner import KAFKA_HEAP, KAFKA_LINE, KAFKA_STOCK_REBALANCE_DELAY_MS, socket_metadata
from harness.child_broker import ChildBroker
from minibroker.testing import jvm
from minibroker.testing.real_kafka import RealKafka, free_loopback_ports, unavailable_reason

RESULTS = Path(__file__).resolve().parent / "ANCHORS_RESULTS.md"
SIDES = ("minibroker", "kafka", "kfake")
FIRST_PARTITIONS = 6
PROCESS_START_TIMEOUT_S = 90.0


# The sizes of this benchmark's runs; each bench module has its own (harness.chosen_plan).
@dataclass(frozen=True)
class Plan:
    runs: int
    point_bytes: int  # value bytes produced (then consumed) at each rate point
    latency_messages: int
    latency_cap_s: float
    memory_messages: int
    consume_cap_s: float
    group_cap_s: float


FULL = Plan(
    runs=3,
    point_bytes=128 * 2**20,
    latency_messages=1_000,
    latency_cap_s=15.0,
    memory_messages=1_000_000,
    consume_cap_s=20.0,
    group_cap_s=60.0,
)
QUICK = Plan(
    runs=1,
    point_bytes=8 * 2**20,
    latency_messages=200,
    latency_cap_s=5.0,
    memory_messages=100_000,
    consume_cap_s=10.0,
    group_cap_s=30.0,
)


@dataclass(frozen=True)
class RatePoint:
    partitions: int
    value_size: int

    @property
    def key(self) -> str:
        return f"p{self.partitions}_v{self.value_size}"

    @property
    def label(self) -> str:
        size = f"{self.value_size // 1024} KiB" if self.value_size >= 1024 else "100 B"
        return f"{size} values, {self.partitions} partitions"

    def messages(self, plan: Plan) -> int:
        return plan.point_bytes // self.value_size


RATE_POINTS = (
    RatePoint(6, 100),
    RatePoint(256, 100),
    RatePoint(6, 10 * 1024),
    RatePoint(256, 10 * 1024),
)


# --- start-up ---


def _wait_for_metadata(bootstrap: str, process: subprocess.Popen[Any], started: float) -> float:
    """Milliseconds from `started` until a Metadata request on a fresh socket is answered."""
    while time.perf_counter() - started < PROCESS_START_TIMEOUT_S:
        if process.poll() is not None:
            raise RuntimeError(f"broker process exited with {process.returncode}")
        try:
            socket_metadata(bootstrap)
            return (time.perf_counter() - started) * 1000
        except (ConnectionError, OSError):
            time.sleep(0.001)
    raise RuntimeError(f"no Metadata answer within {PROCESS_START_TIMEOUT_S:g} s")


def process_start_ms(kind: str) -> float:
    """A new broker process started from nothing to its first Metadata answer."""
    if kind == "kafka":
        started = time.perf_counter()
        with RealKafka(KAFKA_LINE, heap=KAFKA_HEAP) as kafka:
            socket_metadata(kafka.bootstrap_servers)
            return (time.perf_counter() - started) * 1000
    if kind == "kfake":
        started = time.perf_counter()
        process = subprocess.Popen(
            [str(go_binary()), "kfake"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            assert process.stdout is not None
            bootstrap = process.stdout.readline().decode().split()[1]
            return _wait_for_metadata(bootstrap, process, started)
        finally:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(10)
    (port,) = free_loopback_ports(1)
    broker = ChildBroker(port=port, log_level="ERROR", cwd=ROOT)
    started = time.perf_counter()
    broker.launch()
    assert broker.process is not None
    try:
        return _wait_for_metadata(f"127.0.0.1:{port}", broker.process, started)
    finally:
        broker.stop()


def embedded_start_ms(kind: str) -> tuple[float, float] | None:
    """(cold, warm) start to first Metadata with the broker inside a fresh program."""
    if kind == "minibroker":
        return startup_ms("minibroker", "socket")
    if kind == "kfake":
        output = subprocess.run(
            [str(go_binary()), "kfake-startup"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        cold, warm = output.split()
        return float(cold), float(warm)
    return None  # a Kafka broker is a JVM process of its own


def go_consume(bootstrap: str, topic: str, count: int) -> tuple[int, float]:
    """(records received, seconds): franz-go reading every partition from the start."""
    output = subprocess.run(
        [str(go_binary()), "consume", bootstrap, topic, str(count)],
        capture_output=True,
        text=True,
        check=True,
        timeout=180,
    ).stdout
    received, seconds = output.split()
    return int(received), float(seconds)


# --- one run of every metric for one side ---


def run_rates(broker: ServerProcess, kind: str, plan: Plan, samples: Samples) -> None:
    for point in RATE_POINTS:
        topic, count = f"rate-{point.key}", point.messages(plan)
        produced = timed_produce(broker, topic, point.partitions, count, b"v" * point.value_size)
        held, consumed = timed_consume(
            broker, topic, point.partitions, plan.consume_cap_s, CONSUME_TUNED
        )
        received, seconds = go_consume(broker.bootstrap, topic, held)
        samples.add(f"go_consume_{point.key}", kind, received / seconds)
        samples.add(f"go_consumed_{point.key}", kind, received)
        mib = point.value_size / 2**20
        samples.add(f"produce_{point.key}", kind, produced.rate)
        samples.add(f"produce_cpu_{point.key}", kind, produced.broker_cpu * 1000 / (count * mib))
        samples.add(f"consume_{point.key}", kind, consumed.rate)
        samples.add(f"consumed_{point.key}", kind, consumed.count)
        samples.add(f"held_{point.key}", kind, held)
        if consumed.count:
            samples.add(
                f"consume_cpu_{point.key}",
                kind,
                consumed.broker_cpu * 1000 / (consumed.count * mib),
            )


def run_groups(broker: ServerProcess, kind: str, plan: Plan, samples: Samples) -> None:
    broker.create_topic("first", FIRST_PARTITIONS)
    broker.create_topic("join", JOIN_PARTITIONS)
    seconds = first_assignment(broker.bootstrap, "first", plan.group_cap_s)
    if seconds is not None:
        samples.add("first_assignment", kind, seconds * 1000)
    # the first group on a broker pays for loading code (minibroker: the group APIs' codecs)
    seconds = first_assignment(broker.bootstrap, "first", plan.group_cap_s)
    if seconds is not None:
        samples.add("second_assignment", kind, seconds * 1000)
    _, settled = join_one_more(
        broker.bootstrap, "join", JOIN_PARTITIONS, 3, HEARTBEAT_100, plan.group_cap_s
    )
    if settled is not None:
        samples.add("fourth_joins", kind, settled * 1000)


def run_side(kind: str, run: int, plan: Plan, samples: Samples, log: Callable[[str], None]) -> None:
    prefix = f"run {run + 1}/{plan.runs} {kind}"
    log(f"{prefix}: start-up")
    embedded = embedded_start_ms(kind)
    if embedded is not None:
        samples.add("start_embedded", kind, embedded[0])
        samples.add("start_embedded_warm", kind, embedded[1])
    samples.add("start_process", kind, process_start_ms(kind))
    with server(kind) as broker:
        warm_up(broker, FIRST_PARTITIONS)
        log(f"{prefix}: produce + consume, {plan.point_bytes // 2**20} MiB a point")
        run_rates(broker, kind, plan, samples)
        log(f"{prefix}: latency, groups")
        broker.create_topic("latency", 1)
        values = latency(broker.bootstrap, "latency", plan.latency_messages, plan.latency_cap_s)
        if values:
            samples.add("latency_p50", kind, percentile(values, 0.50))
            samples.add("latency_p99", kind, percentile(values, 0.99))
        samples.add("latency_count", kind, len(values))
        run_groups(broker, kind, plan, samples)
    if kind == "kafka":
        log(f"{prefix}: first assignment with Kafka's default initial rebalance delay")
        with server("kafka-stock") as stock:
            stock.create_topic("first", FIRST_PARTITIONS)
            seconds = first_assignment(stock.bootstrap, "first", plan.group_cap_s)
            if seconds is not None:
                samples.add("first_assignment_stock", kind, seconds * 1000)
    log(f"{prefix}: memory, {plan.memory_messages:,} messages")
    measure_memory(kind, FIRST_PARTITIONS, plan.memory_messages, samples)


def measure(plan: Plan, log: Callable[[str], None]) -> Samples:
    samples = Samples()
    for run in range(plan.runs):
        for kind in SIDES:
            run_side(kind, run, plan, samples, log)
    return samples


# --- the table ---


Check = Callable[[float, float | None, float | None], bool]
FASTER = "time"  # lower is better
MORE = "rate"  # higher is better


@dataclass(frozen=True)
class Row:
    title: str
    key: str
    unit: str
    goal: str = ""
    check: Check | None = None
    kafka_key: str | None = None  # the Kafka figure, when it comes from another metric


def _ahead(direction: str, mb: float, other: float | None, factor: float = 1.0) -> bool:
    if other is None:
        return True  # nothing to be behind of
    return mb * factor <= other if direction == FASTER else mb >= factor * other


def rows(plan: Plan) -> list[Row]:
    def beats(direction: str, kafka_factor: float, kfake: bool) -> Check:
        def check(mb: float, kafka: float | None, kfake_value: float | None) -> bool:
            return _ahead(direction, mb, kafka, kafka_factor) and (
                not kfake or _ahead(direction, mb, kfake_value)
            )

        return check

    listed = [
        Row(
            "start to first Metadata, embedded in a fresh program, cold",
            "start_embedded",
            "ms",
            ">= 70x faster than Kafka, faster than kfake",
            beats(FASTER, 70, True),
            kafka_key="start_process",
        ),
        Row(
            "same, a second broker in that program (warm)",
            "start_embedded_warm",
            "ms",
            kafka_key="start_process",
        ),
        Row(
            "start to first Metadata, a new broker process",
            "start_process",
            "ms",
        ),
    ]
    for point in RATE_POINTS:
        count = point.messages(plan)
        listed.append(
            Row(
                f"produce {count:,} x {point.label}, acks=all",
                f"produce_{point.key}",
                "msg/s",
                ">= 1.5x Kafka",
                beats(MORE, 1.5, False),
            )
        )
    for point in RATE_POINTS:
        listed.append(
            Row(
                f"consume them from the beginning ({point.label})",
                f"consume_{point.key}",
                "msg/s",
                ">= 1.5x Kafka, ahead of kfake",
                beats(MORE, 1.5, True),
            )
        )
    for point in RATE_POINTS:
        listed.append(
            Row(
                f"same, read by franz-go, a Go client ({point.label})",
                f"go_consume_{point.key}",
                "msg/s",
                ">= 1.5x Kafka, ahead of kfake",
                beats(MORE, 1.5, True),
            )
        )
    listed += [
        Row(
            "end-to-end latency p50, one message at a time",
            "latency_p50",
            "ms",
            "ahead of Kafka",
            beats(FASTER, 1, False),
        ),
        Row(
            "end-to-end latency p99", "latency_p99", "ms", "ahead of Kafka", beats(FASTER, 1, False)
        ),
        Row(
            "subscribe to first assignment, default client settings "
            f"(Kafka: group.initial.rebalance.delay.ms={KAFKA_STOCK_REBALANCE_DELAY_MS}, "
            "its default)",
            "first_assignment",
            "ms",
            "<= 1/30 of Kafka, ahead of kfake",
            beats(FASTER, 30, True),
            kafka_key="first_assignment_stock",
        ),
        Row(
            "same, Kafka with group.initial.rebalance.delay.ms=0 (its shipped server.properties)",
            "first_assignment",
            "ms",
        ),
        Row(
            "same, a second group on that broker (Kafka: delay 0)",
            "second_assignment",
            "ms",
        ),
        Row(
            "a group of 3 settles after a 4th joins, heartbeat.interval.ms=100",
            "fourth_joins",
            "ms",
            "ahead of Kafka and kfake",
            beats(FASTER, 1, True),
        ),
        Row(
            f"peak RSS holding {plan.memory_messages:,} x 100 B",
            "mem_peak_mib",
            "MiB",
            "below Kafka",
            beats(FASTER, 1, False),
        ),
        Row("RSS before producing (baseline)", "mem_baseline_mib", "MiB"),
    ]
    return listed


def _ratio(mb: float | None, other: float | None) -> str:
    if mb is None or not other:
        return "n/a"
    value = mb / other
    return f"{value:.3f}" if value < 0.1 else f"{value:.2f}"


def table(samples: Samples, plan: Plan) -> list[str]:
    kafka_name = f"Kafka {jvm.KAFKA_BROKERS[KAFKA_LINE]}"
    lines = [
        f"| metric | minibroker | {kafka_name} | kfake | minibroker / Kafka "
        "| minibroker / kfake | goal | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows(plan):
        mb = samples.median(row.key, "minibroker")
        kafka = samples.median(row.kafka_key or row.key, "kafka")
        kfake = samples.median(row.key, "kfake")
        met = ""
        if row.check is not None and mb is not None:
            met = "yes" if row.check(mb, kafka, kfake) else "**no**"
        kafka_cell = fmt(kafka, row.unit)
        if row.kafka_key is not None and kafka is not None:
            kafka_cell += " (process)" if row.kafka_key == "start_process" else ""
        lines.append(
            f"| {row.title} | {fmt(mb, row.unit)} | {kafka_cell} | {fmt(kfake, row.unit)} "
            f"| {_ratio(mb, kafka)} | {_ratio(mb, kfake)} | {row.goal} | {met} |"
        )
    return lines


def cpu_table(samples: Samples) -> list[str]:
    lines = [
        "| values, partitions | produce: minibroker | Kafka | kfake "
        "| consume: minibroker | Kafka | kfake |",
        "|---|---|---|---|---|---|---|",
    ]
    for point in RATE_POINTS:
        cells = [point.label.replace(" values,", ",")]
        for metric in ("produce_cpu", "consume_cpu"):
            cells += [fmt(samples.median(f"{metric}_{point.key}", side), "ms") for side in SIDES]
        lines.append(f"| {' | '.join(cells)} |")
    return lines


def notes(samples: Samples, plan: Plan, load: tuple[str, str]) -> list[str]:
    def med(key: str, side: str) -> float:
        return samples.median(key, side) or 0.0

    short = [
        f"{side} {point.label} ({'confluent-kafka' if prefix == 'consumed' else 'franz-go'}): "
        f"{med(f'{prefix}_{point.key}', side):,.0f} of "
        f"{point.messages(plan):,}"
        for point in RATE_POINTS
        for side in SIDES
        for prefix in ("consumed", "go_consumed")
        if med(f"{prefix}_{point.key}", side) < point.messages(plan)
    ]
    return [
        f"- Medians of {plan.runs} run(s); sides interleaved run by run. Machine: "
        f"{os.cpu_count()} CPUs shared with other work (load average {load[0]} at the start, "
        f"{load[1]} at the end), Python {platform.python_version()}, confluent-kafka "
        f"{client_version()}, Java {java_version()}.",
        "- Client settings, every side: librdkafka defaults plus `acks=all` (producers), "
        "`linger.ms=0` for the latency producer, `fetch.queue.backoff.ms=10` and `assign()` "
        "for the throughput consumers, default settings for the first-assignment consumer, "
        "`heartbeat.interval.ms=100` for the group of 4. franz-go (bench/gobench, its defaults, "
        "no group) reads each topic a second time, as a client that needs less CPU per record "
        "than confluent-kafka's Python loop. Each rate point produces "
        f"{plan.point_bytes // 2**20} MiB of values into a fresh topic, then reads it back "
        "(consume rates over at most "
        f"{plan.consume_cap_s:.0f} s); 10,000 untimed messages go to another topic first.",
        f"- Kafka: one KRaft node (broker and controller) from Kafka's own jars, heap "
        f"`-Xmx{KAFKA_HEAP}` as its start script sets, the settings of "
        "`minibroker.testing.real_kafka.TEST_SETTINGS` (replication factors 1, "
        "`group.initial.rebalance.delay.ms=0`), and a second node with Kafka's default delay "
        f"({KAFKA_STOCK_REBALANCE_DELAY_MS} ms) for the first-assignment row. Its start "
        "includes formatting the storage folder (a JVM of its own, as every fresh Kafka "
        "needs). It writes to log segments on disk: the page cache holding them is not in "
        "its RSS.",
        "- kfake: franz-go's `pkg/kfake` in a small Go program (bench/gobench), one broker, "
        "its defaults. Embedded = `kfake.NewCluster` inside a fresh Go program, then one "
        "Metadata v1 request over a fresh socket, as for minibroker in a fresh interpreter "
        "(`Broker().start_in_thread()`, imports done).",
        "- Process start: minibroker = `python -m minibroker` (interpreter start and imports "
        "included), kfake = the built program, Kafka = storage format and JVM start; each to "
        "the first Metadata answer on a fresh socket.",
        "- The CPU table counts every thread of the broker's process (Kafka: the JVM, its "
        "JIT and GC threads included). With 2 cores, broker CPU is taken from the client.",
        "- Messages read at every rate point: "
        + ("all, on every side." if not short else "short of all: " + "; ".join(short) + "."),
        "- Latency samples per run: "
        + ", ".join(f"{side} {med('latency_count', side):,.0f}" for side in SIDES)
        + f" (at most {plan.latency_cap_s:.0f} s a run).",
    ]


def java_version() -> str:
    from minibroker.testing.real_kafka import java_executable

    java = java_executable()
    if java is None:
        return "none"
    done = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    first = done.stderr.splitlines()[0] if done.stderr else ""
    return first.split('"')[1] if '"' in first else first


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(
        "anchors", __doc__, "small sizes, one run (smoke)", "runs per side (default 3, quick 1)"
    )
    args = parser.parse_args(argv)
    plan = chosen_plan(args.quick, FULL, QUICK, runs=args.runs)
    missing = unavailable_reason(KAFKA_LINE)
    if missing is not None:
        print(missing, file=sys.stderr)
        return 2
    go_binary()  # build it now, not inside a timed start

    run = timed(lambda: measure(plan, log))
    samples = run.result
    lines = table(samples, plan)
    print("\n".join(lines))
    command = "python -m bench.anchors" + " --quick" * args.quick
    kind = "quick smoke run" if args.quick else "full run"
    text = [
        "# minibroker beside Apache Kafka and kfake",
        "",
        f"{run_heading(command, kind, run.elapsed)}. Ratios are "
        "minibroker / anchor (for rates higher is better, for times and memory lower is "
        "better).",
        "",
        *lines,
        "",
        "Broker CPU per MiB of values moved:",
        "",
        *cpu_table(samples),
        "",
        *notes(samples, plan, run.load),
    ]
    write_results(RESULTS, "\n".join(text) + "\n", run.elapsed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
