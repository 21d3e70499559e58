"""Kafka transactions through aiokafka over real sockets: `async with
producer.transaction()` commits, and aborts on an exception; a read_committed consumer
reads only committed records; send_offsets_to_transaction commits a group's input offsets
with the output; a producer whose transactional id was taken over is fenced.

Tests marked parity use only clients over the wire and the plugin's fixtures: CI runs
them against Apache Kafka too. A real Kafka writes markers after it has answered EndTxn,
so reads wait for the last stable offset to reach the log's end.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import ProducerFenced

from minibroker.testing.backends import KafkaService
from minibroker.testing.clients import ClientConfigs

TRANSACTION_TIMEOUT_MS = 60_000
READ_TIMEOUT = 30.0
STABLE_TIMEOUT = 30.0
PROCESS_TIMEOUT = 90.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


class Rollback(Exception):
    """What the application raises inside a transaction to give it up."""


@pytest.fixture
async def producers(
    kafka_config: ClientConfigs,
) -> AsyncIterator[Callable[[str], AIOKafkaProducer]]:
    """Makes transactional producers (started); all stopped after the test."""
    started: list[AIOKafkaProducer] = []

    def make(transactional_id: str) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            **kafka_config.aiokafka_producer(
                transactional_id=transactional_id,
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
            )
        )
        started.append(producer)
        return producer

    yield make
    for producer in started:
        await producer.stop()


async def send_all(producer: AIOKafkaProducer, topic: str, values: list[str]) -> None:
    """Send to partition 0 and wait until every record is acknowledged (in the log)."""
    for value in values:
        await producer.send_and_wait(topic, value.encode(), partition=0)


@dataclass(frozen=True)
class Consumed:
    records: list[tuple[int, int, str]]  # partition, offset, value
    positions: dict[int, int]

    @property
    def values(self) -> list[str]:
        return [value for _, _, value in self.records]


async def end_offsets(
    config: ClientConfigs, topic: str, partitions: int, isolation: str
) -> dict[int, int]:
    """ListOffsets(latest) at this isolation level (the last stable offset for
    read_committed), as an aiokafka consumer asks for it."""
    consumer = AIOKafkaConsumer(**config.aiokafka_consumer(None, isolation_level=isolation))
    await consumer.start()
    try:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: offset for tp, offset in (await consumer.end_offsets(wanted)).items()}
    finally:
        await consumer.stop()


async def wait_until_stable(config: ClientConfigs, topic: str, partitions: int) -> dict[int, int]:
    """Wait until every transaction on the topic is finished and its markers written."""
    deadline = time.monotonic() + STABLE_TIMEOUT
    while True:
        committed = await end_offsets(config, topic, partitions, "read_committed")
        uncommitted = await end_offsets(config, topic, partitions, "read_uncommitted")
        if committed == uncommitted:
            return committed
        assert time.monotonic() < deadline, f"{topic}: stable {committed}, end {uncommitted}"
        await asyncio.sleep(0.05)


async def read_to_end(
    config: ClientConfigs, topic: str, partitions: int, isolation: str
) -> Consumed:
    """Every partition from offset 0 until the consumer's position reaches the end its
    isolation level allows (the last stable offset for read_committed)."""
    consumer = AIOKafkaConsumer(
        **config.aiokafka_consumer(None, isolation_level=isolation, enable_auto_commit=False)
    )
    await consumer.start()
    records: list[tuple[int, int, str]] = []
    try:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(wanted)
        await consumer.seek_to_beginning(*wanted)
        ends = await consumer.end_offsets(wanted)
        deadline = time.monotonic() + READ_TIMEOUT
        positions = {tp: await consumer.position(tp) for tp in wanted}
        while any(positions[tp] < ends[tp] for tp in wanted):
            assert time.monotonic() < deadline, f"read {records}, at {positions}, ends {ends}"
            for tp, batch in (await consumer.getmany(timeout_ms=200)).items():
                records.extend((tp.partition, m.offset, bytes(m.value).decode()) for m in batch)
            positions = {tp: await consumer.position(tp) for tp in wanted}
        return Consumed(records, {tp.partition: at for tp, at in positions.items()})
    finally:
        await consumer.stop()


@pytest.mark.parity
async def test_transaction_context_commits_and_aborts_on_an_exception(
    kafka_topic: Callable[..., str],
    kafka_config: ClientConfigs,
    producers: Callable[[str], AIOKafkaProducer],
) -> None:
    """`async with producer.transaction()` commits when the block ends and aborts when it
    raises: a read_committed consumer reads the committed records (past the aborted ones
    and the markers), a read_uncommitted one reads everything."""
    topic = kafka_topic(partitions=1)
    producer = producers(unique("context"))
    await producer.start()
    async with producer.transaction():
        await send_all(producer, topic, names("first", 3))
    with pytest.raises(Rollback):
        async with producer.transaction():
            await send_all(producer, topic, names("rolled-back", 3))
            raise Rollback
    async with producer.transaction():
        await send_all(producer, topic, names("third", 2))

    ends = await wait_until_stable(kafka_config, topic, 1)
    committed = await read_to_end(kafka_config, topic, 1, "read_committed")
    assert committed.values == names("first", 3) + names("third", 2)
    assert committed.positions == ends == {0: 11}  # eight records and three markers
    everything = await read_to_end(kafka_config, topic, 1, "read_uncommitted")
    assert everything.values == names("first", 3) + names("rolled-back", 3) + names("third", 2)


@pytest.mark.parity
async def test_send_offsets_to_transaction_commits_the_group_offsets_with_the_output(
    kafka_broker: KafkaService,
    kafka_topic: Callable[..., str],
    kafka_config: ClientConfigs,
    producers: Callable[[str], AIOKafkaProducer],
) -> None:
    """Consume-transform-produce with aiokafka: each batch's output and input offsets
    go in one transaction. The output holds every input once, the group's committed
    offsets are the input's end."""
    source, sink, group = kafka_topic(partitions=2), kafka_topic(partitions=1), unique("g")
    inputs = names("event", 30)
    feeder = AIOKafkaProducer(**kafka_config.aiokafka_producer())
    await feeder.start()
    try:
        for i, value in enumerate(inputs):
            await feeder.send(source, value.encode(), partition=i % 2)
        await feeder.flush()
    finally:
        await feeder.stop()
    producer = producers(unique("transform"))
    await producer.start()
    consumer = AIOKafkaConsumer(
        source,
        **kafka_config.aiokafka_consumer(
            group, enable_auto_commit=False, isolation_level="read_committed"
        ),
    )
    await consumer.start()
    processed = 0
    try:
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while processed < len(inputs):
            assert time.monotonic() < deadline, f"processed {processed} of {len(inputs)}"
            fetched = await consumer.getmany(timeout_ms=500, max_records=7)
            if not fetched:
                continue
            async with producer.transaction():
                for batch in fetched.values():
                    for message in batch:
                        transformed = b"done:" + bytes(message.value)
                        await producer.send(sink, transformed, partition=0)
                        processed += 1
                offsets = {tp: batch[-1].offset + 1 for tp, batch in fetched.items()}
                await producer.send_offsets_to_transaction(offsets, group)

        ends = {
            TopicPartition(source, p): end for p, end in kafka_broker.end_offsets(source).items()
        }
        while {tp: await consumer.committed(tp) for tp in ends} != ends:
            assert time.monotonic() < deadline, "the group's offsets were not committed"
            await asyncio.sleep(0.05)
    finally:
        await consumer.stop()

    await wait_until_stable(kafka_config, sink, 1)
    output = await read_to_end(kafka_config, sink, 1, "read_committed")
    assert Counter(output.values) == Counter(f"done:{value}" for value in inputs)


@pytest.mark.parity
async def test_a_producer_whose_transactional_id_was_taken_over_is_fenced(
    kafka_topic: Callable[..., str],
    kafka_config: ClientConfigs,
    producers: Callable[[str], AIOKafkaProducer],
) -> None:
    """A second producer with the same transactional id starts (InitProducerId bumps the
    epoch and aborts the first one's open transaction): the first gets ProducerFenced,
    and nothing it wrote is read committed."""
    topic, transactional_id = kafka_topic(partitions=1), unique("zombie")
    zombie = producers(transactional_id)
    await zombie.start()
    await zombie.begin_transaction()
    await send_all(zombie, topic, ["zombie-0"])

    successor = producers(transactional_id)
    await successor.start()
    async with successor.transaction():
        await send_all(successor, topic, names("successor", 2))

    with pytest.raises(ProducerFenced):
        await zombie.send_and_wait(topic, b"zombie-1", partition=0)
        await zombie.commit_transaction()

    await wait_until_stable(kafka_config, topic, 1)
    committed = await read_to_end(kafka_config, topic, 1, "read_committed")
    assert committed.values == names("successor", 2)
    everything = await read_to_end(kafka_config, topic, 1, "read_uncommitted")
    assert everything.values == ["zombie-0", *names("successor", 2)]
