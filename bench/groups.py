"""Consumer-group benchmarks: minibroker side by side with the librdkafka mock cluster and
with Apache Kafka 4.4.0.

    python -m bench.groups [--quick] [--runs N] [--kafka-runs N]

The brokers run in child processes (bench/runner.py) and are driven by the same client,
confluent-kafka, with the same settings, in the same run, alternating run by run. Every
consumer polls in a thread of its own and the rebalance callbacks stamp the times, so a
figure is what an application would see. Medians over the runs; the tables are printed
and written to bench/GROUPS_RESULTS.md.

Measured:
- subscribe to first assignment, one consumer, librdkafka's default settings;
- a settled group of 3 gets a 4th member (heartbeat.interval.ms=100): time from the new
  member's subscribe until all four hold their new assignment; once with the default
  session timeout (45 s) and once with session.timeout.ms=6000;
- minibroker only: the same join with 1, 10 and 50 members already in the group and 10
  or 1,000 partitions, plus how long those members took to form the group;
- beside Kafka 4.4.0 (one KRaft node from its jars, started once; skipped when Java or the
  jars are missing), a 6-partition topic, with Kafka 4's consumer group protocol
  (group.protocol=consumer, KIP-848) and with classic groups: subscribe to first
  assignment, and a group of 3 getting a 4th member, timed until all four hold a balanced
  assignment (2, 2, 1, 1). Under that protocol the broker sets the heartbeat interval,
  which bounds the join (Kafka: 5 s by default, minibroker: 0.5 s); a row with both at
  0.5 s is measured too. Adds about a minute and a half to the run.
"""

from __future__ import annotations

import os
import platform
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer
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
    log,
    run_heading,
    server,
    timed,
    write_results,
)
from bench.runner import KAFKA_LINE
from minibroker.testing import jvm
from minibroker.testing.real_kafka import unavailable_reason

RESULTS = Path(__file__).resolve().parent / "GROUPS_RESULTS.md"
SIDES = ("minibroker", "mock")
KAFKA_SIDES = ("minibroker", "kafka")
KAFKA_NAME = f"Kafka {jvm.KAFKA_BROKERS[KAFKA_LINE]}"
QUIET = {"log_level": 3}
JOIN_PARTITIONS = 12
FIRST_PARTITIONS = 6
SETTLE_QUIET_S = 0.3  # a formed group must stay unchanged this long before a join is timed
# Kafka 4's consumer group protocol (KIP-848): the broker assigns and sets the heartbeat
# interval; session.timeout.ms, heartbeat.interval.ms and partition.assignment.strategy
# are refused on such a consumer, so it carries this setting only
CONSUMER_PROTOCOL: dict[str, Any] = {"group.protocol": "consumer"}
KIP848_PARTITIONS = 6
HEARTBEAT_CONFIG = "consumer.heartbeat.interval.ms"  # a group config (resource type GROUP)
LIKE_FOR_LIKE_MS = 500  # minibroker's default group.consumer.heartbeat.interval.ms
# Kafka refuses a group's heartbeat interval below group.consumer.min.heartbeat.interval.ms
# (default 5000): lowered so that a group of the like-for-like row may be given 500 ms.
# Kafka's default interval (group.consumer.heartbeat.interval.ms, 5000) stays as it is.
KAFKA_SETTINGS = {"group.consumer.min.heartbeat.interval.ms": str(LIKE_FOR_LIKE_MS)}
LIBRDKAFKA_HEARTBEAT_MS = 3000  # librdkafka's default heartbeat.interval.ms


# The sizes of this benchmark's runs; each bench module has its own (harness.chosen_plan).
@dataclass(frozen=True)
class Plan:
    runs: int
    slow_mock_runs: int  # the mock's default-session rebalance takes ~44 s a run
    growth_members: tuple[int, ...]
    growth_partitions: tuple[int, ...]
    growth_runs: int
    cap_s: float
    kafka_runs: int  # the rows beside Kafka 4.4.0: its consumer-protocol join takes ~5-10 s


FULL = Plan(
    runs=5,
    slow_mock_runs=3,
    growth_members=(1, 10, 50),
    growth_partitions=(10, 1000),
    growth_runs=3,
    cap_s=60.0,
    kafka_runs=3,
)
QUICK = Plan(
    runs=3,
    slow_mock_runs=1,
    growth_members=(1, 10, 50),
    growth_partitions=(10, 1000),
    growth_runs=3,
    cap_s=60.0,
    kafka_runs=1,
)


# --- a group of consumers, each polling in its own thread ---


class Member:
    def __init__(self, bootstrap: str, topic: str, group: str, settings: dict[str, Any]) -> None:
        self.events: list[tuple[float, str, tuple[int, ...]]] = []
        # what the member holds: eager callbacks name the whole assignment, incremental
        # ones (the consumer group protocol) the partitions added or taken away
        self.owned: frozenset[int] = frozenset()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, **QUIET, **settings}
        )
        self.subscribed_at = time.perf_counter()
        self.consumer.subscribe([topic], on_assign=self._on("assign"), on_revoke=self._on("revoke"))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on(self, kind: str) -> Callable[[Any, list[Any]], None]:
        def record(_: Any, partitions: list[Any]) -> None:
            stamp = time.perf_counter()
            numbers = tuple(sorted(p.partition for p in partitions))
            with self._lock:
                self.events.append((stamp, kind, numbers))
                if kind == "assign":
                    self.owned |= set(numbers)
                else:
                    self.owned -= set(numbers)

        return record

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()

    def latest(self) -> tuple[float, str, tuple[int, ...]] | None:
        with self._lock:
            return self.events[-1] if self.events else None

    def holding(self) -> tuple[frozenset[int], float]:
        """(partitions held, time of the last change; 0.0 before any)."""
        with self._lock:
            return self.owned, (self.events[-1][0] if self.events else 0.0)

    def stop(self) -> None:
        self._stop.set()

    def join(self) -> None:
        self._thread.join(30)


def new_group_id() -> str:
    return f"bench-{uuid.uuid4().hex[:10]}"


class Group:
    """Consumers of one group. Settled means, by default: every member's latest callback
    is an assignment made after the timed event, and together they cover every partition
    once. With `balanced`: what the members hold covers every partition once and is spread
    as evenly as it can be (6 over 4: 2, 2, 1, 1), and the last change came after the
    timed event; the criterion for incremental callbacks, where a member that keeps its
    partitions hears nothing."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        settings: dict[str, Any],
        balanced: bool = False,
        group_id: str | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.settings = settings
        self.balanced = balanced
        self.group_id = group_id or new_group_id()
        self.members: list[Member] = []

    def add(self, count: int = 1) -> float:
        """Start `count` members; returns when the first one subscribed."""
        started = time.perf_counter()
        for _ in range(count):
            self.members.append(Member(self.bootstrap, self.topic, self.group_id, self.settings))
        return started

    def settled_since(self, moment: float) -> float | None:
        """Time of the last assignment if every member was assigned after `moment` and the
        assignments cover each partition exactly once; else None."""
        if self.balanced:
            return self._balanced_since(moment)
        latest = [m.latest() for m in self.members]
        if any(e is None or e[1] != "assign" or e[0] < moment for e in latest):
            return None
        owned = sorted(p for e in latest if e is not None for p in e[2])
        if owned != list(range(self.partitions)):
            return None
        return max(e[0] for e in latest if e is not None)

    def _balanced_since(self, moment: float) -> float | None:
        """Time of the last change if the members' holdings are balanced and cover each
        partition exactly once, and that change came after `moment`; else None."""
        held = [m.holding() for m in self.members]
        share, extra = divmod(self.partitions, len(held))
        even = [share] * (len(held) - extra) + [share + 1] * extra
        if sorted(len(owned) for owned, _ in held) != even:
            return None
        if sorted(p for owned, _ in held for p in owned) != list(range(self.partitions)):
            return None
        last = max(stamp for _, stamp in held)
        return last if last >= moment else None

    def wait_settled(self, moment: float, cap_s: float) -> float | None:
        """Seconds from `moment` to the group settling, or None past the cap."""
        deadline = time.perf_counter() + cap_s
        while time.perf_counter() < deadline:
            done = self.settled_since(moment)
            if done is not None:
                return done - moment
            time.sleep(0.002)
        return None

    def wait_quiet(self, cap_s: float) -> bool:
        """Settled and unchanged for SETTLE_QUIET_S."""
        deadline = time.perf_counter() + cap_s
        while time.perf_counter() < deadline:
            done = self.settled_since(0.0)
            if done is not None and time.perf_counter() - done >= SETTLE_QUIET_S:
                return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        for member in self.members:
            member.stop()
        for member in self.members:
            member.join()


@contextmanager
def group(
    bootstrap: str,
    topic: str,
    partitions: int,
    settings: dict[str, Any],
    balanced: bool = False,
    group_id: str | None = None,
) -> Iterator[Group]:
    made = Group(bootstrap, topic, partitions, settings, balanced, group_id)
    try:
        yield made
    finally:
        made.close()


# --- measurements ---


def first_assignment(
    bootstrap: str, topic: str, cap_s: float, settings: dict[str, Any] | None = None
) -> float | None:
    """Seconds from subscribe() to the first assignment; default client settings plus
    `settings`."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": new_group_id(), **QUIET, **(settings or {})}
    )
    assigned: list[float] = []
    try:
        started = time.perf_counter()
        consumer.subscribe([topic], on_assign=lambda *_: assigned.append(time.perf_counter()))
        while not assigned and time.perf_counter() - started < cap_s:
            consumer.poll(0.01)
        return assigned[0] - started if assigned else None
    finally:
        consumer.close()


def join_one_more(
    bootstrap: str,
    topic: str,
    partitions: int,
    existing: int,
    settings: dict[str, Any],
    cap_s: float,
    balanced: bool = False,
    group_id: str | None = None,
) -> tuple[float | None, float | None]:
    """(seconds for `existing` members to form the group, seconds for the group to settle
    after one more member subscribes); None where the cap was hit. `balanced`: settled
    as Group says with it."""
    with group(bootstrap, topic, partitions, settings, balanced, group_id) as members:
        started = members.add(existing)
        formed = members.wait_settled(started, cap_s)
        if formed is None or not members.wait_quiet(cap_s):
            return formed, None
        joined_at = members.add(1)
        return formed, members.wait_settled(joined_at, cap_s)


@dataclass
class Samples(harness.Samples):
    intervals: dict[tuple[str, str], str] = field(default_factory=dict)  # (metric, side)
    kafka_missing: str | None = None  # why the rows beside Kafka were not measured


HEARTBEAT_100: dict[str, Any] = {"heartbeat.interval.ms": 100}
SESSION_6S = {"heartbeat.interval.ms": 100, "session.timeout.ms": 6000}


def measure(plan: Plan, log: Callable[[str], None]) -> Samples:
    samples = Samples()
    with server("minibroker") as minibroker, server("mock") as mock:
        hosts: dict[str, ServerProcess] = {"minibroker": minibroker, "mock": mock}
        for host in hosts.values():
            host.create_topic("first", FIRST_PARTITIONS)
            host.create_topic("join", JOIN_PARTITIONS)
        for run in range(plan.runs):
            for side, host in hosts.items():
                seconds = first_assignment(host.bootstrap, "first", plan.cap_s)
                samples.add("first", side, seconds)
                log(f"run {run + 1}: {side} subscribe -> first assignment {_ms(seconds)}")
        for run in range(plan.runs):
            for side, host in hosts.items():
                _, seconds = join_one_more(
                    host.bootstrap, "join", JOIN_PARTITIONS, 3, SESSION_6S, plan.cap_s
                )
                samples.add("fourth_6s", side, seconds)
                log(f"run {run + 1}: {side} 4th member, session 6 s, settled {_ms(seconds)}")
        for run in range(plan.runs):
            for side, host in hosts.items():
                if side == "mock" and run >= plan.slow_mock_runs:
                    continue
                _, seconds = join_one_more(
                    host.bootstrap, "join", JOIN_PARTITIONS, 3, HEARTBEAT_100, plan.cap_s
                )
                samples.add("fourth", side, seconds)
                log(f"run {run + 1}: {side} 4th member, default session, settled {_ms(seconds)}")
        for partitions in plan.growth_partitions:
            topic = f"growth-{partitions}"
            minibroker.create_topic(topic, partitions)
            for members in plan.growth_members:
                for run in range(plan.growth_runs):
                    formed, seconds = join_one_more(
                        minibroker.bootstrap, topic, partitions, members, HEARTBEAT_100, plan.cap_s
                    )
                    samples.add(f"form_{members}_{partitions}", "minibroker", formed)
                    samples.add(f"join_{members}_{partitions}", "minibroker", seconds)
                    log(
                        f"run {run + 1}: minibroker {members} members, {partitions} partitions:"
                        f" formed {_ms(formed)}, one more joined {_ms(seconds)}"
                    )
    measure_beside_kafka(plan, samples, log)
    return samples


# --- beside Kafka 4.4.0: the consumer group protocol, and classic groups ---


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def set_heartbeat_interval(bootstrap: str, group_id: str, ms: int) -> None:
    """Give a (not yet existing) consumer-protocol group its own heartbeat interval."""
    entry = ConfigEntry(HEARTBEAT_CONFIG, str(ms), incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=[entry])
    admin = _admin(bootstrap)  # kept alive until the answer: a dropped one cancels it
    admin.incremental_alter_configs([resource])[resource].result(15)


def heartbeat_interval_ms(bootstrap: str, group_id: str) -> int:
    """The heartbeat interval the broker gives members of a consumer-protocol group, as
    its DescribeConfigs of the group says (its own setting, else the broker's)."""
    resource = ConfigResource(ResourceType.GROUP, group_id)
    admin = _admin(bootstrap)
    described = admin.describe_configs([resource])[resource].result(15)
    return int(described[HEARTBEAT_CONFIG].value)


def measure_beside_kafka(plan: Plan, samples: Samples, log: Callable[[str], None]) -> None:
    """(a) subscribe to first assignment and (b) a 4th member joining a group of 3, with
    the consumer group protocol and with classic groups, minibroker and Kafka 4.4.0 side
    by side, alternating run by run. 6 partitions; settled = balanced (Group)."""
    missing = unavailable_reason(KAFKA_LINE)
    if missing is not None:
        samples.kafka_missing = missing
        log(f"rows beside {KAFKA_NAME} skipped: {missing}")
        return
    log(f"starting {KAFKA_NAME} and a fresh minibroker")
    with server("minibroker") as minibroker, server("kafka", KAFKA_SETTINGS) as kafka:
        hosts: dict[str, ServerProcess] = {"minibroker": minibroker, "kafka": kafka}
        for side, host in hosts.items():
            host.create_topic("kip848-first", KIP848_PARTITIONS)
            host.create_topic("kip848-join", KIP848_PARTITIONS)
            # untimed: the first group of each protocol on a broker loads code (Kafka: JIT)
            # and waits for the new topics to reach the group coordinator
            for key, settings in (("cp_first", CONSUMER_PROTOCOL), ("classic_first", {})):
                seconds = first_assignment(host.bootstrap, "kip848-first", plan.cap_s, settings)
                samples.add(f"{key}_untimed", side, seconds)
            broker_ms = heartbeat_interval_ms(host.bootstrap, new_group_id())
            for key in ("cp_first", "cp_fourth"):
                samples.intervals[key, side] = f"{broker_ms:,} ms"
            samples.intervals["classic_first", side] = f"{LIBRDKAFKA_HEARTBEAT_MS:,} ms"
            samples.intervals["classic_fourth", side] = (
                f"{HEARTBEAT_100['heartbeat.interval.ms']} ms"
            )
        for run in range(plan.kafka_runs):
            for side, host in hosts.items():
                for key, settings in (("cp_first", CONSUMER_PROTOCOL), ("classic_first", {})):
                    seconds = first_assignment(host.bootstrap, "kip848-first", plan.cap_s, settings)
                    samples.add(key, side, seconds)
                    log(f"run {run + 1}: {side} {key} subscribe -> first assignment {_ms(seconds)}")
        for run in range(plan.kafka_runs):
            for side, host in hosts.items():
                for key, settings in (
                    ("cp_fourth", CONSUMER_PROTOCOL),
                    ("cp_fourth_same", CONSUMER_PROTOCOL),
                    ("classic_fourth", HEARTBEAT_100),
                ):
                    group_id = new_group_id()
                    if key == "cp_fourth_same":
                        set_heartbeat_interval(host.bootstrap, group_id, LIKE_FOR_LIKE_MS)
                        if run == 0:
                            configured = heartbeat_interval_ms(host.bootstrap, group_id)
                            samples.intervals[key, side] = f"{configured:,} ms"
                    formed, seconds = join_one_more(
                        host.bootstrap,
                        "kip848-join",
                        KIP848_PARTITIONS,
                        3,
                        settings,
                        plan.cap_s,
                        balanced=True,
                        group_id=group_id,
                    )
                    samples.add(f"{key}_formed", side, formed)
                    samples.add(key, side, seconds)
                    log(
                        f"run {run + 1}: {side} {key}: 3 formed {_ms(formed)}, "
                        f"4th joined, balanced {_ms(seconds)}"
                    )


# --- report ---


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "capped"
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.1 else f"{seconds * 1000:.1f} ms"


def table(samples: Samples, plan: Plan) -> list[str]:
    rows = [
        ("subscribe to first assignment, one consumer, default client settings", "first", 0.100),
        ("group of 3 settles after a 4th joins, heartbeat.interval.ms=100", "fourth", 0.500),
        ("same, with session.timeout.ms=6000 on every member", "fourth_6s", 0.500),
    ]
    lines = [
        "| metric | minibroker | librdkafka mock | minibroker / mock | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for label, key, target in rows:
        mb, mock = samples.median(key, "minibroker"), samples.median(key, "mock")
        ratio = f"{mb / mock:.3f}" if mb is not None and mock else "n/a"
        met = "n/a" if mb is None else ("yes" if mb <= target else "**no**")
        mock_text = _ms(mock) if mock is not None else f"> {plan.cap_s:.0f} s (capped)"
        lines.append(
            f"| {label} | {_ms(mb)} | {mock_text} | {ratio} | <= {target * 1000:.0f} ms | {met} |"
        )
    lines += [
        "",
        "Rebalance growth on minibroker (heartbeat.interval.ms=100): a group of N members "
        "forms, stays settled, then one more member subscribes.",
        "",
        "| members before the join | partitions | N members form the group | "
        "N + 1 settle after the join | join time / join time with 1 member, 10 partitions |",
        "|---|---|---|---|---|",
    ]
    base_key = f"join_{plan.growth_members[0]}_{plan.growth_partitions[0]}"
    base = samples.median(base_key, "minibroker")
    for partitions in plan.growth_partitions:
        for members in plan.growth_members:
            formed = samples.median(f"form_{members}_{partitions}", "minibroker")
            joined = samples.median(f"join_{members}_{partitions}", "minibroker")
            growth = f"{joined / base:.2f}" if joined is not None and base else "n/a"
            lines.append(
                f"| {members} | {partitions:,} | {_ms(formed)} | {_ms(joined)} | {growth} |"
            )
    return lines


KAFKA_ROWS = (
    # label, group protocol, metric, where the interval is set, goal
    (
        f"subscribe to first assignment, one consumer, {KIP848_PARTITIONS} partitions",
        "consumer",
        "cp_first",
        "broker",
        "ahead of Kafka",
    ),
    ("same", "classic", "classic_first", "client", ""),
    (
        f"a group of 3 gets a 4th member ({KIP848_PARTITIONS} partitions): its subscribe "
        "until all four hold 2, 2, 1, 1",
        "consumer",
        "cp_fourth",
        "broker",
        "ahead of Kafka",
    ),
    (
        f"same, each broker giving the group {HEARTBEAT_CONFIG}={LIKE_FOR_LIKE_MS}",
        "consumer",
        "cp_fourth_same",
        "group config",
        "",
    ),
    (
        "same (a 4th member), heartbeat.interval.ms=100 on every member",
        "classic",
        "classic_fourth",
        "client",
        "",
    ),
)


def kafka_table(samples: Samples, plan: Plan) -> list[str]:
    if samples.kafka_missing is not None:
        return [f"Not measured beside {KAFKA_NAME}: {samples.kafka_missing}"]
    lines = [
        f"| metric | group protocol | heartbeat interval, minibroker / Kafka | minibroker "
        f"| {KAFKA_NAME} | minibroker / Kafka | goal | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, protocol, key, where, goal in KAFKA_ROWS:
        mb, kafka = samples.median(key, "minibroker"), samples.median(key, "kafka")
        ratio = f"{mb / kafka:.3f}" if mb is not None and kafka else "n/a"
        met = ""
        if goal:
            met = "n/a" if mb is None else ("yes" if kafka is None or mb < kafka else "**no**")
        intervals = " / ".join(samples.intervals.get((key, side), "?") for side in KAFKA_SIDES)
        capped = f"> {plan.cap_s:.0f} s (capped)"
        lines.append(
            f"| {label} | {protocol} | {intervals} ({where}) "
            f"| {_ms(mb) if mb is not None else capped} "
            f"| {_ms(kafka) if kafka is not None else capped} | {ratio} | {goal} | {met} |"
        )
    return lines


def kafka_notes(samples: Samples, plan: Plan) -> list[str]:
    if samples.kafka_missing is not None:
        return []

    def both(key: str) -> str:
        return " / ".join(_ms(samples.median(key, side)) for side in KAFKA_SIDES)

    runs = f"{plan.kafka_runs} run{'s' if plan.kafka_runs != 1 else ''}"
    return [
        f"- Beside {KAFKA_NAME}: medians of {runs} per side, sides alternating run by run, "
        "after one first assignment per protocol on each broker that the table leaves out "
        "(the first group of a kind loads code, and Kafka's JIT is cold), minibroker / Kafka: "
        f"consumer protocol {both('cp_first_untimed')}, classic {both('classic_first_untimed')}"
        ". Kafka: one "
        "KRaft node from its own jars (`bench/runner.py serve kafka`), the settings of "
        "`minibroker.testing.real_kafka.TEST_SETTINGS` (group.initial.rebalance.delay.ms=0) "
        f"and group.consumer.min.heartbeat.interval.ms={LIKE_FOR_LIKE_MS} (its default, 5000, "
        f"would refuse a group interval of {LIKE_FOR_LIKE_MS} ms); its default interval is "
        "left as it is. minibroker: a fresh broker with its defaults.",
        "- Consumer group protocol rows: confluent-kafka consumers with only "
        "`group.protocol=consumer` added (session timeout, heartbeat interval and assignor "
        "are the broker's: server-side `uniform` on both). The interval column is what each "
        f"broker's DescribeConfigs of the group reports for {HEARTBEAT_CONFIG}: "
        "minibroker's default is 500 ms (a test-friendly deviation), Kafka's 5,000 ms. "
        "Classic rows: librdkafka's defaults (eager `range,roundrobin`, heartbeat.interval.ms "
        "3000) plus what the row names; their interval is the client's.",
        "- Settled, for every row of this table: what the members hold (tracked from the "
        "callbacks, which are incremental under the consumer group protocol) covers the 6 "
        "partitions once, split 2, 2, 1, 1, and the last change came after the 4th "
        "subscribed; the time is that last callback's.",
        "- What bounds the figures: a consumer-protocol member is given partitions in a "
        "heartbeat answer. Its first heartbeat finds the partitions owned by others; they "
        "learn to give one up each at their next heartbeat (within one interval), and the "
        "newcomer is handed them at its own next heartbeat, one interval after its first. "
        "So the join row is about one heartbeat interval plus round trips on both brokers "
        "(5 s on Kafka at its default, 0.5 s on minibroker); the row with both at 500 ms "
        "compares the brokers at the same interval. The first-assignment row waits for no "
        "interval: the first heartbeat's answer carries the assignment, then the client "
        "looks up the topics' names by id (Metadata). The classic join is about two of the "
        "client's 100 ms heartbeats (the existing members learn of the rebalance at their "
        "next heartbeat, then rejoin and sync).",
        "- Forming the group of 3 before each join (the three subscribe together), "
        "minibroker / Kafka: consumer protocol at the brokers' defaults "
        f"{both('cp_fourth_formed')}, both at {LIKE_FOR_LIKE_MS} ms "
        f"{both('cp_fourth_same_formed')}, classic {both('classic_fourth_formed')}.",
    ]


def notes(samples: Samples, plan: Plan, load: tuple[str, str]) -> list[str]:
    import confluent_kafka

    mock_slow = samples.count("fourth", "mock")
    return [
        f"- Medians of {plan.runs} runs per side ({mock_slow} for the mock's default-session "
        f"join, which takes most of a minute a run), {plan.growth_runs} per growth point; "
        f"sides alternate run by run. Machine: {os.cpu_count()} CPUs shared with other work "
        f"(load average {load[0]} at the start, {load[1]} at the end), Python "
        f"{platform.python_version()}, confluent-kafka {confluent_kafka.__version__} "
        f"(librdkafka {confluent_kafka.libversion()[0]}).",
        "- Both brokers run in child processes (`bench/runner.py serve`), the consumers in "
        "this one, each polling in its own thread; times come from the rebalance callbacks. "
        "A group counts as settled when every member's latest callback is an assignment made "
        "after the timed event and the assignments cover every partition exactly once.",
        "- Client settings: librdkafka defaults (eager `range,roundrobin` assignors, "
        "session.timeout.ms 45000, heartbeat.interval.ms 3000) plus what each row names. "
        f"Topics: {FIRST_PARTITIONS} partitions for the first row, {JOIN_PARTITIONS} for the "
        "joins; the mock's topics are made with `rd_kafka_mock_topic_create`.",
        "- minibroker runs with its defaults: group.initial.rebalance.delay.ms=0 (Kafka's "
        "default is 3000). The mock holds the first join of an empty group for 3 s, and in "
        "these runs a join into a settled group completed only after about "
        "session.timeout.ms - 1 s (44 s with the default 45 s, 5 s with 6 s), although the "
        "existing members heartbeat every 100 ms.",
        "- On minibroker a join into a settled group costs about two heartbeat intervals: "
        "the newcomer's JoinGroup (after MEMBER_ID_REQUIRED) opens the rebalance, the others "
        "learn of it from their next heartbeat and rejoin, then the leader's SyncGroup "
        "completes it. Forming a group of 10 or 50 members at once varies from run to run: "
        "when members arrive while a generation is completing, some SyncGroups are answered "
        "REBALANCE_IN_PROGRESS and those clients have been seen to rejoin 1-2 s later.",
        f"- Capped runs (over {plan.cap_s:.0f} s) count as missing; a median with a capped "
        "run in it is shown as capped.",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(
        "groups",
        __doc__,
        "3 runs, one run of the mock's 44 s join (smoke)",
        "runs per side (default 5, quick 3)",
    )
    parser.add_argument(
        "--kafka-runs", type=int, help="runs per side beside Kafka 4.4.0 (default 3, quick 1)"
    )
    args = parser.parse_args(argv)
    plan = chosen_plan(args.quick, FULL, QUICK, runs=args.runs, kafka_runs=args.kafka_runs)

    run = timed(lambda: measure(plan, log))
    samples = run.result
    beside_kafka = [
        f"Beside {KAFKA_NAME}: Kafka 4's consumer group protocol (group.protocol=consumer) "
        "and classic groups; ratios are minibroker / Kafka.",
        "",
        *kafka_table(samples, plan),
    ]
    body = "\n".join([*table(samples, plan), "", *beside_kafka])
    print(body)
    command = f"python -m bench.groups{' --quick' if args.quick else ''}"
    kind = "quick run" if args.quick else "full run"
    document = "\n".join(
        [
            "# Consumer-group benchmarks",
            "",
            f"{run_heading(command, kind, run.elapsed)}. Times are lower-is-better; ratios "
            f"are minibroker / mock, and minibroker / Kafka in the table beside {KAFKA_NAME}.",
            "",
            body,
            "",
            *notes(samples, plan, run.load),
            *kafka_notes(samples, plan),
            "",
        ]
    )
    write_results(RESULTS, document, run.elapsed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
