"""Eighteen consumers on a six-partition topic with a slow handler (10 ms a record), in a
consumer group and in a share group (KIP-932), with confluent-kafka's clients.

A consumer group gives each partition to one member: 6 members get records and 12 sit
idle however slow the handler is. A share group lets several members read one partition
and hands each record to one of them at a time, so all 18 get records.

Each consumer runs in a thread of its own (the handler sleeps). The share consumers
fetch at most 10 records at a time (max.poll.records) and the producer writes batches of
at most 10 records: a broker may hand out a whole stored batch to one member.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tests.groups.conftest import skip_before_kafka_4

pytestmark = pytest.mark.parity

PARTITIONS = 6
MEMBERS = 18
HANDLER_S = 0.010  # the slow handler: 10 ms a record
BATCH = 10  # records per produced batch and per share fetch
BACKLOG = 2 * MEMBERS * BATCH  # records kept waiting while a share group's members join
SETTLE_S = 1.0  # a consumer group counts as settled once unchanged this long
WAIT_S = 45.0  # cap on each wait; a real Kafka's share heartbeat interval is 5 s
QUIET = {"log_level": 3}

Record = tuple[int, int]  # (partition, offset)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


class Handled:
    """Which member handled which records, filled by the members' threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_member: dict[str, list[Record]] = {}

    def add(self, member: str, record: Record) -> None:
        time.sleep(HANDLER_S)
        with self._lock:
            self._by_member.setdefault(member, []).append(record)

    def by_member(self) -> dict[str, list[Record]]:
        with self._lock:
            return {member: list(records) for member, records in self._by_member.items()}

    def distinct(self) -> set[Record]:
        return {record for records in self.by_member().values() for record in records}


class Members:
    """Consumers, each polling in a thread of its own until stopped."""

    def __init__(self) -> None:
        self.handled = Handled()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def start(
        self, name: str, poll_once: Callable[[], list[Any]], close: Callable[[], Any]
    ) -> None:
        def run() -> None:
            try:
                while not self._stop.is_set():
                    for message in poll_once():
                        if message.error() is not None:
                            self.errors.append(f"{name}: {message.error()}")
                            continue
                        self.handled.add(name, (message.partition(), message.offset()))
            finally:
                close()

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


def produce(bootstrap: str, topic: str, per_partition: int) -> set[Record]:
    """Write `per_partition` records to every partition; returns their (partition, offset)."""
    written: set[Record] = set()

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        written.add((message.partition(), message.offset()))

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": BATCH, **QUIET}
    )
    for index in range(per_partition * PARTITIONS):
        producer.produce(
            topic, b"job-%d" % index, partition=index % PARTITIONS, on_delivery=delivered
        )
    assert producer.flush(30) == 0
    return written


def poll_one(consumer: Consumer) -> Callable[[], list[Any]]:
    return lambda: [m for m in [consumer.poll(0.05)] if m is not None]


def poll_batch(consumer: ShareConsumer) -> Callable[[], list[Any]]:
    return lambda: list(consumer.poll(0.05))


def set_group_config(bootstrap: str, group: str, name: str, value: str) -> None:
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.incremental_alter_configs([resource])[resource].result(15)


def test_consumer_group_keeps_six_of_eighteen_busy(kafka_broker: Any, kafka_topic: Any) -> None:
    bootstrap, topic, group = (
        kafka_broker.bootstrap_servers,
        kafka_topic(partitions=PARTITIONS),
        unique("group"),
    )
    members = Members()
    owned: dict[str, frozenset[int]] = {}
    changed = [time.monotonic()]

    def on_assign(name: str) -> Callable[[Any, list[Any]], None]:
        def record(_: Any, partitions: list[Any]) -> None:
            owned[name] = frozenset(p.partition for p in partitions)
            changed[0] = time.monotonic()

        return record

    try:
        for index in range(MEMBERS):
            name = f"member-{index:02d}"
            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": group,
                    "client.id": name,
                    "auto.offset.reset": "earliest",
                    "heartbeat.interval.ms": 500,
                    **QUIET,
                }
            )
            consumer.subscribe([topic], on_assign=on_assign(name))
            members.start(
                name,
                poll_one(consumer),
                consumer.close,
            )

        def settled() -> bool:
            held = [p for parts in dict(owned).values() for p in parts]
            return (
                len(owned) == MEMBERS
                and sorted(held) == list(range(PARTITIONS))
                and time.monotonic() - changed[0] >= SETTLE_S
            )

        assert wait_until(settled, WAIT_S), f"the group did not settle: {owned}"
        written = produce(bootstrap, topic, per_partition=30)
        assert wait_until(lambda: members.handled.distinct() >= written, WAIT_S)
    finally:
        members.stop()

    assert not members.errors, members.errors
    handled = members.handled.by_member()
    busy = {name for name, records in handled.items() if records}
    assert len(busy) == PARTITIONS, sorted(busy)
    assert len(set(owned) - busy) == MEMBERS - PARTITIONS
    for name in busy:  # each busy member read the one partition it owns
        assert {partition for partition, _ in handled[name]} == set(owned[name])


def test_share_group_puts_all_eighteen_to_work(
    pytestconfig: pytest.Config, kafka_broker: Any, kafka_topic: Any
) -> None:
    skip_before_kafka_4(pytestconfig)  # share groups are served from Kafka 4.2
    bootstrap, topic, group = (
        kafka_broker.bootstrap_servers,
        kafka_topic(partitions=PARTITIONS),
        unique("share"),
    )
    # a share group starts at the end of the partitions unless told otherwise
    set_group_config(bootstrap, group, "share.auto.offset.reset", "earliest")
    members = Members()
    names = [f"member-{index:02d}" for index in range(MEMBERS)]
    written: set[Record] = set()
    try:
        for name in names:
            consumer = ShareConsumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": group,
                    "client.id": name,
                    "max.poll.records": BATCH,
                    **QUIET,
                }
            )
            consumer.subscribe([topic])
            members.start(name, poll_batch(consumer), consumer.close)

        # Keep a backlog waiting until every member has had some work: members join one
        # by one, and a member given partitions then finds records whenever it fetches.
        deadline = time.monotonic() + WAIT_S
        while len(members.handled.by_member()) < MEMBERS and time.monotonic() < deadline:
            if len(written) - len(members.handled.distinct()) < BACKLOG:
                written |= produce(bootstrap, topic, per_partition=BACKLOG // PARTITIONS)
            time.sleep(0.05)
        assert wait_until(lambda: members.handled.distinct() >= written, WAIT_S)
    finally:
        members.stop()

    assert not members.errors, members.errors
    handled = members.handled.by_member()
    assert sorted(name for name, records in handled.items() if records) == names
    assert members.handled.distinct() == written
