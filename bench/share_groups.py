"""Share groups (KIP-932) against consumer groups: eighteen consumers with a slow handler on
a six-partition topic, minibroker side by side with Apache Kafka 4.4.0.

    python -m bench.share_groups [--quick] [--runs N] [--records N]

The workload: 1,800 records already in a 6-partition topic (written in batches of 10),
then 18 consumers start at once, each in a thread of its own, and handle every record they
get in 10 ms (a sleep). A consumer group gives each partition to one member, so 6 members
work and 12 sit idle; a share group lets all 18 read the partitions together. Measured:
the wall time from the consumers' start until every record has been handled, the time
from the first record handled to the last, and how many members handled records.

Both brokers run in child processes (bench/runner.py), the clients (confluent-kafka's
Consumer and ShareConsumer) in this one; sides alternate run by run; medians. The tables
are printed and written to bench/SHARE_GROUPS_RESULTS.md. A side that does not serve share
groups (its IncrementalAlterConfigs of the group config is refused) is reported as such.
"""

from __future__ import annotations

import os
import platform
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from bench import harness
from bench.harness import (
    ServerProcess,
    bench_parser,
    chosen_plan,
    client_version,
    log,
    run_heading,
    server,
    timed,
    write_results,
)
from bench.runner import KAFKA_LINE
from minibroker.testing import jvm
from minibroker.testing.real_kafka import unavailable_reason

RESULTS = Path(__file__).resolve().parent / "SHARE_GROUPS_RESULTS.md"
KAFKA_NAME = f"Kafka {jvm.KAFKA_BROKERS[KAFKA_LINE]}"
SIDES = ("minibroker", "kafka")
KINDS = ("consumer", "share")
KIND_LABEL = {"consumer": "consumer group", "share": "share group"}
QUIET = {"log_level": 3}
PARTITIONS = 6
MEMBERS = 18
HANDLER_S = 0.010  # the slow handler: 10 ms a record
BATCH = 10  # records per produced batch and per share fetch (max.poll.records)
WARM_UP_RECORDS = 180
# a share group whose members have handled nothing this long after starting is taken for a
# broker that does not serve share groups (Kafka 4.4 hands out the first records at about 5 s)
FIRST_RECORD_CAP_S = 20.0


class NotServed(Exception):
    """The broker does not serve share groups."""


@dataclass(frozen=True)
class Plan:
    runs: int
    records: int
    cap_s: float


FULL = Plan(runs=3, records=1_800, cap_s=90.0)
QUICK = Plan(runs=1, records=1_800, cap_s=60.0)


# --- eighteen members, each polling in a thread of its own ---


class Crew:
    """The members of one group: who handled what, and when."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.by_member: dict[str, int] = {}
        self.distinct: set[tuple[int, int]] = set()
        self.handled = 0
        self.first_at: float | None = None
        self.last_at = 0.0
        self.errors: list[str] = []

    def _handle(self, member: str, record: tuple[int, int]) -> None:
        time.sleep(HANDLER_S)
        now = time.perf_counter()
        with self._lock:
            self.by_member[member] = self.by_member.get(member, 0) + 1
            self.distinct.add(record)
            self.handled += 1
            if self.first_at is None:
                self.first_at = now
            self.last_at = now

    def start(self, member: str, poll: Callable[[], list[Any]], close: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                while not self._stop.is_set():
                    for message in poll():
                        if message.error() is not None:
                            with self._lock:
                                self.errors.append(str(message.error()))
                            continue
                        self._handle(member, (message.partition(), message.offset()))
            except KafkaException as error:
                with self._lock:
                    self.errors.append(str(error))
            finally:
                close()

        thread = threading.Thread(target=run, name=member, daemon=True)
        thread.start()
        self._threads.append(thread)

    def idle_since(self, started: float) -> float:
        """Seconds since `started` while no record has been handled yet, else 0."""
        with self._lock:
            return 0.0 if self.first_at is not None else time.perf_counter() - started

    def done(self, expected: int) -> bool:
        with self._lock:
            return len(self.distinct) >= expected

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


def produce(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": BATCH, **QUIET}
    )
    for index in range(records):
        producer.produce(topic, b"job-%d" % index, partition=index % PARTITIONS)
    if producer.flush(60) != 0:
        raise RuntimeError("records left undelivered after 60 s")


def set_group_config(bootstrap: str, group: str, name: str, value: str) -> None:
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.incremental_alter_configs([resource])[resource].result(15)


def new_member(kind: str, bootstrap: str, group: str, name: str, topic: str) -> Any:
    common = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, **QUIET}
    if kind == "share":
        share = ShareConsumer({**common, "max.poll.records": BATCH})
        share.subscribe([topic])
        return share
    consumer = Consumer({**common, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    return consumer


def poller(kind: str, client: Any) -> Callable[[], list[Any]]:
    if kind == "share":
        return lambda: list(client.poll(0.05))
    return lambda: [m for m in [client.poll(0.05)] if m is not None]


@dataclass(frozen=True)
class Outcome:
    wall_s: float | None  # consumers' start until every record was handled; None: capped
    busy_s: float | None  # first record handled until the last
    working: int  # members that handled a record
    handled: int  # records handled, redeliveries included


def run_workload(host: ServerProcess, kind: str, plan: Plan) -> Outcome:
    """One run: a fresh topic holding `plan.records`, then 18 members of a fresh group."""
    topic, group = f"jobs-{uuid.uuid4().hex[:8]}", f"{kind}-{uuid.uuid4().hex[:8]}"
    host.create_topic(topic, PARTITIONS)
    produce(host.bootstrap, topic, plan.records)
    if kind == "share":
        # a share group starts at the partitions' end unless its group config says otherwise
        set_group_config(host.bootstrap, group, "share.auto.offset.reset", "earliest")
    crew = Crew()
    started = time.perf_counter()
    try:
        for index in range(MEMBERS):
            client = new_member(kind, host.bootstrap, group, f"worker-{index:02d}", topic)
            crew.start(f"worker-{index:02d}", poller(kind, client), client.close)
        deadline = started + plan.cap_s
        while not crew.done(plan.records) and time.perf_counter() < deadline:
            if kind == "share" and crew.idle_since(started) > FIRST_RECORD_CAP_S:
                raise NotServed(f"no member got a record in {FIRST_RECORD_CAP_S:.0f} s")
            time.sleep(0.005)
        finished = crew.done(plan.records)
    finally:
        crew.stop()
    if crew.errors:
        log(f"{host.kind} {kind}: {len(crew.errors)} errors, first: {crew.errors[0]}")
    wall = crew.last_at - started if finished else None
    busy = crew.last_at - crew.first_at if finished and crew.first_at is not None else None
    return Outcome(wall, busy, len(crew.by_member), crew.handled)


# --- the runs ---


@dataclass
class Samples(harness.Samples):
    working: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    handled: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    not_served: dict[str, str] = field(default_factory=dict)  # side: why share groups are not
    kafka_missing: str | None = None


def measure(plan: Plan) -> Samples:
    samples = Samples()
    missing = unavailable_reason(KAFKA_LINE)
    if missing is not None:
        samples.kafka_missing = missing
        log(f"{KAFKA_NAME} side skipped: {missing}")
    with ExitStack() as stack:
        hosts = {"minibroker": stack.enter_context(server("minibroker"))}
        if missing is None:
            hosts["kafka"] = stack.enter_context(server("kafka"))
        for host in hosts.values():
            for kind in KINDS:  # untimed: the first group of a kind loads code (Kafka: JIT)
                attempt(samples, host, kind, replace(plan, records=WARM_UP_RECORDS))
        for run in range(plan.runs):
            for side, host in hosts.items():
                for kind in KINDS:
                    outcome = attempt(samples, host, kind, plan)
                    if outcome is None:
                        continue
                    samples.add(kind, side, outcome.wall_s)
                    samples.add(f"{kind}_busy", side, outcome.busy_s)
                    samples.working.setdefault((kind, side), []).append(outcome.working)
                    samples.handled.setdefault((kind, side), []).append(outcome.handled)
                    log(
                        f"run {run + 1}: {side} {KIND_LABEL[kind]}: "
                        f"{_s(outcome.wall_s)} wall, {_s(outcome.busy_s)} handling, "
                        f"{outcome.working} members worked, {outcome.handled} handled"
                    )
    return samples


def attempt(samples: Samples, host: ServerProcess, kind: str, plan: Plan) -> Outcome | None:
    """One run, or None where the side does not serve share groups (noted once)."""
    if kind == "share" and host.kind in samples.not_served:
        return None
    try:
        return run_workload(host, kind, plan)
    except (KafkaException, NotServed) as error:
        samples.not_served[host.kind] = str(error.args[0])
        log(f"{host.kind}: share groups not served: {error.args[0]}")
        return None


# --- report ---


def _s(seconds: float | None) -> str:
    return "capped" if seconds is None else f"{seconds:,.2f} s"


def _ratio(top: float | None, bottom: float | None) -> str:
    return f"{top / bottom:.2f}" if top is not None and bottom else "n/a"


def _cell(samples: Samples, metric: str, kind: str, side: str) -> str:
    if kind == "share" and side in samples.not_served:
        return "not served"
    if side == "kafka" and samples.kafka_missing is not None:
        return "not measured"
    if not samples.count(metric, side):
        return "n/a"
    return _s(samples.median(metric, side))


def _members(samples: Samples, kind: str, side: str) -> str:
    found = samples.working.get((kind, side), [])
    if not found:
        return "n/a"
    low, high = min(found), max(found)
    return f"{low}" if low == high else f"{low}-{high}"


def table(samples: Samples, plan: Plan) -> list[str]:
    lines = [
        f"| {plan.records:,} records, 10 ms each, 18 consumers, 6 partitions | minibroker "
        f"| {KAFKA_NAME} | minibroker / Kafka |",
        "|---|---|---|---|",
    ]
    for kind in KINDS:
        label = KIND_LABEL[kind]
        for metric, what in ((kind, "wall time"), (f"{kind}_busy", "first to last record")):
            cells = [_cell(samples, metric, kind, side) for side in SIDES]
            ratio = _ratio(samples.median(metric, "minibroker"), samples.median(metric, "kafka"))
            lines.append(f"| {label}: {what} | {cells[0]} | {cells[1]} | {ratio} |")
        members = [_members(samples, kind, side) for side in SIDES]
        lines.append(f"| {label}: members that handled records | {members[0]} | {members[1]} | |")
    lines.append(
        "| share group / consumer group, wall time | "
        + " | ".join(
            _ratio(samples.median("share", side), samples.median("consumer", side))
            for side in SIDES
        )
        + " | |"
    )
    return lines


def notes(samples: Samples, plan: Plan, load: tuple[str, str]) -> list[str]:
    ideal_consumer = plan.records / PARTITIONS * HANDLER_S
    ideal_share = plan.records / MEMBERS * HANDLER_S
    lines = [
        f"- Medians of {plan.runs} run{'s' if plan.runs != 1 else ''} per side and group "
        f"kind, sides alternating run by run. Machine: {os.cpu_count()} CPUs shared with "
        f"other work (load average {load[0]} at the start, {load[1]} at the end), Python "
        f"{platform.python_version()}, confluent-kafka {client_version()}.",
        f"- Each run: a fresh 6-partition topic holding {plan.records:,} records (written "
        f"before the consumers start, in batches of at most {BATCH}) and a fresh group; 18 "
        "consumers start at once, each polling in a thread of its own, and sleep 10 ms per "
        "record. Wall time: from the first consumer's creation until every record has been "
        "handled at least once; first to last record: from the first record handled to the "
        "last. Capped runs (over "
        f"{plan.cap_s:.0f} s) count as missing.",
        f"- The handlers alone bound the figures from below: {ideal_consumer:.1f} s when 6 "
        f"members share the work, {ideal_share:.1f} s when 18 do. The rest is the groups "
        "forming (joins and the first assignment) and fetching.",
        "- Consumer group: confluent-kafka `Consumer` with librdkafka's defaults (classic "
        "protocol, eager `range,roundrobin` assignors) and auto.offset.reset=earliest. Share "
        f"group: `ShareConsumer` with max.poll.records={BATCH} and implicit acknowledgement; "
        "the group's share.auto.offset.reset is set to earliest (IncrementalAlterConfigs) "
        "before its members start. A broker may hand one member a whole stored batch, hence "
        "the batches of 10.",
        f"- {KAFKA_NAME}: one KRaft node from its own jars (`bench/runner.py serve kafka`) "
        "with the settings of `minibroker.testing.real_kafka.TEST_SETTINGS`; share groups "
        "with its defaults (share.heartbeat.interval.ms 5,000: members that join after the "
        "first are given partitions at a later heartbeat). minibroker: a fresh broker with "
        "its defaults.",
    ]
    for side, why in samples.not_served.items():
        lines.append(f"- {side} did not serve share groups in this run: {why}")
    if samples.kafka_missing is not None:
        lines.append(f"- Not measured beside {KAFKA_NAME}: {samples.kafka_missing}")
    redelivered = [
        f"{KIND_LABEL[kind]} on {side}: {max(counts) - plan.records:,}"
        for (kind, side), counts in sorted(samples.handled.items())
    ]
    if redelivered:
        lines.append(
            "- Records handled more than once (the most in a run; a consumer group's "
            "rebalance can hand a partition over before its offsets are committed): "
            + "; ".join(redelivered)
            + "."
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(
        "share_groups", __doc__, "one run per side and group kind", "runs (default 3, quick 1)"
    )
    parser.add_argument("--records", type=int, help="records in the topic (default 1,800)")
    args = parser.parse_args(argv)
    plan = chosen_plan(args.quick, FULL, QUICK, runs=args.runs, records=args.records)
    run = timed(lambda: measure(plan))
    samples = run.result
    body = "\n".join(table(samples, plan))
    print(body)
    command = f"python -m bench.share_groups{' --quick' if args.quick else ''}"
    kind = "quick run" if args.quick else "full run"
    document = "\n".join(
        [
            "# Share groups beside consumer groups",
            "",
            f"{run_heading(command, kind, run.elapsed)}. Times are lower-is-better; ratios "
            f"are minibroker / {KAFKA_NAME}, and share group / consumer group on one broker.",
            "",
            body,
            "",
            *notes(samples, plan, run.load),
            "",
        ]
    )
    write_results(RESULTS, document, run.elapsed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
