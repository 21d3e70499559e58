"""Authorized operations as clients ask for them: confluent-kafka's AdminClient with
include_authorized_operations (describe_topics, describe_cluster,
describe_consumer_groups) and raw Metadata / DescribeTopicPartitions requests. Without an
authorizer Kafka answers every operation it supports on the resource type; with ACLs,
the operations the principal is allowed; not asked, Kafka's "not requested" value.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from harness.raw_client import RawClient, make
from minibroker import Broker
from minibroker.testing.backends import KafkaService
from minibroker.testing.plugin import TopicFactory
from minibroker.testing.real_kafka import RealKafka
from minibroker.testing.waiting import wait_for
from tests.groups.conftest import skip_before_kafka_4

TIMEOUT = 20.0
NOT_REQUESTED = -(2**31)
METADATA, DESCRIBE_TOPIC_PARTITIONS = 3, 75
UNKNOWN_TOPIC_OR_PARTITION = 3

TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
}
GROUP_OPERATIONS = {
    AclOperation.READ,
    AclOperation.DELETE,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}


def bits(operations: set[AclOperation]) -> int:
    """Kafka's bit set of the operations (bit n: operation code n)."""
    return sum(1 << int(operation.value) for operation in operations)


def topic_operations(admin: AdminClient, topic: str, asked: bool = True) -> Any:
    future = admin.describe_topics(
        TopicCollection([topic]), include_authorized_operations=asked, request_timeout=TIMEOUT
    )[topic]
    described = future.result(TIMEOUT)
    return None if described.authorized_operations is None else set(described.authorized_operations)


def cluster_operations(admin: AdminClient, asked: bool = True) -> Any:
    described = admin.describe_cluster(
        include_authorized_operations=asked, request_timeout=TIMEOUT
    ).result(TIMEOUT)
    return None if described.authorized_operations is None else set(described.authorized_operations)


def group_operations(admin: AdminClient, group: str, asked: bool = True) -> Any:
    described = admin.describe_consumer_groups(
        [group], include_authorized_operations=asked, request_timeout=TIMEOUT
    )[group].result(TIMEOUT)
    return None if described.authorized_operations is None else set(described.authorized_operations)


def metadata_operations(client: RawClient, topics: list[str], asked: bool) -> list[int]:
    response = client.call(
        METADATA,
        8,
        topics=tuple(make(METADATA, 8, "MetadataRequestTopic", name=name) for name in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=asked,
        include_cluster_authorized_operations=asked,
    )
    by_name = {t.name: int(t.topic_authorized_operations) for t in response.topics}
    return [by_name[name] for name in topics] + [int(response.cluster_authorized_operations)]


@pytest.mark.parity
def test_without_an_authorizer_every_supported_operation_is_authorized(
    kafka_broker: KafkaService, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(partitions=2)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    assert topic_operations(admin, topic) == TOPIC_OPERATIONS
    assert cluster_operations(admin) == CLUSTER_OPERATIONS
    assert topic_operations(admin, topic, asked=False) is None
    assert cluster_operations(admin, asked=False) is None

    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with RawClient(kafka_broker.bootstrap_servers, timeout=TIMEOUT) as client:
        # Metadata v8 (the last with cluster operations): an unknown topic the client
        # may describe carries them too; not asked, "not requested"
        assert metadata_operations(client, [topic, missing], asked=True) == [
            bits(TOPIC_OPERATIONS),
            bits(TOPIC_OPERATIONS),
            bits(CLUSTER_OPERATIONS),
        ]
        assert metadata_operations(client, [topic, missing], asked=False) == [NOT_REQUESTED] * 3
        # DescribeTopicPartitions has no switch: always filled in
        response = client.call(
            DESCRIBE_TOPIC_PARTITIONS,
            0,
            topics=tuple(
                make(DESCRIBE_TOPIC_PARTITIONS, 0, "TopicRequest", name=name)
                for name in (topic, missing)
            ),
            response_partition_limit=100,
            cursor=None,
        )
        answered = {
            t.name: (int(t.error_code), int(t.topic_authorized_operations)) for t in response.topics
        }
        assert answered == {
            topic: (0, bits(TOPIC_OPERATIONS)),
            missing: (UNKNOWN_TOPIC_OR_PARTITION, bits(TOPIC_OPERATIONS)),
        }


@pytest.mark.parity
def test_a_consumer_groups_authorized_operations(
    kafka_broker: KafkaService,
    kafka_topic: TopicFactory,
    pytestconfig: pytest.Config,
) -> None:
    # Kafka 3.9 supports READ, DESCRIBE and DELETE on groups (group configs came in 4.0)
    skip_before_kafka_4(pytestconfig)
    topic = kafka_topic()
    group = f"ops-{uuid.uuid4().hex[:8]}"
    bootstrap = kafka_broker.bootstrap_servers
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), timeout=30)
        assert group_operations(admin, group) == GROUP_OPERATIONS
        assert group_operations(admin, group, asked=False) is None
    finally:
        consumer.close()


# --- with ACLs (an authorizer): the principal's own operations -------------------------

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def sasl(user: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


@pytest.fixture
def secured() -> Iterator[Broker]:
    broker = Broker(
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        sasl_users=USERS,
        acls_enabled=True,
        super_users="User:admin",
    ).start_in_thread()
    try:
        yield broker
    finally:
        broker.stop_thread()


def acl(
    kind: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(kind, name, pattern, "User:alice", "*", operation, permission)


def test_acls_decide_the_authorized_operations(secured: Broker) -> None:
    bootstrap = secured.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    alice = AdminClient({"bootstrap.servers": bootstrap, **sasl("alice")})
    topic, group = "orders", "billing"
    secured.create_topic(topic)
    bindings = [
        # READ implies DESCRIBE; a DENY of WRITE wins over the prefixed ALL
        acl(ResourceType.TOPIC, topic, AclOperation.READ),
        acl(ResourceType.TOPIC, "ord", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, topic, AclOperation.WRITE, AclPermissionType.DENY),
        # ALTER_CONFIGS implies DESCRIBE_CONFIGS
        acl(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER_CONFIGS),
        acl(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
        acl(ResourceType.GROUP, group, AclOperation.READ),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(TIMEOUT)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **sasl("alice")})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), timeout=30)

        assert topic_operations(alice, topic) == TOPIC_OPERATIONS - {AclOperation.WRITE}
        assert cluster_operations(alice) == {
            AclOperation.ALTER_CONFIGS,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.DESCRIBE,
        }
        assert group_operations(alice, group) == {AclOperation.READ, AclOperation.DESCRIBE}
        # a super user is allowed everything
        assert topic_operations(admin, topic) == TOPIC_OPERATIONS
        assert cluster_operations(admin) == CLUSTER_OPERATIONS
        assert group_operations(admin, group) == GROUP_OPERATIONS
    finally:
        consumer.close()


# --- with an authorizer on Kafka too: a broker of its own for the test ---------------------

# Kafka's authorizer, letting everyone do what no ACL names: the client (User:ANONYMOUS,
# no sign-in) may create ACLs, and the ACLs it creates on a topic and a group decide.
KAFKA_AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


@pytest.fixture
def with_authorizer(request: pytest.FixtureRequest, kafka_backend: str) -> Iterator[str]:
    """Bootstrap servers of a broker with ACLs on, allowing what no ACL names: a
    minibroker, or with --kafka-backend=kafka-jvm an Apache Kafka started for the test."""
    if kafka_backend == "embedded":
        broker = Broker(acls_enabled=True, allow_everyone_if_no_acl_found=True).start_in_thread()
        try:
            yield broker.bootstrap_servers
        finally:
            broker.stop_thread()
    elif kafka_backend == "kafka-jvm":
        config = request.config
        line = config.getoption("kafka_jvm_version") or config.getini("kafka_jvm_version")
        with RealKafka(str(line), settings=KAFKA_AUTHORIZER) as kafka:
            yield kafka.bootstrap_servers
    else:
        pytest.skip(f"an authorizer cannot be switched on for the {kafka_backend} backend")


def anonymous_acl(
    kind: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(
        kind, name, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", operation, permission
    )


@pytest.mark.parity
def test_an_authorizer_answers_the_operations_the_acls_allow(with_authorizer: str) -> None:
    admin = AdminClient({"bootstrap.servers": with_authorizer})
    guarded, open_topic = f"guarded-{uuid.uuid4().hex[:8]}", f"open-{uuid.uuid4().hex[:8]}"
    group = f"guarded-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics(
        [NewTopic(guarded, 1, 1), NewTopic(open_topic, 1, 1)], request_timeout=TIMEOUT
    ).values():
        future.result(TIMEOUT)
    bindings = [
        anonymous_acl(ResourceType.TOPIC, guarded, AclOperation.READ),
        anonymous_acl(ResourceType.TOPIC, guarded, AclOperation.WRITE, AclPermissionType.DENY),
        anonymous_acl(ResourceType.GROUP, group, AclOperation.READ),
    ]
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT).values():
        future.result(TIMEOUT)
    # Kafka applies ACLs through its metadata log: wait until the topic's are in force
    wait_for(
        lambda: topic_operations(admin, guarded) == {AclOperation.READ, AclOperation.DESCRIBE},
        describe=lambda: topic_operations(admin, guarded),
    )
    # what no ACL names is allowed (allow.everyone.if.no.acl.found)
    assert topic_operations(admin, open_topic) == TOPIC_OPERATIONS
    assert cluster_operations(admin) == CLUSTER_OPERATIONS

    consumer = Consumer({"bootstrap.servers": with_authorizer, "group.id": group})
    try:
        consumer.subscribe([guarded])
        wait_for(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), timeout=30)
        assert group_operations(admin, group) == {AclOperation.READ, AclOperation.DESCRIBE}
    finally:
        consumer.close()
