"""Raw requests of the replica tests: CreateTopics, CreatePartitions and the partition
reassignment APIs, answered as (code, message) per topic or partition."""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping, Sequence
from typing import Any

from harness.raw_client import RawClient, make

METADATA, CREATE_TOPICS, OFFSET_FOR_LEADER_EPOCH = 3, 19, 23
CREATE_PARTITIONS, ELECT_LEADERS = 37, 43
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 45, 46
TIMEOUT = datetime.timedelta(seconds=10)

NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICATION_FACTOR = 0, 3, 38
INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST = 39, 42
PREFERRED_LEADER_NOT_AVAILABLE, ELECTION_NOT_NEEDED, NO_REASSIGNMENT_IN_PROGRESS = 80, 84, 85


METADATA_WAIT_SECONDS = 10.0


def metadata(client: RawClient, names: Sequence[str] = ()) -> Any:
    """Metadata v12 for these topics (none: the brokers only)."""
    return client.call(
        METADATA,
        12,
        topics=tuple(
            make(METADATA, 12, "MetadataRequestTopic", name=n, topic_id=None) for n in names
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def node_ids(client: RawClient) -> list[int]:
    """The brokers' node ids, from Metadata (a one-node Kafka is node 1, minibroker's 0)."""
    return sorted(b.node_id for b in metadata(client).brokers)


def partitions_of(client: RawClient, name: str) -> dict[int, tuple[int, int, list[int], list[int]]]:
    """Partition -> (leader, leader epoch, replicas, ISR), from Metadata. Kafka may answer
    for a topic it has just created before its metadata has the topic: wait for it."""
    deadline = time.monotonic() + METADATA_WAIT_SECONDS
    [topic] = metadata(client, [name]).topics
    while not topic.partitions and time.monotonic() < deadline:
        time.sleep(0.05)
        [topic] = metadata(client, [name]).topics
    return {
        p.partition_index: (p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
        for p in topic.partitions
    }


def create_topic(
    client: RawClient,
    name: str,
    assignments: Mapping[int, Sequence[int]] | Sequence[tuple[int, Sequence[int]]],
    *,
    partitions: int = -1,
    replication_factor: int = -1,
) -> tuple[int, str | None]:
    """CreateTopics v7 with a manual assignment: the topic's (error code, message)."""
    pairs = assignments.items() if isinstance(assignments, Mapping) else assignments
    topic = make(
        CREATE_TOPICS,
        7,
        "CreatableTopic",
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        assignments=tuple(
            make(
                CREATE_TOPICS,
                7,
                "CreatableReplicaAssignment",
                partition_index=index,
                broker_ids=tuple(brokers),
            )
            for index, brokers in pairs
        ),
        configs=(),
    )
    answer = client.call(CREATE_TOPICS, 7, topics=(topic,), timeout=TIMEOUT, validate_only=False)
    [result] = answer.topics
    return result.error_code.value, result.error_message


def create_partitions(
    client: RawClient, name: str, count: int, assignments: Sequence[Sequence[int]] | None
) -> tuple[int, str | None]:
    """CreatePartitions v3: the topic's (error code, message)."""
    topic = make(
        CREATE_PARTITIONS,
        3,
        "CreatePartitionsTopic",
        name=name,
        count=count,
        assignments=None
        if assignments is None
        else tuple(
            make(CREATE_PARTITIONS, 3, "CreatePartitionsAssignment", broker_ids=tuple(b))
            for b in assignments
        ),
    )
    answer = client.call(
        CREATE_PARTITIONS, 3, topics=(topic,), timeout=TIMEOUT, validate_only=False
    )
    [result] = answer.results
    return result.error_code.value, result.error_message


def reassign(
    client: RawClient, moves: Mapping[tuple[str, int], Sequence[int] | None], version: int = 0
) -> dict[tuple[str, int], int]:
    """AlterPartitionReassignments: (topic, partition) -> error code."""
    topics: dict[str, list[Any]] = {}
    for (name, index), replicas in moves.items():
        topics.setdefault(name, []).append(
            make(
                ALTER_REASSIGNMENTS,
                version,
                "ReassignablePartition",
                partition_index=index,
                replicas=None if replicas is None else tuple(replicas),
            )
        )
    answer = client.call(
        ALTER_REASSIGNMENTS,
        version,
        timeout=TIMEOUT,
        topics=tuple(
            make(ALTER_REASSIGNMENTS, version, "ReassignableTopic", name=name, partitions=tuple(p))
            for name, p in topics.items()
        ),
    )
    assert answer.error_code.value == NONE, answer
    return {
        (t.name, p.partition_index): p.error_code.value
        for t in answer.responses
        for p in t.partitions
    }


def ongoing(
    client: RawClient, wanted: Mapping[str, Sequence[int]] | None = None
) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    """ListPartitionReassignments: (topic, partition) -> (replicas, adding, removing)."""
    topics = (
        None
        if wanted is None
        else tuple(
            make(
                LIST_REASSIGNMENTS,
                0,
                "ListPartitionReassignmentsTopics",
                name=name,
                partition_indexes=tuple(indexes),
            )
            for name, indexes in wanted.items()
        )
    )
    answer = client.call(LIST_REASSIGNMENTS, 0, timeout=TIMEOUT, topics=topics)
    assert answer.error_code.value == NONE, answer
    return {
        (t.name, p.partition_index): (
            list(p.replicas),
            list(p.adding_replicas),
            list(p.removing_replicas),
        )
        for t in answer.topics
        for p in t.partitions
    }


def elect_preferred(client: RawClient, name: str, *indexes: int) -> dict[int, int]:
    """ElectLeaders v2, PREFERRED: partition -> error code."""
    wanted = (make(ELECT_LEADERS, 2, "TopicPartitions", topic=name, partitions=indexes),)
    answer = client.call(
        ELECT_LEADERS, 2, election_type=0, topic_partitions=wanted, timeout=TIMEOUT
    )
    return {
        p.partition_id: p.error_code.value
        for r in answer.replica_election_results
        for p in r.partition_result
    }


def epoch_end(client: RawClient, topic: str, epoch: int) -> tuple[int, int, int]:
    """OffsetForLeaderEpoch v4 for partition 0: (error code, epoch, end offset)."""
    wanted = make(
        OFFSET_FOR_LEADER_EPOCH,
        4,
        "OffsetForLeaderPartition",
        partition=0,
        current_leader_epoch=-1,
        leader_epoch=epoch,
    )
    answer = client.call(
        OFFSET_FOR_LEADER_EPOCH,
        4,
        replica_id=-1,
        topics=(
            make(
                OFFSET_FOR_LEADER_EPOCH,
                4,
                "OffsetForLeaderTopic",
                topic=topic,
                partitions=(wanted,),
            ),
        ),
    )
    [result] = answer.topics[0].partitions
    return result.error_code.value, result.leader_epoch, result.end_offset
