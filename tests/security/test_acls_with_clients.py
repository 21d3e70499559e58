"""ACLs as the Python clients meet them: a super user manages ACLs through the admin API,
a principal with the grants it needs is served, one without them is refused with Kafka's
error. Each scenario is written once; a thin driver per client produces and consumes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from minibroker import Broker
from minibroker.testing.tls import TlsFiles

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
RECORDS = [f"value-{i}".encode() for i in range(5)]
TIMEOUT = 20.0


class Refused(Exception):
    """The client reported a refusal; the message names the error."""


def sasl(user: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(TIMEOUT)


def topic_acl(principal: str, operation: AclOperation, topic: str, **kw: Any) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        topic,
        kw.get("pattern", ResourcePatternType.LITERAL),
        principal,
        "*",
        operation,
        kw.get("permission", AclPermissionType.ALLOW),
    )


def group_acl(principal: str, group: str) -> AclBinding:
    return AclBinding(
        ResourceType.GROUP,
        group,
        ResourcePatternType.LITERAL,
        principal,
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )


class Driver:
    """Produce and consume as one client library does, signed in as `user`."""

    name: ClassVar[str]

    def __init__(self, bootstrap: str, user: str) -> None:
        self.bootstrap = bootstrap
        self.user = user

    def produce(self, topic: str) -> None:
        raise NotImplementedError

    def consume(self, topic: str, group: str) -> list[bytes]:
        raise NotImplementedError


class ConfluentDriver(Driver):
    name = "confluent-kafka"

    def produce(self, topic: str) -> None:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": self.bootstrap, **sasl(self.user), "message.timeout.ms": 10_000}
        )
        failures: list[str] = []
        for value in RECORDS:
            producer.produce(
                topic, value, on_delivery=lambda e, m: failures.append(str(e)) if e else None
            )
        assert producer.flush(TIMEOUT) == 0
        if failures:
            raise Refused(failures[0])

    def consume(self, topic: str, group: str) -> list[bytes]:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                **sasl(self.user),
                "group.id": group,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        read: list[bytes] = []
        try:
            deadline = time.monotonic() + TIMEOUT
            while len(read) < len(RECORDS) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error() is not None:
                    raise Refused(str(message.error()))
                read.append(message.value())
            consumer.commit(asynchronous=False)
            return read
        finally:
            consumer.close()


class AiokafkaDriver(Driver):
    name = "aiokafka"

    def _settings(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": self.user,
            "sasl_plain_password": USERS[self.user],
        }

    def produce(self, topic: str) -> None:
        asyncio.run(asyncio.wait_for(self._produce(topic), TIMEOUT))

    async def _produce(self, topic: str) -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(**self._settings(), acks="all")
        await producer.start()
        try:
            for value in RECORDS:
                await producer.send_and_wait(topic, value)
        except Exception as exc:
            raise Refused(f"{type(exc).__name__}: {exc}") from exc
        finally:
            await producer.stop()

    def consume(self, topic: str, group: str) -> list[bytes]:
        return asyncio.run(asyncio.wait_for(self._consume(topic, group), TIMEOUT))

    async def _consume(self, topic: str, group: str) -> list[bytes]:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(
            topic, **self._settings(), group_id=group, auto_offset_reset="earliest"
        )
        try:
            await consumer.start()
            read: list[bytes] = []
            while len(read) < len(RECORDS):
                batches = await consumer.getmany(timeout_ms=500)
                read += [m.value for messages in batches.values() for m in messages]
            await consumer.commit()
            return read
        except Exception as exc:
            raise Refused(f"{type(exc).__name__}: {exc}") from exc
        finally:
            await consumer.stop()


class KafkaPythonDriver(Driver):
    name = "kafka-python"

    def _settings(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": self.user,
            "sasl_plain_password": USERS[self.user],
        }

    def produce(self, topic: str) -> None:
        import kafka

        producer = kafka.KafkaProducer(**self._settings(), acks="all", max_block_ms=10_000)
        try:
            for value in RECORDS:
                producer.send(topic, value).get(timeout=TIMEOUT)
        except Exception as exc:
            raise Refused(f"{type(exc).__name__}: {exc}") from exc
        finally:
            producer.close()

    def consume(self, topic: str, group: str) -> list[bytes]:
        import kafka

        consumer = kafka.KafkaConsumer(
            topic, **self._settings(), group_id=group, auto_offset_reset="earliest"
        )
        read: list[bytes] = []
        try:
            deadline = time.monotonic() + TIMEOUT
            while len(read) < len(RECORDS) and time.monotonic() < deadline:
                for messages in consumer.poll(timeout_ms=500).values():
                    read += [m.value for m in messages]
            consumer.commit()
            return read
        except Exception as exc:
            raise Refused(f"{type(exc).__name__}: {exc}") from exc
        finally:
            consumer.close()


DRIVERS: list[type[Driver]] = [ConfluentDriver, AiokafkaDriver, KafkaPythonDriver]


@dataclass
class Secured:
    broker: Broker
    admin: AdminClient

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap_servers

    def topic(self) -> str:
        name = f"acl-{uuid.uuid4().hex[:8]}"
        self.broker.create_topic(name, 1)
        return name


@pytest.fixture(scope="module")
def secured() -> Iterator[Secured]:
    broker = Broker(
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        sasl_users=USERS,
        acls_enabled=True,
        super_users="User:admin",
    ).start_in_thread()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **sasl("admin")})
        yield Secured(broker, admin)
    finally:
        broker.stop_thread()


def error_names(refused: BaseException) -> str:
    """The refusal's text, the way each client spells the error (TOPIC_AUTHORIZATION_FAILED,
    TopicAuthorizationFailedError, ...), flattened for matching."""
    return str(refused).replace("_", "").lower()


@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
def test_a_principal_with_the_grants_it_needs_is_served(
    secured: Secured, driver: type[Driver]
) -> None:
    topic, group = secured.topic(), f"group-{uuid.uuid4().hex[:8]}"
    grant(
        secured.admin,
        topic_acl("User:alice", AclOperation.WRITE, topic),
        topic_acl("User:alice", AclOperation.READ, topic),
        group_acl("User:alice", group),
    )
    client = driver(secured.bootstrap, "alice")
    client.produce(topic)
    assert client.consume(topic, group) == RECORDS
    assert secured.broker.end_offsets(topic) == {0: len(RECORDS)}
    assert secured.broker.committed_offsets(group) == {(topic, 0): len(RECORDS)}


@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
def test_a_principal_without_write_is_refused(secured: Secured, driver: type[Driver]) -> None:
    topic = secured.topic()
    grant(secured.admin, topic_acl("User:alice", AclOperation.WRITE, topic))
    with pytest.raises(Refused) as refused:
        driver(secured.bootstrap, "bob").produce(topic)
    assert "topicauthorizationfailed" in error_names(refused.value)
    assert secured.broker.end_offsets(topic) == {0: 0}


@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
def test_a_principal_without_read_on_the_group_is_refused(
    secured: Secured, driver: type[Driver]
) -> None:
    topic, group = secured.topic(), f"group-{uuid.uuid4().hex[:8]}"
    grant(
        secured.admin,
        topic_acl("User:alice", AclOperation.WRITE, topic),
        topic_acl("User:bob", AclOperation.READ, topic),
    )
    driver(secured.bootstrap, "alice").produce(topic)
    with pytest.raises(Refused) as refused:
        driver(secured.bootstrap, "bob").consume(topic, group)
    assert "groupauthorizationfailed" in error_names(refused.value)
    assert secured.broker.committed_offsets(group) == {}


def test_the_admin_api_creates_describes_and_deletes_acls(secured: Secured) -> None:
    topic = secured.topic()
    literal = topic_acl("User:carol", AclOperation.READ, topic)
    prefixed = topic_acl(
        "User:carol", AclOperation.WRITE, topic[:6], pattern=ResourcePatternType.PREFIXED
    )
    denied = topic_acl("User:carol", AclOperation.DELETE, topic, permission=AclPermissionType.DENY)
    grant(secured.admin, literal, prefixed, denied)
    carol = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:carol",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    described = secured.admin.describe_acls(carol).result(TIMEOUT)
    assert set(described) == {literal, prefixed, denied}
    match = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ALLOW,
    )
    assert set(secured.admin.describe_acls(match).result(TIMEOUT)) >= {literal, prefixed}
    [deleted] = secured.admin.delete_acls([carol]).values()
    assert set(deleted.result(TIMEOUT)) == {literal, prefixed, denied}
    assert secured.admin.describe_acls(carol).result(TIMEOUT) == []


def test_only_a_principal_with_alter_on_the_cluster_may_change_acls(secured: Secured) -> None:
    alice = AdminClient({"bootstrap.servers": secured.bootstrap, **sasl("alice")})
    [future] = alice.create_acls([topic_acl("User:alice", AclOperation.ALL, "*")]).values()
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        future.result(TIMEOUT)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_acl_apis_answer_security_disabled_with_acls_off(kafka_broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    [future] = admin.create_acls([topic_acl("User:alice", AclOperation.READ, "t")]).values()
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        future.result(TIMEOUT)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.SECURITY_DISABLED


def test_listing_topics_shows_only_those_the_principal_may_describe(secured: Secured) -> None:
    visible, hidden = secured.topic(), secured.topic()
    grant(secured.admin, topic_acl("User:alice", AclOperation.READ, visible))
    alice = AdminClient({"bootstrap.servers": secured.bootstrap, **sasl("alice")})
    listed = set(alice.list_topics(timeout=TIMEOUT).topics)
    assert visible in listed and hidden not in listed
    named = alice.list_topics(hidden, timeout=TIMEOUT).topics[hidden]
    assert named.error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert hidden in set(secured.admin.list_topics(timeout=TIMEOUT).topics)  # a super user


def test_a_transactional_producer_needs_write_on_its_transactional_id(secured: Secured) -> None:
    topic = secured.topic()
    grant(secured.admin, topic_acl("User:alice", AclOperation.WRITE, topic))

    def producer(transactional_id: str) -> confluent_kafka.Producer:
        return confluent_kafka.Producer(
            {
                "bootstrap.servers": secured.bootstrap,
                **sasl("alice"),
                "transactional.id": transactional_id,
            }
        )

    refused = producer("not-granted")
    with pytest.raises(confluent_kafka.KafkaException) as failed:
        refused.init_transactions(TIMEOUT)
    assert failed.value.args[0].code() == (
        confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    grant(
        secured.admin,
        AclBinding(
            ResourceType.TRANSACTIONAL_ID,
            "granted",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.WRITE,
            AclPermissionType.ALLOW,
        ),
    )
    transactional = producer("granted")
    transactional.init_transactions(TIMEOUT)
    transactional.begin_transaction()
    transactional.produce(topic, b"in a transaction")
    transactional.commit_transaction(TIMEOUT)
    assert secured.broker.end_offsets(topic) == {0: 2}  # the record and the commit marker


def test_an_ssl_client_is_known_by_its_certificate(kafka_tls_files: TlsFiles) -> None:
    with Broker(
        listeners="SSL://127.0.0.1:0",
        acls_enabled=True,
        super_users="User:nobody",
        **kafka_tls_files.broker_settings(client_auth="required"),
    ) as broker:
        broker.create_topic("certified", 1)
        settings = {
            "bootstrap.servers": broker.bootstrap_servers,
            "message.timeout.ms": 10_000,
            **kafka_tls_files.librdkafka_settings("SSL", client_certificate=True),
        }

        def produce() -> list[Any]:
            producer = confluent_kafka.Producer(settings)
            outcome: list[Any] = []
            producer.produce("certified", b"v", on_delivery=lambda e, m: outcome.append(e))
            producer.flush(TIMEOUT)
            return outcome

        [error] = produce()
        assert error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
        broker.add_acl("TOPIC", "certified", kafka_tls_files.client_principal, operation="WRITE")
        assert produce() == [None]
