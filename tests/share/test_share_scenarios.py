"""Share groups (KIP-932) through each client's share consumer: the catalogue of
tests/interop/SCENARIOS.md ("Share group scenarios"), each scenario written once and run
by every driver of share_clients.py (confluent-kafka's ShareConsumer, the Java
KafkaShareConsumer, franz-go).

Every scenario is marked `parity`: CI runs it against Apache Kafka 4.4 too. Groups are set
up as a user would: `share.auto.offset.reset=earliest` and the other share.* settings go to
the GROUP resource through IncrementalAlterConfigs, and the group is made ready by a
member that joins until it is assigned the topic and leaves (share_group_ready: Kafka
initialises a new share group's state a moment after its first member joins, and a
client hears of its assignment only at its next heartbeat, 5 s later at the least). An
acquisition lock runs out on the embedded broker by `broker.clock.advance`, on a real
Kafka by waiting out the shortest lock it allows (15 s), which only the lock-expiry
scenario does.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from minibroker import Broker
from minibroker.testing.backends import KafkaService
from tests.groups.conftest import skip_before_kafka_4, unique
from tests.interop.test_client_matrix import Built
from tests.share.share_clients import (
    SHARE_CLIENTS,
    Delivery,
    ProcessShareMember,
    ShareClient,
    ShareGroupAdmin,
    ShareMember,
    share_client,
    share_group_ready,
)

pytestmark = pytest.mark.parity

TIMEOUT = 30.0  # seconds for records to arrive
POLL = 0.3  # seconds one poll waits
# Kafka's smallest acquisition lock (group.share.min.record.lock.duration.ms).
SHORT_LOCK_MS = 15_000


@pytest.fixture
def broker(kafka_broker: KafkaService) -> KafkaService:
    """A fresh minibroker; with --kafka-backend, that Kafka."""
    return kafka_broker


@pytest.fixture(scope="session")
def built_share_drivers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    yield Built(tmp_path_factory)


@pytest.fixture(params=SHARE_CLIENTS)
def client(
    request: pytest.FixtureRequest, pytestconfig: pytest.Config, built_share_drivers: Built
) -> ShareClient:
    skip_before_kafka_4(pytestconfig)
    return share_client(request.param, built_share_drivers)


@pytest.fixture
def members() -> Iterator[list[ShareMember]]:
    """The members a scenario starts; closed at its end whatever happens."""
    started: list[ShareMember] = []
    yield started
    for member in started:
        with contextlib.suppress(Exception):  # a member that already failed is gone anyway
            member.kill()


# --- set-up as a user does it ---


def produce(broker: KafkaService, topic: str, values: list[str]) -> None:
    """Records in small batches, so that a share fetch can stop between them."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "batch.num.messages": 10, "log_level": 3}
    )
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(15) == 0, "records were not acknowledged"


def configure_group(broker: KafkaService, group: str, **settings: str) -> None:
    """share.auto.offset.reset=earliest and `settings` (dots as underscores) on the group."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 3})
    entries = {"share.auto.offset.reset": "earliest"}
    entries.update({name.replace("_", "."): value for name, value in settings.items()})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in entries.items()
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def setup(broker: KafkaService, records: int, **settings: str) -> tuple[str, str]:
    """A topic of one partition with `records` records, and a group configured and made
    ready (share_group_ready) for it."""
    topic, group = unique("share"), unique("share-group")
    broker.create_topic(topic, 1)
    configure_group(broker, group, **settings)
    share_group_ready(broker.bootstrap_servers, group, topic)
    produce(broker, topic, [str(i) for i in range(records)])
    return topic, group


def embedded(broker: KafkaService) -> bool:
    return isinstance(broker, Broker)


# --- polling ---


def poll_all(members: list[ShareMember], timeout: float = POLL) -> list[list[Delivery]]:
    """One poll of each member; members in processes poll at the same time."""
    waiting = [
        m.start_poll(timeout) if isinstance(m, ProcessShareMember) else None for m in members
    ]
    return [
        m.collect(t) if isinstance(m, ProcessShareMember) and t is not None else m.poll(timeout)
        for m, t in zip(members, waiting, strict=True)
    ]


def poll_until(
    member: ShareMember,
    enough: Callable[[list[Delivery]], bool],
    *,
    each: Callable[[Delivery], None] | None = None,
    timeout: float = TIMEOUT,
) -> list[Delivery]:
    """Poll until `enough(everything so far)`; `each` acknowledges each record as it comes
    (explicit mode needs every record acknowledged before the next poll)."""
    got: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while not enough(got):
        assert time.monotonic() < deadline, f"after {timeout:g} s only {offsets(got)}"
        batch = member.poll(POLL)
        for delivery in batch:
            if each is not None:
                each(delivery)
        got.extend(batch)
    return got


def offsets(deliveries: list[Delivery]) -> list[int]:
    return [d.offset for d in deliveries]


def has(*wanted: int) -> Callable[[list[Delivery]], bool]:
    return lambda got: set(wanted) <= set(offsets(got))


def accept_all(member: ShareMember) -> Callable[[Delivery], None]:
    return lambda delivery: member.acknowledge(delivery, "accept")


def check_count(delivery: Delivery, expected: int) -> None:
    """The delivery count, where the client exposes it."""
    if delivery.delivery_count is not None:
        assert delivery.delivery_count == expected, delivery


def next_is(member: ShareMember, broker: KafkaService, topic: str, offset: int) -> Delivery:
    """A record produced now at `offset` is the next this member gets (nothing before it is
    delivered again), as a first delivery."""
    produce(broker, topic, ["next"])
    got = poll_until(member, lambda got: bool(got), each=None)
    assert offsets(got) == [offset], f"expected only {offset} next, got {got}"
    check_count(got[0], 1)
    return got[0]


# --- the catalogue ---


def test_three_consumers_on_one_partition_share_every_record_once(
    broker: KafkaService, client: ShareClient, members: list[ShareMember]
) -> None:
    total, trickle = 300, 5
    topic, group = setup(broker, 0)
    members.extend(
        client.member(broker.bootstrap_servers, topic, group, explicit=False) for _ in range(3)
    )
    # A few records a round until every member has had some (a member hears of its
    # assignment at its next heartbeat: the first to hear would take a ready backlog
    # alone), then the rest at once.
    got: list[list[Delivery]] = [[], [], []]
    produced = 0
    deadline = time.monotonic() + TIMEOUT
    while sum(len(g) for g in got) < total:
        assert time.monotonic() < deadline, f"only {sum(len(g) for g in got)} of {total}"
        if produced < total:
            more = total - produced if all(got) else min(trickle, total - produced)
            produce(broker, topic, [str(i) for i in range(produced, produced + more)])
            produced += more
        for mine, batch in zip(got, poll_all(members), strict=True):
            mine.extend(batch)
    for member in members:
        assert member.commit() == {}
    everything = sorted(d.offset for g in got for d in g)
    assert everything == list(range(total)), "each record is delivered exactly once"
    assert all(d.delivery_count in (None, 1) for g in got for d in g)
    assert all(got), f"every consumer takes a share: {[len(g) for g in got]}"


def test_implicit_acknowledgement_accepts_on_the_next_poll(
    broker: KafkaService, client: ShareClient, members: list[ShareMember]
) -> None:
    topic, group = setup(broker, 10)
    first = client.member(broker.bootstrap_servers, topic, group, explicit=False)
    members.append(first)
    got = poll_until(first, has(*range(10)))
    assert sorted(offsets(got)) == list(range(10))
    first.poll(POLL)  # accepts the previous poll's records
    assert first.commit() == {}
    first.close()
    second = client.member(broker.bootstrap_servers, topic, group, explicit=False)
    members.append(second)
    next_is(second, broker, topic, 10)


def test_explicit_acknowledgement_accepts_each_record(
    broker: KafkaService, client: ShareClient, members: list[ShareMember]
) -> None:
    topic, group = setup(broker, 10)
    member = client.member(broker.bootstrap_servers, topic, group, explicit=True)
    members.append(member)
    got = poll_until(member, has(*range(10)), each=accept_all(member))
    assert sorted(offsets(got)) == list(range(10))
    assert member.commit() == {}
    member.acknowledge(next_is(member, broker, topic, 10), "accept")
    assert member.commit() == {}


def test_a_released_record_is_delivered_again_with_its_count_up(
    broker: KafkaService, client: ShareClient, members: list[ShareMember]
) -> None:
    topic, group = setup(broker, 5)
    member = client.member(broker.bootstrap_servers, topic, group, explicit=True)
    members.append(member)

    def release_the_first(delivery: Delivery) -> None:
        member.acknowledge(delivery, "release" if delivery.offset == 0 else "accept")

    first = poll_until(member, has(*range(5)), each=release_the_first)
    check_count(next(d for d in first if d.offset == 0), 1)
    assert member.commit() == {}
    again = poll_until(member, has(0), each=accept_all(member))
    assert offsets(again) == [0], "only the released record comes back"
    check_count(again[0], 2)
    assert member.commit() == {}


def test_a_rejected_record_is_never_delivered_again(
    broker: KafkaService, client: ShareClient, members: list[ShareMember]
) -> None:
    topic, group = setup(broker, 5)
    member = client.member(broker.bootstrap_servers, topic, group, explicit=True)
    members.append(member)

    def reject_the_first(delivery: Delivery) -> None:
        member.acknowledge(delivery, "reject" if delivery.offset == 0 else "accept")

    poll_until(member, has(*range(5)), each=reject_the_first)
    assert member.commit() == {}
    member.acknowledge(next_is(member, broker, topic, 5), "accept")
    assert member.commit() == {}


def test_an_unacknowledged_record_comes_back_when_its_lock_expires(
    broker: KafkaService, client: ShareClient, members: list[ShareMember]
) -> None:
    topic, group = setup(broker, 3, share_record_lock_duration_ms=str(SHORT_LOCK_MS))
    holder = client.member(broker.bootstrap_servers, topic, group, explicit=True)
    members.append(holder)
    held = poll_until(holder, has(0, 1, 2))  # acquired, never acknowledged
    assert all(d.delivery_count in (None, 1) for d in held)
    other = client.member(broker.bootstrap_servers, topic, group, explicit=True)
    members.append(other)
    if embedded(broker):
        assert isinstance(broker, Broker)
        other.poll(POLL)  # joined, and nothing to take while the locks hold
        broker.clock.advance(SHORT_LOCK_MS / 1000 + 1)
    back = poll_until(
        other, has(0, 1, 2), each=accept_all(other), timeout=SHORT_LOCK_MS / 1000 + TIMEOUT
    )
    assert sorted(offsets(back)) == [0, 1, 2]
    for delivery in back:
        check_count(delivery, 2)
    assert other.commit() == {}


def test_the_delivery_count_limit_archives_a_poison_record(
    broker: KafkaService, client: ShareClient, members: list[ShareMember]
) -> None:
    topic, group = setup(broker, 3, share_delivery_count_limit="2")
    member = client.member(broker.bootstrap_servers, topic, group, explicit=True)
    members.append(member)

    def release_the_poison(delivery: Delivery) -> None:
        member.acknowledge(delivery, "release" if delivery.offset == 0 else "accept")

    poll_until(member, has(0, 1, 2), each=release_the_poison)
    assert member.commit() == {}
    again = poll_until(member, has(0), each=release_the_poison)
    check_count(again[0], 2)
    assert member.commit() == {}
    # Released on its last permitted delivery: archived, not delivered a third time.
    member.acknowledge(next_is(member, broker, topic, 3), "accept")
    assert member.commit() == {}


def test_a_consumer_killed_mid_batch_loses_nothing(
    broker: KafkaService, client: ShareClient, members: list[ShareMember]
) -> None:
    total = 20
    topic, group = setup(broker, total, share_record_lock_duration_ms=str(SHORT_LOCK_MS))
    doomed = client.member(broker.bootstrap_servers, topic, group, explicit=True)
    members.append(doomed)
    taken = poll_until(doomed, lambda got: bool(got), each=None)
    accepted = {d.offset for d in taken[: len(taken) // 2]}
    for delivery in taken:
        if delivery.offset in accepted:
            doomed.acknowledge(delivery, "accept")
    assert doomed.commit() == {}
    doomed.kill()  # the rest of its batch unacknowledged
    survivor = client.member(broker.bootstrap_servers, topic, group, explicit=True)
    members.append(survivor)
    rest = set(range(total)) - accepted
    # Freed when the killed consumer's connection closes, or at the latest when the short
    # lock runs out.
    got = poll_until(
        survivor, has(*rest), each=accept_all(survivor), timeout=SHORT_LOCK_MS / 1000 + TIMEOUT
    )
    assert set(offsets(got)) == rest, "the survivor gets what was not accepted, and only that"
    assert survivor.commit() == {}


def test_read_committed_share_consumption_skips_an_aborted_transaction(
    broker: KafkaService, client: ShareClient, members: list[ShareMember]
) -> None:
    topic, group = unique("share-txn"), unique("share-group")
    broker.create_topic(topic, 1)
    configure_group(broker, group, share_isolation_level="read_committed")
    share_group_ready(broker.bootstrap_servers, group, topic)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "transactional.id": unique("share-txn-producer"),
            "log_level": 3,
        }
    )
    producer.init_transactions(15)
    for kind in ("committed", "aborted", "after"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{kind}-{i}".encode(), partition=0)
        if kind == "aborted":
            producer.flush(15)
            producer.abort_transaction(15)
        else:
            producer.commit_transaction(15)
    member = client.member(broker.bootstrap_servers, topic, group, explicit=False)
    members.append(member)
    got = poll_until(member, lambda got: "after-2" in {d.value for d in got})
    values = [d.value for d in got]
    assert sorted(values) == sorted(f"{k}-{i}" for k in ("committed", "after") for i in range(3))
    assert member.commit() == {}


def test_share_group_offsets_are_altered_and_deleted_through_the_admin(
    broker: KafkaService,
    client: ShareClient,
    members: list[ShareMember],
    built_share_drivers: Built,
) -> None:
    topic, group = setup(broker, 10)
    admin = ShareGroupAdmin(built_share_drivers, broker.bootstrap_servers, group)
    try:
        # Altered before anyone consumed: the group starts where it is told.
        admin.alter(topic, {0: 6})
        assert admin.start_offsets(topic, [0]) == {0: 6}
        member = client.member(broker.bootstrap_servers, topic, group, explicit=False)
        members.append(member)
        got = poll_until(member, has(6, 7, 8, 9))
        assert sorted(offsets(got)) == [6, 7, 8, 9]
        assert member.commit() == {}
        member.close()
        # Deleted: the group has no state for the topic, and starts over by its reset rule.
        admin.delete(topic)
        assert admin.start_offsets(topic, [0]) == {0: None}
        again = client.member(broker.bootstrap_servers, topic, group, explicit=False)
        members.append(again)
        assert sorted(offsets(poll_until(again, has(*range(10))))) == list(range(10))
        assert again.commit() == {}
    finally:
        admin.close()
