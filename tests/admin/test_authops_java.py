"""Kafka's Java Admin client (4.x, tests/admin/authops/AuthopsAdmin.java) on authorized
operations (describeTopics, which asks DescribeTopicPartitions, describeCluster and
describeConsumerGroups with includeAuthorizedOperations) and on per-broker configs
(incrementalAlterConfigs and describeConfigs with synonyms, sent to the node named).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer

from minibroker.testing.backends import KafkaService
from minibroker.testing.plugin import ClusterFactory, TopicFactory
from minibroker.testing.waiting import wait_for
from tests.groups.conftest import skip_before_kafka_4
from tests.interop.test_client_matrix import Built, Driver

DRIVER = Driver("java-authops", "java", "../admin/authops", "AuthopsAdmin", java_line="4")
RUN_TIMEOUT = 90.0

TOPIC_OPERATIONS = sorted(
    ["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"]
)
CLUSTER_OPERATIONS = sorted(
    [
        "CREATE",
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
    ]
)
GROUP_OPERATIONS = sorted(["READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"])


@pytest.fixture(scope="module")
def java_admin(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return Built(tmp_path_factory).command(DRIVER)


def run(command: list[str], bootstrap: str, *steps: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [*command, bootstrap, *steps], capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [line["step"] for line in lines] == list(steps), done.stdout[-3000:]
    for line in lines:
        assert "error" not in line, line["error"]
    return lines


@pytest.mark.parity
def test_java_admin_reads_authorized_operations(
    java_admin: list[str],
    kafka_broker: KafkaService,
    kafka_topic: TopicFactory,
    pytestconfig: pytest.Config,
) -> None:
    # Kafka 3.9 supports READ, DESCRIBE and DELETE on groups (group configs came in 4.0)
    skip_before_kafka_4(pytestconfig)
    topic = kafka_topic()
    group = f"java-ops-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": group})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), timeout=30)
        [answer] = run(java_admin, kafka_broker.bootstrap_servers, f"ops:{topic}:{group}")
    finally:
        consumer.close()
    assert answer["topic"] == TOPIC_OPERATIONS
    assert answer["topic_unasked"] is None
    assert answer["cluster"] == CLUSTER_OPERATIONS
    assert answer["group"] == GROUP_OPERATIONS


def test_java_admin_keeps_each_nodes_configs(
    java_admin: list[str], kafka_cluster: ClusterFactory
) -> None:
    cluster = kafka_cluster(brokers=3)
    first, second, _ = (str(node.node_id) for node in cluster.nodes)
    name = "log.retention.ms"
    answers = run(
        java_admin,
        cluster.bootstrap_servers,
        f"set:{second}:{name}:7200000",
        f"set::{name}:3600000",
        f"describe:{second}:{name}",
        f"describe:{first}:{name}",
        f"describe::{name}",
    )
    assert answers[2]["value"] == "7200000"
    assert answers[2]["source"] == "DYNAMIC_BROKER_CONFIG"
    assert answers[2]["synonyms"] == [
        [name, "7200000", "DYNAMIC_BROKER_CONFIG"],
        [name, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
        ["log.retention.hours", "168", "DEFAULT_CONFIG"],
    ]
    assert (answers[3]["value"], answers[3]["source"]) == (
        "3600000",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    )
    assert answers[3]["synonyms"] == [
        [name, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
        ["log.retention.hours", "168", "DEFAULT_CONFIG"],
    ]
    assert answers[4]["synonyms"] == [[name, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"]]
