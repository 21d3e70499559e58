"""Idempotent Produce over the wire: what an idempotent producer relies on when it retries.

Each test gets a producer id from InitProducerId, sends hand-built magic-2 batches with
chosen producer id, epoch and base sequence through Produce, checks the exact error code
and base offset of every answer, and reads the partition back with Fetch to check what
the log holds. The rules are Kafka's (ProducerStateManager / ProducerAppendInfo, 2.5+):
a batch equal to one of the producer's last five is acknowledged with its first offset
and not stored again; any other sequence but last + 1 is OUT_OF_ORDER_SEQUENCE_NUMBER; an
epoch older than the last one seen is INVALID_PRODUCER_EPOCH; a producer the partition
has no state for is accepted at any sequence (KIP-360 removed UNKNOWN_PRODUCER_ID).
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Sequence

import pytest

from harness.raw_client import RawClient, fetch_request, produce_request
from minibroker import Broker
from minibroker.protocol import records
from minibroker.protocol.records import BatchHeader
from minibroker.testing.plugin import TopicFactory

PRODUCE, FETCH, INIT_PRODUCER_ID = 0, 1, 22

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47

# Kafka keeps the metadata of this many batches per producer and partition.
CACHED_BATCHES = 5
# A producer id no InitProducerId handed out: the partition has no state for it.
UNSEEN_PRODUCER_ID = 0x0000_7FFF_0000_0001
NOW_MS = int(time.time() * 1000)


@dataclasses.dataclass(frozen=True)
class Producer:
    producer_id: int
    epoch: int


@dataclasses.dataclass(frozen=True)
class Answer:
    error_code: int
    base_offset: int


@dataclasses.dataclass(frozen=True)
class LogContents:
    batches: list[BatchHeader]
    values: list[bytes | None]
    high_watermark: int


def init_producer(client: RawClient) -> Producer:
    """A fresh idempotent producer id and epoch, as a client gets at start-up."""
    answer = client.call(
        INIT_PRODUCER_ID,
        4,
        transactional_id=None,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )
    assert answer.error_code.value == NONE
    return Producer(int(answer.producer_id), int(answer.producer_epoch))


def batch(
    producer: Producer, base_sequence: int, values: Sequence[bytes], *, epoch: int | None = None
) -> bytes:
    """One uncompressed batch of `values` from `producer` starting at `base_sequence`."""
    return records.build_batch(
        [(None, value) for value in values],
        timestamp_ms=NOW_MS,
        producer_id=producer.producer_id,
        producer_epoch=producer.epoch if epoch is None else epoch,
        base_sequence=base_sequence,
    )


def produce(client: RawClient, topic: str, data: bytes, version: int = 9) -> Answer:
    """Send one batch to partition 0 with acks=-1; the partition's error code and offset."""
    response = client.request(PRODUCE, version, produce_request(topic, data, version=version))
    (topic_response,) = response.responses
    (answer,) = topic_response.partition_responses
    return Answer(answer.error_code.value, int(answer.base_offset))


def read_log(client: RawClient, topic: str) -> LogContents:
    """Everything partition 0 holds, read back through Fetch from offset 0."""
    response = client.request(FETCH, 11, fetch_request(topic, version=11, min_bytes=0))
    assert response.error_code.value == NONE
    (partition,) = response.responses[0].partitions
    assert partition.error_code.value == NONE
    data = bytes(partition.records or b"")
    stored = records.split_batches(data)
    stored_values = [r.value for _, raw in stored for r in records.iter_records(raw)]
    return LogContents(
        [header for header, _ in stored], stored_values, int(partition.high_watermark)
    )


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


# --- retries ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 9])
def test_a_retried_batch_gets_its_original_offset_and_is_stored_once(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """A producer whose ack was lost resends the batch; the broker must answer with the
    first offset it gave that batch and keep a single copy."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        producer = init_producer(client)
        assert produce(client, topic, batch(producer, 0, values("a", 3)), version) == Answer(
            NONE, 0
        )
        second = batch(producer, 3, values("b", 2))
        assert produce(client, topic, second, version) == Answer(NONE, 3)

        assert produce(client, topic, second, version) == Answer(NONE, 3)

        log = read_log(client, topic)
        assert [b.base_offset for b in log.batches] == [0, 3]
        assert log.values == values("a", 3) + values("b", 2)
        assert log.high_watermark == 5
        # The retry left the sequence where it was: the next batch follows on.
        assert produce(client, topic, batch(producer, 5, [b"c"]), version) == Answer(NONE, 5)
        assert read_log(client, topic).high_watermark == 6


@pytest.mark.parametrize("back", range(1, CACHED_BATCHES + 1))
def test_a_duplicate_of_any_of_the_last_five_batches_gets_its_original_offset(
    kafka_broker: Broker, kafka_topic: TopicFactory, back: int
) -> None:
    """With up to five requests in flight a retry may repeat any of the producer's last
    five batches, not just the newest; each is acknowledged at its original offset."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        producer = init_producer(client)
        sent = [batch(producer, 2 * i, values(f"b{i}-", 2)) for i in range(CACHED_BATCHES + 1)]
        offsets = [produce(client, topic, data).base_offset for data in sent]
        assert offsets == [2 * i for i in range(CACHED_BATCHES + 1)]
        before = read_log(client, topic)

        assert produce(client, topic, sent[-back]) == Answer(NONE, offsets[-back])

        assert read_log(client, topic) == before
        assert before.high_watermark == 2 * (CACHED_BATCHES + 1)
        assert len(before.batches) == CACHED_BATCHES + 1


def test_a_duplicate_older_than_the_last_five_batches_is_out_of_order(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """Only five batches are remembered: a resend of an older one cannot be recognised as
    a duplicate, and is refused rather than stored twice."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        producer = init_producer(client)
        sent = [batch(producer, i, [f"v{i}".encode()]) for i in range(CACHED_BATCHES + 1)]
        for data in sent:
            assert produce(client, topic, data).error_code == NONE
        before = read_log(client, topic)

        assert produce(client, topic, sent[0]) == Answer(OUT_OF_ORDER_SEQUENCE_NUMBER, -1)

        assert read_log(client, topic) == before
        assert before.high_watermark == CACHED_BATCHES + 1


# --- sequence and epoch errors ------------------------------------------------------


def test_a_sequence_gap_is_out_of_order_and_appends_nothing(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """A batch that skips sequence numbers means earlier batches were lost: the broker
    refuses it with OUT_OF_ORDER_SEQUENCE_NUMBER, so nothing is stored out of order."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        producer = init_producer(client)
        assert produce(client, topic, batch(producer, 0, values("a", 2))) == Answer(NONE, 0)

        gap = batch(producer, 3, [b"skipped-ahead"])
        assert produce(client, topic, gap) == Answer(OUT_OF_ORDER_SEQUENCE_NUMBER, -1)

        log = read_log(client, topic)
        assert (len(log.batches), log.values, log.high_watermark) == (1, values("a", 2), 2)
        # The refused batch did not move the expected sequence: 2 is still next.
        assert produce(client, topic, batch(producer, 2, [b"next"])) == Answer(NONE, 2)
        assert read_log(client, topic).values == [*values("a", 2), b"next"]


def test_an_older_epoch_is_fenced_with_invalid_producer_epoch(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """Once a producer has written with a newer epoch (an idempotent producer bumps its
    epoch itself after a timeout, KIP-360), batches still carrying the old epoch are
    zombies: INVALID_PRODUCER_EPOCH, and not stored."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        producer = init_producer(client)
        bumped = dataclasses.replace(producer, epoch=producer.epoch + 1)
        assert produce(client, topic, batch(producer, 0, [b"old-0"])) == Answer(NONE, 0)
        assert produce(client, topic, batch(bumped, 0, [b"new-0"])) == Answer(NONE, 1)

        zombie = batch(producer, 1, [b"old-1"])
        assert produce(client, topic, zombie) == Answer(INVALID_PRODUCER_EPOCH, -1)

        log = read_log(client, topic)
        assert (log.values, log.high_watermark) == ([b"old-0", b"new-0"], 2)
        assert [(b.producer_epoch, b.base_sequence) for b in log.batches] == [
            (producer.epoch, 0),
            (bumped.epoch, 0),
        ]


def test_a_new_epoch_must_start_at_sequence_zero(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """A bumped epoch resets the sequence: a first batch at any other sequence is
    OUT_OF_ORDER_SEQUENCE_NUMBER, and not stored."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        producer = init_producer(client)
        assert produce(client, topic, batch(producer, 0, values("a", 2))) == Answer(NONE, 0)

        bumped = batch(producer, 2, [b"carried-on"], epoch=producer.epoch + 1)
        assert produce(client, topic, bumped) == Answer(OUT_OF_ORDER_SEQUENCE_NUMBER, -1)

        log = read_log(client, topic)
        assert (log.values, log.high_watermark) == (values("a", 2), 2)


def test_a_producer_the_partition_has_no_state_for_is_accepted_at_any_sequence(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """Kafka 2.5+ (KIP-360) accepts the first batch of a producer it has no state for at
    any sequence (its state may have been lost to retention) instead of answering
    UNKNOWN_PRODUCER_ID; from then on the sequence is checked as usual."""
    topic = kafka_topic(partitions=1)
    unseen = Producer(UNSEEN_PRODUCER_ID, 0)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        assert produce(client, topic, batch(unseen, 17, values("u", 2))) == Answer(NONE, 0)

        assert produce(client, topic, batch(unseen, 20, [b"gap"])) == Answer(
            OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        )
        assert produce(client, topic, batch(unseen, 19, [b"next"])) == Answer(NONE, 2)

        log = read_log(client, topic)
        assert (log.values, log.high_watermark) == ([*values("u", 2), b"next"], 3)
        assert [(b.producer_id, b.base_sequence) for b in log.batches] == [
            (UNSEEN_PRODUCER_ID, 17),
            (UNSEEN_PRODUCER_ID, 19),
        ]
