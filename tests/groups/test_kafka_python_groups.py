"""kafka-python consumer groups: growth 1 -> 2 -> 3, a killed member, committed offsets."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

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
# kafka-python 3.0.12 loses a join that is still in flight when poll() times out if, by
# the next poll, need_rejoin() has turned false (the leader's own assignment brought its
# metadata snapshot up to date): the member then never completes the join, stops
# heartbeating and is expelled. A poll long enough to cover join + sync avoids it.
POLL_MS = 1_000


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=10_000)
    try:
        futures = [
            producer.send(topic, f"{partition}:{i}".encode(), partition=partition)
            for partition, count in per_partition.items()
            for i in range(start, start + count)
        ]
        for future in futures:
            future.get(timeout=15)
    finally:
        producer.close(timeout=10)


def consumer_settings(bootstrap: str, group: str, **overrides: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "session_timeout_ms": SESSION_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "auto_offset_reset": "earliest",
        "retry_backoff_ms": 50,
        "request_timeout_ms": 10_000,
        **overrides,
    }


class Member:
    """A kafka-python consumer polling in its own thread; callbacks go into a RebalanceLog."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, name: str, log: RebalanceLog, **settings: Any
    ) -> None:
        self.name = name
        self.records: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer = KafkaConsumer(
            **consumer_settings(bootstrap, group, client_id=name, **settings)
        )

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                log.record(name, "revoked", (tp.partition for tp in revoked))

            def on_partitions_assigned(self, assigned: Any) -> None:
                log.record(name, "assigned", (tp.partition for tp in assigned))

        self.consumer.subscribe([topic], listener=Listener())
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batches = self.consumer.poll(timeout_ms=POLL_MS)
            with self._lock:
                for tp, found in batches.items():
                    self.records.extend((tp.partition, r.offset) for r in found)

    def read(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self.records)

    def stop_polling(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def close(self) -> None:
        self.stop_polling()
        self.consumer.close()


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    # Stop every poll loop first: a member still polling would rejoin after the first
    # LeaveGroup, and its next close would queue LeaveGroup behind the pending JoinGroup.
    for member in started:
        member.stop_polling()
    for member in started:
        member.close()


def test_kafka_python_group_grows_one_two_three(broker: Broker, members: list[Member]) -> None:
    topic, group, log = unique("grow"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    names = ["k1", "k2", "k3"]
    for count, name in enumerate(names, start=1):
        mark = time.monotonic()
        members.append(Member(broker.bootstrap_servers, topic, group, name, log))
        present = names[:count]
        assert wait_until(
            lambda present=present: settled(broker, group, topic, PARTITIONS, log, present),
            SETTLE_TIMEOUT,
        ), f"{count} members did not settle: {log.events}"
        for earlier in present[:-1]:
            kinds = [kind for _, who, kind, _ in log.since(mark) if who == earlier]
            assert "revoked" in kinds and kinds[-1] == "assigned", (earlier, kinds)
        sizes = sorted(len(log.owned(name)) for name in present)
        assert sizes == {1: [6], 2: [3, 3], 3: [2, 2, 2]}[count]

    produce(broker.bootstrap_servers, topic, dict.fromkeys(range(PARTITIONS), 10))
    assert wait_until(
        lambda: sum(len(m.read()) for m in members) >= 10 * PARTITIONS, SETTLE_TIMEOUT
    )
    for member in members:
        assert {p for p, _ in member.read()} <= log.owned(member.name)
    read = sorted(r for m in members for r in m.read())
    assert read == [(p, o) for p in range(PARTITIONS) for o in range(10)]


def test_kafka_python_killed_member_expelled_after_session_timeout(
    broker: Broker, members: list[Member], member_processes: list[MemberProcess]
) -> None:
    topic, group, log = unique("kill"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    survivors = ["s1", "s2"]
    for name in survivors:
        members.append(Member(broker.bootstrap_servers, topic, group, name, log))
    victim = MemberProcess("kafka-python", broker.bootstrap_servers, topic, group, "victim", log)
    member_processes.append(victim)
    everyone = [*survivors, "victim"]
    assert wait_until(
        lambda: settled(broker, group, topic, PARTITIONS, log, everyone), SETTLE_TIMEOUT
    ), log.events
    held = log.owned("victim")
    assert held

    killed_at = time.monotonic()
    victim.kill()
    assert wait_until(
        lambda: settled(broker, group, topic, PARTITIONS, log, survivors), SETTLE_TIMEOUT
    ), log.events
    assert not left_group(broker, "victim"), "SIGKILL must leave no LeaveGroup behind"
    moves = [at for at, who, kind, _ in log.since(killed_at) if kind == "assigned"]
    # Moved by the session timeout (not at once), and not long after it expired.
    assert SESSION_MS / 2000 <= min(moves) - killed_at <= SESSION_MS / 1000 + 10, (
        min(moves) - killed_at
    )
    assert held <= log.owned("s1") | log.owned("s2")


@pytest.mark.parity
def test_kafka_python_committed_offsets_survive_restart(broker: KafkaService) -> None:
    topic, group = unique("commit"), unique("group")
    partitions, per_partition = 3, 20
    broker.create_topic(topic, partitions)
    produce(broker.bootstrap_servers, topic, dict.fromkeys(range(partitions), per_partition))
    settings = consumer_settings(
        broker.bootstrap_servers,
        group,
        enable_auto_commit=False,
        max_poll_records=1,
        session_timeout_ms=session_ms_for(broker),
    )

    def read(consumer: KafkaConsumer, count: int) -> list[tuple[int, int]]:
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            for tp, found in consumer.poll(timeout_ms=POLL_MS).items():
                got.extend((tp.partition, r.offset) for r in found)
        return got

    first = KafkaConsumer(**settings)
    first.subscribe([topic])
    processed = read(first, 30)
    assert len(processed) == 30
    committed = {p: max(o for q, o in processed if q == p) + 1 for p, _ in processed}
    first.commit(
        {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in committed.items()}
    )
    tail = read(first, partitions * per_partition - 30)
    first.close(autocommit=False)
    assert sorted(processed + tail) == [
        (p, o) for p in range(partitions) for o in range(per_partition)
    ]

    produce(
        broker.bootstrap_servers, topic, dict.fromkeys(range(partitions), 5), start=per_partition
    )
    second = KafkaConsumer(**settings)
    try:
        second.subscribe([topic])
        starts = {p: committed.get(p, 0) for p in range(partitions)}
        expected = [(p, o) for p in range(partitions) for o in range(starts[p], per_partition + 5)]
        resumed = read(second, len(expected))
        assert not second.poll(timeout_ms=500), "records beyond the end"
        stored = {p: second.committed(TopicPartition(topic, p)) for p in committed}
    finally:
        second.close(autocommit=False)
    assert stored == committed
    assert sorted(resumed) == expected
    for p in range(partitions):
        mine = [o for q, o in resumed if q == p]
        assert mine[0] == starts[p], f"partition {p} resumed at {mine[0]}, not {starts[p]}"
    duplicates = set(processed + tail) & set(resumed)
    assert duplicates == {r for r in tail if r[1] >= committed.get(r[0], 0)}
    assert set(processed) & set(resumed) == set()
    assert 0 < sum(committed.values()) < partitions * per_partition
