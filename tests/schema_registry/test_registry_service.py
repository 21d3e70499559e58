"""The registry as users start it: beside a broker, from the command line, as a second
process on the same `_schemas` topic, and across a restart with a data directory."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from minibroker import Broker
from minibroker.testing.backends import KafkaService

_URL = re.compile(r"schema\.registry\.url=(\S+)")
_READY = re.compile(r"listening, bootstrap\.servers=(\S+)")

USER_V1 = '{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}'
USER_V2 = (
    '{"type":"record","name":"User","fields":[{"name":"name","type":"string"},'
    '{"name":"email","type":["null","string"],"default":null}]}'
)


def _client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url})


@contextmanager
def _child(*args: str, until: re.Pattern[str]) -> Iterator[tuple[str, list[str]]]:
    """A `python -m minibroker ARGS` child, until a line matches: (match, lines so far)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "minibroker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        while True:
            line = process.stdout.readline()
            assert line, f"the child stopped: {process.stderr.read() if process.stderr else ''}"
            lines.append(line)
            if found := until.search(line):
                yield found.group(1), lines
                break
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr


def test_the_command_line_prints_the_registry_url_beside_the_bootstrap_address() -> None:
    with _child("--port", "0", "--schema-registry-port", "0", until=_READY) as (_, lines):
        urls = [m.group(1) for line in lines if (m := _URL.search(line))]
        assert len(urls) == 1 and urls[0].startswith("http://127.0.0.1:")
        client = _client(urls[0])
        schema_id = client.register_schema("cli-value", Schema(USER_V1, "AVRO"))
        assert client.get_schema(schema_id).schema_str == USER_V1


def test_a_second_registry_process_serves_the_same_ids() -> None:
    with _child("--port", "0", "--schema-registry-port", "0", until=_READY) as (bootstrap, lines):
        first = _client(next(m.group(1) for line in lines if (m := _URL.search(line))))
        with _child("schema-registry", "--bootstrap-server", bootstrap, until=_URL) as (
            second_url,
            _,
        ):
            second = _client(second_url)
            users = first.register_schema("users-value", Schema(USER_V1, "AVRO"))
            assert second.get_schema(users).schema_str == USER_V1
            assert second.get_latest_version("users-value").schema_id == users
            # The same schema registered through the second one keeps its id...
            assert second.register_schema("accounts-value", Schema(USER_V1, "AVRO")) == users
            # ...and a new one gets the next id, seen by the first.
            evolved = second.register_schema("users-value", Schema(USER_V2, "AVRO"))
            assert evolved == users + 1
            assert first.get_latest_version("users-value").version == 2
            assert sorted(first.get_subjects()) == ["accounts-value", "users-value"]


def test_schemas_survive_a_restart_with_a_data_directory(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path), schema_registry=True) as broker:
        client = _client(broker.schema_registry_url)
        first = client.register_schema("orders-value", Schema(USER_V1, "AVRO"))
        second = client.register_schema("orders-value", Schema(USER_V2, "AVRO"))
        client.set_compatibility("orders-value", "FULL")
        client.delete_version("orders-value", 1)
    with Broker(data_dir=str(tmp_path), schema_registry=True) as broker:
        client = _client(broker.schema_registry_url)
        assert client.get_schema(first).schema_str == USER_V1
        assert client.get_versions("orders-value") == [2]
        assert client.get_latest_version("orders-value").schema_id == second
        assert client.get_compatibility("orders-value") == "FULL"
        # Ids go on from where they were.
        other = client.register_schema("other-value", Schema('"string"', "AVRO"))
        assert other == second + 1


def test_each_test_broker_starts_with_an_empty_registry(schema_registry: str) -> None:
    client = _client(schema_registry)
    assert client.get_subjects() == []
    subject = f"t-{uuid.uuid4().hex[:6]}-value"
    assert client.register_schema(subject, Schema(USER_V1, "AVRO")) >= 1


@pytest.mark.kafka(schema_registry=True)
def test_the_kafka_marker_turns_the_registry_on(kafka_broker: Broker) -> None:
    assert _client(kafka_broker.schema_registry_url).get_subjects() == []


def test_a_broker_without_a_registry_says_how_to_start_one(kafka_broker: Broker) -> None:
    with pytest.raises(RuntimeError, match="schema_registry=True"):
        _ = kafka_broker.schema_registry_url


def test_the_registry_needs_a_plaintext_listener() -> None:
    broker = Broker(
        schema_registry=True,
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        sasl_users={"alice": "secret"},
    )
    with pytest.raises(ValueError, match="PLAINTEXT listener"):
        broker.start_in_thread()


def test_errors_are_confluent_error_bodies(schema_registry: str) -> None:
    client = _client(schema_registry)
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_latest_version("nobody-value")
    assert (missing.value.http_status_code, missing.value.error_code) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as invalid:
        client.register_schema("bad-value", Schema('{"type":"record"}', "AVRO"))
    assert (invalid.value.http_status_code, invalid.value.error_code) == (422, 42201)


@pytest.mark.parity
def test_avro_records_round_trip_through_the_registry_and_a_topic(
    schema_registry: str, kafka_broker: KafkaService
) -> None:
    """On Kafka too: the registry keeps its schemas in that Kafka's `_schemas` topic."""
    topic = f"users-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic)
    client = _client(schema_registry)
    serialize = AvroSerializer(client, USER_V2)
    deserialize = AvroDeserializer(client)
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    users = [{"name": "ann", "email": None}, {"name": "bob", "email": "bob@example.com"}]
    for user in users:
        producer.produce(topic, serialize(user, context))
    assert producer.flush(10) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        read: list[object] = []
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                value = message.value() or b""
                assert value[:1] == b"\x00"  # Confluent's framing: magic byte, then the id
                assert (
                    int.from_bytes(value[1:5], "big")
                    == client.get_latest_version(f"{topic}-value").schema_id
                )
                read.append(deserialize(value, context))
            if len(read) == len(users):
                break
    finally:
        consumer.close()
    assert read == users
