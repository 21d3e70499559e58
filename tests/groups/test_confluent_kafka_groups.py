"""confluent-kafka consumer groups: growth 1 -> 2 -> 3, a killed member, committed offsets."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from minibroker import Broker
from minibroker.testing.backends import KafkaService
from tests.groups.conftest import (
    HEARTBEAT_MS,
    SESSION_MS,
    SETTLE_TIMEOUT,
    MemberProcess,
    RebalanceLog,
    left_group,
    session_ms_for,
    settled,
    unique,
    wait_until,
)

PARTITIONS = 6


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], start: int = 0) -> None:
    """`count` records into each partition, values `p:i` for i from `start`."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
    for partition, count in per_partition.items():
        for i in range(start, start + count):
            producer.produce(topic, f"{partition}:{i}".encode(), partition=partition)
    assert producer.flush(15) == 0, "records were not acknowledged"


class Member:
    """An in-process confluent-kafka consumer whose callbacks go into a RebalanceLog."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, name: str, log: RebalanceLog, **settings: Any
    ) -> None:
        self.name = name
        self.records: list[tuple[int, int]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "auto.offset.reset": "earliest",
                "log_level": 3,
                **settings,
            }
        )
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _, parts: log.record(name, "assigned", (p.partition for p in parts)),
            on_revoke=lambda _, parts: log.record(name, "revoked", (p.partition for p in parts)),
        )

    def pump(self) -> None:
        for message in self.consumer.consume(100, 0.01):
            if message.error() is None:
                self.records.append((message.partition(), message.offset()))

    def close(self) -> None:
        self.consumer.close()


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        member.close()


def pump_all(members: Iterable[Member]) -> None:
    for member in members:
        member.pump()


def test_confluent_kafka_group_grows_one_two_three(broker: Broker, members: list[Member]) -> None:
    topic, group, log = unique("grow"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    names = ["c1", "c2", "c3"]
    for count, name in enumerate(names, start=1):
        mark = time.monotonic()
        members.append(Member(broker.bootstrap_servers, topic, group, name, log))
        present = names[:count]
        assert wait_until(
            lambda present=present: settled(broker, group, topic, PARTITIONS, log, present),
            SETTLE_TIMEOUT,
            pump=lambda: pump_all(members),
        ), f"{count} members did not settle: {log.events}"
        # Each member already there saw the rebalance through its callbacks.
        for earlier in present[:-1]:
            kinds = [kind for _, who, kind, _ in log.since(mark) if who == earlier]
            assert "revoked" in kinds and kinds[-1] == "assigned", (earlier, kinds)
        sizes = sorted(len(log.owned(name)) for name in present)
        assert sizes == {1: [6], 2: [3, 3], 3: [2, 2, 2]}[count]

    # The final assignment is acted on: every record is read once, by its owner.
    produce(broker.bootstrap_servers, topic, dict.fromkeys(range(PARTITIONS), 10))
    assert wait_until(
        lambda: sum(len(m.records) for m in members) >= 10 * PARTITIONS,
        SETTLE_TIMEOUT,
        pump=lambda: pump_all(members),
    )
    pump_all(members)
    for member in members:
        assert {p for p, _ in member.records} <= log.owned(member.name)
    read = sorted(r for m in members for r in m.records)
    assert read == [(p, o) for p in range(PARTITIONS) for o in range(10)]


def test_confluent_kafka_killed_member_expelled_after_session_timeout(
    broker: Broker, members: list[Member], member_processes: list[MemberProcess]
) -> None:
    topic, group, log = unique("kill"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    survivors = ["s1", "s2"]
    for name in survivors:
        members.append(Member(broker.bootstrap_servers, topic, group, name, log))
    victim = MemberProcess("confluent-kafka", broker.bootstrap_servers, topic, group, "victim", log)
    member_processes.append(victim)
    everyone = [*survivors, "victim"]
    assert wait_until(
        lambda: settled(broker, group, topic, PARTITIONS, log, everyone),
        SETTLE_TIMEOUT,
        pump=lambda: pump_all(members),
    ), log.events
    held = log.owned("victim")
    assert held

    killed_at = time.monotonic()
    victim.kill()
    assert wait_until(
        lambda: settled(broker, group, topic, PARTITIONS, log, survivors),
        SETTLE_TIMEOUT,
        pump=lambda: pump_all(members),
    ), log.events
    assert not left_group(broker, "victim"), "SIGKILL must leave no LeaveGroup behind"
    moves = [at for at, who, kind, _ in log.since(killed_at) if kind == "assigned"]
    # Expelled by the session timeout, not by the closed connection.
    # Moved by the session timeout (not at once), and not long after it expired.
    assert SESSION_MS / 2000 <= min(moves) - killed_at <= SESSION_MS / 1000 + 10, (
        min(moves) - killed_at
    )
    assert held <= log.owned("s1") | log.owned("s2")


@pytest.mark.parity
def test_confluent_kafka_committed_offsets_survive_restart(broker: KafkaService) -> None:
    topic, group = unique("commit"), unique("group")
    partitions, per_partition = 3, 20
    broker.create_topic(topic, partitions)
    produce(broker.bootstrap_servers, topic, dict.fromkeys(range(partitions), per_partition))
    settings = {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": group,
        "session.timeout.ms": session_ms_for(broker),
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "log_level": 3,
    }

    def read(consumer: Consumer, count: int) -> list[tuple[int, int]]:
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.partition(), message.offset()))
        return got

    first = Consumer(settings)
    first.subscribe([topic])
    processed = read(first, 30)
    assert len(processed) == 30
    committed = {p: max(o for q, o in processed if q == p) + 1 for p, _ in processed}
    first.commit(
        offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False
    )
    tail = read(first, partitions * per_partition - 30)  # consumed, never committed
    first.close()
    assert sorted(processed + tail) == [
        (p, o) for p in range(partitions) for o in range(per_partition)
    ]

    produce(
        broker.bootstrap_servers, topic, dict.fromkeys(range(partitions), 5), start=per_partition
    )
    second = Consumer(settings)
    try:
        second.subscribe([topic])
        starts = {p: committed.get(p, 0) for p in range(partitions)}
        expected = [(p, o) for p in range(partitions) for o in range(starts[p], per_partition + 5)]
        resumed = read(second, len(expected))
        assert not second.poll(0.5), "records beyond the end"
        stored = second.committed([TopicPartition(topic, p) for p in committed], timeout=10)
    finally:
        second.close()
    assert {tp.partition: tp.offset for tp in stored} == committed
    assert sorted(resumed) == expected
    for p in range(partitions):
        mine = [o for q, o in resumed if q == p]
        assert mine[0] == starts[p], f"partition {p} resumed at {mine[0]}, not {starts[p]}"
    # Duplicates are exactly the consumed-but-uncommitted tail; nothing was lost.
    duplicates = set(processed + tail) & set(resumed)
    assert duplicates == {r for r in tail if r[1] >= committed.get(r[0], 0)}
    assert set(processed) & set(resumed) == set()
    assert 0 < sum(committed.values()) < partitions * per_partition
