"""Soak: many clients against one broker process for minutes, every record accounted for.

    python -m bench.soak [--duration 120] [--clients 100] [--rate 2000] [--no-durable]
    python -m bench.soak --duration 10 --clients 10 --no-write      (smoke run)

The broker runs as a user runs it, `python -m minibroker --port 0 ...`, in a child
process, with `--data-dir` in a temporary directory (`--durable`, the default) or in
memory (`--no-durable`). Half the clients are producers, half consumers split over
`--groups` consumer groups subscribed to one topic. The clients are confluent-kafka
(librdkafka) in worker processes of at most 25 clients each: producers and consumers in
separate workers, the producers of a worker paced by one thread at their share of the
total `--rate`, each consumer polling in a thread of its own.

Order of a run: the consumers subscribe and their groups settle (every partition owned by
exactly one member, no change for a second); the producers send for `--duration` seconds
and wait for every acknowledgement; the topic's end offsets are read and the consumers
read up to them; then everything stops.

Measured: acknowledged and consumed records/s, produce latency (produce() to the
acknowledgement, librdkafka's own stamp), end-to-end latency (the send time travels in the
value), the broker's VmRSS and CPU every `--sample-every` seconds, and, for each group,
that every acknowledged record was read exactly once: records are named by (producer,
sequence number) in their value, so a record missing, read twice, or read without an
acknowledgement is counted. Rebalances after the groups settled are reported (none are
expected: no member joins or leaves while records flow). Exit code 1 if a record is
missing or read twice in any group, or the run could not complete.

The table and the RSS series are printed and written to bench/SOAK_RESULTS.md
(`--no-write` to skip). The broker and the workers are killed on every way out, and the
temporary directory removed.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import platform
import queue
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from types import FrameType
from typing import Any

from bench.harness import ROOT, log, percentile, write_results
from harness.child_broker import ChildBroker, cpu_seconds, die_with_parent, status_kib

RESULTS = Path(__file__).resolve().parent / "SOAK_RESULTS.md"
QUIET = {"log_level": 3}
CLIENTS_PER_WORKER = 25
# producer index, sequence number, send time (CLOCK_MONOTONIC, ns: one clock for every
# process of the machine)
HEAD = struct.Struct(">IIq")
BROKER_START_S = 60.0
SETTLE_QUIET_S = 1.0
REBALANCE_GAP_S = 5.0  # revocations closer than this count as one rebalance
TICK_S = 0.5
FLUSH_S = 60.0


# --- the broker ---


def broker_flags() -> str:
    """The broker's --help text (which flags this minibroker accepts)."""
    return subprocess.run(
        [sys.executable, "-m", "minibroker", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout


def process_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += cpu_seconds(pid)
    return total


# --- the workers (child processes) ---


# What each worker process is told (not a run size chosen by --quick, as elsewhere).
@dataclass(frozen=True)
class Plan:
    bootstrap: str
    topic: str
    partitions: int
    rate: float  # records/s, all producers together
    producers: int
    value_size: int
    linger_ms: int
    group_ids: tuple[str, ...]


@dataclass(frozen=True)
class Role:
    kind: str  # "producer" or "consumer"
    index: int  # producer index, or member index within the worker
    group: int = -1


def _grow(counts: bytearray, size: int) -> None:
    if len(counts) < size:
        counts.extend(bytes(size - len(counts)))


class Member:
    """One consumer in a group, polling in its own thread."""

    def __init__(self, plan: Plan, group: int, key: str, events: Any, stop: EventType) -> None:
        from confluent_kafka import Consumer

        self.group = group
        self.key = key
        self._events = events
        self._stop = stop
        self.consumed = 0
        self.errors = 0
        self.unreadable = 0
        self.counts: dict[int, bytearray] = {}  # producer -> reads per sequence number
        self.next_offset: dict[int, int] = {}  # partition -> last offset read + 1
        self.e2e = array("d")  # seconds
        self.consumer = Consumer(
            {
                "bootstrap.servers": plan.bootstrap,
                "group.id": plan.group_ids[group],
                "client.id": key,
                "auto.offset.reset": "earliest",
                **QUIET,
            }
        )
        self.consumer.subscribe(
            [plan.topic], on_assign=self._on("assign"), on_revoke=self._on("revoke")
        )
        self.thread = threading.Thread(target=self._run, name=key, daemon=True)
        self.thread.start()

    def _on(self, kind: str) -> Any:
        def record(_: Any, partitions: list[Any]) -> None:
            parts = tuple(sorted(p.partition for p in partitions))
            self._events.put(("event", self.group, self.key, kind, parts, time.monotonic()))

        return record

    def _run(self) -> None:
        unpack = HEAD.unpack_from
        clock = time.monotonic_ns
        while not self._stop.is_set():
            # consume() waits out its whole timeout unless it fills the count: take what
            # is there, else wait for one record
            messages = self.consumer.consume(500, 0)
            if not messages:
                one = self.consumer.poll(0.2)
                messages = [] if one is None else [one]
            now = clock()
            for message in messages:
                if message.error() is not None:
                    self.errors += 1
                    continue
                value = message.value()
                if value is None or len(value) < HEAD.size:
                    self.unreadable += 1
                    continue
                producer, sequence, sent = unpack(value)
                counts = self.counts.get(producer)
                if counts is None:
                    counts = self.counts[producer] = bytearray()
                if sequence >= len(counts):
                    _grow(counts, max(sequence + 1, 2 * len(counts)))
                if counts[sequence] < 255:
                    counts[sequence] += 1
                self.e2e.append((now - sent) / 1e9)
                self.consumed += 1
                partition, offset = message.partition(), message.offset()
                if (
                    partition is not None
                    and offset is not None
                    and offset + 1 > self.next_offset.get(partition, 0)
                ):
                    self.next_offset[partition] = offset + 1
        self.consumer.close()  # commits what was read, leaves the group


class Producers:
    """The producers of one worker, paced by one thread at their share of the rate."""

    def __init__(self, plan: Plan, indexes: list[int]) -> None:
        from confluent_kafka import Producer

        self.plan = plan
        self.indexes = indexes
        self.sent = [0] * len(indexes)
        self.acked = [bytearray() for _ in indexes]  # 1 per acknowledged sequence number
        self.errors = 0
        self.error_names: dict[str, int] = {}
        self.latency = array("d")  # seconds, produce() to acknowledgement
        self.buffer_full = 0
        self.clients = [
            Producer(
                {
                    "bootstrap.servers": plan.bootstrap,
                    "client.id": f"soak-producer-{index}",
                    "enable.idempotence": True,
                    "linger.ms": plan.linger_ms,
                    "on_delivery": self._on_delivery(slot),
                    **QUIET,
                }
            )
            for slot, index in enumerate(indexes)
        ]
        for client in self.clients:
            client.list_topics(plan.topic, timeout=30)  # connected before the clock starts

    def _on_delivery(self, slot: int) -> Any:
        acked = self.acked[slot]
        latency = self.latency

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                self.errors += 1
                name = error.name()
                self.error_names[name] = self.error_names.get(name, 0) + 1
                return
            _, sequence, _ = HEAD.unpack_from(message.value())
            acked[sequence] = 1
            latency.append(message.latency() or 0.0)

        return delivered

    def acknowledged(self) -> int:
        return len(self.latency)

    def run(self, stop: EventType) -> float:
        """Send until `stop` is set; returns the seconds spent sending."""
        plan = self.plan
        rate = plan.rate * len(self.indexes) / plan.producers
        padding = b"p" * max(0, plan.value_size - HEAD.size)
        clients, count = self.clients, len(self.clients)
        started = time.monotonic()
        total = 0
        turn = 0
        while not stop.is_set():
            due = int((time.monotonic() - started) * rate) - total
            for _ in range(due):
                slot = turn % count
                sequence = self.sent[slot]
                value = HEAD.pack(self.indexes[slot], sequence, time.monotonic_ns()) + padding
                try:
                    clients[slot].produce(plan.topic, value)
                except BufferError:
                    self.buffer_full += 1
                    break
                self.acked[slot].append(0)
                self.sent[slot] += 1
                total += 1
                turn += 1
            for client in clients:
                client.poll(0)
            time.sleep(0.002)
        return time.monotonic() - started

    def flush(self) -> int:
        """Wait for every acknowledgement; the number still outstanding after FLUSH_S."""
        deadline = time.monotonic() + FLUSH_S
        left = 0
        for client in self.clients:
            left += client.flush(max(0.0, deadline - time.monotonic()))
        return left


def worker(
    wid: int,
    plan: Plan,
    roles: list[Role],
    events: Any,
    produce_go: EventType,
    produce_stop: EventType,
    consume_stop: EventType,
) -> None:
    """One worker process: its producers or consumers, reporting to `events`."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers
    try:
        _work(wid, plan, roles, events, produce_go, produce_stop, consume_stop)
    except BaseException as exc:  # reported, then the parent stops the run
        events.put(("failed", wid, f"{type(exc).__name__}: {exc}"))
        raise


def _work(
    wid: int,
    plan: Plan,
    roles: list[Role],
    events: Any,
    produce_go: EventType,
    produce_stop: EventType,
    consume_stop: EventType,
) -> None:
    producer_indexes = [r.index for r in roles if r.kind == "producer"]
    members = [
        Member(plan, r.group, f"w{wid}-g{r.group}-m{r.index}", events, consume_stop)
        for r in roles
        if r.kind == "consumer"
    ]
    producers = Producers(plan, producer_indexes) if producer_indexes else None
    events.put(("ready", wid))

    def tick() -> None:
        consumed = [0] * len(plan.group_ids)
        next_offset: dict[tuple[int, int], int] = {}
        for member in members:
            consumed[member.group] += member.consumed
            for partition, offset in list(member.next_offset.items()):
                key = (member.group, partition)
                next_offset[key] = max(next_offset.get(key, 0), offset)
        acked = producers.acknowledged() if producers else 0
        errors = producers.errors if producers else 0
        events.put(("tick", wid, acked, errors, consumed, next_offset))

    if producers is not None:
        while not produce_go.wait(TICK_S):
            tick()
        stopper = threading.Thread(target=_ticker, args=(tick, produce_stop), daemon=True)
        stopper.start()
        seconds = producers.run(produce_stop)
        left = producers.flush()
        stopper.join()
        tick()
        events.put(("flushed", wid, seconds, left))
    while not consume_stop.wait(TICK_S):
        tick()
    for member in members:
        member.thread.join(30)
    tick()
    events.put(("result", wid, _result(producers, members, len(plan.group_ids))))


def _ticker(tick: Any, stop: EventType) -> None:
    while not stop.wait(TICK_S):
        tick()


def _result(producers: Producers | None, members: list[Member], groups: int) -> dict[str, Any]:
    """What a worker hands back: per-group read counts summed over its members."""
    reads: list[dict[int, bytearray]] = [{} for _ in range(groups)]
    same_member = [0] * groups  # a record read more than once by one member
    e2e = [array("d") for _ in range(groups)]
    for member in members:
        merged = reads[member.group]
        for producer, counts in member.counts.items():
            same_member[member.group] += sum(c - 1 for c in counts if c > 1)
            total = merged.setdefault(producer, bytearray())
            _grow(total, len(counts))
            for sequence, count in enumerate(counts):
                if count:
                    total[sequence] = min(255, total[sequence] + count)
        e2e[member.group].extend(member.e2e)
    result: dict[str, Any] = {
        "reads": [{p: bytes(c) for p, c in g.items()} for g in reads],
        "same_member": same_member,
        "e2e": [a.tobytes() for a in e2e],
        "consume_errors": sum(m.errors for m in members),
        "unreadable": sum(m.unreadable for m in members),
    }
    if producers is not None:
        result["acked"] = {
            i: bytes(a) for i, a in zip(producers.indexes, producers.acked, strict=True)
        }
        result["sent"] = dict(zip(producers.indexes, producers.sent, strict=True))
        result["latency"] = producers.latency.tobytes()
        result["produce_errors"] = producers.errors
        result["error_names"] = producers.error_names
        result["buffer_full"] = producers.buffer_full
    return result


# --- the run ---


@dataclass
class Sample:
    t: float  # seconds since the producers started (negative before)
    phase: str
    rss_kb: int
    broker_cpu: float  # seconds so far
    client_cpu: float
    acked: int
    consumed: int


@dataclass
class Outcome:
    """Everything measured in one run."""

    settle_s: float | None = None
    produce_s: float = 0.0
    drain_s: float | None = None
    samples: list[Sample] = field(default_factory=list)
    acked: int = 0
    sent: int = 0
    produce_errors: int = 0
    error_names: dict[str, int] = field(default_factory=dict)
    unflushed: int = 0
    buffer_full: int = 0
    consumed: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    same_member: list[int] = field(default_factory=list)
    unacknowledged_reads: list[int] = field(default_factory=list)
    rebalances: list[int] = field(default_factory=list)
    revocations: list[int] = field(default_factory=list)
    produce_latency: list[float] = field(default_factory=list)
    e2e_latency: list[float] = field(default_factory=list)
    end_offsets: int = 0
    consume_errors: int = 0
    unreadable: int = 0
    broker_log_warnings: list[str] = field(default_factory=list)
    broker_exit: int | None = None
    data_bytes: int | None = None  # the --data-dir's files at the end
    data_filesystem: str = ""
    problems: list[str] = field(default_factory=list)

    def failed(self) -> bool:
        return bool(self.problems) or any(self.missing) or any(self.duplicates)


class Interrupted(Exception):
    pass


def _raise_interrupted(signum: int, _: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


class Soak:
    def __init__(self, args: argparse.Namespace, log: Any) -> None:
        self.args = args
        self.log = log
        self.producers = args.clients // 2
        self.consumers = args.clients - self.producers
        self.outcome = Outcome()
        self.broker: ChildBroker | None = None
        self.processes: list[Any] = []
        self.tempdir: str | None = None
        context = multiprocessing.get_context("spawn")
        self.context = context
        self.events: Any = context.Queue()
        self.produce_go = context.Event()
        self.produce_stop = context.Event()
        self.consume_stop = context.Event()
        self.ticks: dict[int, tuple[int, int, list[int], dict[tuple[int, int], int]]] = {}
        self.ready: set[int] = set()
        self.flushed: dict[int, tuple[float, int]] = {}
        self.results: dict[int, dict[str, Any]] = {}
        self.latest: dict[str, tuple[str, tuple[int, ...], float]] = {}  # member -> event
        self.member_group: dict[str, int] = {}
        self.revokes: list[list[float]] = [[] for _ in range(args.groups)]
        self.last_event = time.monotonic()
        self.settled_at: float | None = None
        self.sample_at = 0.0
        self.produce_started = 0.0
        self.phase = "settle"

    # - processes -

    def start_broker(self) -> None:
        args = self.args
        self.tempdir = tempfile.mkdtemp(prefix="minibroker-soak-")
        settings: dict[str, Any] = {
            "host": "127.0.0.1",
            "topics": [f"{args.topic}:{args.partitions}"],
        }
        if args.durable:
            data = Path(self.tempdir) / "data"
            data.mkdir()
            settings["data_dir"] = data
            if args.log_flush:
                settings["log_flush"] = args.log_flush
        self.broker = ChildBroker(
            cwd=ROOT, stderr=Path(self.tempdir) / "broker.log", own_session=True, **settings
        ).start(timeout=BROKER_START_S)
        flags = " ".join(self.broker.args[3:])
        self.log(f"broker pid {self.broker.pid} at {self.broker.bootstrap}: {flags}")

    def start_workers(self) -> None:
        assert self.broker is not None
        args = self.args
        run = uuid.uuid4().hex[:8]
        plan = Plan(
            bootstrap=self.broker.bootstrap,
            topic=args.topic,
            partitions=args.partitions,
            rate=args.rate,
            producers=self.producers,
            value_size=args.value_size,
            linger_ms=args.linger_ms,
            group_ids=tuple(f"soak-{run}-{g}" for g in range(args.groups)),
        )
        layout: list[list[Role]] = []
        producer_workers = math.ceil(self.producers / CLIENTS_PER_WORKER)
        for w in range(producer_workers):
            layout.append([Role("producer", i) for i in range(w, self.producers, producer_workers)])
        consumer_workers = math.ceil(self.consumers / CLIENTS_PER_WORKER)
        for w in range(consumer_workers):
            layout.append(
                [
                    Role("consumer", c, c % args.groups)
                    for c in range(w, self.consumers, consumer_workers)
                ]
            )
        self.expected_members = [
            len(range(g, self.consumers, args.groups)) for g in range(args.groups)
        ]
        for wid, roles in enumerate(layout):
            process = self.context.Process(
                target=worker,
                name=f"soak-worker-{wid}",
                args=(
                    wid,
                    plan,
                    roles,
                    self.events,
                    self.produce_go,
                    self.produce_stop,
                    self.consume_stop,
                ),
                daemon=True,
            )
            process.start()
            self.processes.append(process)
        self.producer_workers = set(range(producer_workers))
        self.log(
            f"{len(layout)} worker processes: {producer_workers} with {self.producers} "
            f"producers, {consumer_workers} with {self.consumers} consumers in "
            f"{args.groups} groups ({', '.join(map(str, self.expected_members))} members)"
        )

    def stop_all(self) -> None:
        """Stop the workers and the broker, whatever state they are in."""
        self.produce_stop.set()
        self.produce_go.set()
        self.consume_stop.set()
        deadline = time.monotonic() + 10
        for process in self.processes:
            process.join(max(0.1, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                process.kill()
                process.join(5)
        if self.broker is not None:
            self.outcome.broker_exit = self.broker.stop(grace=15)
        with contextlib.suppress(Exception):
            self.events.close()
            self.events.join_thread()

    def cleanup(self) -> None:
        if self.tempdir is not None:
            shutil.rmtree(self.tempdir, ignore_errors=True)
            self.tempdir = None

    # - event pump -

    def pump(self, seconds: float) -> None:
        """Handle the workers' messages for `seconds`; sample the broker on schedule."""
        deadline = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            if now >= self.sample_at:
                self.sample()
            wait = min(deadline, self.sample_at) - now
            if wait <= 0 and now >= deadline:
                return
            try:
                message = self.events.get(timeout=max(0.01, wait))
            except queue.Empty:
                continue
            self.handle(message)

    def handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "tick":
            _, wid, acked, errors, consumed, next_offset = message
            self.ticks[wid] = (acked, errors, consumed, next_offset)
        elif kind == "event":
            _, group, key, what, parts, stamp = message
            self.latest[key] = (what, parts, stamp)
            self.member_group[key] = group
            self.last_event = stamp
            if what == "revoke" and self.settled_at is not None and self.phase != "stop":
                self.revokes[group].append(stamp)
                self.log(f"rebalance: {key} revoked {list(parts)}")
        elif kind == "ready":
            self.ready.add(message[1])
        elif kind == "flushed":
            self.flushed[message[1]] = (message[2], message[3])
        elif kind == "result":
            self.results[message[1]] = message[2]
        elif kind == "failed":
            raise RuntimeError(f"worker {message[1]} failed: {message[2]}")
        self.check_alive()

    def check_alive(self) -> None:
        if self.broker is not None and not self.broker.alive():
            raise RuntimeError(
                f"the broker exited (code {self.broker.process.returncode}): "
                f"{self.broker.log_tail()}"
            )
        for process in self.processes:
            if process.exitcode not in (None, 0):
                raise RuntimeError(f"{process.name} exited with code {process.exitcode}")

    def totals(self) -> tuple[int, int, list[int]]:
        acked = sum(t[0] for t in self.ticks.values())
        errors = sum(t[1] for t in self.ticks.values())
        consumed = [0] * self.args.groups
        for tick in self.ticks.values():
            for group, count in enumerate(tick[2]):
                consumed[group] += count
        return acked, errors, consumed

    def sample(self) -> None:
        assert self.broker is not None
        self.check_alive()
        now = time.monotonic()
        acked, _, consumed = self.totals()
        pids = [p.pid for p in self.processes if p.pid is not None]
        sample = Sample(
            t=now - self.produce_started if self.produce_started else 0.0,
            phase=self.phase,
            rss_kb=status_kib(self.broker.pid, "VmRSS"),
            broker_cpu=cpu_seconds(self.broker.pid),
            client_cpu=process_cpu(pids),
            acked=acked,
            consumed=sum(consumed),
        )
        samples = self.outcome.samples
        span = now - (self.produce_started + samples[-1].t) if samples else 0.0
        if span >= 1.0 and self.phase in ("produce", "drain"):
            before = samples[-1]
            self.log(
                f"t={sample.t:5.0f} s  RSS {sample.rss_kb / 1024:6.1f} MiB  broker CPU "
                f"{(sample.broker_cpu - before.broker_cpu) / span:4.0%}  acked "
                f"{(acked - before.acked) / span:7,.0f}/s  consumed "
                f"{(sample.consumed - before.consumed) / span:7,.0f}/s"
            )
        if self.phase in ("produce", "drain"):
            samples.append(sample)
        self.sample_at = now + self.args.sample_every

    # - phases -

    def group_settled(self, group: int) -> bool:
        members = [k for k, g in self.member_group.items() if g == group]
        if len(members) != self.expected_members[group]:
            return False
        owned: list[int] = []
        for key in members:
            what, parts, _ = self.latest[key]
            if what != "assign":
                return False
            owned.extend(parts)
        return sorted(owned) == list(range(self.args.partitions))

    def settle(self) -> None:
        started = time.monotonic()
        cap = self.args.settle_timeout
        while time.monotonic() - started < cap:
            self.pump(0.1)
            workers_ready = len(self.ready) == len(self.processes)
            groups_ready = all(self.group_settled(g) for g in range(self.args.groups))
            quiet = time.monotonic() - self.last_event >= SETTLE_QUIET_S
            if workers_ready and groups_ready and quiet:
                self.settled_at = time.monotonic()
                self.outcome.settle_s = self.last_event - started
                self.log(f"groups settled {self.outcome.settle_s:.1f} s after the workers began")
                return
        raise RuntimeError(f"the groups did not settle within {cap:.0f} s")

    def produce(self) -> None:
        self.phase = "produce"
        self.produce_started = time.monotonic()
        self.sample_at = 0.0  # a sample at t=0
        self.produce_go.set()
        self.pump(self.args.duration)
        self.produce_stop.set()
        self.phase = "flush"
        deadline = time.monotonic() + FLUSH_S + 30
        while len(self.flushed) < len(self.producer_workers):
            if time.monotonic() > deadline:
                raise RuntimeError("the producers did not finish within their flush time")
            self.pump(0.1)
        self.outcome.produce_s = max(s for s, _ in self.flushed.values())
        self.outcome.unflushed = sum(left for _, left in self.flushed.values())
        self.log(f"producers stopped after {self.outcome.produce_s:.1f} s and flushed")

    def end_offsets(self) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        assert self.broker is not None
        consumer = Consumer(
            {"bootstrap.servers": self.broker.bootstrap, "group.id": "soak-watermarks", **QUIET}
        )
        try:
            return {
                p: consumer.get_watermark_offsets(TopicPartition(self.args.topic, p), timeout=30)[1]
                for p in range(self.args.partitions)
            }
        finally:
            consumer.close()

    def drain(self) -> None:
        self.phase = "drain"
        ends = self.end_offsets()
        self.outcome.end_offsets = sum(ends.values())
        started = time.monotonic()
        while time.monotonic() - started < self.args.drain_timeout:
            reached: dict[tuple[int, int], int] = {}
            for tick in self.ticks.values():
                for key, offset in tick[3].items():
                    reached[key] = max(reached.get(key, 0), offset)
            if all(
                reached.get((g, p), 0) >= end
                for g in range(self.args.groups)
                for p, end in ends.items()
            ):
                self.outcome.drain_s = time.monotonic() - started
                self.log(f"both groups read up to the end offsets in {self.outcome.drain_s:.1f} s")
                self.sample_at = 0.0
                self.pump(0)  # a last sample
                return
            self.pump(0.1)
        self.outcome.problems.append(
            f"the groups did not read up to the end offsets within {self.args.drain_timeout} s"
        )

    def collect(self) -> None:
        self.phase = "stop"
        self.consume_stop.set()
        deadline = time.monotonic() + 60
        while len(self.results) < len(self.processes):
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not hand back their counts within 60 s")
            self.pump(0.1)

    # - accounting -

    def account(self) -> None:
        out = self.outcome
        groups = self.args.groups
        acked: dict[int, bytes] = {}
        reads: list[dict[int, bytearray]] = [{} for _ in range(groups)]
        produce_latency = array("d")
        e2e = array("d")
        out.same_member = [0] * groups
        for result in self.results.values():
            acked.update(result.get("acked", {}))
            out.sent += sum(result.get("sent", {}).values())
            produce_latency.frombytes(result.get("latency", b""))
            out.produce_errors += result.get("produce_errors", 0)
            out.buffer_full += result.get("buffer_full", 0)
            for name, count in result.get("error_names", {}).items():
                out.error_names[name] = out.error_names.get(name, 0) + count
            out.consume_errors += result["consume_errors"]
            out.unreadable += result["unreadable"]
            for group in range(groups):
                out.same_member[group] += result["same_member"][group]
                e2e.frombytes(result["e2e"][group])
                for producer, counts in result["reads"][group].items():
                    total = reads[group].setdefault(producer, bytearray())
                    _grow(total, len(counts))
                    for sequence, count in enumerate(counts):
                        if count:
                            total[sequence] = min(255, total[sequence] + count)
        out.acked = sum(a.count(1) for a in acked.values())
        for group in range(groups):
            missing = duplicates = unacknowledged = consumed = 0
            for producer, marks in acked.items():
                counts = reads[group].get(producer, bytearray())
                _grow(counts, len(marks))
                for sequence, count in enumerate(counts):
                    consumed += count
                    if count > 1:
                        duplicates += count - 1
                    if sequence < len(marks) and marks[sequence]:
                        if count == 0:
                            missing += 1
                    elif count:
                        unacknowledged += 1
            for producer, counts in reads[group].items():
                if producer not in acked:  # a value naming no producer of this run
                    unacknowledged += sum(1 for c in counts if c)
                    consumed += sum(counts)
            out.missing.append(missing)
            out.duplicates.append(duplicates)
            out.unacknowledged_reads.append(unacknowledged)
            out.consumed.append(consumed)
            out.revocations.append(len(self.revokes[group]))
            out.rebalances.append(_bursts(self.revokes[group], REBALANCE_GAP_S))
        if self.args.durable and self.tempdir is not None:
            data = Path(self.tempdir) / "data"
            out.data_bytes = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
            out.data_filesystem = filesystem(data)
        out.produce_latency = sorted(produce_latency)
        out.e2e_latency = sorted(e2e)
        if self.broker is not None:
            out.broker_log_warnings = [
                line
                for line in self.broker.log_lines()
                if any(level in line for level in (" WARNING ", " ERROR ", " CRITICAL "))
            ]

    def run(self) -> Outcome:
        self.start_broker()
        self.start_workers()
        self.sample_at = time.monotonic()
        self.settle()
        self.produce()
        self.drain()
        self.collect()
        self.account()
        return self.outcome


def filesystem(path: Path) -> str:
    """The type of the filesystem holding `path` (the longest mount point above it)."""
    best, kind = "", "unknown"
    with contextlib.suppress(OSError), open("/proc/mounts") as mounts:
        for line in mounts:
            parts = line.split()
            point = parts[1]
            inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
            if inside and len(point) > len(best):
                best, kind = point, parts[2]
    return kind


def _bursts(stamps: list[float], gap: float) -> int:
    count = 0
    last: float | None = None
    for stamp in sorted(stamps):
        if last is None or stamp - last > gap:
            count += 1
        last = stamp
    return count


# --- report ---


def _percentile(values: list[float], fraction: float) -> float | None:
    return percentile(values, fraction) if values else None


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    ms = seconds * 1000
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms" if ms >= 1 else f"{ms:.2f} ms"


def _mib(kb: int) -> str:
    return f"{kb / 1024:,.1f} MiB"


def table(args: argparse.Namespace, out: Outcome) -> list[str]:
    produce_s = out.produce_s or 1.0
    samples = out.samples
    span = samples[-1].t - samples[0].t if len(samples) > 1 else 0.0
    broker_cpu = (samples[-1].broker_cpu - samples[0].broker_cpu) / span if span else 0.0
    client_cpu = (samples[-1].client_cpu - samples[0].client_cpu) / span if span else 0.0
    rss = [s.rss_kb for s in samples]
    producers = args.clients // 2
    consumers = args.clients - producers
    lines = [
        "| metric | result |",
        "|---|---|",
        f"| clients | {producers} producers, {consumers} consumers in {args.groups} groups, "
        f"one topic of {args.partitions} partitions |",
        f"| storage | {_storage(args, out)} |",
        f"| produce, target {args.rate:,.0f} records/s of {args.value_size} B for "
        f"{args.duration:.0f} s | {out.acked:,} acknowledged, {out.acked / produce_s:,.0f} "
        f"records/s; {out.produce_errors:,} delivery errors |",
        f"| produce latency, produce() to acknowledgement, p50 / p99 / max | "
        f"{_ms(_percentile(out.produce_latency, 0.5))} / "
        f"{_ms(_percentile(out.produce_latency, 0.99))} / "
        f"{_ms(out.produce_latency[-1] if out.produce_latency else None)} |",
        f"| consume, all groups together | {sum(out.consumed):,} records, "
        f"{sum(out.consumed) / produce_s:,.0f} records/s over the produce time "
        f"(+{out.drain_s or 0:.1f} s to reach the end offsets) |",
        f"| end-to-end latency, produce() to the consumer, p50 / p99 / max | "
        f"{_ms(_percentile(out.e2e_latency, 0.5))} / {_ms(_percentile(out.e2e_latency, 0.99))}"
        f" / {_ms(out.e2e_latency[-1] if out.e2e_latency else None)} |",
    ]
    for group in range(len(out.missing)):
        same = out.same_member[group]
        lines.append(
            f"| group {group}: read / missing / read twice (of those, by one member) / "
            f"read without acknowledgement | {out.consumed[group]:,} / "
            f"{_flag(out.missing[group])} / {_flag(out.duplicates[group])} ({same:,}) / "
            f"{out.unacknowledged_reads[group]:,} |"
        )
    lines += [
        "| rebalances after the groups settled (member revocations) | "
        + ", ".join(
            f"group {g}: {r} ({v})"
            for g, (r, v) in enumerate(zip(out.rebalances, out.revocations, strict=True))
        )
        + " |",
        f"| broker RSS, first / last / max | {_mib(rss[0]) if rss else 'n/a'} / "
        f"{_mib(rss[-1]) if rss else 'n/a'} / {_mib(max(rss)) if rss else 'n/a'} |",
        f"| broker RSS growth per acknowledged record | {_per_record(rss, out.acked)} |",
        f"| broker CPU, share of one core, mean over the run | {broker_cpu:.0%} |",
        f"| client processes' CPU, share of one core | {client_cpu:.0%} |",
        f"| groups settled / producers flushed | {out.settle_s or 0:.1f} s / "
        f"{out.unflushed} unacknowledged after {FLUSH_S:.0f} s |",
        f"| broker log lines at WARNING or above | {len(out.broker_log_warnings)} |",
    ]
    return lines


def _per_record(rss: list[int], records: int) -> str:
    if len(rss) < 2 or not records:
        return "n/a"
    return f"{(rss[-1] - rss[0]) * 1024 / records:,.0f} B"


def _flag(count: int) -> str:
    return f"**{count:,}**" if count else "0"


def _default_flush() -> str:
    """The broker's own default --log-flush, as this minibroker has it."""
    import dataclasses

    from minibroker.config import BrokerConfig

    for setting in dataclasses.fields(BrokerConfig):
        if setting.name == "log_flush":
            return f"{setting.default} (default)"
    return "default"


def _storage(args: argparse.Namespace, out: Outcome) -> str:
    if not args.durable:
        return "in memory (`--no-durable`)"
    flush = f"`--log-flush {args.log_flush or _default_flush()}`"
    held = f", {out.data_bytes / 2**20:,.1f} MiB of files at the end" if out.data_bytes else ""
    return f"`--data-dir` in a temporary directory ({out.data_filesystem}), {flush}{held}"


def series(out: Outcome) -> list[str]:
    lines = [
        "| t (s) | phase | broker RSS | broker CPU | acknowledged/s | consumed/s (all groups) |",
        "|---|---|---|---|---|---|",
    ]
    before: Sample | None = None
    for sample in out.samples:
        if before is None or sample.t - before.t < 1.0:  # too short for a rate
            lines.append(f"| {sample.t:.0f} | {sample.phase} | {_mib(sample.rss_kb)} | | | |")
        else:
            span = max(1e-9, sample.t - before.t)
            lines.append(
                f"| {sample.t:.0f} | {sample.phase} | {_mib(sample.rss_kb)} | "
                f"{(sample.broker_cpu - before.broker_cpu) / span:.0%} | "
                f"{(sample.acked - before.acked) / span:,.0f} | "
                f"{(sample.consumed - before.consumed) / span:,.0f} |"
            )
        before = sample
    return lines


def machine() -> str:
    import confluent_kafka

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} CPUs, {memory:.0f} GiB, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, confluent-kafka {confluent_kafka.__version__} "
        f"(librdkafka {confluent_kafka.libversion()[0]})"
    )


def command_line(argv: list[str]) -> str:
    return " ".join(["python -m bench.soak", *argv]).strip()


def document(argv: list[str], args: argparse.Namespace, out: Outcome, load: tuple[str, str]) -> str:
    verdict = "FAILED" if out.failed() else "passed"
    return "\n".join(
        [
            "# Soak",
            "",
            f"`{command_line(argv)}`, {time.strftime('%Y-%m-%d')}, {verdict}. Machine: "
            f"{machine()}; load average {load[0]} at the start, {load[1]} at the end.",
            "",
            *table(args, out),
            "",
            f"Broker RSS (VmRSS) and rates every {args.sample_every:g} s from the producers' "
            "start; rates are over the interval before each row; `drain` rows are after the "
            "producers stopped.",
            "",
            *series(out),
            "",
            *notes(args, out),
            "",
        ]
    )


def notes(args: argparse.Namespace, out: Outcome) -> list[str]:
    lines = [
        f"- The broker: `python -m minibroker --port 0 --topic {args.topic}:{args.partitions} "
        f"--log-level WARNING{' --data-dir DIR' if args.durable else ''}` in a child "
        "process. Clients: confluent-kafka, librdkafka defaults plus `enable.idempotence` "
        f"and `linger.ms={args.linger_ms}` on the producers, `auto.offset.reset=earliest` "
        "on the consumers (eager range/roundrobin assignors, auto commit); at most "
        f"{CLIENTS_PER_WORKER} clients per worker process.",
        "- Every record's value names its producer and sequence number and carries its "
        "send time; the accounting compares the records each group read against the "
        "producers' delivery reports. Produce latency is librdkafka's own (produce() to the "
        "delivery report, linger and the client's queue included).",
        "- Both groups subscribe and settle before the first record is sent, and read up "
        "to the end offsets taken after the last acknowledgement.",
    ]
    members = (args.clients - args.clients // 2) // args.groups
    if members > args.partitions:
        lines.append(
            f"- A group of {members} members on {args.partitions} partitions: "
            f"{members - args.partitions} members of each group hold no partition and only "
            "heartbeat."
        )
    if out.error_names:
        lines.append(f"- Delivery errors by name: {out.error_names}.")
    if out.buffer_full:
        lines.append(f"- The producers' local queue was full {out.buffer_full} times.")
    if out.consume_errors or out.unreadable:
        lines.append(
            f"- Consumer errors: {out.consume_errors}; unreadable values: {out.unreadable}."
        )
    for line in out.broker_log_warnings[:10]:
        lines.append(f"- Broker log: `{line[:200]}`")
    for problem in out.problems:
        lines.append(f"- **{problem}**")
    return lines


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of producing")
    parser.add_argument("--clients", type=int, default=100, help="producers + consumers")
    parser.add_argument(
        "--rate", type=float, default=2000.0, help="records/s, all producers together"
    )
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--groups", type=int, default=2, help="consumer groups")
    parser.add_argument("--topic", default="soak")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value")
    parser.add_argument("--linger-ms", type=int, default=5, help="producers' linger.ms")
    parser.add_argument(
        "--durable",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the log in a temporary --data-dir (default) or in memory",
    )
    parser.add_argument(
        "--log-flush",
        choices=["write", "interval", "os"],
        help="the broker's --log-flush with --durable (default: the broker's own)",
    )
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds")
    parser.add_argument("--settle-timeout", type=float, default=90.0, help="seconds")
    parser.add_argument("--drain-timeout", type=float, default=120.0, help="seconds")
    parser.add_argument(
        "--no-write", action="store_true", help=f"do not write {RESULTS.relative_to(ROOT)}"
    )
    args = parser.parse_args(argv)
    if args.clients < 2 * args.groups:
        parser.error(f"--clients must be at least {2 * args.groups} (a member per group)")
    if args.value_size < HEAD.size:
        parser.error(f"--value-size must be at least {HEAD.size}")
    if min(args.duration, args.rate, args.partitions, args.groups, args.sample_every) <= 0:
        parser.error("--duration, --rate, --partitions, --groups, --sample-every must be > 0")
    return args


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP end the run like Ctrl-C: through the cleanup."""
    previous = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)

    if args.durable and "--data-dir" not in broker_flags():
        print(
            "bench.soak: this minibroker has no --data-dir; run with --no-durable",
            file=sys.stderr,
        )
        return 2
    load_before = f"{os.getloadavg()[0]:.1f}"
    soak = Soak(args, log)
    failure: str | None = None
    try:
        with signals_raise():
            try:
                soak.run()
            except (KeyboardInterrupt, Interrupted):
                failure = "interrupted"
            except RuntimeError as exc:
                failure = str(exc)
            finally:
                soak.stop_all()
    finally:
        soak.cleanup()
    out = soak.outcome
    if failure is not None:
        print(f"bench.soak: {failure}", file=sys.stderr)
        return 130 if failure == "interrupted" else 1
    load = (load_before, f"{os.getloadavg()[0]:.1f}")
    print("\n".join(table(args, out)))
    print()
    print("\n".join(series(out)))
    if out.problems:
        print("\n".join(out.problems))
    if not args.no_write:
        write_results(RESULTS, document(argv, args, out, load))
    if out.failed():
        print("bench.soak: FAILED: records missing or read twice", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
