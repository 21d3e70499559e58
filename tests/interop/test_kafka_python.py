"""kafka-python against the broker: produce, consume, seek, compression, limits, admin."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kafka.errors as errors
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec, OffsetTimestamp
from kafka.consumer.fetcher import ConsumerRecord

from minibroker import Broker
from minibroker.testing.plugin import TopicFactory
from tests.interop.conftest import (
    CODEC_IDS,
    CODECS,
    CREATE_TIME_MS,
    LARGE_CLIENT_LIMIT,
    LARGE_TOPIC_CONFIGS,
    ONE_MIB,
    SMALL_FETCH_LIMIT,
    WAITED_FETCHES,
    assert_fetches_waited,
    fetch_arrivals,
    now_ms,
    stored_batch_headers,
    unique_client_id,
    wait_until,
)

TIMEOUT = 15  # seconds for any one client operation
LOG_APPEND_TIME = 1


@contextmanager
def producer(broker: Broker, **settings: Any) -> Iterator[KafkaProducer]:
    settings.setdefault("request_timeout_ms", 10_000)
    settings.setdefault("max_block_ms", 10_000)
    client = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **settings)
    try:
        yield client
    finally:
        client.close(timeout=TIMEOUT)


@contextmanager
def consumer(
    broker: Broker, topic: str, partitions: int = 1, **settings: Any
) -> Iterator[KafkaConsumer]:
    """A group-less consumer assigned every partition of `topic`, at the earliest offsets."""
    settings.setdefault("fetch_max_wait_ms", 100)
    client = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=10_000,
        **settings,
    )
    try:
        client.assign([TopicPartition(topic, p) for p in range(partitions)])
        yield client
    finally:
        client.close()


@contextmanager
def admin(broker: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
    try:
        yield client
    finally:
        client.close()


def consume(client: KafkaConsumer, count: int) -> list[ConsumerRecord]:
    """Exactly `count` records, or fail after TIMEOUT seconds."""
    received: list[ConsumerRecord] = []
    deadline = time.monotonic() + TIMEOUT
    while len(received) < count and time.monotonic() < deadline:
        for batch in client.poll(timeout_ms=200).values():
            received.extend(batch)
    assert len(received) == count, f"got {len(received)} of {count} records: {received}"
    return received


def test_kafka_python_keys_headers_null_values_and_create_time(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    sent = [
        (b"key-1", b"value-1", [("trace", b"abc"), ("empty", b"")], CREATE_TIME_MS),
        (None, b"no key", [], CREATE_TIME_MS + 1),
        (b"tombstone", None, [("why", b"deleted")], CREATE_TIME_MS + 2),
        (b"", b"", [("", b"")], CREATE_TIME_MS + 3),  # empty is not null
    ]
    with producer(kafka_broker) as client:
        for key, value, headers, timestamp in sent:
            client.send(
                topic, value, key=key, partition=0, timestamp_ms=timestamp, headers=headers
            ).get(TIMEOUT)
    with consumer(kafka_broker, topic) as reader:
        got = consume(reader, len(sent))
    assert [r.offset for r in got] == [0, 1, 2, 3]
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in got] == sent
    assert {r.timestamp_type for r in got} == {0}


def test_kafka_python_log_append_time_topic_returns_broker_time(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(configs={"message.timestamp.type": "LogAppendTime"})
    before = now_ms()
    with producer(kafka_broker) as client:
        metadata = client.send(topic, b"v", partition=0, timestamp_ms=CREATE_TIME_MS).get(TIMEOUT)
    after = now_ms()
    assert before <= metadata.timestamp <= after
    with consumer(kafka_broker, topic) as reader:
        [record] = consume(reader, 1)
    assert record.timestamp_type == LOG_APPEND_TIME
    assert record.timestamp == metadata.timestamp


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_compression_round_trip(
    kafka_broker: Broker, kafka_topic: TopicFactory, codec: str
) -> None:
    topic = kafka_topic()
    values = [f"{codec} record {i} ".encode() * 20 for i in range(10)]
    with producer(kafka_broker, compression_type=codec, linger_ms=1000) as client:
        futures = [
            client.send(
                topic, value, key=b"k%d" % i, partition=0, timestamp_ms=CREATE_TIME_MS + i * 10
            )
            for i, value in enumerate(values)
        ]
        client.flush(TIMEOUT)
        assert [f.get(TIMEOUT).offset for f in futures] == list(range(10))
    [header] = stored_batch_headers(kafka_broker, topic)
    assert header.compression == CODEC_IDS[codec]
    with consumer(kafka_broker, topic) as reader:
        got = consume(reader, len(values))
        assert [r.value for r in got] == values
        assert [r.timestamp for r in got] == [CREATE_TIME_MS + i * 10 for i in range(10)]
        tp = TopicPartition(topic, 0)
        found = reader.offsets_for_times({tp: CREATE_TIME_MS + 45}, timeout_ms=TIMEOUT * 1000)
        assert (found[tp].offset, found[tp].timestamp) == (5, CREATE_TIME_MS + 50)


def test_kafka_python_idempotent_producer(kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    topic = kafka_topic()
    with producer(kafka_broker, enable_idempotence=True, acks="all") as client:
        for i in range(20):
            client.send(topic, b"%d" % i, partition=0)
        client.flush(TIMEOUT)
    headers = stored_batch_headers(kafka_broker, topic)
    assert {h.producer_id for h in headers} != {-1}
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]
    with consumer(kafka_broker, topic) as reader:
        got = consume(reader, 20)
    assert [r.value for r in got] == [b"%d" % i for i in range(20)]


def test_kafka_python_acks_zero(kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    topic = kafka_topic()
    # acks=0 gets no response at all; a stray one would break the client's request order.
    # kafka-python 3 turns idempotence on by default, and that needs acks=all.
    with producer(kafka_broker, acks=0, enable_idempotence=False) as client:
        for i in range(5):
            client.send(topic, b"%d" % i, partition=0).get(TIMEOUT)
        client.send(topic, b"last", partition=0)
        client.flush(TIMEOUT)
    # Nothing confirms an acks=0 write: the broker may still be reading the last one.
    assert wait_until(lambda: kafka_broker.end_offsets(topic) == {0: 6}, TIMEOUT)
    with consumer(kafka_broker, topic) as reader:
        got = consume(reader, 6)
    assert [r.value for r in got] == [b"0", b"1", b"2", b"3", b"4", b"last"]


def test_kafka_python_seek_earliest_latest_and_by_timestamp(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    tp = TopicPartition(topic, 0)
    with producer(kafka_broker) as client:
        for i in range(5):
            client.send(topic, b"%d" % i, partition=0, timestamp_ms=CREATE_TIME_MS + i * 1000).get(
                TIMEOUT
            )
        with consumer(kafka_broker, topic) as reader:
            reader.seek_to_end(tp)
            assert reader.position(tp, timeout_ms=TIMEOUT * 1000) == 5
            reader.seek_to_beginning(tp)
            assert reader.position(tp, timeout_ms=TIMEOUT * 1000) == 0
            assert [r.value for r in consume(reader, 5)] == [b"%d" % i for i in range(5)]

            found = reader.offsets_for_times({tp: CREATE_TIME_MS + 2500})
            assert (found[tp].offset, found[tp].timestamp) == (3, CREATE_TIME_MS + 3000)
            reader.seek(tp, found[tp].offset)
            assert [r.value for r in consume(reader, 2)] == [b"3", b"4"]
            assert reader.offsets_for_times({tp: CREATE_TIME_MS + 10_000}) == {tp: None}

            reader.seek_to_end(tp)
            assert reader.position(tp, timeout_ms=TIMEOUT * 1000) == 5
            client.send(topic, b"new", partition=0).get(TIMEOUT)
            assert [r.value for r in consume(reader, 1)] == [b"new"]
            assert reader.beginning_offsets([tp]) == {tp: 0}
            assert reader.end_offsets([tp]) == {tp: 6}
            # Past the end: OFFSET_OUT_OF_RANGE, then auto_offset_reset=earliest applies.
            reader.seek(tp, 100)
            assert [r.offset for r in consume(reader, 6)] == list(range(6))


def test_kafka_python_one_mebibyte_message(kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    big = kafka_topic(configs=LARGE_TOPIC_CONFIGS)
    default = kafka_topic()
    payload = os.urandom(ONE_MIB)
    with producer(kafka_broker, max_request_size=LARGE_CLIENT_LIMIT, retries=0) as client:
        client.send(big, payload, key=b"big", partition=0).get(TIMEOUT)
        # The default max.message.bytes (1048588) cannot hold 1 MiB plus overhead.
        with pytest.raises(errors.MessageSizeTooLargeError):
            client.send(default, payload, partition=0).get(TIMEOUT)
    assert kafka_broker.end_offsets(default) == {0: 0}
    with consumer(
        kafka_broker,
        big,
        max_partition_fetch_bytes=LARGE_CLIENT_LIMIT,
        fetch_max_bytes=LARGE_CLIENT_LIMIT,
    ) as reader:
        [record] = consume(reader, 1)
    assert record.key == b"big"
    assert record.value == payload
    # Limits below the record's size: the first batch still comes whole (KIP-74).
    small = {"max_partition_fetch_bytes": SMALL_FETCH_LIMIT, "fetch_max_bytes": SMALL_FETCH_LIMIT}
    with consumer(kafka_broker, big, **small) as reader:
        [record] = consume(reader, 1)
    assert record.value == payload


def test_kafka_python_256_partitions(kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    partitions = 256
    topic = kafka_topic(partitions=partitions)
    with producer(kafka_broker, linger_ms=5) as client:
        futures = [client.send(topic, b"p%d" % p, partition=p) for p in range(partitions)]
        client.flush(TIMEOUT)
        assert [f.get(TIMEOUT).partition for f in futures] == list(range(partitions))
    assert kafka_broker.end_offsets(topic) == {p: 1 for p in range(partitions)}
    with consumer(kafka_broker, topic, partitions) as reader:
        got = consume(reader, partitions)
    assert sorted((r.partition, r.value) for r in got) == [
        (p, b"p%d" % p) for p in range(partitions)
    ]


def test_kafka_python_empty_fetch_waits_max_wait(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    max_wait_ms = 400
    client_id = unique_client_id("kafka-python-empty-fetch")
    with consumer(
        kafka_broker, topic, fetch_max_wait_ms=max_wait_ms, client_id=client_id
    ) as reader:
        # Poll until the broker has answered enough fetches, not for a fixed time.
        deadline = time.monotonic() + TIMEOUT
        while len(fetch_arrivals(kafka_broker, client_id)) < WAITED_FETCHES:
            assert time.monotonic() < deadline, fetch_arrivals(kafka_broker, client_id)
            assert reader.poll(timeout_ms=max_wait_ms) == {}
    assert_fetches_waited(kafka_broker, client_id, max_wait_ms)


# --- admin ---


def test_kafka_python_admin_create_describe_grow_delete(kafka_broker: Broker) -> None:
    name = unique_client_id("kafka-python-admin")
    with admin(kafka_broker) as client:
        created = client.create_topics(
            {
                name: {
                    "num_partitions": 3,
                    "replication_factor": 1,
                    "configs": {"retention.ms": "60000"},
                }
            }
        )
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in created["topics"]] == [
            (name, 0, 3)
        ]
        [described] = client.describe_topics([name])
        assert described["error_code"] == 0
        assert [p["partition_index"] for p in described["partitions"]] == [0, 1, 2]

        grown = client.create_partitions({name: 5})
        assert [r.error_code for r in grown.results] == [0]
        assert kafka_broker.end_offsets(name) == {p: 0 for p in range(5)}

        topic_configs = client.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all"
        )["topic"][name]
        assert topic_configs["retention.ms"]["value"] == "60000"
        assert topic_configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert topic_configs["max.message.bytes"]["value"] == "1048588"
        assert topic_configs["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"

        broker_id = str(kafka_broker.node_id)
        broker_configs = client.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, broker_id)], config_filter="all"
        )["broker"][broker_id]
        assert broker_configs["auto.create.topics.enable"]["value"] == "true"
        assert broker_configs["message.max.bytes"]["value"] == "1048588"

        cluster = client.describe_cluster()
        assert cluster["cluster_id"] == kafka_broker.config.cluster_id
        assert cluster["controller_id"] == kafka_broker.node_id
        assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
            (kafka_broker.node_id, kafka_broker.host, kafka_broker.port)
        ]

        deleted = client.delete_topics([name])
        assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(name, 0)]
    assert name not in kafka_broker.topics()


def test_kafka_python_admin_list_partition_offsets_by_spec(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    # One batch whose records are not in timestamp order: the largest is in the middle.
    with producer(kafka_broker, linger_ms=200) as client:
        for i, delta in enumerate((1000, 5000, 2000)):
            client.send(topic, b"%d" % i, partition=0, timestamp_ms=CREATE_TIME_MS + delta)
        client.flush(TIMEOUT)
    assert len(stored_batch_headers(kafka_broker, topic)) == 1
    tp = TopicPartition(topic, 0)
    specs = {
        "earliest": OffsetSpec.EARLIEST,
        "latest": OffsetSpec.LATEST,
        "max_timestamp": OffsetSpec.MAX_TIMESTAMP,
        "at_or_after": OffsetTimestamp(CREATE_TIME_MS + 1500),
    }
    with admin(kafka_broker) as client:
        found = {
            name: client.list_partition_offsets({tp: spec})[tp] for name, spec in specs.items()
        }
    assert {name: (o.offset, o.timestamp) for name, o in found.items()} == {
        "earliest": (0, -1),
        "latest": (3, -1),
        "max_timestamp": (1, CREATE_TIME_MS + 5000),
        "at_or_after": (1, CREATE_TIME_MS + 5000),
    }


def test_kafka_python_admin_error_paths(kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    existing = kafka_topic(partitions=2)
    with admin(kafka_broker) as client:
        with pytest.raises(errors.TopicAlreadyExistsError):
            client.create_topics({existing: {"num_partitions": 1}})
        with pytest.raises(errors.InvalidPartitionsError):
            client.create_topics({"zero-partitions": {"num_partitions": 0}})
        with pytest.raises(errors.InvalidConfigurationError):
            client.create_topics(
                {"bad-config": {"num_partitions": 1, "configs": {"no.such.config": "1"}}}
            )
        with pytest.raises(errors.InvalidPartitionsError):
            client.create_partitions({existing: 1})
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            client.delete_topics(["never-created"])
        result = client.create_topics({existing: {"num_partitions": 1}}, raise_errors=False)
        assert [t["error_code"] for t in result["topics"]] == [36]  # TOPIC_ALREADY_EXISTS
    assert kafka_broker.end_offsets(existing) == {0: 0, 1: 0}
    for rejected in ("zero-partitions", "bad-config", "never-created"):
        assert rejected not in kafka_broker.topics()


def test_kafka_python_unknown_topic_when_auto_create_is_off() -> None:
    with Broker(auto_create_topics=False) as broker:
        with admin(broker) as client:
            [described] = client.describe_topics(["missing"])
            assert described["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        with (
            producer(broker, max_block_ms=1000) as client,
            pytest.raises(errors.KafkaTimeoutError),
        ):
            client.send("missing", b"v").get(TIMEOUT)
        assert broker.topics() == []


def test_kafka_python_producer_auto_creates_topic_when_allowed(kafka_broker: Broker) -> None:
    name = unique_client_id("kafka-python-auto")
    with producer(kafka_broker) as client:
        metadata = client.send(name, b"v").get(TIMEOUT)
    assert (metadata.partition, metadata.offset) == (0, 0)
    assert kafka_broker.end_offsets(name) == {0: 1}
