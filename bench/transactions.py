"""Transactions: minibroker beside the librdkafka mock cluster and Apache Kafka.

    python -m bench.transactions [--quick] [--runs N] [--records N] [--per-transaction N]

A confluent-kafka transactional producer sends N records of 100 B (200,000 by default)
into a fresh topic, committing every 1,000 records; then a consumer with
isolation.level=read_committed reads them all back from the beginning (and, as a
reference, one with read_uncommitted). Every side is driven by the same client with the
same settings in the same run: minibroker, the librdkafka mock cluster and Apache Kafka
(one KRaft node from Kafka's own jars, the version bench.anchors uses; `python -m
minibroker jars kafka` fetches them), each broker in a fresh child process
(bench/runner.py) for every round, the clients here. Rounds interleave the sides (the order
rotates round by round); each figure is the median over the rounds. The table is printed
with ratios minibroker / mock and minibroker / Kafka and written to
bench/TRANSACTIONS_RESULTS.md.

A side that fails in a round (an error from the client, records missing) is left out of
that round's figures and named in the notes, with the error.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from bench.anchors import java_version
from bench.harness import (
    CONSUME_TUNED,
    QUIET,
    ROOT,
    Samples,
    ServerProcess,
    bench_parser,
    chosen_plan,
    client_version,
    fmt,
    log,
    percentile,
    run_heading,
    server,
    stored_range,
    timed,
    write_results,
)
from bench.runner import KAFKA_HEAP, KAFKA_LINE
from minibroker.testing import jvm
from minibroker.testing.real_kafka import unavailable_reason

RESULTS = Path(__file__).resolve().parent / "TRANSACTIONS_RESULTS.md"
SIDES = ("minibroker", "mock", "kafka")
VALUE_SIZE = 100
SEQUENCE_BYTES = 8  # each value starts with its record's number, to check what is read
TXN_TIMEOUT_S = 20.0  # for init_transactions and commit_transaction
WARM_UP_TRANSACTIONS = 2


# The sizes of this benchmark's runs; each bench module has its own (harness.chosen_plan).
@dataclass(frozen=True)
class Plan:
    runs: int
    records: int
    per_transaction: int  # records between two commits
    partitions: int
    consume_cap_s: float  # a read that takes longer is cut off and counted as short


FULL = Plan(runs=5, records=200_000, per_transaction=1_000, partitions=6, consume_cap_s=30.0)
QUICK = Plan(runs=1, records=20_000, per_transaction=1_000, partitions=6, consume_cap_s=10.0)


def values(count: int) -> list[bytes]:
    """`count` values of 100 B, each starting with its number (big-endian)."""
    padding = b"v" * (VALUE_SIZE - SEQUENCE_BYTES)
    return [index.to_bytes(SEQUENCE_BYTES, "big") + padding for index in range(count)]


def describe(error: BaseException) -> str:
    if isinstance(error, KafkaException) and isinstance(error.args[0], KafkaError):
        found: KafkaError = error.args[0]
        return f"{found.name()}: {found.str()}"
    return f"{type(error).__name__}: {error}"


# --- client-side measurements ---


@dataclass(frozen=True)
class Produced:
    init_ms: float  # init_transactions() of this producer
    seconds: float  # first produce() to the last commit_transaction() returning
    commit_ms: list[float]  # each commit_transaction() call
    broker_cpu: float


def _transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **QUIET})


def _send(producer: Producer, topic: str, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value)
            return
        except BufferError:  # local queue full: serve delivery reports, then retry
            producer.poll(0.001)


def _discard(producer: Producer) -> None:
    """After a failure: drop what is queued so that destroying the handle does not wait."""
    with contextlib.suppress(KafkaException, RuntimeError):
        producer.abort_transaction(2)
    with contextlib.suppress(KafkaException, RuntimeError):
        producer.purge()


def transactional_produce(
    broker: ServerProcess, topic: str, transactional_id: str, batch: list[bytes], every: int
) -> Produced:
    """Produce `batch` in transactions of `every` records, each committed."""
    producer = _transactional_producer(broker.bootstrap, transactional_id)
    try:
        started = time.perf_counter()
        producer.init_transactions(TXN_TIMEOUT_S)
        init_ms = (time.perf_counter() - started) * 1000
        producer.list_topics(topic, timeout=10)  # connect and learn leaders before timing
        commits: list[float] = []
        cpu = broker.cpu_seconds()
        started = time.perf_counter()
        for first in range(0, len(batch), every):
            producer.begin_transaction()
            for value in batch[first : first + every]:
                _send(producer, topic, value)
            producer.poll(0)
            commit_started = time.perf_counter()
            producer.commit_transaction(TXN_TIMEOUT_S)
            commits.append((time.perf_counter() - commit_started) * 1000)
        seconds = time.perf_counter() - started
        return Produced(init_ms, seconds, commits, broker.cpu_seconds() - cpu)
    except BaseException:
        _discard(producer)
        raise


@dataclass(frozen=True)
class Read:
    received: int  # records delivered to the application
    distinct: int  # different record numbers among them
    seconds: float
    first_ms: float | None  # from assign() to the first record delivered
    broker_cpu: float
    errors: list[str]

    @property
    def rate(self) -> float:
        return self.received / self.seconds

    @property
    def steady_rate(self) -> float | None:
        """Records per second from the first record delivered to the last."""
        if self.first_ms is None or self.seconds <= self.first_ms / 1000:
            return None
        return self.received / (self.seconds - self.first_ms / 1000)


def read_back(
    broker: ServerProcess,
    topic: str,
    partitions: int,
    expected: int,
    isolation: str,
    cap_s: float,
) -> Read:
    """Read every partition from its beginning with `isolation.level=isolation` until
    `expected` records arrived, every partition reported its end (for read_committed, the
    last stable offset), or `cap_s` ran out."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            **QUIET,
            **CONSUME_TUNED,
        }
    )
    try:
        batches: list[list[Any]] = []
        received = 0
        first_ms: float | None = None
        errors: list[str] = []
        ended: set[int] = set()  # partitions read to their end
        cpu = broker.cpu_seconds()
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
        while (
            received < expected
            and len(ended) < partitions
            and time.perf_counter() - started < cap_s
        ):
            # ask for no more than is missing (see bench.harness.consume)
            batch = consumer.consume(min(10_000, expected - received), 0.5)
            batches.append(batch)
            for message in batch:
                error = message.error()
                if error is None:
                    received += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition() or 0)
                elif len(errors) < 3:
                    errors.append(str(error))
            if first_ms is None and received:
                first_ms = (time.perf_counter() - started) * 1000
        seconds = time.perf_counter() - started
        cpu = broker.cpu_seconds() - cpu
        numbers = {
            message.value()[:SEQUENCE_BYTES]
            for batch in batches
            for message in batch
            if message.error() is None
        }
        return Read(received, len(numbers), seconds, first_ms, cpu, errors)
    finally:
        consumer.close()


# --- one round of one side ---


def warm_up(broker: ServerProcess, plan: Plan, batch: list[bytes], samples: Samples) -> None:
    """A first transactional id, two transactions and a read_committed read, untimed as
    rates: the first requests of a kind load code on every side, and a real Kafka creates
    its transaction log (__transaction_state) on the first InitProducerId."""
    broker.create_topic("warm-up", plan.partitions)
    count = WARM_UP_TRANSACTIONS * plan.per_transaction
    done = transactional_produce(
        broker, "warm-up", "bench-warm-up", batch[:count], plan.per_transaction
    )
    samples.add("init_first", broker.kind, done.init_ms)
    read_back(broker, "warm-up", plan.partitions, count, "read_committed", 10.0)


def run_side(
    kind: str,
    run: int,
    plan: Plan,
    batch: list[bytes],
    samples: Samples,
    log: Callable[[str], None],
) -> None:
    prefix = f"run {run + 1}/{plan.runs} {kind}"
    log(f"{prefix}: start, warm up")
    with server(kind) as broker:
        warm_up(broker, plan, batch, samples)
        topic = f"txn-{run}"
        broker.create_topic(topic, plan.partitions)
        log(f"{prefix}: produce {plan.records:,} in transactions of {plan.per_transaction:,}")
        produced = transactional_produce(broker, topic, f"bench-{run}", batch, plan.per_transaction)
        held, written = stored_range(broker.bootstrap, topic, plan.partitions)
        samples.add("markers", kind, written - plan.records)
        dropped = written - held  # the mock drops a partition's oldest data beyond a few MB
        reads = {}
        for isolation in ("read_committed", "read_uncommitted"):
            log(f"{prefix}: consume, {isolation}")
            reads[isolation] = read_back(
                broker, topic, plan.partitions, plan.records, isolation, plan.consume_cap_s
            )
    records = plan.records
    samples.add("produce", kind, records / produced.seconds)
    samples.add("produce_mib", kind, records * VALUE_SIZE / 2**20 / produced.seconds)
    samples.add("commit_p50", kind, percentile(produced.commit_ms, 0.50))
    samples.add("commit_p99", kind, percentile(produced.commit_ms, 0.99))
    samples.add("init_second", kind, produced.init_ms)
    samples.add("dropped", kind, dropped)
    samples.add("produce_cpu", kind, produced.broker_cpu * 1000 * 100_000 / records)
    for isolation, read in reads.items():
        key = "committed" if isolation == "read_committed" else "uncommitted"
        samples.add(f"{key}_received", kind, read.received)
        samples.add(f"{key}_distinct", kind, read.distinct)
        if read.first_ms is not None:
            samples.add(f"{key}_first", kind, read.first_ms)
        if read.steady_rate is not None:
            samples.add(f"{key}_steady", kind, read.steady_rate)
        if read.received:
            samples.add(key, kind, read.rate)
            samples.add(f"{key}_cpu", kind, read.broker_cpu * 1000 * 100_000 / read.received)
        # records still held: all of them, or at least those beyond the dropped offsets
        complete = read.received == records if not dropped else read.received >= records - dropped
        if not complete or read.distinct != read.received or read.errors:
            text = (
                f"run {run + 1} {kind}, {isolation}: {read.received:,} records read "
                f"({read.distinct:,} distinct) of {records:,} produced"
                + (f" ({dropped:,} offsets dropped by the broker)" if dropped else "")
                + f", in {read.seconds:.1f} s"
            )
            if read.errors:
                text += f"; errors: {'; '.join(read.errors)}"
            samples.notes.append(text)


def measure(plan: Plan, log: Callable[[str], None]) -> Samples:
    samples = Samples()
    batch = values(plan.records)
    for run in range(plan.runs):
        for step in range(len(SIDES)):
            kind = SIDES[(run + step) % len(SIDES)]
            try:
                run_side(kind, run, plan, batch, samples, log)
            except (KafkaException, RuntimeError) as error:
                text = f"run {run + 1} {kind}: {describe(error)}"
                log(f"FAILED {text}")
                samples.notes.append(text)
    return samples


# --- the table ---


@dataclass(frozen=True)
class Row:
    title: str
    key: str
    unit: str


def rows(plan: Plan) -> list[Row]:
    return [
        Row(
            f"transactional produce, {plan.records:,} x 100 B, {plan.partitions} partitions, "
            f"commit every {plan.per_transaction:,}",
            "produce",
            "records/s",
        ),
        Row("same, MiB/s of values", "produce_mib", "MiB/s"),
        Row("commit_transaction() p50 (last batch acknowledged + EndTxn)", "commit_p50", "ms"),
        Row("commit_transaction() p99", "commit_p99", "ms"),
        Row(
            "consume them from the beginning, isolation.level=read_committed",
            "committed",
            "records/s",
        ),
        Row("same, read_uncommitted (reference)", "uncommitted", "records/s"),
        Row("read_committed: from assign() to the first record", "committed_first", "ms"),
        Row(
            "read_committed: from the first record to the last (steady rate)",
            "committed_steady",
            "records/s",
        ),
        Row("same, read_uncommitted (reference)", "uncommitted_steady", "records/s"),
        Row("broker CPU per 100k records, transactional produce", "produce_cpu", "ms"),
        Row("broker CPU per 100k records, read_committed consume", "committed_cpu", "ms"),
        Row(
            "init_transactions(), first transactional id on a fresh broker (bimodal, see notes)",
            "init_first",
            "ms",
        ),
        Row("init_transactions(), a second transactional id (bimodal)", "init_second", "ms"),
    ]


def cell(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "records/s":
        return f"{value:,.0f} records/s"
    if unit == "MiB/s":
        return f"{value:,.1f} MiB/s" if value < 10 else f"{value:,.0f} MiB/s"
    return fmt(value, unit)


def ratio(mb: float | None, other: float | None) -> str:
    if mb is None or not other:
        return "n/a"
    value = mb / other
    return f"{value:.3f}" if value < 0.1 else f"{value:.2f}"


def kafka_name() -> str:
    return f"Kafka {jvm.KAFKA_BROKERS[KAFKA_LINE]}"


def table(samples: Samples, plan: Plan) -> list[str]:
    lines = [
        f"| metric | minibroker | librdkafka mock | {kafka_name()} "
        "| minibroker / mock | minibroker / Kafka |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows(plan):
        mb, mock, kafka = (samples.median(row.key, side) for side in SIDES)
        lines.append(
            f"| {row.title} | {cell(mb, row.unit)} | {cell(mock, row.unit)} "
            f"| {cell(kafka, row.unit)} | {ratio(mb, mock)} | {ratio(mb, kafka)} |"
        )
    return lines


def notes(samples: Samples, plan: Plan, load: tuple[str, str]) -> list[str]:
    def counted(key: str, side: str) -> int:
        return len(samples.values.get(key, {}).get(side, []))

    def med(key: str, side: str) -> str:
        found = samples.median(key, side)
        return "n/a" if found is None else f"{found:,.0f}"

    measured = ", ".join(f"{side} {counted('produce', side)}" for side in SIDES)
    lines = [
        f"- Medians of {plan.runs} round(s) (rounds measured: {measured}); each round starts "
        "every broker afresh in a child process (bench/runner.py), the sides one after the "
        "other, the order rotating round by round. Machine: "
        f"{os.cpu_count()} CPUs shared with other work (load average {load[0]} at the start, "
        f"{load[1]} at the end), Python {platform.python_version()}, confluent-kafka "
        f"{client_version()}, Java {java_version()}.",
        "- Producer: librdkafka defaults plus `transactional.id` (so idempotence, `acks=all` "
        "and `linger.ms=5`), no keys (the sticky partitioner), 100-byte values; "
        f"`begin_transaction()`, {plan.per_transaction:,} `produce()` calls, "
        "`commit_transaction()`, repeated; timed from the first `produce()` to the last "
        "commit's return, after `init_transactions()` and a metadata request. Each side "
        f"first runs {WARM_UP_TRANSACTIONS} untimed transactions with another "
        "transactional id into another topic and reads them back (a real Kafka creates "
        "`__transaction_state` then; that first `init_transactions()` is its own row).",
        "- Consumers: `assign()` from the beginning, `fetch.queue.backoff.ms=10` (as bench.micro "
        "and bench.anchors), auto-commit off; every value carries its record's number and "
        "each read is checked for all of them, once each. read_uncommitted reads the same "
        f"topic right after (control records are not delivered to the application either "
        f"way). Reads stop after {plan.consume_cap_s:.0f} s.",
        f"- {kafka_name()}: one KRaft node (broker and controller) from Kafka's own jars, heap "
        f"`-Xmx{KAFKA_HEAP}`, the settings of `minibroker.testing.real_kafka.TEST_SETTINGS` "
        "(replication factors and `transaction.state.log.min.isr` 1, otherwise Kafka's "
        "defaults), log segments on disk.",
        "- Broker CPU counts every thread of the broker's process (Kafka: the JVM with its "
        "JIT and GC threads). With 2 cores, broker CPU is taken from the client.",
        "- From `assign()` to the first record takes about 0.5 s on every side (the "
        "client's start: offset lookup, first Fetch), so the whole-read rates are about "
        "half the steady rates; the steady rows (first record to last) leave it out. Both "
        "are set mostly by the client's Python loop (compare the broker CPU row).",
        "- Per transaction, librdkafka sends AddPartitionsToTxn (v0) before the first "
        "record of a partition, the Produce requests (usually one: the sticky partitioner "
        "keeps a transaction's records on one or two partitions) and EndTxn (v1). "
        "minibroker writes the markers before it answers EndTxn, so the next "
        "transaction's AddPartitionsToTxn is accepted at once. Kafka writes them after "
        "answering and refuses the next AddPartitionsToTxn with CONCURRENT_TRANSACTIONS "
        "until they are written; librdkafka retries after a backoff, which sets Kafka's "
        "commit time (checked separately with `debug=eos,protocol`: 19 of 20 "
        "transactions refused once).",
        "- `init_transactions()` is bimodal on every side, about 50 ms or about 550 ms, so "
        "its medians swing from run to run: "
        "when librdkafka's bootstrap connection is not yet up as its transaction state "
        "machine starts, it finds no broker to ask for the coordinator and waits for its "
        "500 ms coordinator-query timer. Kafka's first one on a fresh node also creates "
        "`__transaction_state` (50 partitions).",
        "- Offsets written beyond the records (the commit markers, one per partition a "
        "transaction wrote to), median: "
        + ", ".join(f"{side} {med('markers', side)}" for side in SIDES)
        + f" for {plan.records // plan.per_transaction:,} transactions.",
    ]
    for side in SIDES:
        dropped = [value for value in samples.values.get("dropped", {}).get(side, []) if value]
        if dropped:
            lines.append(
                f"- {side} dropped the oldest offsets of a partition (low watermark above 0) "
                f"in {len(dropped)} of {counted('dropped', side)} rounds, median "
                f"{statistics.median(dropped):,.0f} offsets: its reads cover only what it "
                "still held (the librdkafka mock keeps a few MB a partition), and stop where "
                "every partition reports its end."
            )
    if samples.notes:
        lines.append("- Failures and short reads:")
        lines += [f"  - {text}" for text in samples.notes]
    else:
        lines.append(
            "- Every read of every round delivered each record still held exactly once, with "
            "both isolation levels, and no errors."
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(
        "transactions",
        __doc__,
        "20,000 records, one round (smoke check)",
        "rounds (default 5, quick 1)",
    )
    parser.add_argument("--records", type=int, help="records produced (default 200,000)")
    parser.add_argument(
        "--per-transaction", type=int, help="records between two commits (default 1,000)"
    )
    args = parser.parse_args(argv)
    plan = chosen_plan(
        args.quick,
        FULL,
        QUICK,
        runs=args.runs,
        records=args.records,
        per_transaction=args.per_transaction,
    )
    missing = unavailable_reason(KAFKA_LINE)
    if missing is not None:
        print(missing, file=sys.stderr)
        return 2

    run = timed(lambda: measure(plan, log))
    samples = run.result
    lines = table(samples, plan)
    print("\n".join(lines))
    for text in samples.notes:
        print(f"- {text}")
    command = "python -m bench.transactions" + " ".join(["", *(argv or sys.argv[1:])])
    kind = "quick smoke run" if args.quick else "full run"
    document = [
        "# Transactions: minibroker beside the librdkafka mock and Apache Kafka",
        "",
        f"{run_heading(command, kind, run.elapsed)}. Ratios are "
        "minibroker / anchor (for rates higher is better, for times and CPU lower is "
        "better).",
        "",
        *lines,
        "",
        *notes(samples, plan, run.load),
    ]
    if args.quick:  # a smoke check: the recorded results stay the full run's
        print(f"\nquick run, {run.elapsed:.0f} s: {RESULTS.relative_to(ROOT)} left as it was")
        return 0
    write_results(RESULTS, "\n".join(document) + "\n", run.elapsed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
