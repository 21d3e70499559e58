"""ShareFetch and ShareAcknowledge over real sockets (and, for what needs two nodes,
without): acquisition and redelivery, share session epochs, bad acknowledgements, the
long poll, lock expiry by the broker clock, the delivery count limit, read_committed."""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from kio.schema.errors import ErrorCode

from harness.raw_client import RawClient, make, make_request, produce_batch
from minibroker import Broker
from minibroker.protocol import records
from minibroker.state.share_partitions import ACK_ACCEPT, ACK_REJECT, ACK_RELEASE
from tests.sansio import SansIOBroker
from tests.share.share_wire import (
    SHARE_FETCH,
    VERSION,
    ShareMember,
    acquired_offsets,
    fetch_request,
    join,
    leave,
    partitions_of,
)

GROUP = "workers"
TOPIC = "jobs"
LONG_WAIT_MS = 60_000  # longer than any clock advance here: the poll must be woken


def set_group_configs(client: RawClient, group: str, **configs: str) -> None:
    alter = tuple(
        make(44, 1, "AlterableConfig", name=name.replace("_", "."), config_operation=0, value=v)
        for name, v in configs.items()
    )
    resource = make(
        44, 1, "AlterConfigsResource", resource_type=32, resource_name=group, configs=alter
    )
    answer = client.call(44, 1, resources=(resource,), validate_only=False)
    assert [r.error_code for r in answer.responses] == [ErrorCode.none]


def produce(client: RawClient, *values: bytes, partition: int = 0) -> None:
    # Stamped now: retention (applied when the clock is advanced) keeps them.
    batch = records.build_batch([(None, v) for v in values], timestamp_ms=int(time.time() * 1000))
    produce_batch(client.request, TOPIC, partition, batch)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker() as started:
        started.create_topic(TOPIC, 1)
        yield started


@pytest.fixture
def client(broker: Broker) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap_servers) as raw:
        set_group_configs(raw, GROUP, share_auto_offset_reset="earliest")
        yield raw


def member(broker: Broker, client: RawClient, name: str) -> ShareMember:
    """`name` joins the group (ShareGroupHeartbeat) and is ready to fetch on `client`."""
    join(client.request, GROUP, name, TOPIC)
    topic_id = broker._on_loop(lambda: broker.state.topics.get(TOPIC)).topic_id  # type: ignore[union-attr]
    return ShareMember(client.request, GROUP, name, topic_id)


def test_records_are_acquired_once_released_ones_come_back_rejected_ones_never(
    broker: Broker, client: RawClient
) -> None:
    produce(client, b"a", b"b")
    produce(client, b"c")
    alice, bob = member(broker, client, "alice"), member(broker, client, "bob")
    first = alice.fetch()
    assert first.acquisition_lock_timeout == datetime.timedelta(seconds=30)
    assert acquired_offsets(first) == {0: 1, 1: 1, 2: 1}
    assert acquired_offsets(bob.fetch()) == {}  # all held by alice
    done = alice.acknowledge([(0, 2, (ACK_ACCEPT, ACK_RELEASE, ACK_REJECT))])
    assert [p.error_code for p in partitions_of(done)] == [ErrorCode.none]
    assert acquired_offsets(bob.fetch()) == {1: 2}
    # Accepted and rejected records never come back; bob's piggy-backed accept ends it.
    again = bob.fetch(acks=[(1, 1, (ACK_ACCEPT,))])
    assert [p.acknowledge_error_code for p in partitions_of(again)] == [ErrorCode.none]
    assert acquired_offsets(again) == {}
    assert broker._on_loop(lambda: broker.state.share_partitions.initialized(GROUP)) == {
        (TOPIC, 0): 3
    }


def test_share_session_epochs(broker: Broker, client: RawClient) -> None:
    alice = member(broker, client, "alice")
    alice.epoch = 1
    assert alice.fetch().error_code == ErrorCode.share_session_not_found
    alice.epoch = 0
    assert alice.fetch().error_code == ErrorCode.none
    alice.epoch = 5
    assert alice.fetch().error_code == ErrorCode.invalid_share_session_epoch
    assert alice.acknowledge([], epoch=0).error_code == ErrorCode.invalid_share_session_epoch
    alice.epoch = 1
    assert alice.acknowledge([]).error_code == ErrorCode.none
    assert alice.fetch().error_code == ErrorCode.none  # epoch 2
    # An opening fetch may not acknowledge; closing (-1) fetches nothing.
    alice.epoch = 0
    assert alice.fetch(acks=[(0, 0, (1,))]).error_code == ErrorCode.invalid_request
    alice.epoch = -1
    produce(client, b"x")
    closed = alice.fetch()
    assert (closed.error_code, acquired_offsets(closed)) == (ErrorCode.none, {})
    alice.epoch = 3
    assert alice.fetch().error_code == ErrorCode.share_session_not_found


def test_session_limit() -> None:
    with (
        Broker(group_share_max_share_sessions=1) as broker,
        RawClient(broker.bootstrap_servers) as client,
    ):
        broker.create_topic(TOPIC, 1)
        _session_limit(broker, client)


def _session_limit(broker: Broker, client: RawClient) -> None:
    alice, bob = member(broker, client, "alice"), member(broker, client, "bob")
    assert alice.fetch().error_code == ErrorCode.none
    assert bob.fetch().error_code == ErrorCode.share_session_limit_reached
    alice.epoch = 0  # reopening replaces alice's own session: no new one needed
    assert alice.fetch().error_code == ErrorCode.none


def test_bad_acknowledgements(broker: Broker, client: RawClient) -> None:
    produce(client, b"a", b"b")
    alice, bob = member(broker, client, "alice"), member(broker, client, "bob")
    alice.fetch()
    bob.fetch()

    def ack_code(who: ShareMember, acks: Any) -> int:
        answer = who.acknowledge(acks)
        assert answer.error_code == ErrorCode.none
        [partition] = partitions_of(answer)
        return int(partition.error_code)

    assert ack_code(bob, [(0, 1, (ACK_ACCEPT,))]) == ErrorCode.invalid_record_state
    assert ack_code(alice, [(1, 0, (ACK_ACCEPT,))]) == ErrorCode.invalid_request
    assert ack_code(alice, [(0, 1, (1, 1, 1))]) == ErrorCode.invalid_request
    assert ack_code(alice, [(0, 1, (9,))]) == ErrorCode.invalid_request
    assert ack_code(alice, [(0, 1, (1,)), (0, 1, (1,))]) == ErrorCode.invalid_request
    # Kafka 4.4 lets a batch start at the previous one's last offset; that record is then
    # acknowledged twice, which its state refuses.
    assert ack_code(alice, [(0, 0, (1,)), (0, 1, (1,))]) == ErrorCode.invalid_record_state
    # Renewing (type 4) needs a request marked is_renew_ack.
    assert ack_code(alice, [(0, 1, (4,))]) == ErrorCode.invalid_request
    renewed = alice.acknowledge([(0, 1, (4,))], renew=True)
    assert [p.error_code for p in partitions_of(renewed)] == [ErrorCode.none]
    assert ack_code(alice, [(0, 5, (ACK_ACCEPT,))]) == ErrorCode.invalid_request  # past
    assert ack_code(alice, [(0, 1, (ACK_ACCEPT,))]) == ErrorCode.none
    # Nothing is in flight any more: Kafka 4.4 finds no batch for it.
    assert ack_code(alice, [(0, 0, (ACK_ACCEPT,))]) == ErrorCode.invalid_record_state


def test_group_and_member_ids_are_checked(broker: Broker, client: RawClient) -> None:
    topic_id = broker._on_loop(lambda: broker.state.topics.get(TOPIC)).topic_id  # type: ignore[union-attr]
    for group, member_id in [("", "alice"), (GROUP, ""), (GROUP, "m" * 37)]:
        answer = ShareMember(client.request, group, member_id, topic_id).fetch()
        assert answer.error_code == ErrorCode.invalid_request
        answer = ShareMember(client.request, group, member_id, topic_id).acknowledge([], epoch=1)
        assert answer.error_code == ErrorCode.invalid_request


def test_a_member_id_the_group_does_not_know_is_served_as_on_kafka(
    broker: Broker, client: RawClient
) -> None:
    # Kafka 4.4's partition leaders do not check group membership: the records are
    # acquired for the member id the request names, once the group exists.
    produce(client, b"a")
    topic_id = broker._on_loop(lambda: broker.state.topics.get(TOPIC)).topic_id  # type: ignore[union-attr]
    nobody = ShareMember(client.request, "nobody-joined", "alice", topic_id)
    [partition] = partitions_of(nobody.fetch())
    assert partition.error_code == ErrorCode.unknown_server_error  # as Kafka 4.4 answers
    alice = member(broker, client, "alice")
    stranger = ShareMember(client.request, GROUP, str(uuid.uuid4()), topic_id)
    assert acquired_offsets(stranger.fetch()) == {0: 1}
    alice.fetch()
    [partition] = partitions_of(alice.acknowledge([(0, 0, (ACK_ACCEPT,))]))
    assert partition.error_code == ErrorCode.invalid_record_state


def test_long_poll_wakes_on_produce_and_on_lock_expiry(broker: Broker, client: RawClient) -> None:
    alice, bob = member(broker, client, "alice"), member(broker, client, "bob")
    alice.fetch()

    def waiting_fetch(who: ShareMember) -> tuple[threading.Thread, list[Any]]:
        got: list[Any] = []
        with_own_socket = RawClient(broker.bootstrap_servers)
        who.request = with_own_socket.request

        def run() -> None:
            try:
                got.append(who.fetch(max_wait_ms=LONG_WAIT_MS))
            finally:
                with_own_socket.close()

        thread = threading.Thread(target=run)
        thread.start()
        return thread, got

    thread, got = waiting_fetch(alice)
    _wait_until_waiting(broker)
    produce(client, b"new")
    thread.join(10)
    assert acquired_offsets(got[0]) == {0: 1}
    # bob waits; alice's lock expires when the clock passes it, and bob is woken with it.
    bob.fetch()
    thread, got = waiting_fetch(bob)
    _wait_until_waiting(broker)
    broker.clock.advance(31)
    thread.join(10)
    assert acquired_offsets(got[0]) == {0: 2}


def test_new_records_go_to_the_member_that_waited_longest(
    broker: Broker, client: RawClient
) -> None:
    """A trickle of records shared by members that each wait in a long poll: each record
    is acquired by the poll waiting longest, and a member that took one waits behind the
    others, even when its acknowledgement wakes them for nothing. So the work goes round,
    instead of to whichever member happens to be woken first."""
    members = [member(broker, client, name) for name in ("alice", "bob", "carol")]
    for each in members:
        each.fetch()  # opens its share session
    sockets = [RawClient(broker.bootstrap_servers) for _ in members]
    winners: list[tuple[str, dict[int, int]]] = []

    def take_records(who: ShareMember) -> None:
        acks: list[tuple[int, int, list[int]]] = []
        with contextlib.suppress(OSError, AssertionError):  # its socket closed at the end
            while True:
                got = acquired_offsets(who.fetch(acks=acks, max_wait_ms=LONG_WAIT_MS))
                winners.append((who.member, got))
                acks = [(offset, offset, [ACK_ACCEPT]) for offset in sorted(got)]

    threads = []
    try:
        for waiting, (each, own) in enumerate(zip(members, sockets, strict=True), start=1):
            each.request = own.request
            threads.append(threading.Thread(target=take_records, args=(each,), daemon=True))
            threads[-1].start()
            _wait_until_waiting(broker, waiting)
        for offset in range(4):
            produce(client, b"job-%d" % offset)
            _wait_until(lambda offset=offset: len(winners) > offset)
            _wait_until_waiting(broker, len(members))  # the winner waits again, acking
        assert winners == [
            ("alice", {0: 1}),
            ("bob", {1: 1}),
            ("carol", {2: 1}),
            ("alice", {3: 1}),
        ]
    finally:
        for own in sockets:
            own.close()


def _wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("timed out")


def _wait_until_waiting(broker: Broker, polls: int = 1) -> None:
    """Until `polls` fetches are parked on the partition's log (long polls)."""
    log = broker._on_loop(lambda: broker.state.topics.get(TOPIC).partitions[0].log)  # type: ignore[union-attr]
    deadline = threading.Event()
    for _ in range(500):
        if broker._on_loop(lambda: broker.node(0).waiters.waiting(log)) >= polls:
            return
        deadline.wait(0.01)
    raise AssertionError("the share fetch never waited")


def test_delivery_limit_archives_a_poison_record(broker: Broker, client: RawClient) -> None:
    set_group_configs(client, GROUP, share_delivery_count_limit="2")
    produce(client, b"poison")
    produce(client, b"fine")
    alice = member(broker, client, "alice")
    assert acquired_offsets(alice.fetch(max_records=1)) == {0: 1}
    assert acquired_offsets(alice.fetch(acks=[(0, 0, (ACK_RELEASE,))], max_records=1)) == {0: 2}
    # Released at the limit: archived, never delivered again; the next record follows.
    after = alice.fetch(acks=[(0, 0, (ACK_RELEASE,))], max_records=1)
    assert acquired_offsets(after) == {1: 1}
    assert broker._on_loop(lambda: broker.state.share_partitions.initialized(GROUP)) == {
        (TOPIC, 0): 1
    }


def test_records_go_back_at_once_when_the_session_connection_closes(
    broker: Broker, client: RawClient
) -> None:
    produce(client, b"a")
    bob = member(broker, client, "bob")
    with RawClient(broker.bootstrap_servers) as own:
        alice = member(broker, own, "alice")
        assert acquired_offsets(alice.fetch()) == {0: 1}
        # Leaving the group leaves the records with alice's open session (Kafka 4.4: she
        # may still acknowledge them over it).
        leave(client.request, GROUP, "alice")
        assert acquired_offsets(bob.fetch()) == {}
    # Her connection closed (a consumer killed mid-batch): released, no lock to wait for.
    for _ in range(200):
        got = acquired_offsets(bob.fetch())
        if got:
            break
        time.sleep(0.01)
    assert got == {0: 2}


def test_read_committed_skips_an_aborted_transaction(broker: Broker, client: RawClient) -> None:
    set_group_configs(client, GROUP, share_isolation_level="read_committed")
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "share-txn"}
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(TOPIC, b"aborted-1", partition=0)
    producer.produce(TOPIC, b"aborted-2", partition=0)
    producer.flush(10)
    producer.abort_transaction(10)
    producer.begin_transaction()
    producer.produce(TOPIC, b"committed", partition=0)
    producer.commit_transaction(10)
    alice = member(broker, client, "alice")
    answer = alice.fetch()
    values = {
        r.offset: r.value
        for p in partitions_of(answer)
        for h, batch in records.split_batches(p.records)
        if not h.is_control
        for r in records.iter_records(batch)
    }
    delivered = acquired_offsets(answer)
    assert [values[o] for o in sorted(delivered)] == [b"committed"]


def test_not_leader_and_unknown_topic_id_without_sockets() -> None:
    broker = SansIOBroker(nodes=2)
    topic = broker.cluster.topics.create(TOPIC, 1)
    assert topic is not None
    broker.cluster.move_leader(TOPIC, 0, 1)

    def fetch(topic_id: uuid.UUID) -> Any:
        return broker.request(SHARE_FETCH, VERSION, fetch_request(GROUP, "alice", 0, topic_id))

    answer = fetch(topic.topic_id)
    [partition] = partitions_of(answer)
    assert partition.error_code == ErrorCode.not_leader_or_follower
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, 1)
    assert [(e.node_id, e.port) for e in answer.node_endpoints] == [(1, 9093)]
    [partition] = partitions_of(fetch(uuid.uuid4()))
    assert partition.error_code == ErrorCode.unknown_topic_id


def test_group_authorization_without_sockets() -> None:
    from minibroker.config import BrokerConfig

    broker = SansIOBroker(BrokerConfig(acls_enabled=True))
    topic = broker.cluster.topics.create(TOPIC, 1)
    assert topic is not None
    answer = broker.request(SHARE_FETCH, VERSION, fetch_request(GROUP, "alice", 0, topic.topic_id))
    assert answer.error_code == ErrorCode.group_authorization_failed
    ack = make_request(
        79, VERSION, group_id=GROUP, member_id="alice", share_session_epoch=1, topics=()
    )
    assert broker.request(79, VERSION, ack).error_code == ErrorCode.group_authorization_failed


def test_fault_rules_answer_share_partitions_with_their_error(
    broker: Broker, client: RawClient
) -> None:
    produce(client, b"a")
    alice = member(broker, client, "alice")
    rule = broker.faults.add("ShareFetch", topic=TOPIC, error=ErrorCode.kafka_storage_error)
    [partition] = partitions_of(alice.fetch())
    assert (partition.error_code, partition.acquired_records) == (
        ErrorCode.kafka_storage_error,
        (),
    )
    rule.remove()
    assert acquired_offsets(alice.fetch()) == {0: 1}


def test_a_deleted_topic_takes_its_share_partitions(broker: Broker, client: RawClient) -> None:
    produce(client, b"a")
    alice = member(broker, client, "alice")
    assert acquired_offsets(alice.fetch()) == {0: 1}
    broker.delete_topic(TOPIC)
    assert broker._on_loop(lambda: broker.state.share_partitions.initialized(GROUP)) == {}
    [partition] = partitions_of(alice.fetch())
    assert partition.error_code == ErrorCode.unknown_topic_id


def test_share_consumers_receive_every_record_once_and_accept_it(
    broker: Broker, client: RawClient
) -> None:
    """confluent-kafka's ShareConsumer: three consumers on one partition share its
    records, each delivered once, and their implicit acknowledgements accept them all."""
    values = [b"r%d" % i for i in range(60)]
    for start in range(0, len(values), 5):
        produce(client, *values[start : start + 5])
    consumers = [
        ShareConsumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": GROUP,
                "client.id": f"share-{i}",
                "log_level": 0,
            }
        )
        for i in range(3)
    ]
    delivered: list[bytes] = []
    try:
        for consumer in consumers:
            consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 20
        while len(delivered) < len(values) and time.monotonic() < deadline:
            for consumer in consumers:
                for message in consumer.poll(0.05):
                    if message.error() is None:
                        delivered.append(message.value())
        for consumer in consumers:
            consumer.poll(0.05)  # acknowledges the last records polled (implicit mode)
    finally:
        for consumer in consumers:
            consumer.close()
    assert sorted(delivered) == sorted(values)
    assert broker._on_loop(lambda: broker.state.share_partitions.initialized(GROUP)) == {
        (TOPIC, 0): len(values)
    }


def test_partitions_take_turns_by_session_epoch_without_sockets() -> None:
    broker = SansIOBroker()
    topic = broker.cluster.topics.create(TOPIC, 2)
    assert topic is not None
    broker.cluster.group_configs.alter(GROUP, [("share.auto.offset.reset", 0, "earliest")])
    join(broker.request, GROUP, "alice", TOPIC)
    for index in (0, 1):
        for _ in range(3):
            batch = records.build_batch([(None, b"v")], timestamp_ms=int(time.time() * 1000))
            produce_batch(broker.request, TOPIC, index, batch)

    def first_partition(epoch: int) -> int:
        request = fetch_request(GROUP, "alice", epoch, topic.topic_id, (0, 1), max_records=1)
        answer = broker.request(SHARE_FETCH, VERSION, request)
        [read] = [p for p in partitions_of(answer) if p.acquired_records]
        return int(read.partition_index)

    # Kafka 4.4 starts at the partition at the request's epoch: max_records is shared out.
    assert [first_partition(epoch) for epoch in range(4)] == [0, 1, 0, 1]
    # A full fetch lists every partition of the session, an incremental one only those
    # with something to say.
    listed = partitions_of(
        broker.request(
            SHARE_FETCH,
            VERSION,
            fetch_request(GROUP, "bob", 0, topic.topic_id, (0, 1), max_records=0),
        )
    )
    assert sorted(p.partition_index for p in listed) == [0, 1]
    again = broker.request(
        SHARE_FETCH, VERSION, fetch_request(GROUP, "bob", 1, topic.topic_id, (0, 1), max_records=0)
    )
    assert partitions_of(again) == []
