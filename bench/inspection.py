"""What fault rules and request recording cost on the hot path.

    python -m bench.inspection [--runs N] [--messages N]

The same confluent-kafka producer and consumer run against four brokers in one run,
interleaved round by round: a plain broker (the anchor), one with a fault rule that never
matches (every request is checked against it), one recording every request and answer
(inspection.py), and one with both. Each broker runs in the benchmark's process on its
own thread, as the pytest fixtures run it. Figures are medians over the rounds; the
table is printed with ratios to the plain broker and written to
bench/INSPECTION_RESULTS.md.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.harness import ROOT, bench_parser, timed, write_results
from minibroker import Broker

RESULTS = ROOT / "bench" / "INSPECTION_RESULTS.md"
VALUE = b"x" * 100


def _plain(broker: Broker) -> None:
    pass


def _rule(broker: Broker) -> None:
    broker.faults.add("DeleteTopics", topic="never-used")


def _recording(broker: Broker) -> None:
    broker.record_requests()


def _both(broker: Broker) -> None:
    _rule(broker)
    _recording(broker)


MODES: dict[str, Callable[[Broker], None]] = {
    "plain broker (anchor)": _plain,
    "a fault rule that never matches": _rule,
    "recording every request": _recording,
    "both": _both,
}


def one_round(prepare: Callable[[Broker], None], messages: int) -> tuple[float, float]:
    """(produce, consume) messages per second against a fresh broker."""
    with Broker() as broker:
        prepare(broker)
        broker.create_topic("bench", 1)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "acks": "all",
                # one message per request: the per-request path is what is measured
                "linger.ms": 0,
                "batch.num.messages": 1,
            }
        )
        start = time.perf_counter()
        for _ in range(messages):
            while True:
                try:
                    producer.produce("bench", VALUE)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(120)
        produced = messages / (time.perf_counter() - start)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "bench",
                "enable.auto.commit": False,
                # about ten messages per fetch
                "max.partition.fetch.bytes": 1_000,
            }
        )
        consumer.assign([TopicPartition("bench", 0, 0)])
        start = time.perf_counter()
        got = 0
        while got < messages:
            batch = consumer.consume(10_000, 1.0)
            got += sum(1 for m in batch if m.error() is None)
        consumed = messages / (time.perf_counter() - start)
        consumer.close()
        return produced, consumed


def measure(runs: int, messages: int) -> dict[str, list[tuple[float, float]]]:
    """Each mode's (produce, consume) rates, the modes interleaved round by round."""
    results: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for _ in range(runs):
        for mode, prepare in MODES.items():
            results[mode].append(one_round(prepare, messages))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser("inspection", __doc__, None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args(argv)
    run = timed(lambda: measure(args.runs, args.messages))
    results = run.result
    anchor = MODES and next(iter(MODES))
    base_produce = statistics.median(p for p, _ in results[anchor])
    base_consume = statistics.median(c for _, c in results[anchor])
    lines = [
        "| broker | produce msg/s | / anchor | consume msg/s | / anchor |",
        "|---|---|---|---|---|",
    ]
    for mode, rounds in results.items():
        produce = statistics.median(p for p, _ in rounds)
        consume = statistics.median(c for _, c in rounds)
        lines.append(
            f"| {mode} | {produce:,.0f} | {produce / base_produce:.2f} | "
            f"{consume:,.0f} | {consume / base_consume:.2f} |"
        )
    table = "\n".join(lines)
    print(table)
    write_results(
        RESULTS,
        "# Fault rules and request recording: their cost\n\n"
        f"`python -m bench.inspection --runs {args.runs} --messages {args.messages}` on "
        f"{platform.machine()}, Python {platform.python_version()}; 100-byte values, one "
        "per Produce request and about ten per Fetch, one partition, confluent-kafka in "
        "the same process as the broker; medians of the rounds.\n\n" + table + "\n",
        run.elapsed,
    )


if __name__ == "__main__":
    main()
