"""Broker core benchmarks: minibroker side by side with the librdkafka mock cluster.

    python -m bench.micro [--quick] [--runs N]
    python -m bench.micro --growth [--quick] [--runs N]

Both brokers are driven by the same client (confluent-kafka) with the same settings, in
the same run, interleaved run by run so that machine noise hits both sides alike. Each
figure is the median over the runs. The table is printed and written to bench/RESULTS.md.

The growth section measures how produce and consume rates change with the partition count
and the value size, each point moving the same number of value bytes, and writes its own
section of bench/RESULTS.md. A plain run does both; --growth does only the growth section
and keeps the rest of the file as it was.

Where each broker runs:
- start-up: a fresh interpreter per run (imports done, nothing else warm), broker and
  client in that process, as a test suite would use them;
- throughput, latency, memory: the broker in a child process (bench/runner.py), the
  clients here (bench/harness.py says why).
"""

from __future__ import annotations

import mmap
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.harness import (
    CONSUME_TUNED,
    ROOT,
    VALUE,
    WARM_UP_MESSAGES,
    Samples,
    bench_parser,
    chosen_plan,
    client_version,
    fmt,
    latency,
    load_average,
    log,
    measure_memory,
    percentile,
    produce,
    run_heading,
    server,
    startup_ms,
    timed_consume,
    timed_produce,
    warm_up,
)

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SIDES = ("minibroker", "mock")


# The sizes of this benchmark's runs; each bench module has its own (harness.chosen_plan).
@dataclass(frozen=True)
class Plan:
    runs: int
    messages: int  # produce / consume
    produce_reps: int  # timed produce passes per run, each into a fresh topic
    partitions: int
    latency_messages: int
    memory_messages: int
    consume_cap_s: float  # the mock serves consumers slowly; stop and take the rate so far
    latency_cap_s: float
    growth_bytes: int  # value bytes produced at each growth point


FULL = Plan(
    runs=3,
    messages=500_000,
    produce_reps=2,
    partitions=6,
    latency_messages=1_000,
    memory_messages=1_000_000,
    consume_cap_s=8.0,
    latency_cap_s=15.0,
    growth_bytes=128 * 2**20,
)
QUICK = Plan(
    runs=1,
    messages=50_000,
    produce_reps=1,
    partitions=6,
    latency_messages=200,
    memory_messages=100_000,
    consume_cap_s=3.0,
    latency_cap_s=5.0,
    growth_bytes=8 * 2**20,
)


# --- the broker child process ---


# --- client-side measurements ---


# --- one run of every metric for one side ---


def run_throughput(kind: str, plan: Plan, samples: Samples) -> None:
    with server(kind) as broker:
        warm_up(broker, plan.partitions)
        for rep in range(plan.produce_reps):
            done = timed_produce(broker, f"bench-{rep}", plan.partitions, plan.messages)
            per_100k = 100_000 / done.count * 1000
            samples.add("produce_broker_cpu", kind, done.broker_cpu * per_100k)
            samples.add("produce_client_cpu", kind, done.client_cpu * per_100k)
            samples.add("produce", kind, done.rate)
        for key, settings in (("consume", CONSUME_TUNED), ("consume_default", {})):
            held, done = timed_consume(
                broker, "bench-0", plan.partitions, plan.consume_cap_s, settings
            )
            samples.add(key, kind, done.rate)
            samples.add(f"{key}_received", kind, done.count)
            if key == "consume" and done.count:
                per_100k = 100_000 / done.count * 1000
                samples.add("consume_broker_cpu", kind, done.broker_cpu * per_100k)
                samples.add("consume_client_cpu", kind, done.client_cpu * per_100k)
        samples.add("consume_held", kind, held)


def run_inprocess_produce(kind: str, plan: Plan, samples: Samples) -> None:
    """Produce with the broker inside this process, as a test fixture runs it."""
    from bench.mock import MockCluster
    from minibroker import Broker

    if kind == "minibroker":
        broker = Broker().start_in_thread()
        broker.create_topic("in-process", plan.partitions)
        broker.create_topic("warm-up", plan.partitions)
        bootstrap, close = broker.bootstrap_servers, broker.stop_thread
    else:
        mock = MockCluster()
        mock.create_topic("in-process", plan.partitions)
        mock.create_topic("warm-up", plan.partitions)
        bootstrap, close = mock.bootstrap_servers, mock.close
    try:
        produce(bootstrap, "warm-up", WARM_UP_MESSAGES)
        seconds = produce(bootstrap, "in-process", plan.messages)
        samples.add("produce_inprocess", kind, plan.messages / seconds)
    finally:
        close()


def run_latency(kind: str, plan: Plan, samples: Samples) -> None:
    with server(kind) as broker:
        broker.create_topic("latency", 1)
        values = latency(broker.bootstrap, "latency", plan.latency_messages, plan.latency_cap_s)
    if values:
        samples.add("latency_p50", kind, percentile(values, 0.50))
        samples.add("latency_p99", kind, percentile(values, 0.99))
    samples.add("latency_count", kind, len(values))


def run_memory(kind: str, plan: Plan, samples: Samples) -> None:
    measure_memory(kind, plan.partitions, plan.memory_messages, samples)


def measure(plan: Plan, log: Callable[[str], None]) -> Samples:
    samples = Samples()
    for run in range(plan.runs):
        for kind in SIDES:
            log(f"run {run + 1}/{plan.runs} {kind}: start-up")
            for probe in ("client", "socket"):
                cold, warm = startup_ms(kind, probe)
                samples.add(f"start_{probe}", kind, cold)
                samples.add(f"start_{probe}_warm", kind, warm)
            log(f"run {run + 1}/{plan.runs} {kind}: produce + consume {plan.messages:,}")
            run_throughput(kind, plan, samples)
            log(f"run {run + 1}/{plan.runs} {kind}: latency")
            run_inprocess_produce(kind, plan, samples)
            run_latency(kind, plan, samples)
            log(f"run {run + 1}/{plan.runs} {kind}: memory, {plan.memory_messages:,} messages")
            run_memory(kind, plan, samples)
    return samples


# --- growth with the work ---


@dataclass(frozen=True)
class GrowthPoint:
    partitions: int
    value_size: int

    @property
    def key(self) -> str:
        return f"growth_p{self.partitions}_v{self.value_size}"


GROWTH_POINTS = (
    GrowthPoint(1, 100),
    GrowthPoint(6, 100),
    GrowthPoint(64, 100),
    GrowthPoint(256, 100),
    GrowthPoint(6, 1024),
    GrowthPoint(6, 10 * 1024),
)


def growth_messages(plan: Plan, point: GrowthPoint) -> int:
    return plan.growth_bytes // point.value_size


def run_growth_point(kind: str, plan: Plan, point: GrowthPoint, samples: Samples) -> None:
    """Produce then consume one byte budget on a fresh broker (same settings as the
    main produce / consume rows)."""
    mib = point.value_size / 2**20  # per message
    with server(kind) as broker:
        warm_up(broker, point.partitions)
        produced = timed_produce(
            broker,
            "growth",
            point.partitions,
            growth_messages(plan, point),
            b"v" * point.value_size,
        )
        held, consumed = timed_consume(
            broker, "growth", point.partitions, plan.consume_cap_s, CONSUME_TUNED
        )
    key = point.key
    samples.add(f"{key}_produce", kind, produced.rate)
    samples.add(f"{key}_produce_cpu", kind, produced.broker_cpu * 1000 / (produced.count * mib))
    samples.add(f"{key}_consume", kind, consumed.rate)
    if consumed.count:
        samples.add(f"{key}_consume_cpu", kind, consumed.broker_cpu * 1000 / (consumed.count * mib))
    samples.add(f"{key}_held", kind, held)
    samples.add(f"{key}_received", kind, consumed.count)


def measure_growth(plan: Plan, log: Callable[[str], None]) -> Samples:
    samples = Samples()
    for run in range(plan.runs):
        for point in GROWTH_POINTS:
            for kind in SIDES:
                log(
                    f"run {run + 1}/{plan.runs} {kind}: growth, {point.partitions} partitions, "
                    f"{growth_messages(plan, point):,} x {point.value_size} B"
                )
                run_growth_point(kind, plan, point, samples)
    return samples


# --- the table ---


Check = Callable[[float, float | None], bool]


def table(samples: Samples, plan: Plan) -> list[str]:
    rows: list[tuple[str, str, str, str, Check | None]] = [
        (
            "start to first Metadata, AdminClient.list_topics, cold",
            "start_client",
            "ms",
            "<= 50 ms",
            lambda mb, _m: mb <= 50,
        ),
        (
            "start to first Metadata, AdminClient.list_topics, warm",
            "start_client_warm",
            "ms",
            "<= 50 ms",
            lambda mb, _m: mb <= 50,
        ),
        (
            "start to first Metadata, raw socket (Metadata v1), cold",
            "start_socket",
            "ms",
            "<= 50 ms",
            lambda mb, _m: mb <= 50,
        ),
        (
            "start to first Metadata, raw socket (Metadata v1), warm",
            "start_socket_warm",
            "ms",
            "<= 50 ms",
            lambda mb, _m: mb <= 50,
        ),
        (
            f"produce {plan.messages:,} x 100 B, {plan.partitions} partitions, acks=all",
            "produce",
            "msg/s",
            ">= 0.8x mock",
            lambda mb, m: m is not None and mb >= 0.8 * m,
        ),
        (
            "same, broker inside the client's process (thread / C threads)",
            "produce_inprocess",
            "msg/s",
            "",
            None,
        ),
        (
            "consume from the beginning (assign), fetch.queue.backoff.ms=10",
            "consume",
            "msg/s",
            ">= 300,000 msg/s",
            lambda mb, _m: mb >= 300_000,
        ),
        ("same, client default fetch.queue.backoff.ms=1000", "consume_default", "msg/s", "", None),
        ("broker CPU per 100k messages produced", "produce_broker_cpu", "ms", "", None),
        ("client CPU per 100k messages produced", "produce_client_cpu", "ms", "", None),
        ("broker CPU per 100k messages consumed", "consume_broker_cpu", "ms", "", None),
        ("client CPU per 100k messages consumed", "consume_client_cpu", "ms", "", None),
        ("end-to-end latency p50, one message at a time", "latency_p50", "ms", "", None),
        ("end-to-end latency p99", "latency_p99", "ms", "<= 10 ms", lambda mb, _m: mb <= 10),
        (
            f"peak RSS (VmHWM) after producing {plan.memory_messages:,} x 100 B",
            "mem_peak_mib",
            "MiB",
            "",
            None,
        ),
        ("RSS before producing (baseline)", "mem_baseline_mib", "MiB", "", None),
        ("stored batch bytes", "mem_stored_mib", "MiB", "", None),
        ("peak RSS / stored bytes", "mem_ratio", "x", "<= 2x", lambda mb, _m: mb <= 2),
        ("(peak RSS - baseline) / stored bytes", "mem_growth_ratio", "x", "", None),
    ]
    lines = [
        "| metric | minibroker | librdkafka mock | minibroker / mock | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for title, key, unit, target, check in rows:
        mb = samples.median(key, "minibroker")
        mock = samples.median(key, "mock")
        ratio = f"{mb / mock:.2f}" if mb is not None and mock else "n/a"
        met = ""
        if check is not None and mb is not None:
            met = "yes" if check(mb, mock) else "**no**"
        lines.append(
            f"| {title} | {fmt(mb, unit)} | {fmt(mock, unit)} | {ratio} | {target} | {met} |"
        )
    return lines


def _size(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def _ratio(mb: float | None, mock: float | None) -> str:
    return f"{mb / mock:.2f}" if mb is not None and mock else "n/a"


def growth_tables(samples: Samples, plan: Plan) -> list[str]:
    def rate(key: str, side: str, value_size: int) -> str:
        found = samples.median(key, side)
        if found is None:
            return "n/a"
        return f"{fmt(found, 'msg/s')} ({found * value_size / 2**20:,.0f} MiB/s)"

    lines = [
        "| partitions | value | produce, minibroker | produce, mock | ratio "
        "| consume, minibroker | consume, mock | ratio | messages read, minibroker / mock |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for point in GROWTH_POINTS:
        key, size = point.key, point.value_size
        cells = [str(point.partitions), _size(size)]
        for metric in ("produce", "consume"):
            mb = samples.median(f"{key}_{metric}", "minibroker")
            mock = samples.median(f"{key}_{metric}", "mock")
            cells += [
                rate(f"{key}_{metric}", "minibroker", size),
                rate(f"{key}_{metric}", "mock", size),
                _ratio(mb, mock),
            ]
        if (samples.median(f"{key}_held", "mock") or 0) < growth_messages(plan, point):
            cells[6] += " \\*"  # the mock held less than it was sent
        read = [samples.median(f"{key}_received", side) for side in SIDES]
        cells.append(" / ".join(f"{count:,.0f}" if count is not None else "n/a" for count in read))
        lines.append(f"| {' | '.join(cells)} |")
    lines += [
        "",
        "Broker CPU (every thread of the broker's process) per MiB of values moved:",
        "",
        "| partitions | value | produce, minibroker | produce, mock | ratio "
        "| consume, minibroker | consume, mock | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for point in GROWTH_POINTS:
        cells = [str(point.partitions), _size(point.value_size)]
        for metric in ("produce_cpu", "consume_cpu"):
            mb = samples.median(f"{point.key}_{metric}", "minibroker")
            mock = samples.median(f"{point.key}_{metric}", "mock")
            cells += [fmt(mb, "ms"), fmt(mock, "ms"), _ratio(mb, mock)]
        lines.append(f"| {' | '.join(cells)} |")
    return lines


def growth_notes(samples: Samples, plan: Plan, load: tuple[str, str]) -> list[str]:
    def short(side: str) -> list[str]:
        return [
            f"{point.partitions} x {_size(point.value_size)}: "
            f"{samples.median(f'{point.key}_held', side) or 0:,.0f} of "
            f"{growth_messages(plan, point):,}"
            for point in GROWTH_POINTS
            if (samples.median(f"{point.key}_held", side) or 0) < growth_messages(plan, point)
        ]

    minibroker_short, mock_short = short("minibroker"), short("mock")
    lines = [
        f"- Each point produces {plan.growth_bytes / 2**20:,.0f} MiB of values (so "
        f"{growth_messages(plan, GROWTH_POINTS[0]):,} messages at 100 B, "
        f"{growth_messages(plan, GROWTH_POINTS[-1]):,} at 10 KiB) into a fresh topic on a "
        "fresh broker child process, after the same untimed warm-up as above, then reads "
        "it back from the beginning with `assign()`. Same client settings as the main "
        "produce and consume rows (`acks=all`, `fetch.queue.backoff.ms=10`). Medians of "
        f"{plan.runs} run(s), sides interleaved point by point. Load average {load[0]} at "
        f"the start, {load[1]} at the end.",
        "- Consume rates count only the messages that arrived, over at most "
        f"{plan.consume_cap_s:.0f} s, out of what the broker still held. minibroker held "
        + (
            "every message at every point."
            if not minibroker_short
            else f"less than it was sent: {'; '.join(minibroker_short)}."
        ),
    ]
    if mock_short:
        lines.append(
            "- The mock drops the oldest data of a partition beyond a few MB, so it held "
            "less than it was sent where a partition got more than that (median held of "
            f"sent, partitions x value): {'; '.join(mock_short)}. Its consume rates there "
            "(marked \\*) are over that smaller read, so the consumer's fixed start "
            "(0.5 to 1 s to the first message on either side: its first Fetch may name "
            "only an empty partition and wait out `fetch.wait.max.ms`) weighs more in them."
        )
    return lines


def notes(samples: Samples, plan: Plan, load: tuple[str, str]) -> list[str]:
    def med(key: str, side: str) -> float:
        return samples.median(key, side) or 0.0

    lines = [
        f"- Medians of {plan.runs} run(s), {plan.produce_reps} timed produce pass(es) a run; "
        f"sides interleaved run by run. Machine: {os.cpu_count()} CPUs shared with other "
        f"work (load average {load[0]} at the start, {load[1]} at the end), Python "
        f"{platform.python_version()}, confluent-kafka {client_version()}.",
        "- Client settings, both sides: librdkafka defaults plus `acks=all` (producers), "
        "`linger.ms=0` for the latency producer, `group.id` set with auto-commit off and "
        "`assign()` (no group protocol) for consumers; 100-byte values, no keys. "
        f"{WARM_UP_MESSAGES:,} untimed messages go to another topic first.",
        "- Start-up: cold = the first broker started in a fresh interpreter (imports done; "
        "the codec modules for the first requests still load), warm = a second broker in "
        "that interpreter, as a test suite with a fresh broker per test sees it. The "
        "AdminClient figures are bimodal (a few ms or about 55 ms): librdkafka retires its "
        "bootstrap connection as soon as the first Metadata answer names the broker, and "
        "its own pipelined Metadata request, if still unanswered there, fails and is "
        "retried about 50 ms later. minibroker writes the answers to one read's requests "
        "together, which avoids this unless the first codec loads (cold) let the two "
        "requests arrive in separate reads; the mock hits it often.",
        "- Where the brokers run: start-up is timed with broker "
        "and client in one process (minibroker: `Broker()` started on its background loop "
        "thread; mock: the client created with `test.mock.num.brokers=1`, which starts the "
        "mock). Throughput, latency and memory run each broker in its own child process "
        "(`bench/runner.py`) with the clients in the parent: in-process, minibroker's event "
        "loop would share the GIL with the client's Python calls while the mock runs in C "
        "threads. The mock's child holds it through `rd_kafka_new` with "
        "`test.mock.num.brokers=1` via ctypes; topics are made with "
        "`rd_kafka_mock_topic_create` (the mock has no CreateTopics).",
        "- CPU rows: broker = every thread of the broker's process; client = this process "
        "(the Python loop and librdkafka's threads). With 2 cores, broker CPU is taken from "
        "the client, so it shows up in the produce rate even when the client is the limit.",
        "- The mock does not keep everything it is sent: it drops the oldest data of a "
        "partition beyond a few MB, so its consumer reads (and its memory) cover only what it "
        f"still held: median {med('consume_held', 'mock'):,.0f} of {plan.messages:,} "
        f"messages for the consume test, {med('mem_held', 'mock'):,.0f} of "
        f"{plan.memory_messages:,} for the memory test. minibroker kept all of them "
        f"({med('consume_held', 'minibroker'):,.0f} and {med('mem_held', 'minibroker'):,.0f}). "
        f"Consume rates are taken over at most {plan.consume_cap_s:.0f} s.",
        f"- Latency samples per run: minibroker {med('latency_count', 'minibroker'):,.0f}, "
        f"mock {med('latency_count', 'mock'):,.0f} (at most {plan.latency_cap_s:.0f} s a run).",
        "- Raw value bytes of the memory test: "
        f"{plan.memory_messages * len(VALUE) / 2**20:,.0f} MiB; stored batch bytes add the "
        "per-record and per-batch framing.",
    ]
    if med("latency_p50", "mock") >= 400:
        lines.append(
            "- The mock answers a waiting Fetch only when `fetch.wait.max.ms` (500 ms) runs "
            "out, not when data arrives, hence its latency; minibroker answers on append."
        )
    return lines


GROWTH_HEADING = "## Growth with the work"


def write_sections(core: str | None = None, growth: str | None = None) -> None:
    """Replace one section of RESULTS.md, keeping the other as it was (unlike
    harness.write_results, which writes a whole file)."""
    old = RESULTS.read_text() if RESULTS.exists() else ""
    old_main, marker, old_growth = old.partition(GROWTH_HEADING)
    parts = [core if core is not None else old_main]
    if growth is not None:
        parts.append(growth)
    elif marker:
        parts.append(marker + old_growth)
    RESULTS.write_text("\n\n".join(part.strip("\n") for part in parts if part.strip()) + "\n")


FLOOR_FRAME_BYTES = 1024 * 1024


def fresh_memory_ms_per_mib(total_bytes: int) -> float:
    """CPU milliseconds per MiB to write `total_bytes` into memory never touched before,
    a MiB at a time, all of it kept (as a broker keeps what is produced): page faults and
    zeroing, the floor under produce CPU for any broker that keeps every byte in memory."""
    data = bytes(FLOOR_FRAME_BYTES)
    kept: list[mmap.mmap] = []
    started = time.process_time()
    for _ in range(max(1, total_bytes // FLOOR_FRAME_BYTES)):
        memory = mmap.mmap(-1, FLOOR_FRAME_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        memory[:] = data
        kept.append(memory)
    elapsed = time.process_time() - started
    return elapsed * 1000 / (len(kept) * FLOOR_FRAME_BYTES / 2**20)


def growth_section(plan: Plan, heading: str, log: Callable[[str], None]) -> str:
    load_before = load_average()
    started = time.perf_counter()
    samples = measure_growth(plan, log)
    floor = statistics.median(fresh_memory_ms_per_mib(plan.growth_bytes) for _ in range(plan.runs))
    elapsed = time.perf_counter() - started
    lines = growth_tables(samples, plan)
    print("\n".join(lines))
    return "\n".join(
        [
            GROWTH_HEADING,
            "",
            f"{heading}, {elapsed:.0f} s. Produce and consume rates as the partition count "
            "and the value size grow, the same value bytes at every point. Ratios are "
            "minibroker / mock (for rates higher is better, for CPU lower is better).",
            "",
            *lines,
            "",
            *growth_notes(samples, plan, (load_before, load_average())),
            f"- The floor under produce CPU for a broker that keeps every byte in memory: "
            f"writing {plan.growth_bytes / 2**20:,.0f} MiB into memory never touched before, "
            f"a MiB at a time, costs {floor:.2f} ms of CPU per MiB on this machine (page "
            "faults and zeroing; measured in this run, median of "
            f"{plan.runs}). The mock does not pay it: it keeps a few MB per partition and "
            "reuses its memory.",
        ]
    )


def core_section(plan: Plan, heading: str, log: Callable[[str], None]) -> str:
    load_before = load_average()
    started = time.perf_counter()
    samples = measure(plan, log)
    elapsed = time.perf_counter() - started
    load = (load_before, load_average())
    lines = table(samples, plan)
    print("\n".join(lines))
    return "\n".join(
        [
            "# Broker core benchmarks",
            "",
            f"{heading}, {elapsed:.0f} s. Ratios are minibroker / mock "
            "(for rates higher is better, for times and memory lower is better).",
            "",
            *lines,
            "",
            *notes(samples, plan, load),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(
        "micro", __doc__, "small sizes, one run (smoke)", "runs per side (default 3, quick 1)"
    )
    parser.add_argument(
        "--growth", action="store_true", help="only the growth with partitions and value size"
    )
    args = parser.parse_args(argv)
    plan = chosen_plan(args.quick, FULL, QUICK, runs=args.runs)
    command = "python -m bench.micro" + " --growth" * args.growth + " --quick" * args.quick
    heading = run_heading(command, "quick smoke run" if args.quick else "full run")
    started = time.perf_counter()
    core = None if args.growth else core_section(plan, heading, log)
    growth = growth_section(plan, heading, log)
    write_sections(core=core, growth=growth)
    elapsed = time.perf_counter() - started
    print(f"\nwritten to {RESULTS.relative_to(ROOT)} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
