"""aiokafka against the broker: produce, consume, seek, compression, limits, long polls."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord

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
)

TIMEOUT = 15  # seconds for any one client operation
LOG_APPEND_TIME = 1


@asynccontextmanager
async def producer(broker: Broker, **settings: Any) -> AsyncIterator[AIOKafkaProducer]:
    client = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000, **settings
    )
    await asyncio.wait_for(client.start(), TIMEOUT)
    try:
        yield client
    finally:
        await asyncio.wait_for(client.stop(), TIMEOUT)


@asynccontextmanager
async def consumer(
    broker: Broker, topic: str, partitions: int = 1, **settings: Any
) -> AsyncIterator[AIOKafkaConsumer]:
    """A group-less consumer assigned every partition of `topic`, at the earliest offsets."""
    # aiokafka finishes an in-flight fetch before it seeks: keep long polls short.
    settings.setdefault("fetch_max_wait_ms", 100)
    client = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=10_000,
        **settings,
    )
    await asyncio.wait_for(client.start(), TIMEOUT)
    try:
        client.assign([TopicPartition(topic, p) for p in range(partitions)])
        yield client
    finally:
        await asyncio.wait_for(client.stop(), TIMEOUT)


async def consume(client: AIOKafkaConsumer, count: int) -> list[ConsumerRecord[Any, Any]]:
    """Exactly `count` records, or fail after TIMEOUT seconds."""
    received: list[ConsumerRecord[Any, Any]] = []

    async def collect() -> None:
        while len(received) < count:
            batches = await client.getmany(timeout_ms=200)
            for batch in batches.values():
                received.extend(batch)

    try:
        await asyncio.wait_for(collect(), TIMEOUT)
    except TimeoutError:
        pytest.fail(f"got {len(received)} of {count} records: {received}")
    assert len(received) == count, received
    return received


async def test_aiokafka_keys_headers_null_values_and_create_time(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    sent = [
        (b"key-1", b"value-1", [("trace", b"abc"), ("empty", b"")], CREATE_TIME_MS),
        (None, b"no key", [], CREATE_TIME_MS + 1),
        (b"tombstone", None, [("why", b"deleted")], CREATE_TIME_MS + 2),
        (b"", b"", [("", b"")], CREATE_TIME_MS + 3),  # empty is not null
    ]
    async with producer(kafka_broker) as client:
        for key, value, headers, timestamp in sent:
            await client.send_and_wait(
                topic, value, key=key, partition=0, timestamp_ms=timestamp, headers=headers
            )
    async with consumer(kafka_broker, topic) as reader:
        got = await consume(reader, len(sent))
    assert [r.offset for r in got] == [0, 1, 2, 3]
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in got] == sent
    assert {r.timestamp_type for r in got} == {0}


async def test_aiokafka_log_append_time_topic_returns_broker_time(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(configs={"message.timestamp.type": "LogAppendTime"})
    before = now_ms()
    async with producer(kafka_broker) as client:
        metadata = await client.send_and_wait(topic, b"v", partition=0, timestamp_ms=CREATE_TIME_MS)
    after = now_ms()
    assert before <= metadata.timestamp <= after
    async with consumer(kafka_broker, topic) as reader:
        [record] = await consume(reader, 1)
    assert record.timestamp_type == LOG_APPEND_TIME
    assert record.timestamp == metadata.timestamp


@pytest.mark.parametrize("codec", CODECS)
async def test_aiokafka_compression_round_trip(
    kafka_broker: Broker, kafka_topic: TopicFactory, codec: str
) -> None:
    topic = kafka_topic()
    values = [f"{codec} record {i} ".encode() * 20 for i in range(10)]
    async with producer(kafka_broker, compression_type=codec) as client:
        batch = client.create_batch()
        for i, value in enumerate(values):
            assert batch.append(key=b"k%d" % i, value=value, timestamp=CREATE_TIME_MS + i * 10)
        await asyncio.wait_for(await client.send_batch(batch, topic, partition=0), TIMEOUT)
    [header] = stored_batch_headers(kafka_broker, topic)
    assert header.compression == CODEC_IDS[codec]
    async with consumer(kafka_broker, topic) as reader:
        got = await consume(reader, len(values))
        assert [r.value for r in got] == values
        assert [r.timestamp for r in got] == [CREATE_TIME_MS + i * 10 for i in range(10)]
        # A timestamp inside a compressed batch still finds the exact record.
        tp = TopicPartition(topic, 0)
        found = await reader.offsets_for_times({tp: CREATE_TIME_MS + 45})
        assert found[tp] is not None
        assert (found[tp].offset, found[tp].timestamp) == (5, CREATE_TIME_MS + 50)


async def test_aiokafka_idempotent_producer(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    async with producer(kafka_broker, enable_idempotence=True, acks="all") as client:
        for i in range(20):
            await client.send(topic, b"%d" % i, partition=0)
        await asyncio.wait_for(client.flush(), TIMEOUT)
    headers = stored_batch_headers(kafka_broker, topic)
    assert {h.producer_id for h in headers} != {-1}
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]
    async with consumer(kafka_broker, topic) as reader:
        got = await consume(reader, 20)
    assert [r.value for r in got] == [b"%d" % i for i in range(20)]


async def test_aiokafka_seek_earliest_latest_and_by_timestamp(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    tp = TopicPartition(topic, 0)
    async with producer(kafka_broker) as client:
        for i in range(5):
            await client.send_and_wait(
                topic, b"%d" % i, partition=0, timestamp_ms=CREATE_TIME_MS + i * 1000
            )
        async with consumer(kafka_broker, topic) as reader:
            await reader.seek_to_end(tp)
            assert await reader.position(tp) == 5
            await reader.seek_to_beginning(tp)
            assert await reader.position(tp) == 0
            assert [r.value for r in await consume(reader, 5)] == [b"%d" % i for i in range(5)]

            found = await reader.offsets_for_times({tp: CREATE_TIME_MS + 2500})
            assert (found[tp].offset, found[tp].timestamp) == (3, CREATE_TIME_MS + 3000)
            reader.seek(tp, found[tp].offset)
            assert [r.value for r in await consume(reader, 2)] == [b"3", b"4"]
            after_last = await reader.offsets_for_times({tp: CREATE_TIME_MS + 10_000})
            assert after_last[tp] is None

            await reader.seek_to_end(tp)
            await client.send_and_wait(topic, b"new", partition=0)
            assert [r.value for r in await consume(reader, 1)] == [b"new"]
            assert await reader.beginning_offsets([tp]) == {tp: 0}
            assert await reader.end_offsets([tp]) == {tp: 6}
            # Past the end: OFFSET_OUT_OF_RANGE, then auto_offset_reset=earliest applies.
            reader.seek(tp, 100)
            assert [r.offset for r in await consume(reader, 6)] == list(range(6))


async def test_aiokafka_one_mebibyte_message(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    big = kafka_topic(configs=LARGE_TOPIC_CONFIGS)
    default = kafka_topic()
    payload = os.urandom(ONE_MIB)
    async with producer(kafka_broker, max_request_size=LARGE_CLIENT_LIMIT) as client:
        await client.send_and_wait(big, payload, key=b"big", partition=0)
        # The default max.message.bytes (1048588) cannot hold 1 MiB plus overhead.
        with pytest.raises(MessageSizeTooLargeError):
            await client.send_and_wait(default, payload, partition=0)
    assert kafka_broker.end_offsets(default) == {0: 0}
    async with consumer(
        kafka_broker,
        big,
        max_partition_fetch_bytes=LARGE_CLIENT_LIMIT,
        fetch_max_bytes=LARGE_CLIENT_LIMIT,
    ) as reader:
        [record] = await consume(reader, 1)
    assert record.key == b"big"
    assert record.value == payload
    # Limits below the record's size: the first batch still comes whole (KIP-74).
    small = {"max_partition_fetch_bytes": SMALL_FETCH_LIMIT, "fetch_max_bytes": SMALL_FETCH_LIMIT}
    async with consumer(kafka_broker, big, **small) as reader:
        [record] = await consume(reader, 1)
    assert record.value == payload


async def test_aiokafka_256_partitions(kafka_broker: Broker, kafka_topic: TopicFactory) -> None:
    partitions = 256
    topic = kafka_topic(partitions=partitions)
    async with producer(kafka_broker, linger_ms=5) as client:
        futures = [await client.send(topic, b"p%d" % p, partition=p) for p in range(partitions)]
        await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
    assert kafka_broker.end_offsets(topic) == {p: 1 for p in range(partitions)}
    async with consumer(kafka_broker, topic, partitions) as reader:
        got = await consume(reader, partitions)
    assert sorted((r.partition, r.value) for r in got) == [
        (p, b"p%d" % p) for p in range(partitions)
    ]


async def test_aiokafka_empty_fetch_waits_max_wait(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    max_wait_ms = 400
    client_id = unique_client_id("aiokafka-empty-fetch")
    async with consumer(
        kafka_broker, topic, fetch_max_wait_ms=max_wait_ms, client_id=client_id
    ) as reader:
        # Poll until the broker has answered enough fetches, not for a fixed time.
        async with asyncio.timeout(TIMEOUT):
            while len(fetch_arrivals(kafka_broker, client_id)) < WAITED_FETCHES:
                assert await reader.getmany(timeout_ms=max_wait_ms) == {}
    assert_fetches_waited(kafka_broker, client_id, max_wait_ms)
