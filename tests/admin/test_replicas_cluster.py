"""Replica lists on a three-node cluster: manual assignments through confluent-kafka's
AdminClient, reassignments through kafka-python's (confluent-kafka has none), preferred
elections, and stopped nodes leaving the ISR.

Kafka on one node cannot place a partition on two brokers nor move one, so these are
not `parity` tests; test_replicas_errors.py checks the refusals against Kafka.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonPartition

from harness.raw_client import RawClient
from minibroker import Cluster
from minibroker.state.clock import FakeClock
from minibroker.testing.waiting import wait_for
from tests.admin.replicas_raw import epoch_end, partitions_of

TIMEOUT = 10


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    # The broker's clock stands still: a move stays under way until the test advances it.
    with Cluster(brokers=3, clock=FakeClock()) as running:
        yield running


@pytest.fixture
def admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


@pytest.fixture
def mover(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield client
    client.close()


def described(
    cluster: Cluster, topic: str, node: int = 2
) -> dict[int, tuple[int, int, list[int], list[int]]]:
    """Partition -> (leader, leader epoch, replicas, ISR), as Metadata reports them (by
    node 2 unless told: the tests never stop it)."""
    with RawClient(cluster.bootstrap_servers.split(",")[node]) as client:
        return partitions_of(client, topic)


def test_manual_assignments_place_partitions(cluster: Cluster, admin: AdminClient) -> None:
    created = admin.create_topics(
        [
            NewTopic("placed", 3, replica_assignment=[[0, 1], [1, 2], [2, 0]]),
            NewTopic("spread", 3, replication_factor=3),
        ]
    )
    for future in created.values():
        future.result(TIMEOUT)
    assert described(cluster, "placed") == {
        0: (0, 0, [0, 1], [0, 1]),
        1: (1, 0, [1, 2], [1, 2]),
        2: (2, 0, [2, 0], [2, 0]),
    }
    # Without an assignment: leaders round robin, the other replicas on the next nodes.
    spread = described(cluster, "spread")
    assert sorted(leader for leader, _, _, _ in spread.values()) == [0, 1, 2]
    assert all(
        replicas[0] == leader and sorted(replicas) == [0, 1, 2]
        for leader, _, replicas, _ in spread.values()
    )

    def grow(assignment: list[list[int]]) -> KafkaError | None:
        future = admin.create_partitions([NewPartitions("placed", 4, assignment)])["placed"]
        try:
            future.result(TIMEOUT)
        except KafkaException as exc:
            return exc.args[0]
        return None

    for refused in ([[5, 0]], [[1]], [[1, 1]]):  # no broker 5; one replica; twice the same
        error = grow(refused)
        assert error is not None and error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, refused
    assert grow([[1, 0]]) is None
    assert described(cluster, "placed")[3] == (1, 0, [1, 0], [1, 0])
    assert cluster.replicas("placed")[3] == ([1, 0], [1, 0])
    # DescribeTopicPartitions reports the same lists.
    [topic] = (
        admin.describe_topics(TopicCollection(["placed"]))["placed"].result(TIMEOUT).partitions[3:]
    )
    assert [n.id for n in topic.replicas] == [1, 0] and [n.id for n in topic.isr] == [1, 0]


def test_a_reassignment_is_listed_until_it_completes(
    cluster: Cluster, admin: AdminClient, mover: KafkaAdminClient
) -> None:
    admin.create_topics([NewTopic("moved", 2, replica_assignment=[[0, 1], [1, 2]])])[
        "moved"
    ].result(TIMEOUT)
    first, second = KafkaPythonPartition("moved", 0), KafkaPythonPartition("moved", 1)
    assert mover.alter_partition_reassignments({first: [2, 1], second: [2, 1]}) == {
        first: None,
        second: None,
    }
    # Partition 0 gains node 2 (it catches up first); partition 1 only changes order.
    assert mover.list_partition_reassignments() == {
        first: {"replicas": [2, 1, 0], "adding_replicas": [2], "removing_replicas": [0]}
    }
    during = described(cluster, "moved")
    assert during[0] == (0, 0, [2, 1, 0], [1, 0])
    assert during[1] == (1, 0, [2, 1], [2, 1])  # its leader stays: still a replica
    cluster.clock.advance(5)  # the new replica has caught up
    wait_for(lambda: not mover.list_partition_reassignments(), describe="the move completes")
    # The old leader left the replicas: the first target replica in sync leads, at epoch 1.
    assert described(cluster, "moved")[0] == (2, 1, [2, 1], [2, 1])

    # A cancel goes back to the replicas before the move.
    assert mover.alter_partition_reassignments({first: [0, 1]}) == {first: None}
    assert mover.list_partition_reassignments([first])[first]["adding_replicas"] == [0]
    assert mover.alter_partition_reassignments({first: None}) == {first: None}
    assert mover.list_partition_reassignments() == {}
    assert described(cluster, "moved")[0] == (2, 1, [2, 1], [2, 1])


def test_preferred_election_and_stopped_nodes(cluster: Cluster, admin: AdminClient) -> None:
    admin.create_topics([NewTopic("elected", 1, replica_assignment=[[0, 1, 2]])])["elected"].result(
        TIMEOUT
    )
    partition = [TopicPartition("elected", 0)]

    def elect() -> int:
        answer = admin.elect_leaders(ElectionType.PREFERRED, partition).result(TIMEOUT)
        error = answer[partition[0]]
        return KafkaError.NO_ERROR if error is None else error.code()

    assert elect() == KafkaError.ELECTION_NOT_NEEDED
    cluster.stop_broker(0)
    # The stopped node leaves the ISR; the next replica in sync leads.
    assert described(cluster, "elected")[0] == (1, 1, [0, 1, 2], [1, 2])
    assert elect() == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    cluster.start_broker(0)
    wait_for(lambda: described(cluster, "elected")[0][3] == [0, 1, 2], describe="0 back in sync")
    assert elect() == KafkaError.NO_ERROR
    assert described(cluster, "elected")[0] == (0, 2, [0, 1, 2], [0, 1, 2])
    # move_leader keeps working: to a replica, or to a node that then joins the replicas.
    cluster.move_leader("elected", 0, 2)
    assert described(cluster, "elected")[0][:2] == (2, 3)
    assert elect() == KafkaError.NO_ERROR


def test_batches_carry_the_leader_epoch_they_were_written_in(
    cluster: Cluster, admin: AdminClient
) -> None:
    admin.create_topics([NewTopic("stamped", 1, replica_assignment=[[0, 1]])])["stamped"].result(
        TIMEOUT
    )
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})

    def write(value: bytes) -> None:
        producer.produce("stamped", value)
        assert producer.flush(TIMEOUT) == 0

    write(b"before")
    cluster.move_leader("stamped", 0, 1)  # epoch 1
    write(b"after")
    assert stamped(cluster, "stamped", 2) == [(b"before", 0), (b"after", 1)]
    # OffsetForLeaderEpoch: epoch 0 ended where epoch 1 began; epoch 1 runs to the end.
    with RawClient(cluster.bootstrap_servers.split(",")[1]) as client:
        answers = [epoch_end(client, "stamped", epoch) for epoch in (0, 1, 2)]
    assert answers == [(0, 0, 1), (0, 1, 2), (0, -1, -1)]


def stamped(cluster: Cluster, topic: str, count: int) -> list[tuple[bytes | None, int | None]]:
    """The first `count` records of partition 0 with the leader epoch of their batch."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": topic})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read: list[tuple[bytes | None, int | None]] = []
        while len(read) < count:
            message = consumer.poll(TIMEOUT)
            assert message is not None and message.error() is None, message
            read.append((message.value(), message.leader_epoch()))
    finally:
        consumer.close()
    return read


def test_replicas_and_epochs_survive_a_restart(tmp_path: Path) -> None:
    with Cluster(brokers=2, data_dir=str(tmp_path)) as cluster:
        cluster.create_topic("kept")
        cluster.move_leader("kept", 0, 1)
        cluster.move_leader("kept", 0, 0)  # replicas [0, 1], epoch 2
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        producer.produce("kept", b"at-2")
        assert producer.flush(TIMEOUT) == 0
    with Cluster(brokers=2, data_dir=str(tmp_path)) as cluster:
        assert described(cluster, "kept", node=1)[0] == (0, 2, [0, 1], [0, 1])
        assert stamped(cluster, "kept", 1) == [(b"at-2", 2)]
