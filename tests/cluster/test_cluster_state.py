"""ClusterState: what the brokers of one cluster share, and the coordinators it names."""

from __future__ import annotations

import pytest

from minibroker.config import BrokerConfig
from minibroker.state import group_rules as rules
from minibroker.state.cluster import (
    OFFSETS_TOPIC,
    TRANSACTION_KEY,
    TRANSACTION_TOPIC,
    ClusterState,
    Node,
)
from minibroker.state.groups import partition_for
from minibroker.state.topic_errors import TopicError


def _cluster(nodes: int = 1, **config: int) -> ClusterState:
    cluster = ClusterState(BrokerConfig(**config))  # type: ignore[arg-type]
    for node_id in range(nodes):
        cluster.add_node(Node(node_id, "127.0.0.1", 9092 + node_id))
    return cluster


def test_the_configured_partition_limit_applies() -> None:
    cluster = _cluster(max_partitions_per_broker=2)
    cluster.topics.create("t", 2)
    with pytest.raises(TopicError) as info:
        cluster.topics.create("u", 1)
    assert info.value.error_code == 44  # POLICY_VIOLATION


def test_a_cluster_without_nodes_leads_everything_from_node_0() -> None:
    cluster = ClusterState(BrokerConfig())
    topic = cluster.topics.create("t", 2)
    assert topic is not None and [p.leader for p in topic.partitions] == [0, 0]
    assert cluster.coordinator_for("g") == 0


def test_offsets_are_committed_only_for_partitions_that_exist() -> None:
    cluster = _cluster()
    cluster.topics.create("t", 2)
    results = cluster.groups.commit(
        0.0,
        group_id="g",
        generation=-1,
        member_id="",
        group_instance_id=None,
        offsets=[
            ("t", 0, 1, -1, None),
            ("t", 1, 1, -1, None),
            ("t", 2, 1, -1, None),
            ("t", -1, 1, -1, None),
            ("missing", 0, 1, -1, None),
        ],
    )
    assert results == {
        ("t", 0): rules.NONE,
        ("t", 1): rules.NONE,
        ("t", 2): rules.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", -1): rules.UNKNOWN_TOPIC_OR_PARTITION,
        ("missing", 0): rules.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_group_coordinators_live_on_the_compacted_internal_offsets_topic() -> None:
    cluster = _cluster(nodes=3, offsets_topic_partitions=6)
    node = cluster.coordinator_for("my-group")
    assert TRANSACTION_TOPIC not in cluster.topics
    topic = cluster.topics.get(OFFSETS_TOPIC)
    assert topic is not None and topic.internal is True
    assert topic.config("cleanup.policy") == "compact"
    assert len(topic.partitions) == 6
    assert node == topic.partitions[partition_for("my-group", 6)].leader


def test_transaction_coordinators_live_on_the_compacted_internal_transaction_topic() -> None:
    cluster = _cluster(nodes=3, offsets_topic_partitions=6)
    node = cluster.coordinator_for("my-tx", TRANSACTION_KEY)
    assert OFFSETS_TOPIC not in cluster.topics
    topic = cluster.topics.get(TRANSACTION_TOPIC)
    assert topic is not None and topic.internal is True
    assert topic.config("cleanup.policy") == "compact"
    assert node == topic.partitions[partition_for("my-tx", 6)].leader
    assert cluster.coordinator_for("my-tx", TRANSACTION_KEY) == node, "created once"
