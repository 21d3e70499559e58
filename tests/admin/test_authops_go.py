"""franz-go's kadm (tests/admin/authops/go) on authorized operations (Metadata with
WithAuthorizedOps, DescribeGroups, DescribeConsumerGroups, DescribeShareGroups) and on
per-broker configs (AlterBrokerConfigs, DescribeBrokerConfigs with synonyms)."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer

from harness.raw_client import RawClient
from minibroker.testing.backends import KafkaService
from minibroker.testing.plugin import ClusterFactory, TopicFactory
from minibroker.testing.waiting import wait_for
from tests.groups.conftest import skip_before_kafka_4
from tests.interop.test_client_matrix import Built, Driver

DRIVER = Driver("franz-go-authops", "go", "../admin/authops/go", "authops")
RUN_TIMEOUT = 90.0
SHARE_GROUP_HEARTBEAT = 76

TOPIC_OPERATIONS = sorted(
    ["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"]
)
GROUP_OPERATIONS = sorted(["READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"])


@pytest.fixture(scope="module")
def kadm(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
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


def joined(bootstrap: str, topic: str, group: str, protocol: str) -> Consumer:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol}
    )
    consumer.subscribe([topic])
    wait_for(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), timeout=30)
    return consumer


@pytest.mark.parity
def test_kadm_reads_every_groups_authorized_operations(
    kadm: list[str],
    kafka_broker: KafkaService,
    kafka_topic: TopicFactory,
    pytestconfig: pytest.Config,
) -> None:
    skip_before_kafka_4(pytestconfig)  # share groups, and Kafka 4's operations on groups
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_topic()
    classic, modern, share = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in "cms")
    consumers = [joined(bootstrap, topic, classic, "classic")]
    try:
        consumers.append(joined(bootstrap, topic, modern, "consumer"))
        with RawClient(bootstrap, timeout=30) as client:
            joined_share = client.call(
                SHARE_GROUP_HEARTBEAT,
                1,
                group_id=share,
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                rack_id=None,
                subscribed_topic_names=(topic,),
            )
            assert joined_share.error_code.value == 0
        answers = run(
            kadm,
            bootstrap,
            f"topic:{topic}",
            f"group:{classic}",
            f"consumer:{modern}",
            f"share:{share}",
        )
    finally:
        for consumer in consumers:
            consumer.close()
    assert [answer["operations"] for answer in answers] == [
        TOPIC_OPERATIONS,
        GROUP_OPERATIONS,
        GROUP_OPERATIONS,
        GROUP_OPERATIONS,
    ]


def test_kadm_keeps_each_nodes_configs(kadm: list[str], kafka_cluster: ClusterFactory) -> None:
    cluster = kafka_cluster(brokers=3)
    _, second, third = (str(node.node_id) for node in cluster.nodes)
    name = "log.retention.ms"
    answers = run(
        kadm,
        cluster.bootstrap_servers,
        f"set:{third}:{name}:7200000",
        f"set::{name}:3600000",
        f"describe:{third}:{name}",
        f"describe:{second}:{name}",
        f"describe::{name}",
    )
    assert (answers[2]["value"], answers[2]["source"]) == ("7200000", "DYNAMIC_BROKER_CONFIG")
    assert answers[2]["synonyms"] == [
        [name, "7200000", "DYNAMIC_BROKER_CONFIG"],
        [name, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
        ["log.retention.hours", "168", "DEFAULT_CONFIG"],
    ]
    assert (answers[3]["value"], answers[3]["source"]) == (
        "3600000",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    )
    assert answers[4]["synonyms"] == [[name, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"]]
