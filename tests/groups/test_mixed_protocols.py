"""Mixed groups: classic members and Kafka 4 consumer-protocol members in one group, the
way users move a live group from one protocol to the other.

A member with group.protocol=consumer joining a live classic group converts it to a
consumer-protocol group (an online upgrade): the classic members stay, the broker
assigns everyone, and the classic members are told to rejoin. When the last
consumer-protocol member leaves, the group goes back to the classic protocol (an online
downgrade) and its classic members rebalance among themselves. Records produced at each
step must all be read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer

from minibroker.testing.backends import KafkaService
from tests.groups.conftest import session_ms_for, skip_before_kafka_4, unique, wait_until

PARTITIONS = 6
SETTLE = 40.0  # Kafka 4.4's members hear of changes every 5 s; a move takes a few
# A conversion may be refused while the classic group rebalances (a new member tries
# again) and then moves every partition: on a loaded machine Kafka 4.4 takes longer.
CONVERT = 90.0
PER_STEP = 300  # records produced at each step


class ClassicMember:
    """A classic-protocol member: confluent-kafka (range or cooperative-sticky), polled
    from the test's thread, or kafka-python (range), which polls in a thread of its own
    (its poll blocks through a rebalance)."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, session_ms: int):
        self.client = client
        self.records: set[tuple[int, int]] = set()
        if client == "kafka-python":
            self.python: KafkaConsumer | None = KafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=group,
                session_timeout_ms=session_ms,
                heartbeat_interval_ms=200,
                auto_offset_reset="earliest",
                retry_backoff_ms=50,
                # A leader that assigned before it saw the new topic's partitions notices
                # them at its next metadata refresh and rebalances: make that soon.
                metadata_max_age_ms=500,
            )
            self.python.subscribe([topic])
            self.confluent: Consumer | None = None
            self._lock = threading.Lock()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        else:
            strategy = client.removeprefix("confluent-kafka-")
            self.confluent = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": group,
                    "partition.assignment.strategy": strategy,
                    "session.timeout.ms": session_ms,
                    "heartbeat.interval.ms": 200,
                    "auto.offset.reset": "earliest",
                    "auto.commit.interval.ms": 200,
                }
            )
            self.confluent.subscribe([topic])
            self.python = None

    def _run(self) -> None:
        assert self.python is not None
        while not self._stop.is_set():
            batches = self.python.poll(timeout_ms=50)
            with self._lock:
                for tp, found in batches.items():
                    self.records.update((tp.partition, r.offset) for r in found)

    def poll(self) -> None:
        if self.python is not None:
            return
        assert self.confluent is not None
        for message in self.confluent.consume(200, 0.02):
            if message.error() is None:
                self.records.add((message.partition(), message.offset()))

    def seen(self) -> set[tuple[int, int]]:
        if self.python is not None:
            with self._lock:
                return set(self.records)
        return set(self.records)

    def owned(self) -> set[int]:
        if self.python is not None:
            return {tp.partition for tp in self.python.assignment()}
        assert self.confluent is not None
        return {tp.partition for tp in self.confluent.assignment()}

    def close(self) -> None:
        if self.python is not None:
            self._stop.set()
            self._thread.join(10)
            self.python.close()
        elif self.confluent is not None:
            self.confluent.close()


class ConsumerProtocolMember(ClassicMember):
    """A consumer-protocol member. Kafka refuses to convert a classic group in the middle
    of a rebalance (GROUP_ID_NOT_FOUND, which librdkafka makes fatal); `refused` says so,
    and the test starts another member, as an application would."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.client = "consumer-protocol"
        self.records = set()
        self.python = None
        self.refused = False
        self.confluent = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 200,
            }
        )
        self.confluent.subscribe([topic])

    def poll(self) -> None:
        assert self.confluent is not None
        for message in self.confluent.consume(200, 0.02):
            error = message.error()
            if error is None:
                self.records.add((message.partition(), message.offset()))
            elif error.fatal() or error.code() == KafkaError._FATAL:
                # Reported either way: as the error itself, or as _FATAL naming it.
                assert error.code() == KafkaError.GROUP_ID_NOT_FOUND or (
                    "group id does not exist" in error.str()
                ), error
                self.refused = True


@pytest.fixture(autouse=True)
def _consumer_protocol_served(pytestconfig: pytest.Config) -> None:
    skip_before_kafka_4(pytestconfig)


@pytest.fixture
def members() -> Iterator[list[ClassicMember]]:
    started: list[ClassicMember] = []
    yield started
    for member in started:
        member.close()


def _settled(members: list[ClassicMember], sizes: list[int]) -> bool:
    for member in members:
        member.poll()
    owned = [member.owned() for member in members]
    every = [p for partitions in owned for p in partitions]
    return sorted(len(o) for o in owned) == sizes and sorted(every) == list(range(PARTITIONS))


def _produce(bootstrap: str, topic: str, produced: set[tuple[int, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    offsets: list[tuple[int, int]] = []

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        offsets.append((message.partition(), message.offset()))

    for index in range(PER_STEP):
        producer.produce(topic, b"v", partition=index % PARTITIONS, on_delivery=delivered)
    producer.flush(15)
    assert len(offsets) == PER_STEP
    produced.update(offsets)


def _read_everything(
    members: list[ClassicMember], produced: set[tuple[int, int]], read: set[tuple[int, int]]
) -> bool:
    """Whether the members read every record produced, counting what earlier members read
    (`read`, updated)."""

    def done() -> bool:
        for member in members:
            member.poll()
            read.update(member.seen())
        return produced <= read

    return wait_until(done, SETTLE)


def _group_type(admin: AdminClient, group: str) -> str:
    """The group's type as the admin client lists it: CLASSIC or CONSUMER."""
    (listed,) = [g for g in admin.list_consumer_groups().result(15).valid if g.group_id == group]
    return str(listed.type.name)


@pytest.mark.parity
@pytest.mark.parametrize(
    # kafka-python's pair sometimes never settles as a classic group on a loaded machine
    # (before any consumer-protocol member joins); kept in ClassicMember, not run here.
    "classic",
    ["confluent-kafka-range", "confluent-kafka-cooperative-sticky"],
)
def test_a_live_classic_group_upgrades_and_downgrades_without_losing_records(
    broker: KafkaService, members: list[ClassicMember], classic: str, pytestconfig: pytest.Config
) -> None:
    backend = pytestconfig.getoption("kafka_backend") or pytestconfig.getini("kafka_backend")
    if backend == "kafka-jvm" and classic == "confluent-kafka-cooperative-sticky":
        # Measured on Kafka 4.4.0 (3 runs in 12): the first consumer-protocol member is
        # fenced with GROUP_ID_NOT_FOUND just after the conversion, the group goes back to
        # classic, and Kafka then refuses every later upgrade of the stable classic group
        # for over a minute. The eager (range) pair converts every time there.
        pytest.skip("Kafka 4.4 does not reliably upgrade a cooperative-sticky librdkafka group")
    bootstrap = broker.bootstrap_servers
    topic, group = unique("mixed-topic"), unique("mixed-group")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    produced: set[tuple[int, int]] = set()
    read: set[tuple[int, int]] = set()
    session_ms = session_ms_for(broker)

    members.extend(ClassicMember(classic, bootstrap, topic, group, session_ms) for _ in range(2))
    assert wait_until(lambda: _settled(members, [3, 3]), SETTLE), "classic group of two"
    _produce(bootstrap, topic, produced)
    assert _read_everything(members, produced, read), "read by the classic group"

    # A consumer-protocol member joins: the group converts and the broker assigns all.
    modern = ConsumerProtocolMember(bootstrap, topic, group)
    members.append(modern)

    def upgraded() -> bool:
        nonlocal modern
        settled = _settled(members, [2, 2, 2])
        if modern.refused:  # it came mid-rebalance: another one tries
            members.remove(modern)
            modern.close()
            modern = ConsumerProtocolMember(bootstrap, topic, group)
            members.append(modern)
        return settled

    assert wait_until(upgraded, CONVERT), "upgraded group of three"
    assert _group_type(admin, group) == "CONSUMER"
    _produce(bootstrap, topic, produced)
    assert _read_everything(members, produced, read), "read by the mixed group"

    # The last consumer-protocol member leaves: the classic members take over again.
    members.remove(modern)
    modern.close()
    assert wait_until(lambda: _settled(members, [3, 3]), SETTLE), "downgraded group of two"
    assert _group_type(admin, group) == "CLASSIC"
    _produce(bootstrap, topic, produced)
    assert _read_everything(members, produced, read), "read by the downgraded group"
