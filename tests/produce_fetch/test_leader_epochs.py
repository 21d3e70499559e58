"""OffsetForLeaderEpoch and ElectLeaders over the wire.

Every partition has had one leader epoch (0) and its leader is its preferred replica, so
OffsetForLeaderEpoch answers epoch 0 with the log end offset and later epochs with
Kafka's "undefined" answer, and ElectLeaders finds no election needed. Each error branch
is checked with the code Kafka sends.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from harness.raw_client import RawClient, make, produce_batch
from minibroker import Broker
from minibroker.protocol import records
from minibroker.testing.plugin import ClusterFactory, TopicFactory
from tests.produce_fetch.test_fetch_limits import node_address

OFFSET_FOR_LEADER_EPOCH, ELECT_LEADERS = 23, 43
NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 0, 3, 6
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, ELECTION_NOT_NEEDED = 74, 75, 84
CONSUMER = -1
PREFERRED, UNCLEAN = 0, 1


def end_offsets(
    client: RawClient, version: int, topic: str, *wanted: tuple[int, int, int]
) -> list[tuple[int, int, int]]:
    """(error code, leader epoch, end offset) for (partition, leader epoch, current
    leader epoch) triples; v0 answers no epoch: -1 stands in for it."""
    partitions = tuple(
        make(
            OFFSET_FOR_LEADER_EPOCH,
            version,
            "OffsetForLeaderPartition",
            partition=partition,
            current_leader_epoch=current,
            leader_epoch=epoch,
        )
        for partition, epoch, current in wanted
    )
    response = client.call(
        OFFSET_FOR_LEADER_EPOCH,
        version,
        replica_id=CONSUMER,
        topics=(
            make(
                OFFSET_FOR_LEADER_EPOCH,
                version,
                "OffsetForLeaderTopic",
                topic=topic,
                partitions=partitions,
            ),
        ),
    )
    (result,) = response.topics
    assert result.topic == topic
    return [(p.error_code.value, int(p.leader_epoch), int(p.end_offset)) for p in result.partitions]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_epoch_zero_ends_at_the_log_end_and_later_epochs_are_undefined(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic(partitions=2)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        batch = records.build_batch([(None, b"a"), (None, b"b"), (None, b"c")])
        produce_batch(client.request, topic, 0, batch)
        epoch_in_answer = 0 if version >= 1 else -1  # v0 has no leader epoch field
        assert end_offsets(client, version, topic, (0, 0, -1), (1, 0, -1)) == [
            (NONE, epoch_in_answer, 3),
            (NONE, epoch_in_answer, 0),
        ]
        assert end_offsets(client, version, topic, (0, 1, -1), (2, 0, -1)) == [
            (NONE, -1, -1),
            (UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ]
        assert end_offsets(client, version, "no-such-topic", (0, 0, -1)) == [
            (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
        ]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_a_current_leader_epoch_other_than_the_partitions_is_refused(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """From v2 the client says which leader epoch it believes current: a newer one than
    the partition's is UNKNOWN_LEADER_EPOCH (the broker is behind), an older one
    FENCED_LEADER_EPOCH (the client is)."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        assert end_offsets(client, version, topic, (0, 0, 1), (0, 0, -2), (0, 0, 0)) == [
            (UNKNOWN_LEADER_EPOCH, -1, -1),
            (FENCED_LEADER_EPOCH, -1, -1),
            (NONE, 0, 0),
        ]


def test_only_the_leader_answers_for_a_partition(kafka_cluster: ClusterFactory) -> None:
    cluster = kafka_cluster(brokers=2)
    cluster.create_topic("epochs", 2)
    leaders = cluster.leaders("epochs")
    for node_id in (0, 1):
        with RawClient(node_address(cluster, node_id)) as client:
            answers = end_offsets(client, 4, "epochs", (0, 0, -1), (1, 0, -1))
        expected = [
            (NONE, 0, 0) if leaders[partition] == node_id else (NOT_LEADER_OR_FOLLOWER, -1, -1)
            for partition in (0, 1)
        ]
        assert answers == expected


def elect(client: RawClient, version: int, kind: int, wanted: Any) -> Any:
    return client.call(
        ELECT_LEADERS,
        version,
        election_type=kind,
        topic_partitions=wanted,
        timeout=datetime.timedelta(seconds=5),
    )


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("kind", [PREFERRED, UNCLEAN])
def test_no_election_is_ever_needed(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int, kind: int
) -> None:
    topic = kafka_topic(partitions=2)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        named = (
            make(ELECT_LEADERS, version, "TopicPartitions", topic=topic, partitions=(0, 1, 5)),
            make(ELECT_LEADERS, version, "TopicPartitions", topic="no-such-topic", partitions=(0,)),
        )
        response = elect(client, version, kind, named)
        if version >= 1:
            assert response.error_code.value == NONE
        results = {
            (r.topic, p.partition_id): (p.error_code.value, bool(p.error_message))
            for r in response.replica_election_results
            for p in r.partition_result
        }
        assert results == {
            (topic, 0): (ELECTION_NOT_NEEDED, True),
            (topic, 1): (ELECTION_NOT_NEEDED, True),
            (topic, 5): (UNKNOWN_TOPIC_OR_PARTITION, True),
            ("no-such-topic", 0): (UNKNOWN_TOPIC_OR_PARTITION, True),
        }
        # All partitions: none was elected, so none is listed (Kafka's answer).
        assert elect(client, version, kind, None).replica_election_results == ()
