"""Keyed records land where Java's default partitioner puts them (seed 002).

Java hashes a record's key bytes with Utils.murmur2, clears the sign bit
(Utils.toPositive, `& 0x7fffffff`) and takes the result modulo the partition count.
Clients that claim Java compatibility must agree with it, or the same key written from
Python and from the JVM (Spark) ends up in two partitions and per-key order is lost.
The broker only stores what it is sent, so this reads back, over the wire, where each
key landed and compares that with an independent implementation of the Java rule.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaProducer

from minibroker import Broker
from minibroker.testing.plugin import TopicFactory
from tests.interop.conftest import java_partition, murmur2, unique_client_id

TIMEOUT = 15

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
PARTITION_COUNTS = (10, 64)


def test_key_partitioning_fixture_is_fifty_distinct_keys() -> None:
    assert len(KEYS) == 50
    assert len(set(KEYS)) == len(KEYS)


@pytest.mark.parametrize(("key", "expected"), sorted(KAFKA_MURMUR2_REFERENCE.items()))
def test_key_partitioning_murmur2_matches_kafka_reference(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_key_partitioning_java_rule_spreads_the_keys() -> None:
    # A hash that collapsed keys onto a few partitions would make the client checks weak.
    for partitions in PARTITION_COUNTS:
        used = {java_partition(key, partitions) for key in KEYS}
        assert len(used) >= min(partitions, len(KEYS)) // 2


def landed_partitions(broker: Broker, topic: str, partitions: int) -> dict[bytes, int]:
    """Read every record back over the wire: key -> the partition it is stored in."""
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": unique_client_id("partitioning-reader"),
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        landed: dict[bytes, int] = {}
        deadline = time.monotonic() + TIMEOUT
        while len(landed) < len(KEYS) and time.monotonic() < deadline:
            for message in reader.consume(len(KEYS), timeout=0.2):
                assert message.error() is None, message.error()
                key = message.key()
                assert key is not None and key not in landed, key
                assert message.value() == key
                landed[key] = message.partition()
    finally:
        reader.close()
    assert len(landed) == len(KEYS), f"read back {len(landed)} of {len(KEYS)} keys"
    return landed


def java_placement(partitions: int) -> dict[bytes, int]:
    return {key: java_partition(key, partitions) for key in KEYS}


@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
async def test_key_partitioning_aiokafka_default_partitioner_matches_java(
    kafka_broker: Broker, kafka_topic: TopicFactory, partitions: int
) -> None:
    topic = kafka_topic(partitions=partitions)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    await asyncio.wait_for(producer.start(), TIMEOUT)
    try:
        sent = [await producer.send(topic, key, key=key) for key in KEYS]
        reported = [m.partition for m in await asyncio.wait_for(asyncio.gather(*sent), TIMEOUT)]
    finally:
        await asyncio.wait_for(producer.stop(), TIMEOUT)
    landed = await asyncio.to_thread(landed_partitions, kafka_broker, topic, partitions)
    assert landed == java_placement(partitions)
    assert reported == [landed[key] for key in KEYS]


@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
def test_key_partitioning_confluent_kafka_murmur2_random_matches_java(
    kafka_broker: Broker, kafka_topic: TopicFactory, partitions: int
) -> None:
    topic = kafka_topic(partitions=partitions)
    producer = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "partitioner": "murmur2_random",
            "message.timeout.ms": TIMEOUT * 1000,
        }
    )
    for key in KEYS:
        producer.produce(topic, key, key)
    assert producer.flush(TIMEOUT) == 0
    assert landed_partitions(kafka_broker, topic, partitions) == java_placement(partitions)


@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
def test_key_partitioning_kafka_python_default_partitioner_matches_java(
    kafka_broker: Broker, kafka_topic: TopicFactory, partitions: int
) -> None:
    topic = kafka_topic(partitions=partitions)
    producer = KafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap_servers, max_block_ms=TIMEOUT * 1000
    )
    try:
        sent = [producer.send(topic, key, key=key) for key in KEYS]
        producer.flush(TIMEOUT)
        reported = [future.get(TIMEOUT).partition for future in sent]
    finally:
        producer.close(timeout=TIMEOUT)
    landed = landed_partitions(kafka_broker, topic, partitions)
    assert landed == java_placement(partitions)
    assert reported == [landed[key] for key in KEYS]
