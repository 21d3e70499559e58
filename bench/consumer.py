"""Consumer library benchmarks: `python -m bench.consumer [--quick]`.

1. Overhead: the same records read by plain aiokafka (`getmany` in a loop, counting)
   and by `consumer.Consumer` with a trivial handler, interleaved run by run.
2. One topic stopped: three topics, trivial handlers; how many records of the two healthy topics
   are handled in a fixed window when the third topic flows, is paused, or has a
   handler that never returns.

The broker runs in its own process (bench/runner.py) so that its event loop does not
share the GIL with the client being measured. Writes bench/CONSUMER_RESULTS.md.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.harness import ROOT, bench_parser, chosen_plan, log, server, timed, write_results
from minibroker.consumer import Consumer

RESULTS = ROOT / "bench" / "CONSUMER_RESULTS.md"


@dataclass
class Plan:
    records: int = 200_000
    partitions: int = 4
    size: int = 100
    runs: int = 5
    window: float = 2.0
    stopped_records: int = 250_000  # per topic; more than a window can take


# The sizes of this benchmark's runs; each bench module has its own (harness.chosen_plan).
FULL = Plan()
QUICK = Plan(records=40_000, runs=3, window=1.0, stopped_records=40_000)


async def produce(bootstrap: str, topic: str, count: int, partitions: int, size: int) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=256 * 1024, acks=1
    )
    await producer.start()
    value = b"x" * size
    try:
        batch = []
        for n in range(count):
            batch.append(await producer.send(topic, value, partition=n % partitions))
            if len(batch) >= 20_000:
                await asyncio.gather(*batch)
                batch.clear()
        await asyncio.gather(*batch)
    finally:
        await producer.stop()


async def plain_aiokafka(bootstrap: str, topic: str, plan: Plan) -> float:
    """Records/s of a bare getmany loop from the beginning of every partition."""
    client = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await client.start()
    try:
        client.assign([TopicPartition(topic, p) for p in range(plan.partitions)])
        seen = 0
        started = time.perf_counter()
        while seen < plan.records:
            batches = await client.getmany(timeout_ms=500)
            for records in batches.values():
                for _ in records:
                    seen += 1
        return seen / (time.perf_counter() - started)
    finally:
        await client.stop()


async def library(bootstrap: str, topic: str, plan: Plan, threaded: bool = False) -> float:
    """Records/s of `Consumer` with a handler that only counts."""
    seen = 0
    done = asyncio.Event()

    async def handle(record: Any) -> None:
        nonlocal seen
        seen += 1
        if seen >= plan.records:
            done.set()

    def handle_sync(record: Any) -> None:
        nonlocal seen
        seen += 1  # one partition per thread at a time; a lost increment only delays
        if seen >= plan.records:
            loop.call_soon_threadsafe(done.set)

    loop = asyncio.get_running_loop()
    consumer = Consumer(
        handle_sync if threaded else handle,
        bootstrap_servers=bootstrap,
        partitions=[(topic, p) for p in range(plan.partitions)],
    )
    async with consumer:
        started = time.perf_counter()  # after start(), as for plain aiokafka
        await done.wait()
        elapsed = time.perf_counter() - started
    return seen / elapsed


async def one_topic_stopped(bootstrap: str, topics: list[str], mode: str, plan: Plan) -> float:
    """Records/s of the two healthy topics over a fixed window; the first topic is
    flowing, paused, or blocked in its handler."""
    slow, *healthy = topics
    processed: dict[str, int] = defaultdict(int)
    counting = False
    release = asyncio.Event()

    async def handle(record: Any) -> None:
        if counting:
            processed[record.topic] += 1

    async def blocked(record: Any) -> None:
        await release.wait()

    handlers = {t: handle for t in topics}
    if mode == "blocked":
        handlers[slow] = blocked
    consumer = Consumer(
        handlers,
        bootstrap_servers=bootstrap,
        partitions=[(t, p) for t in topics for p in range(plan.partitions)],
        revoke_timeout=0.5,
    )
    if mode == "paused":
        consumer.pause(slow)
    async with consumer:
        await asyncio.sleep(0.5)  # warm up: connections, first fetches
        counting = True
        await asyncio.sleep(plan.window)
        counting = False
        release.set()
    return sum(processed[t] for t in healthy) / plan.window


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


async def measure(plan: Plan, log: Any) -> list[str]:
    with server("minibroker") as broker:
        bootstrap = broker.bootstrap
        broker.create_topic("bench", plan.partitions)
        await produce(bootstrap, "bench", plan.records, plan.partitions, plan.size)
        stopped_topics = ["stopped-slow", "stopped-a", "stopped-b"]
        for topic in stopped_topics:
            broker.create_topic(topic, plan.partitions)
            await produce(bootstrap, topic, plan.stopped_records, plan.partitions, plan.size)
        log("data written")

        rates: dict[str, list[float]] = defaultdict(list)
        for run in range(plan.runs):
            rates["plain"].append(await plain_aiokafka(bootstrap, "bench", plan))
            rates["library"].append(await library(bootstrap, "bench", plan))
            rates["threaded"].append(await library(bootstrap, "bench", plan, threaded=True))
            for mode in ("flowing", "paused", "blocked"):
                rates[mode].append(await one_topic_stopped(bootstrap, stopped_topics, mode, plan))
            log(f"run {run + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items()))

    med = {k: statistics.median(v) for k, v in rates.items()}
    overhead = 1 - med["library"] / med["plain"]
    lines = [
        "# Consumer library benchmarks",
        "",
        f"`python -m bench.consumer`, {time.strftime('%Y-%m-%d')}. Medians of {plan.runs} "
        "runs, the variants interleaved run by run. Broker: minibroker in its own process.",
        "",
        "## Overhead against plain aiokafka",
        "",
        f"{plan.records:,} records of {plan.size} B over {plan.partitions} partitions, read "
        "from the beginning with assigned partitions.",
        "",
        "| reader | records/s | / plain aiokafka |",
        "|---|---|---|",
        f"| plain aiokafka `getmany` loop | {med['plain']:,.0f} | 1.00 |",
        f"| `Consumer`, async handler | {med['library']:,.0f} | "
        f"{ratio(med['library'], med['plain'])} |",
        f"| `Consumer`, sync handler in threads | {med['threaded']:,.0f} | "
        f"{ratio(med['threaded'], med['plain'])} |",
        "",
        f"Overhead of the library with an async handler: {overhead:.0%} (target <= 20%: "
        f"{'met' if overhead <= 0.20 else 'not met'}).",
        "",
        "## One topic stopped, two healthy",
        "",
        f"Three topics of {plan.partitions} partitions, {plan.stopped_records:,} records each, "
        "trivial handlers, default buffer bounds; records of the two "
        f"healthy topics handled in a {plan.window:.1f} s window.",
        "",
        "| third topic | healthy records/s | / flowing |",
        "|---|---|---|",
        f"| flowing | {med['flowing']:,.0f} | 1.00 |",
        f"| paused (`pause(topic)`) | {med['paused']:,.0f} | "
        f"{ratio(med['paused'], med['flowing'])} |",
        f"| handler never returns | {med['blocked']:,.0f} | "
        f"{ratio(med['blocked'], med['flowing'])} |",
        "",
        "Target: the healthy topics keep >= 80% of their throughput when the third stops. "
        "With the third topic flowing it shares the CPU, so stopping it can raise the "
        "healthy topics' rate above 1.00.",
        "",
        "Raw samples (records/s): "
        + "; ".join(f"{k}: {', '.join(f'{x:,.0f}' for x in v)}" for k, v in rates.items()),
        "",
        f"Machine: {os.cpu_count()} CPUs shared with other work, load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, Python "
        f"{sys.version.split()[0]}.",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("consumer", __doc__, "smaller, for a smoke run")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    plan = chosen_plan(args.quick, FULL, QUICK)
    run = timed(lambda: asyncio.run(measure(plan, log)))
    text = "\n".join(run.result) + "\n"
    print(text)
    if args.no_write:
        log(f"took {run.elapsed:.0f} s")
    else:
        write_results(RESULTS, text, run.elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
