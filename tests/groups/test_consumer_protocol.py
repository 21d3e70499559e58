"""Consumer groups under Kafka 4's consumer group protocol (KIP-848, group.protocol=consumer),
driven through confluent-kafka.

The broker assigns the partitions, and members learn of a change at their next heartbeat,
so partitions move incrementally: a member is told to give some up, and only once it has
let them go are they handed to another. The tests check what an application relies on:
partitions split evenly and disjointly, members joining or leaving mid-stream lose no
records, committed offsets are where a new member resumes, the admin client reports the
group as a consumer-protocol group with its members and their assignments, a regex
subscription picks up a topic created later, and a static member that restarts gets its
partitions back.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from minibroker.testing.backends import KafkaService
from tests.groups.conftest import unique, wait_until

PARTITIONS = 6
# Members hear of a change at their next heartbeat (Kafka's default interval is 5 s),
# and moving a partition takes a revocation and an assignment: a few heartbeats.
SETTLE = 30.0
ADMIN_TIMEOUT = 15.0
DRAIN = 15.0  # seconds for settled members to read what is left
# Kafka re-evaluates a group's patterns at most every 10 s, on a heartbeat, and hands
# the result out at a later one: a new topic is picked up within about 20 s.
REGEX_PICKUP = 40.0
# Longer than Kafka's heartbeat interval (5 s), far shorter than its session timeout (45 s).
AWAY = 6.0
BATCH = 500  # records a member takes per poll, and so at most in flight per partition

Record = tuple[str, int, int]  # topic, partition, offset


@pytest.fixture(autouse=True)
def _consumer_protocol_served(pytestconfig: pytest.Config) -> None:
    """Kafka 3.9 ships the consumer group protocol as a preview, off by default."""
    backend = pytestconfig.getoption("kafka_backend") or pytestconfig.getini("kafka_backend")
    line = pytestconfig.getoption("kafka_jvm_version") or pytestconfig.getini("kafka_jvm_version")
    if backend == "kafka-jvm" and str(line) == "3.9":
        pytest.skip("Kafka 3.9 does not serve group.protocol=consumer by default")


# --- topics, records, admin ---


def admin_for(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    """Create `name` and wait until every partition has a leader."""
    admin = admin_for(bootstrap)
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1)
    admin.create_topics([topic], operation_timeout=ADMIN_TIMEOUT)[name].result(ADMIN_TIMEOUT)

    def ready() -> bool:
        found = admin.list_topics(topic=name, timeout=ADMIN_TIMEOUT).topics.get(name)
        return (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        )

    assert wait_until(ready, ADMIN_TIMEOUT, interval=0.1), f"{name} has no leaders"


def described(admin: AdminClient, group: str) -> Any:
    """The group's ConsumerGroupDescription."""
    futures = admin.describe_consumer_groups([group], request_timeout=ADMIN_TIMEOUT)
    return futures[group].result(ADMIN_TIMEOUT)


def members_of(admin: AdminClient, group: str) -> int:
    """How many members the group has (none while the broker does not know it)."""
    try:
        return len(described(admin, group).members)
    except KafkaException:
        return 0


class Writer:
    """A producer that remembers where each acknowledged record landed."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
        self.delivered: list[Record] = []
        self.failures: list[KafkaError] = []

    def _report(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failures.append(error)
        else:
            self.delivered.append((message.topic(), message.partition(), message.offset()))

    def send(self, topic: str, partitions: Iterable[int], per_partition: int = 1) -> None:
        for partition in partitions:
            for _ in range(per_partition):
                self.producer.produce(topic, b"x", partition=partition, on_delivery=self._report)
        self.producer.poll(0)

    def flush(self) -> list[Record]:
        assert self.producer.flush(ADMIN_TIMEOUT) == 0, "records were not acknowledged"
        assert not self.failures, self.failures
        return self.delivered


def produce(
    bootstrap: str, topic: str, per_partition: int, partitions: int = PARTITIONS
) -> list[Record]:
    writer = Writer(bootstrap)
    writer.send(topic, range(partitions), per_partition)
    return writer.flush()


# --- members ---


class Member:
    """A confluent-kafka consumer speaking the consumer group protocol.

    It commits synchronously after each batch it processes, and notes its rebalance
    callbacks (incremental under this protocol: on_assign names the partitions added,
    on_revoke those taken away)."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        name: str,
        topics: list[str],
        *,
        batch: int = BATCH,
        **settings: Any,
    ) -> None:
        self.name = name
        self.batch = batch
        self.owned: set[tuple[str, int]] = set()
        self.events: list[tuple[float, str, tuple[tuple[str, int], ...]]] = []
        self.records: list[Record] = []
        self.errors: list[KafkaError] = []
        self.commit_errors: list[KafkaException] = []
        self.closed = False
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "log_level": 3,
                **settings,
            }
        )
        self.consumer.subscribe(
            topics,
            on_assign=lambda _, parts: self._note("assigned", parts),
            on_revoke=lambda _, parts: self._note("revoked", parts),
            on_lost=lambda _, parts: self._note("lost", parts),
        )

    def _note(self, kind: str, parts: list[TopicPartition]) -> None:
        moved = {(tp.topic, tp.partition) for tp in parts}
        self.events.append((time.monotonic(), kind, tuple(sorted(moved))))
        if kind == "assigned":
            self.owned |= moved
        else:
            self.owned -= moved

    def partitions(self, topic: str) -> set[int]:
        """What the callbacks handed this member so far."""
        return {p for t, p in self.owned if t == topic}

    def assignment(self, topic: str) -> set[int]:
        """What the client says it holds."""
        return {tp.partition for tp in self.consumer.assignment() if tp.topic == topic}

    def changes_since(self, moment: float) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
        return [(kind, parts) for at, kind, parts in self.events if at >= moment]

    def pump(self, timeout: float = 0.05) -> None:
        """Consume what is there, then commit it (synchronously) before the next batch."""
        if self.closed:
            return
        batch = self.consumer.consume(self.batch, timeout)
        positions: dict[tuple[str, int], int] = {}
        for message in batch:
            error = message.error()
            if error is not None:
                self.errors.append(error)
                continue
            record = (message.topic(), message.partition(), message.offset())
            self.records.append(record)
            positions[record[:2]] = record[2] + 1
        if positions:
            offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
            try:
                self.consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                self.commit_errors.append(exc)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


@pytest.fixture
def members() -> Iterator[list[Member]]:
    """Members a test starts; every one is closed at the end, whatever happens."""
    started: list[Member] = []
    try:
        yield started
    finally:
        for member in started:
            member.close()


def pump_all(members: Iterable[Member]) -> None:
    for member in members:
        member.pump()


def consumed(members: Iterable[Member]) -> list[Record]:
    return sorted(r for m in members for r in m.records)


def split(members: list[Member], topic: str, sizes: list[int]) -> bool:
    """Each member's callbacks agree with its client's assignment, and the members hold
    every partition exactly once, in shares of `sizes`."""
    held = [m.partitions(topic) for m in members]
    if any(m.assignment(topic) != mine for m, mine in zip(members, held, strict=True)):
        return False
    flat = sorted(p for mine in held for p in mine)
    return flat == list(range(PARTITIONS)) and sorted(map(len, held)) == sorted(sizes)


def settle(
    members: list[Member],
    condition: Callable[[], bool],
    what: str,
    *,
    pump: Callable[[], object] | None = None,
    timeout: float = SETTLE,
) -> float:
    """Pump the members until `condition`; returns how long it took."""
    started = time.monotonic()
    assert wait_until(condition, timeout, pump=pump or (lambda: pump_all(members))), (
        f"{what} within {timeout:g}s: "
        + "; ".join(f"{m.name} holds {sorted(m.owned)} after {m.events}" for m in members)
    )
    return time.monotonic() - started


def start(
    broker: KafkaService,
    members: list[Member],
    group: str,
    topic: str,
    names: Iterable[str],
    **settings: Any,
) -> list[Member]:
    added = [Member(broker.bootstrap_servers, group, name, [topic], **settings) for name in names]
    members.extend(added)
    return added


# --- the tests ---


@pytest.mark.parity
def test_three_members_share_six_partitions_and_read_each_record_once(
    broker: KafkaService, members: list[Member]
) -> None:
    topic, group = unique("kip848-share"), unique("group")
    create_topic(broker.bootstrap_servers, topic)
    produced = produce(broker.bootstrap_servers, topic, 100)
    # Small batches: the first member is still reading when partitions move to the others,
    # who must carry on from its commits.
    trio = start(broker, members, group, topic, ["c1", "c2", "c3"], batch=5)

    settle(
        trio,
        lambda: split(trio, topic, [2, 2, 2]) and len(consumed(trio)) >= len(produced),
        "three members did not end with two partitions each and every record read",
    )
    assert consumed(trio) == sorted(produced), "records lost or read twice"
    for member in trio:
        assert not member.errors and not member.commit_errors, (member.errors, member.commit_errors)
        assert len(member.consumer.assignment()) == 2


@pytest.mark.parity
def test_a_fourth_member_joining_mid_stream_takes_partitions_and_loses_nothing(
    broker: KafkaService, members: list[Member]
) -> None:
    topic, group = unique("kip848-join"), unique("group")
    create_topic(broker.bootstrap_servers, topic)
    writer = Writer(broker.bootstrap_servers)
    trio = start(broker, members, group, topic, ["c1", "c2", "c3"])

    def produce_and_pump() -> None:
        writer.send(topic, range(PARTITIONS))
        pump_all(members)

    settle(trio, lambda: split(trio, topic, [2, 2, 2]), "three members", pump=produce_and_pump)
    joined = time.monotonic()
    start(broker, members, group, topic, ["c4"])
    settle(
        members,
        lambda: split(members, topic, [2, 2, 1, 1]),
        "four members did not split the partitions 2, 2, 1, 1",
        pump=produce_and_pump,
    )
    produced = writer.flush()
    settle(
        members,
        lambda: set(produced) <= set(consumed(members)),
        "the records produced were not all consumed",
        timeout=DRAIN,
    )

    assignments = [m.assignment(topic) for m in members]
    assert sorted(p for mine in assignments for p in mine) == list(range(PARTITIONS))
    assert members[3].partitions(topic), "the new member got nothing"
    # Only partitions that changed hands can have been read twice, and only the ones
    # in flight when they moved (every batch is committed before the next).
    moved = {p for m in members for kind, parts in m.changes_since(joined) for _, p in parts}
    duplicates = [r for r, n in Counter(consumed(members)).items() if n > 1]
    assert {p for _, p, _ in duplicates} <= moved, (duplicates, moved)
    assert len(duplicates) <= BATCH * len(moved), duplicates
    for member in members:
        assert not member.errors and not member.commit_errors, (member.errors, member.commit_errors)


@pytest.mark.parity
def test_a_member_that_closes_hands_its_partitions_to_the_others(
    broker: KafkaService, members: list[Member]
) -> None:
    topic, group = unique("kip848-leave"), unique("group")
    create_topic(broker.bootstrap_servers, topic)
    before = produce(broker.bootstrap_servers, topic, 20)
    trio = start(broker, members, group, topic, ["c1", "c2", "c3"])
    settle(
        trio,
        lambda: split(trio, topic, [2, 2, 2]) and len(consumed(trio)) >= len(before),
        "three members did not settle and read the first records",
    )
    leaving, staying = trio[2], trio[:2]
    held = leaving.partitions(topic)
    read_by_leaver = len(leaving.records)

    leaving.close()
    after = produce(broker.bootstrap_servers, topic, 20)
    settle(
        staying,
        lambda: split(staying, topic, [3, 3]) and set(after) <= set(consumed(staying)),
        "the two members left did not take over and read the later records",
    )
    assert held <= staying[0].partitions(topic) | staying[1].partitions(topic)
    assert len(leaving.records) == read_by_leaver
    assert consumed(trio) == sorted(before + after), "records lost or read twice"
    for member in trio:
        assert not member.errors and not member.commit_errors, (member.errors, member.commit_errors)


@pytest.mark.parity
def test_a_new_member_resumes_after_the_offsets_committed_by_a_closed_one(
    broker: KafkaService,
) -> None:
    topic, group = unique("kip848-commit"), unique("group")
    create_topic(broker.bootstrap_servers, topic)
    before = produce(broker.bootstrap_servers, topic, 20)
    settings = {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "log_level": 3,
    }

    def read(consumer: Consumer, count: int) -> list[Record]:
        got: list[Record] = []
        deadline = time.monotonic() + SETTLE
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.topic(), message.partition(), message.offset()))
        return got

    first = Consumer({**settings, "client.id": "first"})
    try:
        first.subscribe([topic])
        processed = read(first, 50)
        assert len(processed) == 50
        first.commit(asynchronous=False)  # the offsets after the records polled
        committed = {p: o + 1 for _, p, o in sorted(processed)}
        stored = first.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
        assert {tp.partition: tp.offset for tp in stored if tp.offset >= 0} == committed
    finally:
        first.close()

    later = produce(broker.bootstrap_servers, topic, 5)
    second = Consumer({**settings, "client.id": "second"})
    try:
        second.subscribe([topic])
        expected = sorted(r for r in before + later if r[2] >= committed.get(r[1], 0))
        resumed = read(second, len(expected))
        assert second.poll(0.5) is None, "records beyond the end"
    finally:
        second.close()
    assert sorted(resumed) == expected
    assert not set(processed) & set(resumed), "committed records were read again"
    for p in range(PARTITIONS):
        mine = [o for _, q, o in resumed if q == p]
        assert mine[0] == committed.get(p, 0), f"partition {p} resumed at {mine[0]}"


@pytest.mark.parity
def test_the_admin_client_lists_and_describes_a_consumer_protocol_group(
    broker: KafkaService, members: list[Member]
) -> None:
    topic, group = unique("kip848-admin"), unique("group")
    create_topic(broker.bootstrap_servers, topic)
    trio = start(broker, members, group, topic, ["c1", "c2", "c3"])
    settle(trio, lambda: split(trio, topic, [2, 2, 2]), "three members did not settle")
    admin = admin_for(broker.bootstrap_servers)

    def listed(**filters: Any) -> dict[str, Any]:
        result = admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT, **filters)
        listing = result.result(ADMIN_TIMEOUT)
        assert not listing.errors, listing.errors
        return {g.group_id: g for g in listing.valid}

    def stable() -> bool:
        found = listed().get(group)
        return found is not None and found.state == ConsumerGroupState.STABLE

    settle(trio, stable, "the group was not listed as stable")
    listing = listed()[group]
    assert listing.type == ConsumerGroupType.CONSUMER
    assert not listing.is_simple_consumer_group
    assert group in listed(types={ConsumerGroupType.CONSUMER})
    assert group not in listed(types={ConsumerGroupType.CLASSIC})
    assert group in listed(states={ConsumerGroupState.STABLE})

    description = described(admin, group)
    assert description.group_id == group
    assert description.type == ConsumerGroupType.CONSUMER
    assert description.state == ConsumerGroupState.STABLE
    assert not description.is_simple_consumer_group
    assert description.coordinator is not None and description.coordinator.id >= 0
    assert len(description.members) == 3
    by_client = {m.client_id: m for m in description.members}
    assert set(by_client) == {"c1", "c2", "c3"}
    assert len({m.member_id for m in description.members}) == 3
    reported = {
        name: {tp.partition for tp in by_client[name].assignment.topic_partitions}
        for name in by_client
    }
    # What the broker reports each member holds is what that member's client holds.
    assert reported == {m.name: m.assignment(topic) for m in trio}
    assert sorted(p for held in reported.values() for p in held) == list(range(PARTITIONS))
    for member in description.members:
        assert {tp.topic for tp in member.assignment.topic_partitions} == {topic}
        assert member.group_instance_id is None
        if member.target_assignment is not None:  # settled: target and current agree
            target = {tp.partition for tp in member.target_assignment.topic_partitions}
            assert target == reported[member.client_id]


@pytest.mark.parity
def test_a_regex_subscription_picks_up_a_topic_created_later(
    broker: KafkaService, members: list[Member]
) -> None:
    prefix = unique("kip848rx")
    matching, other = f"{prefix}-late", f"not-{prefix}-late"
    group = unique("group")
    member = Member(broker.bootstrap_servers, group, "rx", [f"^{prefix}-.*"])
    members.append(member)
    # The member has joined, its pattern matching nothing yet, before the topic exists.
    admin = admin_for(broker.bootstrap_servers)
    settle(members, lambda: members_of(admin, group) == 1, "the member did not join")
    assert not member.owned

    create_topic(broker.bootstrap_servers, other, 2)
    create_topic(broker.bootstrap_servers, matching, 2)
    produced = produce(broker.bootstrap_servers, matching, 10, partitions=2)
    produce(broker.bootstrap_servers, other, 10, partitions=2)
    settle(
        members,
        lambda: set(produced) <= set(member.records),
        f"the regex subscription did not read {matching}",
        timeout=REGEX_PICKUP,
    )
    assert member.owned == {(matching, 0), (matching, 1)}
    assert sorted(member.records) == sorted(produced), "records of another topic, or twice"
    assert not member.errors, member.errors


@pytest.mark.parity
def test_a_static_member_restarting_within_its_session_gets_its_partitions_back(
    broker: KafkaService, members: list[Member]
) -> None:
    topic, group = unique("kip848-static"), unique("group")
    create_topic(broker.bootstrap_servers, topic)
    bootstrap = broker.bootstrap_servers
    static = Member(bootstrap, group, "static", [topic], **{"group.instance.id": "instance-1"})
    other = Member(bootstrap, group, "other", [topic])
    members.extend([static, other])
    settle(members, lambda: split(members, topic, [3, 3]), "two members did not settle")
    held, others = static.partitions(topic), other.partitions(topic)

    restarted_at = time.monotonic()
    static.close()
    # Away for longer than a heartbeat interval, but well within the session timeout:
    # its partitions wait for it rather than moving to the other member.
    deadline = time.monotonic() + AWAY
    while time.monotonic() < deadline:
        other.pump()
    assert other.partitions(topic) == others == other.assignment(topic)
    again = Member(bootstrap, group, "static-again", [topic], **{"group.instance.id": "instance-1"})
    members.append(again)
    pair = [again, other]
    settle(pair, lambda: split(pair, topic, [3, 3]), "the restarted static member did not settle")
    assert again.partitions(topic) == held, "the static member did not get its partitions back"
    assert other.partitions(topic) == others
    assert other.changes_since(restarted_at) == [], "the other member saw a rebalance"
