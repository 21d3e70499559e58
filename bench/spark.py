"""PySpark benchmarks of the "minibroker" Kafka data source, and of a downstream suite.

    python -m bench.spark [--quick] [--runs N]
    python -m bench.spark --suite

`--suite` runs bench/spark_suite (a streaming job as a data engineer writes one: JSON
orders from Kafka, filtered, per-minute totals with a watermark into one topic, dead
letters into another; 11 tests, 17 AvailableNow queries, the plugin's public fixtures
only) as separate pytest runs: a local SparkSession serial and with `-n 2`, then the
shared Spark Connect server (`--spark-remote=auto`) started by the run (cold), reused
(warm) and reused with `-n 2`; each on minibroker and on `--kafka-backend=kafka-jvm`
(Apache Kafka 4.4.0) side by side. It prints where the time goes (Spark's start, the
first query, the later queries and Spark's split of them) and writes its section of
bench/SPARK_RESULTS.md.

The broker runs in a child process (bench/runner.py) so its event loop does not share a
GIL with the Spark driver's Python side. Records are 100-byte values over 4 partitions,
produced with confluent-kafka. Measured, each as the median of several runs:

- read rate: one Trigger.AvailableNow query reading 1,000,000 records into the "noop"
  sink (records/s), and the same through a batch read;
- one AvailableNow batch of 100,000 records, into "noop" and into the memory sink;
- Spark's own JVM connector (format "kafka", when `python -m minibroker jars spark` has
  fetched it) running the same 1,000,000-record AvailableNow query beside the Python source, with
  the broker process's CPU time during each: the broker is the limit only if its CPU
  time comes near the query's wall time;
- where the time goes: the same rows from an in-memory Python data source (Spark's
  Python source machinery without Kafka, the anchor), the reader alone outside Spark
  (confluent-kafka fetch plus Arrow conversion), confluent-kafka alone, the fixed cost of
  an AvailableNow query over an empty topic, and Spark's own split of a batch
  (durationMs: latestOffset, queryPlanning, addBatch, walCommit).

Results go to stdout and bench/SPARK_RESULTS.md.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from bench.harness import bench_parser, server, write_results
from harness.child_broker import cpu_seconds

RESULTS = Path(__file__).resolve().parent / "SPARK_RESULTS.md"
SUITE = Path(__file__).resolve().parent / "spark_suite"
SUITE_HEADING = "## The downstream-suite shape"
VALUE = b"v" * 100
PARTITIONS = 4


def produce(bootstrap: str, topic: str, count: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 500_000,
            "partitioner": "murmur2_random",
            "log_level": 3,
        }
    )
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return time.perf_counter() - started


def confluent_only(bootstrap: str, topic: str, count: int) -> float:
    """confluent-kafka consuming every record, no Arrow and no Spark."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = 0
    started = time.perf_counter()
    while seen < count:
        seen += sum(1 for m in consumer.consume(10_000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def reader_only(bootstrap: str, topic: str, count: int) -> float:
    """The source's partition reader (fetch + Arrow batches) outside Spark, one
    partition after another as a single Spark task would."""
    from minibroker.testing.spark.kafka_io import (
        TopicPartitionRange,
        kafka_arrow_schema,
        read_range,
    )
    from minibroker.testing.spark.options import parse_source_options

    options = parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False
    )
    schema = kafka_arrow_schema()
    per = count // PARTITIONS
    rows = 0
    started = time.perf_counter()
    for partition in range(PARTITIONS):
        for batch in read_range(options, TopicPartitionRange(topic, partition, 0, per), schema):
            rows += batch.num_rows
    assert rows == count, rows
    return time.perf_counter() - started


def in_memory_source(spark: Any, count: int) -> Callable[[], float]:
    """An anchor: a Python data source producing the same columns from memory."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from minibroker.testing.spark.kafka_io import kafka_arrow_schema
    from minibroker.testing.spark.source import kafka_schema

    class Generated(DataSourceReader):  # type: ignore[misc]
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(p) for p in range(PARTITIONS)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            schema = kafka_arrow_schema()
            per = count // PARTITIONS
            for begin in range(0, per, 10_000):
                n = min(10_000, per - begin)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([None] * n, pa.binary()),
                        pa.array([VALUE] * n, pa.binary()),
                        pa.array(["t"] * n, pa.string()),
                        pa.array([partition.value] * n, pa.int32()),
                        pa.array(range(begin, begin + n), pa.int64()),
                        pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
                        pa.array([0] * n, pa.int32()),
                    ],
                    schema=schema,
                )

    class GeneratedSource(DataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return "bench_generated"

        def schema(self) -> Any:
            return kafka_schema()

        def reader(self, schema: Any) -> Generated:
            return Generated()

    spark.dataSource.register(GeneratedSource)

    def run() -> float:
        started = time.perf_counter()
        spark.read.format("bench_generated").load().write.format("noop").mode("overwrite").save()
        return time.perf_counter() - started

    return run


def available_now(
    spark: Any, bootstrap: str, topic: str, sink: str, kafka_format: str = "minibroker"
) -> tuple[float, Any]:
    """One AvailableNow query from the earliest offsets; (seconds, the finished query).
    The query also gets `bench_start_s`: how long `start()` took to return."""
    checkpoint = tempfile.mkdtemp(prefix="bench-spark-")
    df = (
        spark.readStream.format(kafka_format)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    writer = (
        df.writeStream.format(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )
    if sink == "memory":
        writer = writer.queryName(f"bench_{os.getpid()}_{time.monotonic_ns()}")
    started = time.perf_counter()
    query = writer.start()
    start_s = time.perf_counter() - started
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    query.bench_start_s = start_s
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return elapsed, query


def batch_read(spark: Any, bootstrap: str, topic: str) -> float:
    started = time.perf_counter()
    (
        spark.read.format("minibroker")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    return time.perf_counter() - started


def durations(query: Any) -> dict[str, int]:
    """Spark's split of the query's batches (ms), summed over its progress reports."""
    total: dict[str, int] = {}
    for progress in query.recentProgress:
        for name, ms in (progress.get("durationMs") or {}).items():
            total[name] = total.get(name, 0) + int(ms)
    return total


def median(values: list[float]) -> float:
    return statistics.median(values)


def phases(elapsed: float, query: Any) -> tuple[float, float, float]:
    """(start() call, micro-batches, the rest: source runner start and shutdown), seconds."""
    batches = durations(query).get("triggerExecution", 0) / 1000
    start = float(query.bench_start_s)
    return start, batches, max(elapsed - start - batches, 0.0)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("spark", __doc__, "fewer records, one run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="do not update the results")
    parser.add_argument("--suite", action="store_true", help="the downstream-suite shape")
    args = parser.parse_args(argv)
    if args.suite:
        return suite_main(write=not args.no_write)
    big = 200_000 if args.quick else 1_000_000
    small = 100_000
    runs = 1 if args.quick else args.runs

    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from minibroker.testing.spark.session import (
        find_connector,
        jvm_kafka_available,
        make_session,
    )

    connector = find_connector({})
    started = time.perf_counter()
    spark = make_session(connector=connector)
    session_s = time.perf_counter() - started
    with_jvm = jvm_kafka_available(spark)
    print(connector.described)

    rows: list[tuple[str, str]] = []
    with server("minibroker") as broker:
        bootstrap, create_topic, broker_pid = broker.bootstrap, broker.create_topic, broker.pid
        create_topic("big", PARTITIONS)
        create_topic("small", PARTITIONS)
        create_topic("empty", PARTITIONS)
        produce_s = produce(bootstrap, "big", big)
        produce(bootstrap, "small", small)

        # Warm the Python workers once so the first timed run is not the odd one out.
        available_now(spark, bootstrap, "small", "noop")
        if with_jvm:
            available_now(spark, bootstrap, "small", "noop", "kafka")

        stream_big, batch_big, stream_small, memory_small, empty = [], [], [], [], []
        anchor, reader, client = [], [], []
        anchor_run = in_memory_source(spark, big)
        anchor_run()
        split: dict[str, int] = {}
        small_phases: list[tuple[float, float, float]] = []
        empty_phases: list[tuple[float, float, float]] = []
        jvm_big: list[float] = []
        broker_cpu: dict[str, list[float]] = {"minibroker": [], "kafka": []}
        for _ in range(runs):
            cpu_before = cpu_seconds(broker_pid)
            seconds, query = available_now(spark, bootstrap, "big", "noop")
            broker_cpu["minibroker"].append(cpu_seconds(broker_pid) - cpu_before)
            stream_big.append(seconds)
            split = durations(query)
            if with_jvm:
                cpu_before = cpu_seconds(broker_pid)
                jvm_big.append(available_now(spark, bootstrap, "big", "noop", "kafka")[0])
                broker_cpu["kafka"].append(cpu_seconds(broker_pid) - cpu_before)
            batch_big.append(batch_read(spark, bootstrap, "big"))
            seconds, query = available_now(spark, bootstrap, "small", "noop")
            stream_small.append(seconds)
            small_phases.append(phases(seconds, query))
            memory_small.append(available_now(spark, bootstrap, "small", "memory")[0])
            seconds, query = available_now(spark, bootstrap, "empty", "noop")
            empty.append(seconds)
            empty_phases.append(phases(seconds, query))
            anchor.append(anchor_run())
            reader.append(reader_only(bootstrap, "big", big))
            client.append(confluent_only(bootstrap, "big", big))

    spark.stop()
    rate = big / median(stream_big)
    rows = [
        (
            f"AvailableNow, {big:,} records -> noop sink",
            f"{median(stream_big):.1f} s, {rate:,.0f} records/s",
        ),
        (
            f"batch read, {big:,} records -> noop sink",
            f"{median(batch_big):.1f} s, {big / median(batch_big):,.0f} records/s",
        ),
        (
            f"one AvailableNow batch, {small:,} records -> noop sink",
            f"{median(stream_small):.2f} s",
        ),
        (
            f"one AvailableNow batch, {small:,} records -> memory sink",
            f"{median(memory_small):.2f} s",
        ),
        (
            f"broker CPU during the {big:,}-record AvailableNow query (Python source)",
            f"{median(broker_cpu['minibroker']):.2f} s of {median(stream_big):.1f} s",
        ),
        *(
            [
                (
                    f"Spark's JVM connector: AvailableNow, {big:,} records -> noop sink",
                    f"{median(jvm_big):.1f} s, {big / median(jvm_big):,.0f} records/s",
                ),
                (
                    f"broker CPU during the {big:,}-record AvailableNow query (JVM connector)",
                    f"{median(broker_cpu['kafka']):.2f} s of {median(jvm_big):.1f} s",
                ),
                (
                    "ratio: JVM connector rate / Python source rate",
                    f"{median(stream_big) / median(jvm_big):.2f}x",
                ),
            ]
            if jvm_big
            else [("Spark's JVM connector", "not measured: " + connector.described)]
        ),
        ("AvailableNow over an empty topic (fixed cost per query)", f"{median(empty):.2f} s"),
        (
            f"{small:,}-record query: start() / micro-batches / runner start+stop",
            " / ".join(f"{median([p[i] for p in small_phases]):.2f} s" for i in range(3)),
        ),
        (
            "empty-topic query: start() / micro-batches / runner start+stop",
            " / ".join(f"{median([p[i] for p in empty_phases]):.2f} s" for i in range(3)),
        ),
        (
            f"anchor: in-memory Python source, {big:,} rows -> noop",
            f"{median(anchor):.1f} s, {big / median(anchor):,.0f} rows/s",
        ),
        (
            f"reader alone (fetch + Arrow), {big:,} records, one task",
            f"{median(reader):.1f} s, {big / median(reader):,.0f} records/s",
        ),
        (
            f"confluent-kafka alone, {big:,} records, one consumer",
            f"{median(client):.1f} s, {big / median(client):,.0f} records/s",
        ),
        (
            f"produce {big:,} records (confluent-kafka, for scale)",
            f"{produce_s:.1f} s, {big / produce_s:,.0f} records/s",
        ),
        ("SparkSession start (local[2])", f"{session_s:.1f} s"),
        (
            "Spark's split of the big AvailableNow query (ms)",
            ", ".join(f"{k} {v}" for k, v in sorted(split.items(), key=lambda kv: -kv[1])[:6]),
        ),
        (
            "ratio: AvailableNow read time / in-memory anchor",
            f"{median(stream_big) / median(anchor):.2f}x",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    table = "\n".join(f"| {name.ljust(width)} | {value} |" for name, value in rows)
    header = f"| {'measure'.ljust(width)} | result |\n|{'-' * (width + 2)}|--------|"
    machine = f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}"
    text = (
        f"# PySpark source benchmark\n\nMedians of {runs} run(s); {machine}; "
        f"`python -m bench.spark{' --quick' if args.quick else ''}`.\n\n"
        f"{header}\n{table}\n"
    )
    print(text)
    if not args.no_write:
        write_results(RESULTS, text + _section(SUITE_HEADING, keep=True))
    return 0


def _section(heading: str, *, keep: bool) -> str:
    """The results file's section under `heading` (to keep it), or its text without it."""
    text = RESULTS.read_text() if RESULTS.exists() else ""
    before, found, after = text.partition(heading)
    if keep:
        return f"\n{found}{after}" if found else ""
    return before.rstrip() + "\n"


# --- the downstream-suite shape ---

SUITE_RUNS = (
    # (label, --spark-remote, xdist workers, stop a shared server first)
    ("local session, serial", "off", 0, False),
    ("local session, -n 2", "off", 2, False),
    ("Connect, cold (starts the server)", "auto", 0, True),
    ("Connect, warm", "auto", 0, False),
    ("Connect, warm, -n 2", "auto", 2, False),
)
BACKENDS = (("minibroker", "embedded"), ("Kafka 4.4.0", "kafka-jvm"))


def run_suite(backend: str, remote: str, workers: int, out: Path) -> dict[str, Any]:
    """One pytest run of the suite; its wall time and what the suite's conftest recorded."""
    command = [sys.executable, "-m", "pytest", "-q", "-c", str(SUITE / "pytest.ini")]
    command += ["--rootdir", str(SUITE), str(SUITE), f"--kafka-backend={backend}"]
    command += [f"--spark-remote={remote}", *(["-n", str(workers)] if workers else [])]
    env = {**os.environ, "BENCH_SPARK_SUITE_OUT": str(out), "SPARK_LOCAL_IP": "127.0.0.1"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=SUITE, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
    return summarise(out, wall, done.returncode == 0)


def summarise(out: Path, wall: float, ok: bool) -> dict[str, Any]:
    """What the suite's conftest recorded in `out`, for a run of `wall` seconds."""
    entries = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    calls = [e for e in entries if e["kind"] == "phase" and e["when"] == "call"]
    passed = sum(1 for e in calls if e["outcome"] == "passed")
    first: list[float] = []
    later: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in entries:
        if entry["kind"] != "query":
            continue
        if entry["worker"] in seen:
            later.append(entry)
        else:
            seen.add(entry["worker"])
            first.append(entry["wall"])
    fixtures: dict[str, list[float]] = {}
    for entry in entries:
        if entry["kind"] == "fixture":
            fixtures.setdefault(entry["name"], []).append(entry["wall"])
    return {
        "wall": wall,
        "passed": passed,
        "tests": len(calls),
        "queries": len(first) + len(later),
        "spark": max(fixtures.get("spark", [0.0])),
        "broker": max(fixtures.get("_kafka_remote", [0.0])),
        "first": max(first, default=0.0),
        "later": later,
        "queries_s": sum(first) + sum(q["wall"] for q in later),
        "calls_s": sum(e["wall"] for e in calls),
        "ok": ok,
    }


def _later_split(later: list[dict[str, Any]]) -> str:
    """Median ms of Spark's phases over the later queries, and of the rest of their wall."""
    if not later:
        return "-"
    names = ("addBatch", "queryPlanning", "walCommit", "commitOffsets", "latestOffset")
    parts = [f"{n} {median([q['split'].get(n, 0) for q in later]):.0f}" for n in names]
    outside = [q["wall"] * 1000 - q["split"].get("triggerExecution", 0) for q in later]
    batches = median([q["batches"] for q in later])
    parts.append(f"outside batches {median(outside):.0f}")
    return f"{batches:g} batches; " + ", ".join(parts)


def suite_main(*, write: bool) -> int:
    from minibroker.testing.real_kafka import unavailable_reason
    from minibroker.testing.spark import remote

    results: dict[tuple[str, str], dict[str, Any]] = {}
    missing: dict[str, str] = {}
    folder = Path(tempfile.mkdtemp(prefix="bench-spark-suite-"))
    for name, backend in BACKENDS:
        why = unavailable_reason("4") if backend == "kafka-jvm" else None
        if why:
            missing[name] = why
            continue
        for label, mode, workers, stop_first in SUITE_RUNS:
            if stop_first:
                remote.stop_server()
            out = folder / f"{backend}-{len(results)}.jsonl"
            result = run_suite(backend, mode, workers, out)
            results[(name, label)] = result
            print(
                f"{name:12} {label:36} {result['wall']:6.1f} s  "
                f"{result['passed']}/{result['tests']} passed, {result['queries']} queries",
                flush=True,
            )
    remote.stop_server()
    text = suite_table(results, missing, f"{os.getloadavg()[1]:.1f}")
    print("\n" + text)
    if write:
        write_results(RESULTS, _section(SUITE_HEADING, keep=False) + "\n" + text)
    return 0 if all(r["ok"] for r in results.values()) else 1


def suite_table(
    results: dict[tuple[str, str], dict[str, Any]], missing: dict[str, str], load: str
) -> str:
    """The results section: wall times side by side, where the time goes, ratios."""
    names = [name for name, _ in BACKENDS]

    def cell(name: str, label: str, show: Any) -> str:
        if name in missing:
            return "not run"
        result = results[(name, label)]
        return str(show(result)) + ("" if result["ok"] else " (failed)")

    def wall(r: dict[str, Any]) -> str:
        return f"{r['wall']:.1f} s"

    def later(r: dict[str, Any]) -> str:
        walls = [q["wall"] for q in r["later"]]
        return f"{median(walls):.2f} s" if walls else "-"

    lines = [
        f"{SUITE_HEADING}\n",
        "`python -m bench.spark --suite`: bench/spark_suite (11 tests, 17 AvailableNow "
        "queries reading JSON from Kafka, a windowed aggregation with a watermark, results "
        "and dead letters written to Kafka), one pytest run per cell, run once; "
        f"{platform.machine()}, {os.cpu_count()} cpus shared with other work (load average "
        f"{load} over the last 5 minutes at the end), so single runs are noisy.\n",
        "| run | "
        + " | ".join(f"{n}: wall" for n in names)
        + " | "
        + " | ".join(f"{n}: a later query (median)" for n in names)
        + " |",
        "|---|" + "---|" * (2 * len(names)),
    ]
    for label, *_ in SUITE_RUNS:
        walls = [cell(n, label, wall) for n in names]
        medians = [cell(n, label, later) for n in names]
        lines.append(f"| {label} | " + " | ".join(walls + medians) + " |")
    lines += ["", "Where the time goes (first backend; with -n 2, Spark and the first query "
              "are the slower worker's, the rest is summed over both):", "",
              "| run | Spark (fixture setup) | first query | all queries | a later one-batch / "
              "two-batch query (median) | test bodies besides queries | Spark's split of a "
              "later query (median, ms) |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    first_name = names[0]
    for label, *_ in SUITE_RUNS:
        if first_name in missing:
            break
        r = results[(first_name, label)]
        by_batches = [
            median([q["wall"] for q in r["later"] if q["batches"] == n] or [0.0]) for n in (1, 2)
        ]
        lines.append(
            f"| {label} | {r['spark']:.1f} s | {r['first']:.1f} s | {r['queries_s']:.1f} s | "
            f"{by_batches[0]:.2f} s / {by_batches[1]:.2f} s | "
            f"{r['calls_s'] - r['queries_s']:.1f} s | {_later_split(r['later'])} |"
        )
    ratios = []
    for name in names:
        if name in missing:
            continue
        serial, parallel, _, warm, warm_parallel = (
            results[(name, label)]["wall"] for label, *_ in SUITE_RUNS
        )
        ratios.append(
            f"{name}: local -n 2 / serial {parallel / serial:.2f}, "
            f"Connect warm / local serial {warm / serial:.2f}, "
            f"Connect warm -n 2 / warm serial {warm_parallel / warm:.2f}"
        )
    if len(ratios) == len(names):
        for label, *_ in SUITE_RUNS:
            mine = results[(names[0], label)]["wall"]
            other = results[(names[1], label)]["wall"]
            ratios.append(f"{label}: {names[0]} / {names[1]} wall {mine / other:.2f}")
    lines += ["", "Ratios: " + "; ".join(ratios) + "."]
    lines += [f"\n{name}: not run: {why}" for name, why in missing.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
