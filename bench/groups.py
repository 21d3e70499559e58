"""Consumer-group benchmarks: minibroker side by side with the librdkafka mock cluster.

    python -m bench.groups [--quick] [--runs N]

Both brokers run in child processes (bench/runner.py) and are driven by the same client,
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
  or 1,000 partitions, plus how long those members took to form the group.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from bench.core import ServerProcess, server

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "GROUPS_RESULTS.md"
SIDES = ("minibroker", "mock")
QUIET = {"log_level": 3}
JOIN_PARTITIONS = 12
FIRST_PARTITIONS = 6
SETTLE_QUIET_S = 0.3  # a formed group must stay unchanged this long before a join is timed


@dataclass(frozen=True)
class Plan:
    runs: int
    slow_mock_runs: int  # the mock's default-session rebalance takes ~44 s a run
    growth_members: tuple[int, ...]
    growth_partitions: tuple[int, ...]
    growth_runs: int
    cap_s: float


FULL = Plan(
    runs=5,
    slow_mock_runs=3,
    growth_members=(1, 10, 50),
    growth_partitions=(10, 1000),
    growth_runs=3,
    cap_s=60.0,
)
QUICK = Plan(
    runs=3,
    slow_mock_runs=1,
    growth_members=(1, 10, 50),
    growth_partitions=(10, 1000),
    growth_runs=3,
    cap_s=60.0,
)


# --- a group of consumers, each polling in its own thread ---


class Member:
    def __init__(self, bootstrap: str, topic: str, group: str, settings: dict[str, Any]) -> None:
        self.events: list[tuple[float, str, tuple[int, ...]]] = []
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
            with self._lock:
                self.events.append((stamp, kind, tuple(sorted(p.partition for p in partitions))))

        return record

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()

    def latest(self) -> tuple[float, str, tuple[int, ...]] | None:
        with self._lock:
            return self.events[-1] if self.events else None

    def stop(self) -> None:
        self._stop.set()

    def join(self) -> None:
        self._thread.join(30)


class Group:
    def __init__(
        self, bootstrap: str, topic: str, partitions: int, settings: dict[str, Any]
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.settings = settings
        self.group_id = f"bench-{uuid.uuid4().hex[:10]}"
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
        latest = [m.latest() for m in self.members]
        if any(e is None or e[1] != "assign" or e[0] < moment for e in latest):
            return None
        owned = sorted(p for e in latest if e is not None for p in e[2])
        if owned != list(range(self.partitions)):
            return None
        return max(e[0] for e in latest if e is not None)

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
def group(bootstrap: str, topic: str, partitions: int, settings: dict[str, Any]) -> Iterator[Group]:
    made = Group(bootstrap, topic, partitions, settings)
    try:
        yield made
    finally:
        made.close()


# --- measurements ---


def first_assignment(bootstrap: str, topic: str, cap_s: float) -> float | None:
    """Seconds from subscribe() to the first assignment, default client settings."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:10]}", **QUIET}
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
) -> tuple[float | None, float | None]:
    """(seconds for `existing` members to form the group, seconds for the group to settle
    after one more member subscribes); None where the cap was hit."""
    with group(bootstrap, topic, partitions, settings) as members:
        started = members.add(existing)
        formed = members.wait_settled(started, cap_s)
        if formed is None or not members.wait_quiet(cap_s):
            return formed, None
        joined_at = members.add(1)
        return formed, members.wait_settled(joined_at, cap_s)


@dataclass
class Samples:
    values: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)

    def add(self, metric: str, side: str, value: float | None) -> None:
        self.values.setdefault(metric, {}).setdefault(side, []).append(value)

    def median(self, metric: str, side: str) -> float | None:
        found = self.values.get(metric, {}).get(side, [])
        if not found or any(v is None for v in found):
            return None
        return statistics.median(v for v in found if v is not None)

    def capped(self, metric: str, side: str) -> int:
        return sum(1 for v in self.values.get(metric, {}).get(side, []) if v is None)

    def count(self, metric: str, side: str) -> int:
        return len(self.values.get(metric, {}).get(side, []))


HEARTBEAT_100 = {"heartbeat.interval.ms": 100}
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
    return samples


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
    parser = argparse.ArgumentParser(
        prog="python -m bench.groups",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 runs, one run of the mock's 44 s join (smoke)"
    )
    parser.add_argument("--runs", type=int, help="runs per side (default 5, quick 3)")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.runs is not None:
        plan = Plan(**{**plan.__dict__, "runs": max(1, args.runs)})

    def log(text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    load_before = f"{os.getloadavg()[0]:.1f}"
    started = time.perf_counter()
    samples = measure(plan, log)
    elapsed = time.perf_counter() - started
    load = (load_before, f"{os.getloadavg()[0]:.1f}")
    body = "\n".join(table(samples, plan))
    print(body)
    kind = "quick run" if args.quick else "full run"
    document = "\n".join(
        [
            "# Consumer-group benchmarks",
            "",
            f"`python -m bench.groups{' --quick' if args.quick else ''}`, {kind}, "
            f"{time.strftime('%Y-%m-%d')}, {elapsed:.0f} s. Times are lower-is-better; ratios "
            "are minibroker / mock.",
            "",
            body,
            "",
            *notes(samples, plan, load),
            "",
        ]
    )
    RESULTS.write_text(document)
    print(f"\nwritten to {RESULTS.relative_to(ROOT)} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
