"""confluent-kafka (librdkafka) against the broker: produce, consume, seek, admin."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

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
    answer_times,
    assert_fetches_waited,
    fetch_arrivals,
    now_ms,
    stored_batch_headers,
    unique_client_id,
    wait_until,
)

TIMEOUT = 15  # seconds for any one client operation


def _common(broker: Broker) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "socket.timeout.ms": 10_000,
        "log.connection.close": False,  # the broker stops at teardown; that is expected
    }


class DeliveryLog:
    """Delivery reports of one producer, in the order librdkafka reports them."""

    def __init__(self) -> None:
        self.reports: list[tuple[KafkaError | None, Message]] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        self.reports.append((err, msg))

    def delivered(self) -> list[Message]:
        failed = [err for err, _ in self.reports if err is not None]
        assert not failed, failed
        return [msg for _, msg in self.reports]


@contextmanager
def producer(broker: Broker, **settings: Any) -> Iterator[Producer]:
    config = {**_common(broker), "message.timeout.ms": TIMEOUT * 1000, **settings}
    client = Producer(config)
    yield client
    assert client.flush(TIMEOUT) == 0, "messages still queued after flush"


@contextmanager
def consumer(broker: Broker, **settings: Any) -> Iterator[Consumer]:
    """A consumer for manual assignment: librdkafka needs a group.id, nothing commits."""
    config = {
        **_common(broker),
        "group.id": unique_client_id("confluent-unused-group"),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.wait.max.ms": 100,
        **settings,
    }
    client = Consumer(config)
    try:
        yield client
    finally:
        client.close()


@contextmanager
def admin(broker: Broker) -> Iterator[AdminClient]:
    yield AdminClient(_common(broker))


def consume(client: Consumer, count: int) -> list[Message]:
    """Exactly `count` records, or fail after TIMEOUT seconds."""
    received: list[Message] = []
    deadline = time.monotonic() + TIMEOUT
    while len(received) < count and time.monotonic() < deadline:
        for message in client.consume(count - len(received), timeout=0.2):
            assert message.error() is None, message.error()
            received.append(message)
    assert len(received) == count, f"got {len(received)} of {count} records"
    return received


def fail_code(future: Any) -> int:
    """The Kafka error code an admin future failed with."""
    with pytest.raises(KafkaException) as raised:
        future.result(TIMEOUT)
    return int(raised.value.args[0].code())


def test_confluent_kafka_keys_headers_null_values_and_create_time(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    sent = [
        (b"key-1", b"value-1", [("trace", b"abc"), ("empty", b"")], CREATE_TIME_MS),
        (None, b"no key", None, CREATE_TIME_MS + 1),
        (b"tombstone", None, [("why", b"deleted")], CREATE_TIME_MS + 2),
        (b"", b"", [("", b"")], CREATE_TIME_MS + 3),  # empty is not null
    ]
    log = DeliveryLog()
    with producer(kafka_broker) as client:
        for key, value, headers, timestamp in sent:
            client.produce(
                topic,
                value,
                key,
                partition=0,
                timestamp=timestamp,
                headers=headers,
                on_delivery=log,
            )
    assert [m.offset() for m in log.delivered()] == [0, 1, 2, 3]
    with consumer(kafka_broker) as reader:
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = consume(reader, len(sent))
    assert [m.offset() for m in got] == [0, 1, 2, 3]
    assert [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got] == sent
    assert {m.timestamp()[0] for m in got} == {TIMESTAMP_CREATE_TIME}


def test_confluent_kafka_log_append_time_topic_returns_broker_time(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(configs={"message.timestamp.type": "LogAppendTime"})
    log = DeliveryLog()
    before = now_ms()
    with producer(kafka_broker) as client:
        client.produce(topic, b"v", partition=0, timestamp=CREATE_TIME_MS, on_delivery=log)
    after = now_ms()
    [delivered] = log.delivered()
    assert delivered.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
    assert before <= delivered.timestamp()[1] <= after
    with consumer(kafka_broker) as reader:
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        [record] = consume(reader, 1)
    assert record.timestamp() == (TIMESTAMP_LOG_APPEND_TIME, delivered.timestamp()[1])


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_compression_round_trip(
    kafka_broker: Broker, kafka_topic: TopicFactory, codec: str
) -> None:
    topic = kafka_topic()
    values = [f"{codec} record {i} ".encode() * 20 for i in range(10)]
    log = DeliveryLog()
    with producer(kafka_broker, **{"compression.type": codec, "linger.ms": 1000}) as client:
        for i, value in enumerate(values):
            client.produce(
                topic,
                value,
                b"k%d" % i,
                partition=0,
                timestamp=CREATE_TIME_MS + i * 10,
                on_delivery=log,
            )
    assert [m.offset() for m in log.delivered()] == list(range(10))
    [header] = stored_batch_headers(kafka_broker, topic)
    assert header.compression == CODEC_IDS[codec]
    with consumer(kafka_broker) as reader:
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = consume(reader, len(values))
        assert [m.value() for m in got] == values
        assert [m.timestamp()[1] for m in got] == [CREATE_TIME_MS + i * 10 for i in range(10)]
        [found] = reader.offsets_for_times(
            [TopicPartition(topic, 0, CREATE_TIME_MS + 45)], timeout=TIMEOUT
        )
        assert found.offset == 5


def test_confluent_kafka_idempotent_producer(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    log = DeliveryLog()
    with producer(kafka_broker, **{"enable.idempotence": True, "linger.ms": 0}) as client:
        for i in range(20):
            client.produce(topic, b"%d" % i, partition=0, on_delivery=log)
            client.poll(0)
    assert [m.offset() for m in log.delivered()] == list(range(20))
    headers = stored_batch_headers(kafka_broker, topic)
    assert {h.producer_id for h in headers} != {-1}
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]
    with consumer(kafka_broker) as reader:
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = consume(reader, 20)
    assert [m.value() for m in got] == [b"%d" % i for i in range(20)]


def test_confluent_kafka_acks_zero(kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    topic = kafka_topic()
    log = DeliveryLog()
    # acks=0 gets no response at all; a stray one would break the client's request order.
    with producer(kafka_broker, acks=0) as client:
        for i in range(5):
            client.produce(topic, b"%d" % i, partition=0, on_delivery=log)
        client.flush(TIMEOUT)
        client.produce(topic, b"after flush", partition=0, on_delivery=log)
    assert len(log.delivered()) == 6
    with consumer(kafka_broker) as reader:
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = consume(reader, 6)
    assert [m.value() for m in got] == [b"0", b"1", b"2", b"3", b"4", b"after flush"]


def test_confluent_kafka_seek_earliest_latest_and_by_timestamp(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    with producer(kafka_broker) as client:
        for i in range(5):
            client.produce(topic, b"%d" % i, partition=0, timestamp=CREATE_TIME_MS + i * 1000)
    client_id = unique_client_id("confluent-seek")
    settings = {"auto.offset.reset": "earliest", "client.id": client_id}
    with consumer(kafka_broker, **settings) as reader:
        tp = TopicPartition(topic, 0)
        assert reader.get_watermark_offsets(tp, timeout=TIMEOUT) == (0, 5)
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert [m.value() for m in consume(reader, 5)] == [b"%d" % i for i in range(5)]

        [found] = reader.offsets_for_times(
            [TopicPartition(topic, 0, CREATE_TIME_MS + 2500)], timeout=TIMEOUT
        )
        assert found.offset == 3
        reader.seek(TopicPartition(topic, 0, found.offset))
        assert [m.value() for m in consume(reader, 2)] == [b"3", b"4"]
        [after_last] = reader.offsets_for_times(
            [TopicPartition(topic, 0, CREATE_TIME_MS + 10_000)], timeout=TIMEOUT
        )
        assert after_last.offset == OFFSET_END

        reader.seek(TopicPartition(topic, 0, OFFSET_BEGINNING))
        assert consume(reader, 1)[0].offset() == 0
        resolved = len(answer_times(kafka_broker, client_id, "ListOffsets"))
        reader.seek(TopicPartition(topic, 0, OFFSET_END))
        # librdkafka resolves OFFSET_END with a ListOffsets of its own; once the broker
        # has answered it (end offset 5), the new record cannot move the seek past itself.
        assert wait_until(
            lambda: len(answer_times(kafka_broker, client_id, "ListOffsets")) > resolved,
            TIMEOUT,
        ), "the seek to the end sent no ListOffsets"
        with producer(kafka_broker) as client:
            client.produce(topic, b"new", partition=0)
        [newest] = consume(reader, 1)
        assert (newest.offset(), newest.value()) == (5, b"new")
        assert reader.get_watermark_offsets(tp, timeout=TIMEOUT) == (0, 6)
        # Past the end: OFFSET_OUT_OF_RANGE, then auto.offset.reset=earliest applies.
        reader.seek(TopicPartition(topic, 0, 100))
        assert [m.offset() for m in consume(reader, 6)] == list(range(6))


def test_confluent_kafka_one_mebibyte_message(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    big = kafka_topic(configs=LARGE_TOPIC_CONFIGS)
    default = kafka_topic()
    payload = os.urandom(ONE_MIB)
    log = DeliveryLog()
    limits = {"message.max.bytes": LARGE_CLIENT_LIMIT, "batch.size": LARGE_CLIENT_LIMIT}
    with producer(kafka_broker, **limits) as client:
        client.produce(big, payload, b"big", partition=0, on_delivery=log)
        client.flush(TIMEOUT)
        # The default max.message.bytes (1048588) cannot hold 1 MiB plus overhead.
        client.produce(default, payload, partition=0, on_delivery=log)
    [(ok, _), (rejected, _)] = log.reports
    assert ok is None
    assert rejected is not None and rejected.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert kafka_broker.end_offsets(default) == {0: 0}
    fetch_limits = {
        "fetch.max.bytes": LARGE_CLIENT_LIMIT,
        "max.partition.fetch.bytes": LARGE_CLIENT_LIMIT,
        "receive.message.max.bytes": 2 * LARGE_CLIENT_LIMIT,
    }
    with consumer(kafka_broker, **fetch_limits) as reader:
        reader.assign([TopicPartition(big, 0, OFFSET_BEGINNING)])
        [record] = consume(reader, 1)
    assert record.key() == b"big"
    assert record.value() == payload
    # Limits below the record's size: the first batch still comes whole (KIP-74).
    small = {
        "fetch.max.bytes": SMALL_FETCH_LIMIT,
        "max.partition.fetch.bytes": SMALL_FETCH_LIMIT,
        "message.max.bytes": SMALL_FETCH_LIMIT,
    }
    with consumer(kafka_broker, **small) as reader:
        reader.assign([TopicPartition(big, 0, OFFSET_BEGINNING)])
        [record] = consume(reader, 1)
    assert record.value() == payload


def test_confluent_kafka_256_partitions(kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    partitions = 256
    topic = kafka_topic(partitions=partitions)
    log = DeliveryLog()
    with producer(kafka_broker, **{"linger.ms": 5}) as client:
        for p in range(partitions):
            client.produce(topic, b"p%d" % p, partition=p, on_delivery=log)
    assert sorted(m.partition() for m in log.delivered()) == list(range(partitions))
    assert kafka_broker.end_offsets(topic) == {p: 1 for p in range(partitions)}
    with consumer(kafka_broker) as reader:
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = consume(reader, partitions)
    assert sorted((m.partition(), m.value()) for m in got) == [
        (p, b"p%d" % p) for p in range(partitions)
    ]


def test_confluent_kafka_empty_fetch_waits_max_wait(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    max_wait_ms = 400
    client_id = unique_client_id("confluent-empty-fetch")
    settings = {"fetch.wait.max.ms": max_wait_ms, "client.id": client_id}
    with consumer(kafka_broker, **settings) as reader:
        reader.assign([TopicPartition(topic, 0, OFFSET_END)])
        # Poll until the broker has answered enough fetches, not for a fixed time.
        deadline = time.monotonic() + TIMEOUT
        while len(fetch_arrivals(kafka_broker, client_id)) < WAITED_FETCHES:
            assert time.monotonic() < deadline, fetch_arrivals(kafka_broker, client_id)
            assert reader.poll(max_wait_ms / 1000) is None
    assert_fetches_waited(kafka_broker, client_id, max_wait_ms)


# --- admin ---


def test_confluent_kafka_admin_create_describe_grow_delete(kafka_broker: Broker) -> None:
    name = unique_client_id("confluent-admin")
    with admin(kafka_broker) as client:
        new = NewTopic(
            name, num_partitions=3, replication_factor=1, config={"retention.ms": "60000"}
        )
        assert client.create_topics([new], request_timeout=TIMEOUT)[name].result(TIMEOUT) is None
        metadata = client.list_topics(topic=name, timeout=TIMEOUT)
        assert sorted(metadata.topics[name].partitions) == [0, 1, 2]
        [description] = client.describe_topics(
            TopicCollection([name]), request_timeout=TIMEOUT
        ).values()
        assert [p.id for p in description.result(TIMEOUT).partitions] == [0, 1, 2]

        grow = client.create_partitions([NewPartitions(name, 5)], request_timeout=TIMEOUT)
        assert grow[name].result(TIMEOUT) is None
        assert kafka_broker.end_offsets(name) == {p: 0 for p in range(5)}

        topic_resource = ConfigResource(ResourceType.TOPIC, name)
        broker_resource = ConfigResource(ResourceType.BROKER, str(kafka_broker.node_id))
        described = client.describe_configs(
            [topic_resource, broker_resource], request_timeout=TIMEOUT
        )
        topic_configs = described[topic_resource].result(TIMEOUT)
        assert topic_configs["retention.ms"].value == "60000"
        assert topic_configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert topic_configs["max.message.bytes"].value == "1048588"
        assert topic_configs["max.message.bytes"].is_default
        broker_configs = described[broker_resource].result(TIMEOUT)
        assert broker_configs["auto.create.topics.enable"].value == "true"
        assert broker_configs["message.max.bytes"].source == (
            ConfigSource.STATIC_BROKER_CONFIG.value
        )

        cluster = client.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
        assert cluster.cluster_id == kafka_broker.config.cluster_id
        assert cluster.controller.id == kafka_broker.node_id
        assert [(n.id, n.host, n.port) for n in cluster.nodes] == [
            (kafka_broker.node_id, kafka_broker.host, kafka_broker.port)
        ]

        latest = client.list_offsets(
            {TopicPartition(name, 0): OffsetSpec.latest()}, request_timeout=TIMEOUT
        )
        assert [f.result(TIMEOUT).offset for f in latest.values()] == [0]

        assert client.delete_topics([name], request_timeout=TIMEOUT)[name].result(TIMEOUT) is None
    assert name not in kafka_broker.topics()


def test_confluent_kafka_admin_list_offsets_by_spec(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    # One batch whose records are not in timestamp order: the largest is in the middle.
    with producer(kafka_broker, **{"linger.ms": 200}) as client:
        for i, delta in enumerate((1000, 5000, 2000)):
            client.produce(topic, b"%d" % i, partition=0, timestamp=CREATE_TIME_MS + delta)
    assert len(stored_batch_headers(kafka_broker, topic)) == 1
    tp = TopicPartition(topic, 0)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
        "at_or_after": OffsetSpec.for_timestamp(CREATE_TIME_MS + 1500),
    }
    with admin(kafka_broker) as client:
        # One partition per call, so one call per spec; all in flight at once.
        futures = {
            name: client.list_offsets({tp: spec}, request_timeout=TIMEOUT)[tp]
            for name, spec in specs.items()
        }
        found = {}
        for name, future in futures.items():
            info = future.result(TIMEOUT)
            found[name] = (info.offset, info.timestamp)
    assert found == {
        "earliest": (0, -1),
        "latest": (3, -1),
        "max_timestamp": (1, CREATE_TIME_MS + 5000),
        # the first record, in offset order, at or after the time
        "at_or_after": (1, CREATE_TIME_MS + 5000),
    }


def test_confluent_kafka_admin_error_paths(kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    existing = kafka_topic(partitions=2)
    with admin(kafka_broker) as client:
        again = client.create_topics([NewTopic(existing, 1, 1)], request_timeout=TIMEOUT)
        assert fail_code(again[existing]) == KafkaError.TOPIC_ALREADY_EXISTS
        zero = client.create_topics([NewTopic("zero-partitions", 0, 1)], request_timeout=TIMEOUT)
        assert fail_code(zero["zero-partitions"]) == KafkaError.INVALID_PARTITIONS
        bad_config = client.create_topics(
            [NewTopic("bad-config", 1, 1, config={"no.such.config": "1"})],
            request_timeout=TIMEOUT,
        )
        assert fail_code(bad_config["bad-config"]) == KafkaError.INVALID_CONFIG
        shrink = client.create_partitions([NewPartitions(existing, 1)], request_timeout=TIMEOUT)
        assert fail_code(shrink[existing]) == KafkaError.INVALID_PARTITIONS
        gone = client.delete_topics(["never-created"], request_timeout=TIMEOUT)
        assert fail_code(gone["never-created"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
        resource = ConfigResource(ResourceType.TOPIC, "never-created")
        configs = client.describe_configs([resource], request_timeout=TIMEOUT)
        assert fail_code(configs[resource]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert kafka_broker.end_offsets(existing) == {0: 0, 1: 0}
    for rejected in ("zero-partitions", "bad-config", "never-created"):
        assert rejected not in kafka_broker.topics()


def test_confluent_kafka_unknown_topic_when_auto_create_is_off() -> None:
    with Broker(auto_create_topics=False) as broker:
        with admin(broker) as client:
            metadata = client.list_topics(topic="missing", timeout=TIMEOUT)
            assert metadata.topics["missing"].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            [description] = client.describe_topics(
                TopicCollection(["missing"]), request_timeout=TIMEOUT
            ).values()
            assert fail_code(description) == KafkaError.UNKNOWN_TOPIC_OR_PART
        log = DeliveryLog()
        settings = {"message.timeout.ms": 1000, "topic.metadata.propagation.max.ms": 200}
        with producer(broker, **settings) as client:
            client.produce("missing", b"v", on_delivery=log)
        [(err, _)] = log.reports
        assert err is not None
        assert err.code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART)
        assert broker.topics() == []


def test_confluent_kafka_producer_auto_creates_topic_when_allowed(kafka_broker: Broker) -> None:
    name = unique_client_id("confluent-auto")
    log = DeliveryLog()
    with producer(kafka_broker) as client:
        client.produce(name, b"v", on_delivery=log)
    [delivered] = log.delivered()
    assert (delivered.partition(), delivered.offset()) == (0, 0)
    assert kafka_broker.end_offsets(name) == {0: 1}
