"""confluent-kafka and kafka-python members in one group, both with the range assignor.

Whichever client is the leader computes the assignment for the other's members too, so
the two must agree on the consumer protocol's subscription and assignment formats.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient
from kafka.coordinator.assignors.range import RangePartitionAssignor

from minibroker import Broker
from tests.groups.conftest import SETTLE_TIMEOUT, RebalanceLog, settled, unique, wait_until
from tests.groups.group_clients import ConfluentMember, KafkaPythonMember

PARTITIONS = 6
Member = ConfluentMember | KafkaPythonMember


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    # librdkafka serves a rebalance only inside poll and kafka-python only inside its poll
    # loop, so stop the loops first, then leave: a member left waiting in a join would
    # hold up the next LeaveGroup on its connection until the request timeout.
    python_members = [m for m in started if isinstance(m, KafkaPythonMember)]
    for member in python_members:
        member.stop_polling()
    for member in started:
        if isinstance(member, ConfluentMember):
            member.close()
    for member in python_members:
        member.close()


def pump(members: list[Member]) -> None:
    for member in members:
        if isinstance(member, ConfluentMember):
            member.pump()  # librdkafka runs callbacks only inside poll


@pytest.mark.parametrize("first", ["confluent-kafka", "kafka-python"])
def test_confluent_kafka_and_kafka_python_share_a_range_group(
    broker: Broker, members: list[Member], first: str
) -> None:
    topic, group, log = unique("mixed"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    second = "kafka-python" if first == "confluent-kafka" else "confluent-kafka"
    order = [(first, "m1"), (second, "m2"), (first, "m3"), (second, "m4")]

    def start(client: str, name: str) -> Member:
        if client == "confluent-kafka":
            return ConfluentMember(
                broker.bootstrap_servers,
                topic,
                group,
                name,
                log,
                **{"partition.assignment.strategy": "range"},
            )
        return KafkaPythonMember(
            broker.bootstrap_servers,
            topic,
            group,
            name,
            log,
            partition_assignment_strategy=[RangePartitionAssignor],
        )

    names: list[str] = []
    for client, name in order:
        mark = time.monotonic()
        members.append(start(client, name))
        names.append(name)
        assert wait_until(
            lambda: settled(broker, group, topic, PARTITIONS, log, names),
            SETTLE_TIMEOUT,
            pump=lambda: pump(members),
        ), f"{names} did not settle: {log.events}"
        for earlier in names[:-1]:
            kinds = [kind for _, who, kind, _ in log.since(mark) if who == earlier]
            assert kinds and kinds[-1] == "assigned", (earlier, kinds)

    # Range over 6 partitions and 4 members sorted by member id: 2, 2, 1, 1.
    by_name = {name: sorted(log.owned(name)) for name in names}
    ordered = sorted(
        names, key=lambda n: next(m for m in broker.group_members(group) if m.startswith(f"{n}-"))
    )
    assert [len(by_name[n]) for n in ordered] == [2, 2, 1, 1]
    assert [p for n in ordered for p in by_name[n]] == list(range(PARTITIONS))

    # DescribeGroups through a real admin client reports the same group.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 3})
    description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    assert description.partition_assignor == "range"
    assert description.state == ConsumerGroupState.STABLE
    described = {
        m.client_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
        for m in description.members
    }
    assert described == by_name
