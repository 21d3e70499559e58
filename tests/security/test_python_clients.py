"""SASL and TLS listeners with the Python clients: each scenario written once, a thin
driver per client (librdkafka through confluent-kafka, aiokafka, kafka-python).

A scenario signs a client in on one listener and either produces records and reads
them back, or expects the sign-in to fail with the error Kafka gives it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from minibroker import Broker
from minibroker.testing.tls import TlsFiles

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
RECORDS = [f"value-{i}".encode() for i in range(10)]
PLAIN_FAILED = "Authentication failed: Invalid username or password"
TIMEOUT = 20.0
LISTENERS = (
    "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
)


class SignInFailed(Exception):
    """The client could not sign in (or connect); the message is what it reported."""


@dataclass(frozen=True)
class Security:
    protocol: str
    mechanism: str | None = None
    user: str | None = None
    password: str | None = None
    client_certificate: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    listener: str
    security: Security
    # None: the records come back; else the sign-in fails, the error saying this.
    refused_with: str | None = None
    broker: str = "requested"  # which broker: client certificates requested or required


SCENARIOS = [
    *(
        Scenario(f"sasl_plaintext_{m}", "SASL_PLAINTEXT", Security("SASL_PLAINTEXT", m, *pair))
        for m, pair in [
            ("PLAIN", ("alice", "alice-secret")),
            ("SCRAM-SHA-256", ("bob", "bob-secret")),
            ("SCRAM-SHA-512", ("alice", "alice-secret")),
        ]
    ),
    Scenario(
        "sasl_ssl_SCRAM-SHA-512",
        "SASL_SSL",
        Security("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret"),
    ),
    Scenario("ssl", "SSL", Security("SSL")),
    Scenario(
        "ssl_client_certificate",
        "SSL",
        Security("SSL", client_certificate=True),
        broker="required",
    ),
    Scenario(
        "ssl_without_a_required_certificate",
        "SSL",
        Security("SSL"),
        refused_with="",
        broker="required",
    ),
    Scenario(
        "wrong_password_PLAIN",
        "SASL_PLAINTEXT",
        Security("SASL_PLAINTEXT", "PLAIN", "alice", "wrong"),
        refused_with=PLAIN_FAILED,
    ),
    Scenario(
        "unknown_user_SCRAM-SHA-256",
        "SASL_SSL",
        Security("SASL_SSL", "SCRAM-SHA-256", "mallory", "alice-secret"),
        refused_with="invalid credentials with SASL mechanism SCRAM-SHA-256",
    ),
    Scenario(
        "wrong_password_SCRAM-SHA-512",
        "SASL_PLAINTEXT",
        Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "alice-secret"),
        refused_with="invalid credentials with SASL mechanism SCRAM-SHA-512",
    ),
    Scenario("plaintext_client_on_the_ssl_port", "SSL", Security("PLAINTEXT"), refused_with=""),
]


class Driver:
    """Produce RECORDS to a topic and read them back as one client does, on one listener."""

    name: ClassVar[str]

    def __init__(self, bootstrap: str, security: Security, tls: TlsFiles) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.tls = tls

    def round_trip(self, topic: str) -> list[bytes]:
        raise NotImplementedError

    def _settings(self) -> dict[str, Any]:
        """Keyword settings of the Python libraries (aiokafka and kafka-python spell
        them alike)."""
        s = self.security
        settings: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": s.protocol,
            "request_timeout_ms": int(TIMEOUT * 1000),
        }
        if s.protocol in ("SSL", "SASL_SSL"):
            settings["ssl_context"] = self.ssl_context()
        if s.mechanism is not None:
            settings.update(
                sasl_mechanism=s.mechanism,
                sasl_plain_username=s.user,
                sasl_plain_password=s.password,
            )
        return settings

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.tls.ca))
        if self.security.client_certificate:
            context.load_cert_chain(str(self.tls.client_certificate), str(self.tls.client_key))
        return context


class ConfluentDriver(Driver):
    name = "confluent-kafka"

    def round_trip(self, topic: str) -> list[bytes]:
        import confluent_kafka

        s = self.security
        errors: list[str] = []
        common = {
            "bootstrap.servers": self.bootstrap,
            "error_cb": lambda error: errors.append(str(error)),
            **self.tls.librdkafka_settings(
                s.protocol,
                mechanism=s.mechanism,
                username=s.user,
                password=s.password,
                client_certificate=s.client_certificate,
            ),
        }
        producer = confluent_kafka.Producer({**common, "acks": "all"})
        delivered: list[Any] = []
        for value in RECORDS:
            producer.produce(
                topic, value, partition=0, on_delivery=lambda e, m: delivered.append(e)
            )
        deadline = time.monotonic() + TIMEOUT
        while len(delivered) < len(RECORDS) and not errors and time.monotonic() < deadline:
            producer.poll(0.1)
        if errors:
            raise SignInFailed(errors[0])
        assert delivered == [None] * len(RECORDS), delivered
        consumer = confluent_kafka.Consumer(
            {**common, "group.id": f"g-{uuid.uuid4().hex}", "enable.auto.commit": False}
        )
        try:
            consumer.assign(
                [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
            )
            read: list[bytes] = []
            while len(read) < len(RECORDS) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    read.append(message.value())
            return read
        finally:
            consumer.close()


class AiokafkaDriver(Driver):
    name = "aiokafka"

    def round_trip(self, topic: str) -> list[bytes]:
        return asyncio.run(asyncio.wait_for(self._round_trip(topic), TIMEOUT))

    async def _round_trip(self, topic: str) -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

        producer = AIOKafkaProducer(acks="all", **self._settings())
        try:
            await producer.start()
        except Exception as exc:
            await producer.stop()
            raise SignInFailed(f"{type(exc).__name__}: {exc}") from exc
        try:
            for value in RECORDS:
                await producer.send_and_wait(topic, value, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**self._settings(), enable_auto_commit=False)
        await consumer.start()
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            read: list[bytes] = []
            while len(read) < len(RECORDS):
                batches = await consumer.getmany(timeout_ms=500)
                read += [m.value for messages in batches.values() for m in messages]
            return read
        finally:
            await consumer.stop()


class KafkaPythonDriver(Driver):
    name = "kafka-python"

    def round_trip(self, topic: str) -> list[bytes]:
        import kafka
        from kafka.structs import TopicPartition

        settings = self._settings()
        if "bootstrap_timeout_ms" in kafka.KafkaProducer.DEFAULT_CONFIG:
            settings["bootstrap_timeout_ms"] = 5_000  # a refusal is certain after the first
        try:
            producer = kafka.KafkaProducer(acks="all", **settings)
        except Exception as exc:
            raise SignInFailed(f"{type(exc).__name__}: {exc}") from exc
        try:
            for value in RECORDS:
                producer.send(topic, value, partition=0).get(timeout=TIMEOUT)
        finally:
            producer.close()
        consumer = kafka.KafkaConsumer(enable_auto_commit=False, **self._settings())
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            consumer.seek_to_beginning(partition)
            read: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT
            while len(read) < len(RECORDS) and time.monotonic() < deadline:
                for messages in consumer.poll(timeout_ms=500).values():
                    read += [m.value for m in messages]
            return read
        finally:
            consumer.close()


DRIVERS: list[type[Driver]] = [ConfluentDriver, AiokafkaDriver, KafkaPythonDriver]


@dataclass
class Brokers:
    by_client_auth: dict[str, Broker] = field(default_factory=dict)


@pytest.fixture(scope="module")
def brokers(kafka_tls_files: TlsFiles) -> Iterator[Brokers]:
    found = Brokers()
    for client_auth in ("requested", "required"):
        broker = Broker(
            listeners=LISTENERS,
            sasl_users=USERS,
            auto_create_topics=True,
            **kafka_tls_files.broker_settings(client_auth),
        )
        found.by_client_auth[client_auth] = broker.start_in_thread()
    yield found
    for broker in found.by_client_auth.values():
        broker.stop_thread()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
def test_signing_in(
    brokers: Brokers,
    kafka_tls_files: TlsFiles,
    caplog: pytest.LogCaptureFixture,
    driver: type[Driver],
    scenario: Scenario,
) -> None:
    broker = brokers.by_client_auth[scenario.broker]
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 1)
    client = driver(
        broker.bootstrap_servers_for(scenario.listener), scenario.security, kafka_tls_files
    )
    if scenario.refused_with is None:
        assert client.round_trip(topic) == RECORDS
        return
    with pytest.raises(Exception) as refused:  # each client has its own error types
        client.round_trip(topic)
    if scenario.refused_with:
        # librdkafka puts the broker's message in its error; the Python clients log it
        # (with the error code, 58) and raise a connection error.
        assert scenario.refused_with in str(refused.value) + caplog.text
    assert broker.end_offsets(topic) == {0: 0}  # nothing got in
