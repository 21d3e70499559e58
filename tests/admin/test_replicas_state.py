"""ReplicaControl without sockets: moves changed midway, cancelled, held up by a stopped
node, and a topic deleted under a move (what the client tests cannot time)."""

from __future__ import annotations

import pytest

from minibroker.config import BrokerConfig
from minibroker.state.cluster import ClusterState, Node
from minibroker.state.replicas import CATCH_UP_SECONDS
from minibroker.state.topic_errors import TopicError
from minibroker.state.topics import Partition

INVALID_REPLICATION_FACTOR = 38


def _cluster() -> ClusterState:
    cluster = ClusterState(BrokerConfig())
    for node_id in range(3):
        cluster.add_node(Node(node_id, "127.0.0.1", 9092 + node_id))
    return cluster


def _create(cluster: ClusterState, assignments: list[tuple[int, list[int]]]) -> None:
    cluster.topics.create("t", -1, replication_factor=-1, assignments=assignments)


def _partition(cluster: ClusterState, name: str = "t") -> Partition:
    topic = cluster.topics.get(name)
    assert topic is not None
    return topic.partitions[0]


def test_a_move_changed_midway_is_measured_from_the_replicas_before_it() -> None:
    cluster = _cluster()
    _create(cluster, [(0, [0])])
    cluster.replicas.reassign("t", 0, [1], now=0.0)
    cluster.replicas.reassign("t", 0, [2, 0], now=0.5)
    partition = _partition(cluster)
    assert (partition.replicas, partition.adding, partition.removing) == ([2, 0], [2], [])
    cluster.replicas.tick(0.5 + CATCH_UP_SECONDS)
    assert (partition.replicas, partition.isr, partition.leader) == ([2, 0], [2, 0], 0)
    assert cluster.replicas.ongoing == {}


def test_a_move_waits_for_its_new_replica_to_run() -> None:
    cluster = _cluster()
    _create(cluster, [(0, [0])])
    cluster.node_stopped(2)
    cluster.replicas.reassign("t", 0, [2], now=0.0)
    cluster.replicas.tick(CATCH_UP_SECONDS)
    assert _partition(cluster).adding == [2]  # still under way
    cluster.add_node(Node(2, "127.0.0.1", 9094))
    cluster.replicas.tick(3 * CATCH_UP_SECONDS)
    partition = _partition(cluster)
    assert (partition.replicas, partition.leader, partition.leader_epoch) == ([2], 2, 1)
    assert partition.log.leader_epoch == 1


def test_refused_moves_change_nothing() -> None:
    cluster = _cluster()
    _create(cluster, [(0, [0, 1])])
    with pytest.raises(TopicError) as refused:
        cluster.replicas.reassign("t", 0, [2], now=0.0, allow_replication_factor_change=False)
    assert refused.value.error_code == INVALID_REPLICATION_FACTOR
    assert (_partition(cluster).replicas, cluster.replicas.ongoing) == ([0, 1], {})


def test_a_topic_deleted_under_a_move_leaves_no_move_behind() -> None:
    cluster = _cluster()
    _create(cluster, [(0, [0])])
    cluster.replicas.reassign("t", 0, [1], now=0.0)
    cluster.topics.delete("t")
    cluster.topics.create("t", 1)  # another topic of the same name
    cluster.replicas.tick(CATCH_UP_SECONDS)
    assert cluster.replicas.ongoing == {}
    assert _partition(cluster).replicas == [_partition(cluster).leader]
