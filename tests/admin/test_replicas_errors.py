"""Manual replica assignments, reassignments and preferred elections refused with
Kafka's errors, by raw requests (the codes as sent, before any client retries them).

One node is enough to be refused (a broker id that does not exist, one named twice,
partitions not numbered from 0, counts given with an assignment, a cancel of no move), so
these run against Kafka 4.4 too (`parity`); what only several nodes show (moves, elections
that change a leader) is in test_replicas_cluster.py, which one-node Kafka cannot run.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.raw_client import RawClient
from minibroker.testing.plugin import KafkaService, unique_topic_name
from tests.admin.replicas_raw import (
    ELECTION_NOT_NEEDED,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REQUEST,
    NO_REASSIGNMENT_IN_PROGRESS,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
    create_partitions,
    create_topic,
    elect_preferred,
    node_ids,
    ongoing,
    partitions_of,
    reassign,
)

pytestmark = pytest.mark.parity
MISSING = 999  # no such broker


def test_create_topics_refuses_bad_manual_assignments(kafka_broker: KafkaService) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        [node] = node_ids(client)

        def refused(assignments: Any, **counts: int) -> tuple[int, bool]:
            code, message = create_topic(client, unique_topic_name(), assignments, **counts)
            return code, bool(message)

        assert refused({0: [node, MISSING]}) == (INVALID_REPLICA_ASSIGNMENT, True)
        assert refused({0: [node, node]}) == (INVALID_REPLICA_ASSIGNMENT, True)
        assert refused({0: []}) == (INVALID_REPLICA_ASSIGNMENT, True)
        assert refused({1: [node]}) == (INVALID_REPLICA_ASSIGNMENT, True)  # not from 0
        assert refused([(0, [node]), (0, [node])]) == (INVALID_REPLICA_ASSIGNMENT, True)
        assert refused({0: [node]}, replication_factor=1) == (INVALID_REQUEST, True)
        assert refused({0: [node]}, partitions=1) == (INVALID_REQUEST, True)
        name = unique_topic_name()
        assert create_topic(client, name, {0: [node], 1: [node]}) == (NONE, None)
        described = partitions_of(client, name)
        assert {index: replicas for index, (_, _, replicas, _) in described.items()} == {
            0: [node],
            1: [node],
        }


def test_create_partitions_refuses_bad_manual_assignments(kafka_broker: KafkaService) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        [node] = node_ids(client)
        name = unique_topic_name()
        assert create_topic(client, name, {0: [node]}) == (NONE, None)
        refusals = [
            create_partitions(client, name, 2, [[MISSING]])[0],
            create_partitions(client, name, 2, [[node, node]])[0],
            create_partitions(client, name, 2, [[node], [node]])[0],  # one list too many
        ]
        assert refusals == [INVALID_REPLICA_ASSIGNMENT] * 3
        assert create_partitions(client, name, 3, [[node], [node]]) == (NONE, None)


def test_reassignments_refused_and_listed(kafka_broker: KafkaService) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        [node] = node_ids(client)
        name = unique_topic_name()
        assert create_topic(client, name, {0: [node]}) == (NONE, None)
        answers = reassign(
            client,
            {
                (name, 0): [MISSING],
                (name, 5): [node],
                ("no-such-topic-here", 0): [node],
            },
        )
        assert answers == {
            (name, 0): INVALID_REPLICA_ASSIGNMENT,
            (name, 5): UNKNOWN_TOPIC_OR_PARTITION,
            ("no-such-topic-here", 0): UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert reassign(client, {(name, 0): None}) == {(name, 0): NO_REASSIGNMENT_IN_PROGRESS}
        # Onto the replicas it has: nothing to move, nothing listed.
        assert reassign(client, {(name, 0): [node]}) == {(name, 0): NONE}
        assert ongoing(client, {name: [0]}) == {}
        assert (name, 0) not in ongoing(client)


def test_preferred_election_where_the_preferred_replica_leads(
    kafka_broker: KafkaService,
) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        [node] = node_ids(client)
        name = unique_topic_name()
        assert create_topic(client, name, {0: [node]}) == (NONE, None)
        answers = elect_preferred(client, name, 0, 3)
        assert answers == {0: ELECTION_NOT_NEEDED, 3: UNKNOWN_TOPIC_OR_PARTITION}
