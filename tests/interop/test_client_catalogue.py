"""The Kafka clients against the broker: each scenario written once and run by every
client that has the API for it, over real sockets.

Each client has a thin driver in tests/interop/clients that maps a scenario's steps onto
its API and declares, in `lacks`, what the client has no API for; `for_clients(...)` runs
a scenario for the clients that have what it needs. Where a client's producer cannot write
the records a scenario reads (kcat sets no record times), the reference producer
(librdkafka through confluent-kafka) writes them and the scenario checks the client's
reader.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TypeVar

import pytest
from kio.schema.errors import ErrorCode

from minibroker import Broker
from minibroker.testing.plugin import TopicFactory
from tests.interop.clients.aiokafka_client import AiokafkaClient
from tests.interop.clients.base import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    TIMEOUT,
    AdminFailed,
    Capability,
    Client,
    ConfigEntry,
    OffsetAndTime,
    OffsetQuery,
    ProduceOptions,
    ProduceRejected,
    ReadOptions,
    Record,
    Refusal,
    ResourceKind,
    Spec,
    TopicMetadata,
)
from tests.interop.clients.confluent_kafka_client import ConfluentKafkaClient
from tests.interop.clients.kafka_python_client import KafkaPythonClient
from tests.interop.clients.kcat_client import KcatClient
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
    java_partition,
    key_for_each_partition,
    murmur2,
    now_ms,
    stored_batch_headers,
    unique_client_id,
    wait_until,
)

T = TypeVar("T")

CLIENTS: tuple[type[Client], ...] = (
    AiokafkaClient,
    KafkaPythonClient,
    ConfluentKafkaClient,
    KcatClient,
)
REFERENCE = ConfluentKafkaClient


def clients(*needs: Capability, lacking: Capability | None = None) -> list[type[Client]]:
    """The clients that have every one of `needs` (and lack `lacking`, if given)."""
    return [
        c
        for c in CLIENTS
        if all(c.can(need) for need in needs) and (lacking is None or not c.can(lacking))
    ]


def for_clients(*needs: Capability, lacking: Capability | None = None) -> pytest.MarkDecorator:
    chosen = clients(*needs, lacking=lacking)
    return pytest.mark.parametrize(
        "driver", [pytest.param(c, id=c.name) for c in chosen], indirect=True
    )


def for_clients_and(
    name: str, values: Sequence[object], *needs: Capability, lacking: Capability | None = None
) -> pytest.MarkDecorator:
    """Every chosen client with every value, as ids like `kafka-python-gzip`."""
    params = [
        pytest.param(c, value, id=f"{c.name}-{value}")
        for c in clients(*needs, lacking=lacking)
        for value in values
    ]
    return pytest.mark.parametrize(("driver", name), params, indirect=["driver"])


@pytest.fixture
def driver(request: pytest.FixtureRequest) -> type[Client]:
    chosen: type[Client] = request.param
    reason = chosen.unavailable()
    if reason is not None:
        pytest.skip(reason)
    return chosen


@pytest.fixture
def client(driver: type[Client], kafka_broker: Broker) -> Iterator[Client]:
    with driver(kafka_broker) as chosen:
        yield chosen


def producing(client: Client, *needs: Capability) -> Client:
    """`client`, or the reference producer where the client's producer lacks a need."""
    return client if all(client.can(need) for need in needs) else REFERENCE(client.broker)


def reported(client: Client, capability: Capability, value: T) -> T | None:
    """`value` where the client reports it, else None (what its driver then gives)."""
    return value if client.can(capability) else None


# --- records: keys, headers, nulls, timestamps ---


@for_clients()
def test_keys_headers_null_values_and_create_time(
    client: Client, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    sent = [
        Record(b"key-1", b"value-1", (("trace", b"abc"), ("empty", b"")), CREATE_TIME_MS, 0),
        Record(None, b"no key", (), CREATE_TIME_MS + 1, 0),
        Record(b"tombstone", None, (("why", b"deleted"),), CREATE_TIME_MS + 2, 0),
        Record(b"", b"", (("", b""),), CREATE_TIME_MS + 3, 0),  # empty is not null
    ]
    writer = producing(
        client,
        Capability.RECORD_TIMESTAMPS,
        Capability.RECORD_HEADERS,
        Capability.NULL_AND_EMPTY,
    )
    with writer.producer() as producer:
        delivered = producer.send(topic, sent)
    if writer.can(Capability.DELIVERY_REPORTS):
        assert [d.offset for d in delivered] == [0, 1, 2, 3]
    with client.reader(topic) as reader:
        got = reader.read(len(sent))
    assert [r.offset for r in got] == [0, 1, 2, 3]
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (r.key, r.value, list(r.headers), r.timestamp) for r in sent
    ]
    assert {r.timestamp_type for r in got} == {CREATE_TIME}


@for_clients()
def test_producer_time_shared_headers_and_null_values(
    client: Client, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    headers = (("trace", b"abc"), ("empty", b""))
    sent = [
        Record(b"k1", b"v1", headers, partition=0),
        Record(b"tombstone", None, headers, partition=0),
        Record(None, b"no key", headers, partition=0),
    ]
    before = now_ms()
    with client.producer() as producer:
        delivered = producer.send(topic, sent)
    after = now_ms()
    if client.can(Capability.DELIVERY_REPORTS):
        assert [d.offset for d in delivered] == [0, 1, 2]
    with client.reader(topic) as reader:
        got = reader.read(len(sent))
    assert [(r.offset, r.key, r.value) for r in got] == [
        (0, b"k1", b"v1"),
        (1, b"tombstone", None),
        (2, None, b"no key"),
    ]
    assert [r.headers for r in got] == [list(headers)] * len(sent)
    assert {r.timestamp_type for r in got} == {CREATE_TIME}
    assert all(before <= r.timestamp <= after for r in got)


@for_clients()
def test_log_append_time_topic_returns_broker_time(
    client: Client, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(configs={"message.timestamp.type": "LogAppendTime"})
    writer = producing(client, Capability.RECORD_TIMESTAMPS)
    before = now_ms()
    with writer.producer() as producer:
        given = producer.send(
            topic, [Record(value=b"given", timestamp=CREATE_TIME_MS, partition=0)]
        )
    with client.producer() as producer:
        unset = producer.send(topic, [Record(value=b"unset", partition=0)])
    after = now_ms()
    with client.reader(topic) as reader:
        got = reader.read(2)
    assert {r.timestamp_type for r in got} == {LOG_APPEND_TIME}
    assert got[0].timestamp != CREATE_TIME_MS
    assert before <= got[0].timestamp <= got[1].timestamp <= after
    if client.can(Capability.DELIVERY_REPORTS):
        # The acknowledgement carries the time the broker appended the record.
        acknowledged = [*(given if writer is client else []), *unset]
        appended = reported(client, Capability.DELIVERY_TIMESTAMP_TYPE, LOG_APPEND_TIME)
        assert [(d.timestamp_type, d.timestamp) for d in acknowledged] == [
            (appended, r.timestamp) for r in got[-len(acknowledged) :]
        ]


# --- compression ---


@for_clients_and("codec", CODECS)
def test_compression_round_trip(
    client: Client, kafka_broker: Broker, kafka_topic: TopicFactory, codec: str
) -> None:
    topic = kafka_topic()
    sent = [
        Record(b"k%d" % i, f"{codec} record {i} ".encode() * 20, (), CREATE_TIME_MS + i * 10, 0)
        for i in range(10)
    ]
    writer = producing(client, Capability.RECORD_TIMESTAMPS)
    with writer.producer(ProduceOptions(codec=codec, one_batch=True)) as producer:
        delivered = producer.send(topic, sent)
    if writer.can(Capability.DELIVERY_REPORTS):
        assert [d.offset for d in delivered] == list(range(10))
    [header] = stored_batch_headers(kafka_broker, topic)
    assert header.compression == CODEC_IDS[codec]
    with client.reader(topic) as reader:
        got = reader.read(len(sent))
        assert [(r.key, r.value, r.timestamp) for r in got] == [
            (r.key, r.value, r.timestamp) for r in sent
        ]
        # A timestamp inside a compressed batch still finds the exact record.
        found = reader.offset_for_time(CREATE_TIME_MS + 45)
    found_time = reported(client, Capability.LOOKUP_TIMESTAMP, CREATE_TIME_MS + 50)
    assert found == OffsetAndTime(5, found_time)


@for_clients_and("codec", CODECS, lacking=Capability.RECORD_TIMESTAMPS)
def test_compressed_produce_with_producer_times(
    client: Client, kafka_broker: Broker, kafka_topic: TopicFactory, codec: str
) -> None:
    """test_compression_round_trip writes with the reference producer for a client that
    cannot set record times; this checks that client's own compressing producer."""
    topic = kafka_topic()
    sent = [
        Record(b"k%d" % i, f"{codec} record {i} ".encode() * 20, partition=0) for i in range(10)
    ]
    with client.producer(ProduceOptions(codec=codec, one_batch=True)) as producer:
        producer.send(topic, sent)
    # librdkafka before 2.11.1 (kcat 1.7 bundles 2.0.2) compresses gzip, snappy and lz4
    # only for a broker that lists Produce v0 in ApiVersions, as Kafka lists it.
    stored = {h.compression for h in stored_batch_headers(kafka_broker, topic)}
    assert stored == {CODEC_IDS[codec]}
    with client.reader(topic) as reader:
        got = reader.read(len(sent))
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in sent]


# --- producer guarantees ---


@for_clients()
def test_idempotent_producer(
    client: Client, kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    sent = [Record(value=b"%d" % i, partition=0) for i in range(20)]
    with client.producer(ProduceOptions(idempotence=True, acks=-1, linger_ms=0)) as producer:
        delivered = producer.send(topic, sent)
    if client.can(Capability.DELIVERY_REPORTS):
        assert [d.offset for d in delivered] == list(range(20))
    headers = stored_batch_headers(kafka_broker, topic)
    assert {h.producer_id for h in headers} != {-1}
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]
    with client.reader(topic) as reader:
        got = reader.read(len(sent))
    assert [r.value for r in got] == [r.value for r in sent]


@for_clients()
def test_acks_zero(client: Client, kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    topic = kafka_topic()
    values = [b"0", b"1", b"2", b"3", b"4", b"last"]
    # acks=0 gets no response at all; a stray one would break the client's request order.
    with client.producer(ProduceOptions(acks=0)) as producer:
        delivered = [
            d for value in values for d in producer.send(topic, [Record(value=value, partition=0)])
        ]
    if client.can(Capability.DELIVERY_REPORTS):
        assert len(delivered) == len(values)
    # Nothing confirms an acks=0 write: the broker may still be reading the last one.
    assert wait_until(lambda: kafka_broker.end_offsets(topic) == {0: 6}, TIMEOUT)
    with client.reader(topic) as reader:
        got = reader.read(len(values))
    assert [r.value for r in got] == values


@for_clients()
def test_producer_auto_creates_topic_when_allowed(client: Client, kafka_broker: Broker) -> None:
    name = unique_client_id(f"{client.name}-auto")
    with client.producer() as producer:
        delivered = producer.send(name, [Record(value=b"v")])
    if client.can(Capability.DELIVERY_REPORTS):
        assert [(d.partition, d.offset) for d in delivered] == [(0, 0)]
    assert kafka_broker.end_offsets(name) == {0: 1}


# --- reading: seeks, offsets for times, limits, long polls ---

TIMED = [
    Record(value=b"%d" % i, timestamp=CREATE_TIME_MS + i * 1000, partition=0) for i in range(5)
]


@for_clients()
def test_seek_earliest_latest_and_by_timestamp(client: Client, kafka_topic: TopicFactory) -> None:
    topic = kafka_topic()
    with producing(client, Capability.RECORD_TIMESTAMPS).producer() as producer:
        producer.send(topic, TIMED)
    positions = client.can(Capability.READER_POSITION)
    with client.reader(topic) as reader:
        assert reader.watermarks() == (0, 5)
        reader.seek_to_end()
        if positions:
            assert reader.position() == 5
        reader.seek_to_beginning()
        if positions:
            assert reader.position() == 0
        assert [r.value for r in reader.read(5)] == [r.value for r in TIMED]

        found = reader.offset_for_time(CREATE_TIME_MS + 2500)
        found_time = reported(client, Capability.LOOKUP_TIMESTAMP, CREATE_TIME_MS + 3000)
        assert found == OffsetAndTime(3, found_time)
        reader.seek(found.offset)
        assert [r.value for r in reader.read(2)] == [b"3", b"4"]
        assert reader.offset_for_time(CREATE_TIME_MS + 10_000) is None

        reader.seek_to_beginning()
        assert [r.offset for r in reader.read(1)] == [0]
        reader.seek_to_end()
        if positions:
            assert reader.position() == 5
        with client.producer() as producer:
            producer.send(topic, [Record(value=b"new", partition=0)])
        [newest] = reader.read(1)
        assert (newest.offset, newest.value) == (5, b"new")
        assert reader.watermarks() == (0, 6)
        # Past the end: OFFSET_OUT_OF_RANGE, then the reset to the earliest applies.
        reader.seek(100)
        assert [r.offset for r in reader.read(6)] == list(range(6))


@pytest.mark.parametrize("driver", [pytest.param(KcatClient, id=KcatClient.name)], indirect=True)
def test_kcat_offset_and_time_ranges(client: Client, kafka_topic: TopicFactory) -> None:
    """kcat's own range syntax: relative offsets and start and end times."""
    assert isinstance(client, KcatClient)
    topic = kafka_topic()
    with REFERENCE(client.broker).producer() as producer:
        producer.send(topic, TIMED)

    def values(*offset_args: str) -> list[bytes | None]:
        return [r.value for r in client.read_range(topic, *offset_args)]

    assert values("-o", "beginning") == [b"0", b"1", b"2", b"3", b"4"]
    assert values("-o", "end") == []
    assert values("-o", "-2") == [b"3", b"4"]
    assert values("-o", f"s@{CREATE_TIME_MS + 2500}") == [b"3", b"4"]
    assert values("-o", "beginning", "-o", f"e@{CREATE_TIME_MS + 2000}") == [b"0", b"1"]
    assert client.query_offset(topic, 0, CREATE_TIME_MS + 2500) == 3


@for_clients()
def test_one_mebibyte_message(
    client: Client, kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    big = kafka_topic(configs=LARGE_TOPIC_CONFIGS)
    default = kafka_topic()
    payload = os.urandom(ONE_MIB)
    limits = ProduceOptions(max_request_bytes=LARGE_CLIENT_LIMIT, retries=0)
    with client.producer(limits) as producer:
        producer.send(big, [Record(b"big", payload, partition=0)])
        # The default max.message.bytes (1048588) cannot hold 1 MiB plus overhead.
        with pytest.raises(ProduceRejected) as rejected:
            producer.send(default, [Record(value=payload, partition=0)])
    assert rejected.value.reason is Refusal.MESSAGE_TOO_LARGE
    assert kafka_broker.end_offsets(default) == {0: 0}
    with client.reader(big, options=ReadOptions(fetch_limit=LARGE_CLIENT_LIMIT)) as reader:
        [record] = reader.read(1)
    assert record.key == b"big"
    assert record.value == payload
    # Limits below the record's size: the first batch still comes whole (KIP-74).
    with client.reader(big, options=ReadOptions(fetch_limit=SMALL_FETCH_LIMIT)) as reader:
        [record] = reader.read(1)
    assert record.value == payload


@for_clients(Capability.RECORD_PARTITION)
def test_256_partitions(client: Client, kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    partitions = 256
    topic = kafka_topic(partitions=partitions)
    sent = [Record(value=b"p%d" % p, partition=p) for p in range(partitions)]
    with client.producer(ProduceOptions(linger_ms=5)) as producer:
        delivered = producer.send(topic, sent)
    if client.can(Capability.DELIVERY_REPORTS):
        assert [d.partition for d in delivered] == list(range(partitions))
    assert kafka_broker.end_offsets(topic) == {p: 1 for p in range(partitions)}
    with client.reader(topic, partitions) as reader:
        got = reader.read(partitions)
    assert sorted((r.partition, r.value) for r in got) == [(r.partition, r.value) for r in sent]


@for_clients()
def test_empty_fetch_waits_max_wait(
    client: Client, kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    max_wait_ms = 400
    client_id = unique_client_id(f"{client.name}-empty-fetch")
    options = ReadOptions(max_wait_ms=max_wait_ms, client_id=client_id)
    with client.reader(topic, options=options) as reader:
        # Poll until the broker has answered enough fetches, not for a fixed time.
        deadline = time.monotonic() + TIMEOUT
        while len(fetch_arrivals(kafka_broker, client_id)) < WAITED_FETCHES:
            assert time.monotonic() < deadline, fetch_arrivals(kafka_broker, client_id)
            assert reader.poll(max_wait_ms) == []
        assert reader.poll(0) == []
    assert_fetches_waited(kafka_broker, client_id, max_wait_ms)


# --- keyed records: Java's default partitioner ---

# Facts from Kafka's own UtilsTest.testMurmur2 (signed Java ints).
KAFKA_MURMUR2_REFERENCE = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

# Fifty fixed keys: every length mod 4 (the hash's tail cases), bytes >= 0x80 (Java bytes
# are signed), UTF-8 text, and ids of the kind real topics are keyed by.
KEYS: tuple[bytes, ...] = (
    *(f"user-{i}".encode() for i in range(20)),
    *(f"order:{i:08d}".encode() for i in range(0, 100_000, 9_091)),
    b"a",
    b"ab",
    b"abc",
    b"abcd",
    b"abcde",
    b"abcdef",
    b"abcdefg",
    bytes(range(0x80, 0x90)),
    b"\xff",
    b"\xff\xfe",
    b"\xff\xfe\xfd",
    b"\x00\x00\x00\x00",
    "ключ".encode(),
    "键值".encode(),
    "clé-é".encode(),
    b"21",
    b"foobar",
    b"a-little-bit-long-string",
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
)
PARTITION_COUNTS = (10, 64, 256)


def test_key_fixture_is_fifty_distinct_keys() -> None:
    assert len(KEYS) == 50
    assert len(set(KEYS)) == len(KEYS)


@pytest.mark.parametrize(("key", "expected"), sorted(KAFKA_MURMUR2_REFERENCE.items()))
def test_murmur2_matches_kafka_reference(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_java_rule_spreads_the_keys() -> None:
    # A hash that collapsed keys onto a few partitions would make the client checks weak.
    for partitions in PARTITION_COUNTS:
        used = {java_partition(key, partitions) for key in KEYS}
        assert len(used) >= min(partitions, len(KEYS)) // 2


@for_clients_and("partitions", PARTITION_COUNTS)
def test_keyed_records_land_where_java_puts_them(
    client: Client, kafka_broker: Broker, kafka_topic: TopicFactory, partitions: int
) -> None:
    """Java hashes a record's key bytes with Utils.murmur2, clears the sign bit and takes
    the result modulo the partition count. A client claiming Java compatibility must agree,
    or the same key written from Python and from the JVM (Spark) lands in two partitions
    and per-key order is lost. The broker stores what it is sent, so this reads back where
    each key landed and compares that with an independent implementation of the rule."""
    topic = kafka_topic(partitions=partitions)
    # One more key for each partition, so that every partition is written.
    keys = [*KEYS, *key_for_each_partition(partitions)]
    with client.producer(ProduceOptions(java_partitioner=True)) as producer:
        delivered = producer.send(topic, [Record(key, key) for key in keys])
    java = {key: java_partition(key, partitions) for key in keys}
    with client.reader(topic, partitions) as reader:
        got = reader.read(len(keys))
    assert all(r.value == r.key for r in got)
    landed = {r.key: r.partition for r in got}
    assert len(landed) == len(keys)
    assert landed == java
    counts = Counter(java.values())
    assert kafka_broker.end_offsets(topic) == {p: counts[p] for p in range(partitions)}
    if client.can(Capability.DELIVERY_REPORTS):
        assert [d.partition for d in delivered] == [java[key] for key in keys]


# --- metadata and admin ---


@pytest.mark.kafka(auto_create_topics=False)
@for_clients()
def test_metadata_and_unknown_topic_when_auto_create_is_off(
    client: Client, kafka_broker: Broker
) -> None:
    kafka_broker.create_topic("three", 3)
    listed = client.metadata()
    assert listed.brokers == [(kafka_broker.node_id, kafka_broker.host, kafka_broker.port)]
    assert listed.topics == {"three": TopicMetadata(0, [0, 1, 2])}
    missing = client.metadata(["missing"]).topics["missing"]
    assert missing.error == ErrorCode.unknown_topic_or_partition
    if client.can(Capability.ADMIN):
        with client.admin() as admin, pytest.raises(AdminFailed) as failed:
            admin.describe_topic("missing")
        assert failed.value.code == ErrorCode.unknown_topic_or_partition
    with (
        client.producer(ProduceOptions(delivery_timeout_ms=3000)) as producer,
        pytest.raises(ProduceRejected) as rejected,
    ):
        producer.send("missing", [Record(value=b"v")])
    assert rejected.value.reason is client.unknown_topic_refusal
    assert kafka_broker.topics() == ["three"]


@for_clients(Capability.ADMIN)
def test_admin_create_describe_grow_delete(client: Client, kafka_broker: Broker) -> None:
    name = unique_client_id(f"{client.name}-admin")
    with client.admin() as admin:
        admin.create_topic(name, 3, {"retention.ms": "60000"})
        assert admin.describe_topic(name) == [0, 1, 2]
        assert client.metadata([name]).topics == {name: TopicMetadata(0, [0, 1, 2])}

        admin.create_partitions(name, 5)
        assert kafka_broker.end_offsets(name) == {p: 0 for p in range(5)}

        topic_configs = admin.describe_configs(ResourceKind.TOPIC, name)
        assert topic_configs["retention.ms"] == ConfigEntry("60000", "DYNAMIC_TOPIC_CONFIG")
        assert topic_configs["max.message.bytes"] == ConfigEntry("1048588", "DEFAULT_CONFIG")
        broker_configs = admin.describe_configs(ResourceKind.BROKER, str(kafka_broker.node_id))
        assert broker_configs["auto.create.topics.enable"].value == "true"
        assert broker_configs["message.max.bytes"] == ConfigEntry("1048588", "DEFAULT_CONFIG")
        # minibroker's setting away from Kafka's default (3000 ms)
        assert broker_configs["group.initial.rebalance.delay.ms"] == ConfigEntry(
            "0", "STATIC_BROKER_CONFIG"
        )

        cluster = admin.describe_cluster()
        assert cluster.cluster_id == kafka_broker.config.cluster_id
        assert cluster.controller_id == kafka_broker.node_id
        assert cluster.nodes == [(kafka_broker.node_id, kafka_broker.host, kafka_broker.port)]

        if client.can(Capability.ADMIN_LIST_OFFSETS):
            [latest] = admin.list_offsets(name, 0, [Spec.LATEST])
            assert latest.offset == 0

        admin.delete_topic(name)
    assert name not in kafka_broker.topics()


@for_clients(Capability.ADMIN_LIST_OFFSETS)
def test_admin_list_offsets_by_spec(
    client: Client, kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    # One batch whose records are not in timestamp order: the largest is in the middle.
    sent = [
        Record(value=b"%d" % i, timestamp=CREATE_TIME_MS + delta, partition=0)
        for i, delta in enumerate((1000, 5000, 2000))
    ]
    with client.producer(ProduceOptions(one_batch=True)) as producer:
        producer.send(topic, sent)
    assert len(stored_batch_headers(kafka_broker, topic)) == 1
    queries: dict[str, OffsetQuery] = {
        "earliest": Spec.EARLIEST,
        "latest": Spec.LATEST,
        "max_timestamp": Spec.MAX_TIMESTAMP,
        "at_or_after": CREATE_TIME_MS + 1500,
    }
    with client.admin() as admin:
        found = admin.list_offsets(topic, 0, list(queries.values()))
    assert dict(zip(queries, found, strict=True)) == {
        "earliest": OffsetAndTime(0, -1),
        "latest": OffsetAndTime(3, -1),
        "max_timestamp": OffsetAndTime(1, CREATE_TIME_MS + 5000),
        # the first record, in offset order, at or after the time
        "at_or_after": OffsetAndTime(1, CREATE_TIME_MS + 5000),
    }


@for_clients(Capability.ADMIN)
def test_admin_error_paths(client: Client, kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    existing = kafka_topic(partitions=2)
    with client.admin() as admin:
        with pytest.raises(AdminFailed) as again:
            admin.create_topic(existing, 1)
        assert again.value.code == ErrorCode.topic_already_exists
        with pytest.raises(AdminFailed) as zero:
            admin.create_topic("zero-partitions", 0)
        assert zero.value.code == ErrorCode.invalid_partitions
        with pytest.raises(AdminFailed) as bad_config:
            admin.create_topic("bad-config", 1, {"no.such.config": "1"})
        assert bad_config.value.code == ErrorCode.invalid_config
        with pytest.raises(AdminFailed) as shrink:
            admin.create_partitions(existing, 1)
        assert shrink.value.code == ErrorCode.invalid_partitions
        with pytest.raises(AdminFailed) as gone:
            admin.delete_topic("never-created")
        assert gone.value.code == ErrorCode.unknown_topic_or_partition
    assert kafka_broker.end_offsets(existing) == {0: 0, 1: 0}
    for rejected in ("zero-partitions", "bad-config", "never-created"):
        assert rejected not in kafka_broker.topics()


@for_clients(Capability.ADMIN, Capability.MISSING_CONFIG_ERRORS)
def test_admin_describe_configs_of_missing_topic(client: Client) -> None:
    with client.admin() as admin, pytest.raises(AdminFailed) as failed:
        admin.describe_configs(ResourceKind.TOPIC, "never-created")
    assert failed.value.code == ErrorCode.unknown_topic_or_partition
