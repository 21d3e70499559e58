"""Share groups (KIP-932) against consumer groups: eighteen consumers with a slow handler on
a six-partition topic, minibroker side by side with Apache Kafka 4.4.0.

    python -m bench.share_groups [--quick] [--runs N] [--records N]

The workload: 1,800 records on a 6-partition topic (written in batches of 10) and 18
consumers, each in a thread of its own, handling every record they get in 10 ms (a
sleep). A consumer group gives each partition to one member, so 6 members work and 12 sit
idle; a share group lets all 18 read the partitions together. Two ways, each timed until
every record has been handled:
- the group settled first (all 18 members in, assigned), then the records written; timed
  from the writing: the steady state of a queue of jobs;
- the records waiting, then the 18 consumers started; timed from their start, so it
  includes the group forming; also timed from the first record handled to the last.
Also counted: how many members handled records, and how many the busiest one did.

Both brokers run in child processes (bench/runner.py), the clients (confluent-kafka's
Consumer and ShareConsumer) in this one; sides alternate run by run; medians. The tables
are printed and written to bench/SHARE_GROUPS_RESULTS.md. A side that does not serve share
groups (no member gets a record) is reported as such.
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
SETTLE_BACKLOG = 2 * MEMBERS * BATCH  # records kept waiting while a share group settles
SETTLE_QUIET_S = 1.0  # a consumer group counts as settled once unchanged this long


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
        self._owned: dict[str, frozenset[int]] = {}  # consumer groups: the latest assignment
        self._assigned_at = 0.0

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

    def assigned(self, member: str, partitions: list[Any]) -> None:
        with self._lock:
            self._owned[member] = frozenset(p.partition for p in partitions)
            self._assigned_at = time.perf_counter()

    def settled(self, members: int, partitions: int, quiet_s: float) -> bool:
        """Every member assigned, each partition held once, no change for `quiet_s`."""
        with self._lock:
            held = sorted(p for owned in self._owned.values() for p in owned)
            return (
                len(self._owned) == members
                and held == list(range(partitions))
                and time.perf_counter() - self._assigned_at >= quiet_s
            )

    def distinct_count(self) -> int:
        with self._lock:
            return len(self.distinct)

    def working(self) -> int:
        with self._lock:
            return len(self.by_member)

    def reset(self) -> None:
        """Forget what was handled so far (the settling) before the timed part."""
        with self._lock:
            self.by_member.clear()
            self.distinct.clear()
            self.handled = 0
            self.first_at = None
            self.last_at = 0.0

    def outcome(self, started: float, finished: bool, side: str, kind: str) -> Outcome:
        if self.errors:
            log(f"{side} {kind}: {len(self.errors)} errors, first: {self.errors[0]}")
        with self._lock:
            first, last = self.first_at, self.last_at
            wall = last - started if finished else None
            busy = last - first if finished and first is not None else None
            busiest = max(self.by_member.values(), default=0)
            return Outcome(wall, busy, len(self.by_member), busiest, self.handled)

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


def new_member(kind: str, bootstrap: str, group: str, name: str, topic: str, crew: Crew) -> Any:
    common = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, **QUIET}
    if kind == "share":
        share = ShareConsumer({**common, "max.poll.records": BATCH})
        share.subscribe([topic])
        return share
    consumer = Consumer({**common, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic], on_assign=lambda _, parts: crew.assigned(name, parts))
    return consumer


def poller(kind: str, client: Any) -> Callable[[], list[Any]]:
    if kind == "share":
        return lambda: list(client.poll(0.05))
    return lambda: [m for m in [client.poll(0.05)] if m is not None]


@dataclass(frozen=True)
class Outcome:
    wall_s: float | None  # start of the timed part until every record was handled; None: capped
    busy_s: float | None  # first record handled until the last
    working: int  # members that handled a record
    busiest: int  # records handled by the member that handled the most
    handled: int  # records handled, redeliveries included


def start_crew(host: ServerProcess, kind: str, topic: str, group: str) -> Crew:
    if kind == "share":
        # a share group starts at the partitions' end unless its group config says otherwise
        set_group_config(host.bootstrap, group, "share.auto.offset.reset", "earliest")
    crew = Crew()
    for index in range(MEMBERS):
        name = f"worker-{index:02d}"
        client = new_member(kind, host.bootstrap, group, name, topic, crew)
        crew.start(name, poller(kind, client), client.close)
    return crew


def wait_handled(crew: Crew, kind: str, records: int, started: float, cap_s: float) -> bool:
    deadline = started + cap_s
    while not crew.done(records) and time.perf_counter() < deadline:
        if kind == "share" and crew.idle_since(started) > FIRST_RECORD_CAP_S:
            raise NotServed(f"no member got a record in {FIRST_RECORD_CAP_S:.0f} s")
        time.sleep(0.005)
    return crew.done(records)


def heartbeat_interval_s(bootstrap: str, group: str) -> float:
    """The share group's heartbeat interval, as the broker's DescribeConfigs says."""
    resource = ConfigResource(ResourceType.GROUP, group)
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    described = admin.describe_configs([resource])[resource].result(15)
    return int(described["share.heartbeat.interval.ms"].value) / 1000


def settle(
    host: ServerProcess, crew: Crew, kind: str, topic: str, group: str, cap_s: float
) -> bool:
    """Bring a new group to its steady state. A consumer group: every member has been
    assigned and together they hold each partition once, unchanged for SETTLE_QUIET_S. A
    share group (its client reports no assignment): a backlog of SETTLE_BACKLOG records
    is kept waiting until every member has handled one; then it is drained, and one more
    heartbeat interval lets a rebalanced assignment reach every member."""
    started = time.perf_counter()
    deadline = started + cap_s
    if kind == "consumer":
        while time.perf_counter() < deadline:
            if crew.settled(MEMBERS, PARTITIONS, SETTLE_QUIET_S):
                return True
            time.sleep(0.01)
        return False
    written = 0
    while crew.working() < MEMBERS and time.perf_counter() < deadline:
        if crew.idle_since(started) > FIRST_RECORD_CAP_S:
            raise NotServed(f"no member got a record in {FIRST_RECORD_CAP_S:.0f} s")
        if written - crew.distinct_count() < SETTLE_BACKLOG:
            produce(host.bootstrap, topic, SETTLE_BACKLOG)
            written += SETTLE_BACKLOG
        time.sleep(0.05)
    if crew.working() < MEMBERS or not wait_handled(crew, kind, written, started, cap_s):
        return False
    # members learn of a rebalanced assignment at their next heartbeat: wait one more
    time.sleep(heartbeat_interval_s(host.bootstrap, group) + SETTLE_QUIET_S)
    return True


def run_backlog(host: ServerProcess, kind: str, plan: Plan) -> Outcome:
    """From cold: a fresh topic already holding `plan.records`, then 18 members of a fresh
    group start; timed from their start."""
    topic, group = f"jobs-{uuid.uuid4().hex[:8]}", f"{kind}-{uuid.uuid4().hex[:8]}"
    host.create_topic(topic, PARTITIONS)
    produce(host.bootstrap, topic, plan.records)
    started = time.perf_counter()
    crew = start_crew(host, kind, topic, group)
    try:
        finished = wait_handled(crew, kind, plan.records, started, plan.cap_s)
    finally:
        crew.stop()
    return crew.outcome(started, finished, host.kind, kind)


def run_settled(host: ServerProcess, kind: str, plan: Plan) -> Outcome:
    """Steady state: 18 members of a fresh group on a fresh topic settle first (`settle`),
    then `plan.records` are written; timed from the start of the writing."""
    topic, group = f"jobs-{uuid.uuid4().hex[:8]}", f"{kind}-{uuid.uuid4().hex[:8]}"
    host.create_topic(topic, PARTITIONS)
    crew = start_crew(host, kind, topic, group)
    try:
        if not settle(host, crew, kind, topic, group, plan.cap_s):
            log(f"{host.kind} {KIND_LABEL[kind]} did not settle in {plan.cap_s:.0f} s")
            return crew.outcome(0.0, False, host.kind, kind)
        crew.reset()
        started = time.perf_counter()
        produce(host.bootstrap, topic, plan.records)
        finished = wait_handled(crew, kind, plan.records, started, plan.cap_s)
    finally:
        crew.stop()
    return crew.outcome(started, finished, host.kind, kind)


# --- the runs ---


@dataclass
class Samples(harness.Samples):
    working: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    busiest: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    handled: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    not_served: dict[str, str] = field(default_factory=dict)  # side: why share groups are not
    kafka_missing: str | None = None


MODES: dict[str, Callable[[ServerProcess, str, Plan], Outcome]] = {
    "settled": run_settled,
    "backlog": run_backlog,
}
MODE_LABEL = {
    "settled": "the group settled first, then the records written",
    "backlog": "the records waiting, then the group started",
}


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
                attempt(samples, host, "backlog", kind, replace(plan, records=WARM_UP_RECORDS))
        for run in range(plan.runs):
            for side, host in hosts.items():
                for mode in MODES:
                    for kind in KINDS:
                        outcome = attempt(samples, host, mode, kind, plan)
                        if outcome is None:
                            continue
                        key = f"{mode}_{kind}"
                        samples.add(key, side, outcome.wall_s)
                        samples.add(f"{key}_busy", side, outcome.busy_s)
                        samples.working.setdefault((key, side), []).append(outcome.working)
                        samples.busiest.setdefault((key, side), []).append(outcome.busiest)
                        samples.handled.setdefault((key, side), []).append(outcome.handled)
                        log(
                            f"run {run + 1}: {side} {mode} {KIND_LABEL[kind]}: "
                            f"{_s(outcome.wall_s)} wall, {_s(outcome.busy_s)} handling, "
                            f"{outcome.working} members worked, the busiest "
                            f"{outcome.busiest} records, {outcome.handled} handled"
                        )
    return samples


def attempt(
    samples: Samples, host: ServerProcess, mode: str, kind: str, plan: Plan
) -> Outcome | None:
    """One run, or None where the side does not serve share groups (noted once)."""
    if kind == "share" and host.kind in samples.not_served:
        return None
    try:
        return MODES[mode](host, kind, plan)
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


def _range(found: list[int]) -> str:
    if not found:
        return "n/a"
    low, high = min(found), max(found)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def table(samples: Samples, plan: Plan) -> list[str]:
    lines = [
        f"| {plan.records:,} records, 10 ms each, 18 consumers, 6 partitions | minibroker "
        f"| {KAFKA_NAME} | minibroker / Kafka |",
        "|---|---|---|---|",
    ]
    for mode, how in MODE_LABEL.items():
        lines.append(f"| **{how}** | | | |")
        for kind in KINDS:
            key, label = f"{mode}_{kind}", KIND_LABEL[kind]
            for metric, what in ((key, "wall time"), (f"{key}_busy", "first to last record")):
                if mode == "settled" and metric.endswith("_busy"):
                    continue  # timed from the writing: the wall time is the figure
                cells = [_cell(samples, metric, kind, side) for side in SIDES]
                ratio = _ratio(
                    samples.median(metric, "minibroker"), samples.median(metric, "kafka")
                )
                lines.append(f"| {label}: {what} | {cells[0]} | {cells[1]} | {ratio} |")
            counts = [
                "not served"
                if kind == "share" and side in samples.not_served
                else f"{_range(samples.working.get((key, side), []))}, "
                f"{_range(samples.busiest.get((key, side), []))}"
                for side in SIDES
            ]
            lines.append(
                f"| {label}: members that handled records, records of the busiest "
                f"| {counts[0]} | {counts[1]} | |"
            )
        ratios = [
            _ratio(samples.median(f"{mode}_share", side), samples.median(f"{mode}_consumer", side))
            for side in SIDES
        ]
        lines.append(f"| share group / consumer group, wall time | {ratios[0]} | {ratios[1]} | |")
    return lines


def notes(samples: Samples, plan: Plan, load: tuple[str, str]) -> list[str]:
    ideal_consumer = plan.records / PARTITIONS * HANDLER_S
    ideal_share = plan.records / MEMBERS * HANDLER_S
    lines = [
        f"- Medians of {plan.runs} run{'s' if plan.runs != 1 else ''} per side, way and "
        f"group kind, sides alternating run by run; ranges for the member counts. Machine: "
        f"{os.cpu_count()} CPUs shared with other work (load average {load[0]} at the "
        f"start, {load[1]} at the end), Python {platform.python_version()}, confluent-kafka "
        f"{client_version()}.",
        "- Every run has a fresh 6-partition topic and a fresh group of 18 consumers that "
        "start at once, each polling in a thread of its own and sleeping 10 ms per record; "
        f"records are written in batches of at most {BATCH}.",
        "- Group settled first: the consumers start on the empty topic; a consumer group "
        "counts as settled when every member has been assigned and together they hold each "
        f"partition once, unchanged for {SETTLE_QUIET_S:.0f} s; a share group (its client "
        "reports no assignment) when every member has handled a record, with a backlog of "
        f"{SETTLE_BACKLOG} records kept waiting meanwhile, the backlog is drained, and one "
        "more heartbeat interval (share.heartbeat.interval.ms, 5 s on both) and 1 s have "
        "passed, for a rebalanced assignment to reach every member. Then "
        f"{plan.records:,} records are written; the wall time runs from the start of the "
        "writing until every one has been handled.",
        f"- Records waiting: {plan.records:,} records are written first, then the consumers "
        "start; the wall time runs from the first consumer's creation until every record "
        "has been handled, so it includes the group forming; first to last record runs from "
        "the first record handled to the last.",
        f"- The handlers alone bound the figures from below: {ideal_consumer:.1f} s when 6 "
        f"members share the work, {ideal_share:.1f} s when 18 do.",
        "- Consumer group: confluent-kafka `Consumer` with librdkafka's defaults (classic "
        "protocol, eager `range,roundrobin` assignors, heartbeat.interval.ms 3000) and "
        "auto.offset.reset=earliest. Share group: `ShareConsumer` with "
        f"max.poll.records={BATCH} and implicit acknowledgement; the group's "
        "share.auto.offset.reset is set to earliest (IncrementalAlterConfigs) before its "
        "members start. A broker may hand one member a whole stored batch, hence the "
        "batches of 10.",
        f"- {KAFKA_NAME}: one KRaft node from its own jars (`bench/runner.py serve kafka`) "
        "with the settings of `minibroker.testing.real_kafka.TEST_SETTINGS`; share groups "
        "with its defaults (group.share.heartbeat.interval.ms 5,000: a member is given "
        "partitions in a heartbeat answer). minibroker: a fresh broker with its defaults.",
        f"- Capped runs (over {plan.cap_s:.0f} s) count as missing; a median with a capped "
        "run in it is shown as capped.",
    ]
    for side, why in samples.not_served.items():
        lines.append(f"- {side} did not serve share groups in this run: {why}")
    if samples.kafka_missing is not None:
        lines.append(f"- Not measured beside {KAFKA_NAME}: {samples.kafka_missing}")
    redelivered = [
        f"{key.replace('_', ' ')} group on {side}: {max(counts) - plan.records:,}"
        for (key, side), counts in sorted(samples.handled.items())
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
