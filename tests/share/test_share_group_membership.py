"""Share group membership (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe.

Raw requests against a broker without sockets check Kafka 4.4's rules one by one (epochs,
fencing, errors, sessions on the broker clock, the simple assignor's sharing), and real
share consumers (confluent-kafka's ShareConsumer) join a group on a real broker.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import ShareConsumer
from kio.schema.errors import ErrorCode

from harness.raw_client import RawClient, make
from minibroker.config import BrokerConfig
from minibroker.state.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from minibroker.state.sessions import ANONYMOUS
from minibroker.state.share_groups import share_pool, simple_assignor
from minibroker.testing.backends import KafkaService
from tests.sansio import SansIOBroker

HEARTBEAT, DESCRIBE = 76, 77
JOIN_GROUP = 11
CONSUMER_HEARTBEAT = 68


class Group:
    """A share group on a socket-less broker, driven by raw heartbeats."""

    def __init__(self, broker: SansIOBroker | None = None, partitions: int = 6) -> None:
        self.broker = broker or SansIOBroker()
        if self.broker.cluster.topics.get("t") is None:
            self.broker.cluster.topics.create("t", partitions)
        self.epochs: dict[str, int] = {}
        self.gone: list[tuple[str, str]] = []
        store = self.broker.cluster.share_partitions
        store.member_gone = lambda group, member, now: self.gone.append((group, member))  # type: ignore[method-assign]

    def beat(
        self,
        member: str,
        epoch: int | None = None,
        topics: tuple[str, ...] | None = None,
        **extra: Any,
    ) -> Any:
        if epoch is None:
            epoch = self.epochs.get(member, 0)
        if epoch == 0 and topics is None:
            topics = ("t",)
        answer = self.broker.call(
            HEARTBEAT,
            1,
            group_id=extra.pop("group", "g"),
            member_id=member,
            member_epoch=epoch,
            rack_id=extra.pop("rack_id", None),
            subscribed_topic_names=topics,
        )
        if answer.error_code == ErrorCode.none and answer.member_epoch >= 0:
            self.epochs[member] = answer.member_epoch
        return answer

    def describe(self, group: str = "g") -> Any:
        [described] = self.broker.call(
            DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False
        ).groups
        return described

    def partitions_of(self, member: str) -> set[int]:
        [found] = [m for m in self.describe().members if m.member_id == member]
        return {p for t in found.assignment.topic_partitions for p in t.partitions}


def test_a_joining_member_gets_every_partition_and_the_group_interval() -> None:
    group = Group()
    answer = group.beat("m1")
    assert (answer.error_code, answer.member_id, answer.member_epoch) == (ErrorCode.none, "m1", 1)
    assert answer.heartbeat_interval.total_seconds() == 5.0  # share.heartbeat.interval.ms
    [topic] = answer.assignment.topic_partitions
    assert topic.partitions == (0, 1, 2, 3, 4, 5)
    described = group.describe()
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == (
        "Stable",
        1,
        1,
    )
    assert described.assignor_name == "simple"
    [member] = described.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == (
        "m1",
        1,
        ("t",),
    )
    assert [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [
        ("t", (0, 1, 2, 3, 4, 5))
    ]


def test_members_split_partitions_and_learn_of_it_at_their_next_heartbeat() -> None:
    group = Group()
    group.beat("m1")
    second = group.beat("m2")
    assert second.member_epoch == 2
    assert {p for t in second.assignment.topic_partitions for p in t.partitions} == {3, 4, 5}
    # m1 still holds all six until it heartbeats: no revocation handshake.
    assert group.partitions_of("m1") == {0, 1, 2, 3, 4, 5}
    again = group.beat("m1")
    assert again.member_epoch == 2
    assert {p for t in again.assignment.topic_partitions for p in t.partitions} == {0, 1, 2}
    # Nothing changed since: no assignment in the answer.
    assert group.beat("m1").assignment is None


def test_eighteen_members_on_six_partitions_read_three_to_a_partition() -> None:
    group = Group()
    members = [f"member-{i:02}" for i in range(18)]
    for member in members:
        group.beat(member)
    for member in members:
        group.beat(member)  # everyone at the latest epoch
    readers = Counter[int]()
    for member in members:
        held = group.partitions_of(member)
        assert len(held) == 1
        readers.update(held)
    assert readers == {p: 3 for p in range(6)}


def test_three_members_on_one_partition_all_read_it() -> None:
    group = Group(partitions=1)
    for member in ("a", "b", "c"):
        group.beat(member)
    for member in ("a", "b", "c"):
        group.beat(member)
        assert group.partitions_of(member) == {0}


def test_the_simple_assignor_balances_and_keeps_what_it_can() -> None:
    partitions = list(range(6))
    first = share_pool(partitions, ["a", "b"], {})
    assert sorted(len(v) for v in first.values()) == [3, 3]
    assert first["a"] | first["b"] == set(partitions)
    # A third member takes two partitions; a and b keep two of theirs each.
    second = share_pool(partitions, ["a", "b", "c"], first)
    assert second["a"] <= first["a"] and second["b"] <= first["b"]
    assert sorted(len(v) for v in second.values()) == [2, 2, 2]
    # Seven members on six partitions: every partition read by two, counts 2 or 1.
    seven = share_pool(partitions, list("abcdefg"), {})
    assert Counter(p for held in seven.values() for p in held) == {p: 2 for p in partitions}
    assert sorted(len(v) for v in seven.values()) == [1, 1, 2, 2, 2, 2, 2]


def test_members_subscribed_to_different_topics_share_each_topic_apart() -> None:
    t1, t2 = uuid.UUID(int=1), uuid.UUID(int=2)
    result = simple_assignor(
        {"a": frozenset({t1}), "b": frozenset({t2}), "c": frozenset({t1, t2})},
        {t1: 2, t2: 2},
        {},
    )
    assert set(result["a"]) == {t1} and set(result["b"]) == {t2}
    assert result["a"][t1] | result["c"][t1] == {0, 1}
    assert result["b"][t2] | result["c"][t2] == {0, 1}


def test_a_member_with_the_wrong_epoch_is_fenced_and_can_rejoin() -> None:
    group = Group()
    group.beat("m1")
    ahead = group.beat("m1", epoch=5)
    assert ahead.error_code == ErrorCode.fenced_member_epoch
    assert ahead.error_message.startswith("The share group member has a greater member epoch (5)")
    assert (ahead.member_id, ahead.member_epoch) == (None, 0)
    group.beat("m2")  # epoch 2; m1 is still at 1
    group.beat("m1")  # m1 moves to 2, its previous epoch 1
    assert group.beat("m1", epoch=1).error_code == ErrorCode.none  # the previous epoch is fine
    behind = group.beat("m1", epoch=0, topics=("t",))
    assert (behind.error_code, behind.member_epoch) == (ErrorCode.none, 2)  # a rejoin
    group.beat("m3")
    group.beat("m1")
    stale = group.beat("m1", epoch=1)
    assert stale.error_code == ErrorCode.fenced_member_epoch
    assert "does not match the previous member epoch (2)" in stale.error_message


@pytest.mark.parametrize(
    ("member", "epoch", "topics", "group", "rack", "message"),
    [
        ("", 0, ("t",), "g", None, "Invalid member id in the request."),
        ("x" * 37, 0, ("t",), "g", None, "Invalid member id in the request."),
        ("  ", 0, ("t",), "g", None, "MemberId can't be empty."),
        ("m", 0, ("t",), "", None, "GroupId can't be empty."),
        ("m", 0, ("t",), "g", " ", "RackId can't be empty."),
        ("m", 0, None, "g", None, "SubscribedTopicNames must be set in first request."),
        ("m", 0, (), "g", None, "SubscribedTopicNames must be set in first request."),
        ("m", -2, None, "g", None, "MemberEpoch is invalid."),
    ],
)
def test_invalid_heartbeats_are_refused_in_kafkas_words(
    member: str,
    epoch: int,
    topics: tuple[str, ...] | None,
    group: str,
    rack: str | None,
    message: str,
) -> None:
    broker = SansIOBroker()
    answer = broker.call(
        HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rack_id=rack,
        subscribed_topic_names=topics,
    )
    assert (answer.error_code, answer.error_message) == (ErrorCode.invalid_request, message)


def test_unknown_groups_and_members_are_refused() -> None:
    group = Group()
    lost = group.beat("m1", epoch=3, group="nowhere")
    assert (lost.error_code, lost.error_message) == (
        ErrorCode.group_id_not_found,
        "Share group nowhere not found.",
    )
    group.beat("m1")
    stranger = group.beat("m9", epoch=1)
    assert (stranger.error_code, stranger.error_message) == (
        ErrorCode.unknown_member_id,
        "Member m9 is not a member of group g.",
    )
    assert group.beat("m9", epoch=-1).error_code == ErrorCode.unknown_member_id


def test_a_group_id_of_a_classic_group_is_not_a_share_group() -> None:
    group = Group()
    joined = group.broker.call(
        JOIN_GROUP,
        5,
        group_id="classic",
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=10),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(make(JOIN_GROUP, 5, "JoinGroupRequestProtocol", name="range", metadata=b""),),
    )
    assert joined.error_code == ErrorCode.member_id_required  # the group exists now
    answer = group.beat("m1", group="classic")
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.group_id_not_found,
        "Group classic is not a share group.",
    )
    described = group.describe("classic")
    assert (described.error_code, described.error_message) == (
        ErrorCode.group_id_not_found,
        "Group classic is not a share group.",
    )
    assert group.describe("nothing").error_message == "Group nothing not found."


def test_a_share_groups_id_is_no_classic_or_consumer_group() -> None:
    group = Group()
    group.beat("m1")
    joined = group.broker.call(
        JOIN_GROUP,
        5,
        group_id="g",
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=10),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(make(JOIN_GROUP, 5, "JoinGroupRequestProtocol", name="range", metadata=b""),),
    )
    assert (joined.error_code, joined.member_id) == (ErrorCode.inconsistent_group_protocol, "")
    consumer = group.broker.call(
        CONSUMER_HEARTBEAT,
        1,
        group_id="g",
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=("t",),
        topic_partitions=(),
    )
    assert (consumer.error_code, consumer.error_message) == (
        ErrorCode.group_id_not_found,
        "Group g is not a consumer group.",
    )
    assert group.broker.cluster.group_type("g") == "share"


def test_a_full_group_refuses_new_members_only() -> None:
    group = Group(SansIOBroker(BrokerConfig(group_share_max_size=2)))
    group.beat("m1")
    group.beat("m2")
    full = group.beat("m3")
    assert (full.error_code, full.error_message) == (
        ErrorCode.group_max_size_reached,
        "The share group has reached its maximum capacity of 2 members.",
    )
    assert group.beat("m1").error_code == ErrorCode.none


def test_a_member_that_leaves_releases_its_records_and_the_group_rebalances() -> None:
    group = Group()
    group.beat("m1")
    group.beat("m2")
    group.beat("m1")  # down to three partitions
    left = group.beat("m2", epoch=-1)
    assert (left.error_code, left.member_id, left.member_epoch) == (ErrorCode.none, "m2", -1)
    assert left.heartbeat_interval.total_seconds() == 0
    assert group.gone == [("g", "m2")]
    again = group.beat("m1")
    assert again.member_epoch == 3
    assert {p for t in again.assignment.topic_partitions for p in t.partitions} == set(range(6))
    group.beat("m1", epoch=-1)
    described = group.describe()
    assert (described.group_state, described.members) == ("Empty", ())


def test_a_silent_member_times_out_on_the_broker_clock() -> None:
    group = Group()
    cluster = group.broker.cluster
    cluster.group_configs.alter("g", [("share.session.timeout.ms", 0, "50000")])
    group.beat("m1")
    group.beat("m2")
    group.broker.clock.advance(30)
    group.beat("m1")  # m1's session starts again
    group.broker.clock.advance(25)
    cluster.share_groups.tick(cluster.clock.monotonic())
    assert [m.member_id for m in group.describe().members] == ["m1"]
    assert group.gone == [("g", "m2")]
    assert cluster.share_groups.next_deadline() == pytest.approx(cluster.clock.monotonic() + 25)


def test_a_new_partition_is_shared_out_at_the_next_heartbeat() -> None:
    group = Group(partitions=2)
    group.beat("m1")
    group.beat("m2")
    group.beat("m1")
    group.broker.cluster.topics.add_partitions("t", 4)
    answer = group.beat("m1")
    assert answer.member_epoch == 3
    assert len({p for t in answer.assignment.topic_partitions for p in t.partitions}) == 2


def test_acls_guard_the_group_and_the_subscribed_topics() -> None:
    broker = SansIOBroker(BrokerConfig(acls_enabled=True, allow_everyone_if_no_acl_found=True))
    for resource, name, operation in [
        (ResourceType.GROUP, "closed", Operation.READ),
        (ResourceType.TOPIC, "secret", Operation.DESCRIBE),
        (ResourceType.GROUP, "hidden", Operation.DESCRIBE),
    ]:
        broker.cluster.acls.add(
            AclBinding(
                resource, name, PatternType.LITERAL, ANONYMOUS, "*", operation, Permission.DENY
            )
        )
    group = Group(broker)
    assert group.beat("m1", group="closed").error_code == ErrorCode.group_authorization_failed
    refused = group.beat("m1", topics=("t", "secret"))
    assert refused.error_code == ErrorCode.topic_authorization_failed
    assert group.describe("hidden").error_code == ErrorCode.group_authorization_failed


# --- real share consumers ---

SETTLE = 30.0  # seconds: Kafka hands partitions out once their share state is initialized


def _describe(bootstrap: str, group: str) -> Any:
    with RawClient(bootstrap) as client:
        [described] = client.call(
            DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False
        ).groups
    return described


def test_share_consumers_join_and_every_partition_is_read(kafka_broker: KafkaService) -> None:
    """Three confluent-kafka share consumers on a two-partition topic: all three are
    members, both partitions are handed out, and one of them is read by two."""
    topic, group = f"share-join-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=2)
    consumers = [
        ShareConsumer(
            {
                "bootstrap.servers": kafka_broker.bootstrap_servers,
                "group.id": group,
                "client.id": f"share-{i}",
                "log_level": 0,
            }
        )
        for i in range(3)
    ]
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        deadline = time.monotonic() + SETTLE
        readers: Counter[int] = Counter()
        while time.monotonic() < deadline:
            for consumer in consumers:
                consumer.poll(0.05)
            described = _describe(kafka_broker.bootstrap_servers, group)
            readers = Counter(
                p
                for m in described.members
                for t in m.assignment.topic_partitions
                for p in t.partitions
            )
            if len(described.members) == 3 and sum(readers.values()) == 4:
                break
        assert described.error_code == ErrorCode.none
        assert described.group_state == "Stable"
        assert {m.client_id for m in described.members} == {"share-0", "share-1", "share-2"}
        assert readers == {0: 2, 1: 2}
    finally:
        for consumer in consumers:
            consumer.close()
    described = _describe(kafka_broker.bootstrap_servers, group)
    assert (described.group_state, described.members) == ("Empty", ())
