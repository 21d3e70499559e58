"""Authorized operations through each admin client's driver (tests/admin/drivers.py):
Kafka's Java Admin (4.x) asks describeTopics (DescribeTopicPartitions), describeCluster
and describeConsumerGroups with includeAuthorizedOperations; franz-go's kadm asks
Metadata with WithAuthorizedOps, DescribeGroups, DescribeConsumerGroups and
DescribeShareGroups. Without an authorizer every operation is allowed, as Kafka 4.4
reports. Runs against Apache Kafka too (`parity`)."""

from __future__ import annotations

import uuid
from contextlib import ExitStack

import pytest
from confluent_kafka import Consumer

from harness.raw_client import RawClient
from minibroker.testing.backends import KafkaService
from minibroker.testing.plugin import TopicFactory
from minibroker.testing.waiting import wait_for
from tests.admin.drivers import FRANZ_GO, JAVA, AdminDrivers
from tests.groups.conftest import skip_before_kafka_4

SHARE_GROUP_HEARTBEAT = 76

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


def join(closing: ExitStack, bootstrap: str, topic: str, group: str, protocol: str) -> None:
    """A member in `group`, assigned its partitions; closed when `closing` closes."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol}
    )
    closing.callback(consumer.close)
    consumer.subscribe([topic])
    wait_for(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), timeout=30)


def check_java(drivers: AdminDrivers, bootstrap: str, topic: str, closing: ExitStack) -> None:
    group = f"java-ops-{uuid.uuid4().hex[:8]}"
    join(closing, bootstrap, topic, group, "classic")
    [answer] = drivers.json_steps(JAVA, bootstrap, f"ops:{topic}:{group}")
    assert answer["topic"] == TOPIC_OPERATIONS
    assert answer["topic_unasked"] is None
    assert answer["cluster"] == CLUSTER_OPERATIONS
    assert answer["group"] == GROUP_OPERATIONS


def check_franz_go(drivers: AdminDrivers, bootstrap: str, topic: str, closing: ExitStack) -> None:
    classic, modern, share = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in "cms")
    join(closing, bootstrap, topic, classic, "classic")
    join(closing, bootstrap, topic, modern, "consumer")
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
    answers = drivers.json_steps(
        FRANZ_GO,
        bootstrap,
        f"topic:{topic}",
        f"group:{classic}",
        f"consumer:{modern}",
        f"share:{share}",
    )
    assert [answer["operations"] for answer in answers] == [
        TOPIC_OPERATIONS,
        GROUP_OPERATIONS,
        GROUP_OPERATIONS,
        GROUP_OPERATIONS,
    ]


CHECKS = {JAVA: check_java, FRANZ_GO: check_franz_go}


@pytest.mark.parity
@pytest.mark.parametrize("client", [JAVA, FRANZ_GO])
def test_admin_client_reads_authorized_operations(
    admin_drivers: AdminDrivers,
    kafka_broker: KafkaService,
    kafka_topic: TopicFactory,
    pytestconfig: pytest.Config,
    client: str,
) -> None:
    # Kafka 3.9 supports READ, DESCRIBE and DELETE on groups (group configs came in 4.0)
    # and has no share groups.
    skip_before_kafka_4(pytestconfig)
    with ExitStack() as closing:
        CHECKS[client](admin_drivers, kafka_broker.bootstrap_servers, kafka_topic(), closing)
