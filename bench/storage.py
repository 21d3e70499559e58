"""Data directory benchmarks: `python -m bench.storage [--quick]`.

The same produce (acks=all, confluent-kafka) and consume against `python -m minibroker`
in memory (the anchor) and with `--data-dir` under each flush policy, interleaved run by
run, each broker in a child process started as a user starts it. Then the time a broker
takes to start on the data directory the runs left behind: from the checkpoints of its
clean stop, and with them removed, as after a crash (recovery reads every batch).
Ratios are against the in-memory broker of the same run. Writes bench/STORAGE_RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import ROOT, consume, log, produce, write_results
from harness.child_broker import ChildBroker

RESULTS = ROOT / "bench" / "STORAGE_RESULTS.md"
SIDES = ("in memory", "os", "interval", "write")


# The sizes of this benchmark's runs; each bench module has its own (harness.chosen_plan).
@dataclass
class Plan:
    messages: int = 1_000_000
    partitions: int = 4
    runs: int = 3
    one_by_one: int = 2_000  # records produced one at a time, each awaited
    small_batches: int = 200_000  # one-record batches for the restart of a many-batch log

    @classmethod
    def quick(cls) -> Plan:
        return cls(messages=20_000, runs=1, one_by_one=200, small_batches=5_000)


@contextlib.contextmanager
def broker(data_dir: Path | None, flush: str) -> Iterator[tuple[str, float]]:
    """A broker child process: (bootstrap servers, seconds from launch to listening)."""
    settings = {} if data_dir is None else {"data_dir": data_dir, "log_flush": flush}
    child = ChildBroker(stderr="inherit", **settings)
    started = time.perf_counter()
    try:
        child.start(timeout=300)
        yield child.bootstrap, time.perf_counter() - started
    finally:
        child.stop(grace=30)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def produce_one_by_one(bootstrap: str, topic: str, count: int) -> float:
    """Seconds to produce `count` records, each acknowledged (acks=all) before the next
    is sent: the latency of one Produce request, fsync included under flush write."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    producer.list_topics(topic, timeout=10)
    started = time.perf_counter()
    for _ in range(count):
        producer.produce(topic, b"v" * 100, partition=0)
        if producer.flush(10) != 0:
            raise RuntimeError("a record was not acknowledged")
    return time.perf_counter() - started


def produce_small_batches(bootstrap: str, topic: str, count: int) -> None:
    """`count` records, each in a batch of its own (librdkafka's batch.num.messages=1)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1, "acks": 1}
    )
    for number in range(count):
        while True:
            try:
                producer.produce(topic, b"v" * 100, key=b"%d" % number)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError("a record was not acknowledged")


def measure_many_batches(plan: Plan, scratch: Path, log: Any) -> dict[str, list[float]]:
    """Start times on a log of `plan.small_batches` one-record batches: after a clean stop
    (checkpoints) and as after a crash (every batch read)."""
    data_dir = scratch / "many-batches"
    with broker(data_dir, "os") as (bootstrap, _):
        create_topic(bootstrap, "many", plan.partitions)
        produce_small_batches(bootstrap, "many", plan.small_batches)
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(plan.runs):
        with broker(None, "os") as (_, start_seconds):
            samples["in memory, empty"].append(start_seconds * 1000)
        with broker(data_dir, "os") as (_, start_seconds):
            samples["after a clean stop"].append(start_seconds * 1000)
        for checkpoint in data_dir.rglob("checkpoint"):
            checkpoint.unlink()
        with broker(data_dir, "os") as (_, start_seconds):
            samples["after a crash"].append(start_seconds * 1000)
    size = sum(f.stat().st_size for f in data_dir.rglob("*.log"))
    samples["data MiB"].append(size / 2**20)
    log("many small batches: done")
    return samples


def measure(plan: Plan, log: Any) -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    scratch = Path(tempfile.mkdtemp(prefix="minibroker-bench-"))
    try:
        for run in range(plan.runs):
            for side in SIDES:
                data_dir = None if side == "in memory" else scratch / f"{side}-{run}"
                with broker(data_dir, side) as (bootstrap, _):
                    topic = f"bench-{run}"
                    create_topic(bootstrap, topic, plan.partitions)
                    seconds = produce(bootstrap, topic, plan.messages)
                    samples["produce msg/s"][side].append(plan.messages / seconds)
                    samples["one at a time msg/s"][side].append(
                        plan.one_by_one / produce_one_by_one(bootstrap, topic, plan.one_by_one)
                    )
                    received, seconds = consume(
                        bootstrap, topic, plan.partitions, plan.messages, 120, {}
                    )
                    if received != plan.messages:
                        raise RuntimeError(f"{side}: read {received} of {plan.messages}")
                    samples["consume msg/s"][side].append(received / seconds)
                log(f"run {run + 1}/{plan.runs} {side}: done")
                if data_dir is not None:
                    size = sum(f.stat().st_size for f in data_dir.rglob("*.log"))
                    with broker(data_dir, side) as (_, start_seconds):
                        samples["restart ms"][side].append(start_seconds * 1000)
                    for checkpoint in data_dir.rglob("checkpoint"):
                        checkpoint.unlink()  # as after a crash
                    with broker(data_dir, side) as (_, start_seconds):
                        samples["restart ms, after a crash"][side].append(start_seconds * 1000)
                    samples["data MiB"][side].append(size / 2**20)
            with broker(None, "os") as (_, start_seconds):
                samples["restart ms"]["in memory"].append(start_seconds * 1000)
                samples["restart ms, after a crash"]["in memory"].append(start_seconds * 1000)
        samples["many batches"] = measure_many_batches(plan, scratch, log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return samples


def table(samples: dict[str, dict[str, list[float]]]) -> list[str]:
    lines = [
        "| metric | in memory | data dir, flush os | flush interval | flush write |",
        "|---|---|---|---|---|",
    ]
    for metric in (
        "produce msg/s",
        "one at a time msg/s",
        "consume msg/s",
        "restart ms",
        "restart ms, after a crash",
        "data MiB",
    ):
        row = samples.get(metric, {})
        anchor = statistics.median(row["in memory"]) if row.get("in memory") else None
        cells = []
        for side in SIDES:
            values = row.get(side)
            if not values:
                cells.append("-")
                continue
            value = statistics.median(values)
            text = f"{value:,.0f}" if value >= 100 else f"{value:.1f}"
            if anchor and side != "in memory":
                text += f" ({value / anchor:.2f}x)"
            cells.append(text)
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    starts = samples.get("many batches", {})
    if starts:
        anchor = statistics.median(starts["in memory, empty"])
        lines += [
            "",
            "| start to listening, ms | in memory, empty | data dir after a clean stop "
            "| after a crash | data MiB |",
            "|---|---|---|---|---|",
            f"| one-record batches | {anchor:,.0f} | "
            + " | ".join(
                f"{statistics.median(starts[k]):,.0f} "
                f"({statistics.median(starts[k]) / anchor:.2f}x)"
                for k in ("after a clean stop", "after a crash")
            )
            + f" | {statistics.median(starts['data MiB']):.1f} |",
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.storage", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, one run (smoke)")
    args = parser.parse_args(argv)
    plan = Plan.quick() if args.quick else Plan()

    samples = measure(plan, log)
    lines = [
        "# Data directory benchmark",
        "",
        f"`python -m bench.storage{' --quick' * args.quick}`, {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} cores; {plan.messages:,} messages of 100 bytes, "
        f"{plan.partitions} partitions, acks=all (confluent-kafka), medians of {plan.runs} "
        "interleaved runs. Ratios are against the in-memory broker. `one at a time` is "
        f"{plan.one_by_one:,} records each acknowledged before the next is sent (one "
        "Produce request each). `restart ms` is from launching `python -m minibroker` to "
        "it listening, with the run's data to recover: after a clean stop (from its "
        "checkpoints) and after a crash (checkpoints removed: every batch is read). The "
        "in-memory column of both is an empty broker's start. The second table: a log of "
        f"{plan.small_batches:,} one-record batches (librdkafka's batch.num.messages=1), "
        "where a start that reads every batch costs most.",
        "",
        *table(samples),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        write_results(RESULTS, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
