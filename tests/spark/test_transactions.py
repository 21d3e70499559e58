"""Transactions through Spark's own Kafka connector: a streaming query with
`kafka.isolation.level` = read_committed reads what committed transactions wrote and
nothing of an aborted one between them, nor of one still open; read_uncommitted reads
all of it. The transactions are confluent-kafka's (librdkafka's transactional producer).

Pinned to format "kafka": the isolation level is the Java consumer's setting, passed
through by the connector, which also asks for its end offsets at that level.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from confluent_kafka import IsolationLevel, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
from pyspark.sql import functions as F

from minibroker.testing.clients import ClientConfigs

pytestmark = pytest.mark.spark_kafka("kafka")

PARTITIONS = 2
PER_PARTITION = 3  # records each transaction writes to each partition
TIMEOUT = 30.0

Row = tuple[int, int, str]  # partition, offset, value


class Transactions:
    """One transactional producer; `run(name)` writes PER_PARTITION records "NAME-P-I" to
    each partition in a transaction of its own and returns them as acknowledged."""

    def __init__(self, config: ClientConfigs, topic: str) -> None:
        self.topic = topic
        self.producer = Producer(
            config.confluent_producer(
                **{
                    "transactional.id": f"spark-txn-{uuid.uuid4().hex[:8]}",
                    "transaction.timeout.ms": 60_000,
                }
            )
        )
        self.producer.init_transactions(TIMEOUT)
        self.open = False

    def run(self, name: str) -> list[Row]:
        acknowledged: list[Row] = []
        errors: list[KafkaError] = []

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                errors.append(error)
                return
            partition, offset, value = message.partition(), message.offset(), message.value()
            assert partition is not None and offset is not None and value is not None
            acknowledged.append((partition, offset, value.decode()))

        self.producer.begin_transaction()
        self.open = True
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                value = f"{name}-{p}-{i}".encode()
                self.producer.produce(self.topic, value=value, partition=p, on_delivery=delivered)
        assert self.producer.flush(TIMEOUT) == 0
        assert not errors, errors
        assert len(acknowledged) == PARTITIONS * PER_PARTITION
        return sorted(acknowledged)

    def commit(self) -> None:
        self.producer.commit_transaction(TIMEOUT)
        self.open = False

    def abort(self) -> None:
        self.producer.abort_transaction(TIMEOUT)
        self.open = False


@pytest.fixture
def transactions(
    kafka_config: ClientConfigs, kafka_topic: Callable[..., str]
) -> Iterator[Transactions]:
    topic = kafka_topic(partitions=PARTITIONS)
    made = Transactions(kafka_config, topic)
    yield made
    if made.open:
        made.abort()


def last_stable_offsets(admin: AdminClient, topic: str) -> dict[int, int]:
    """partition -> the end offset a read_committed consumer sees."""
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    asked = {TopicPartition(topic, p): latest for p in range(PARTITIONS)}
    answered = admin.list_offsets(
        asked, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=TIMEOUT
    )
    return {tp.partition: future.result().offset for tp, future in answered.items()}


def read(
    spark: Any, spark_kafka_source: Any, spark_stream: Any, topic: str, level: str
) -> list[Row]:
    df = spark_kafka_source.read_stream(
        spark,
        subscribe=topic,
        startingOffsets="earliest",
        **{"kafka.isolation.level": level},
    ).select("partition", "offset", F.col("value").cast("string").alias("value"))
    return sorted((r.partition, r.offset, r.value) for r in spark_stream.collect(df))


def test_read_committed_reads_only_what_committed_transactions_wrote(
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_config: ClientConfigs,
    kafka_wait_for: Callable[..., Any],
    transactions: Transactions,
) -> None:
    topic = transactions.topic
    first = transactions.run("first")
    transactions.commit()
    aborted = transactions.run("aborted")
    transactions.abort()
    second = transactions.run("second")
    transactions.commit()
    still_open = transactions.run("open")
    # The open transaction's first offsets are where read_committed stops, once the
    # markers of the transactions before it are written.
    open_starts = {p: min(o for q, o, _ in still_open if q == p) for p in range(PARTITIONS)}
    admin = AdminClient(kafka_config.confluent_admin())
    kafka_wait_for(
        lambda: last_stable_offsets(admin, topic) == open_starts,
        timeout=TIMEOUT,
        describe=lambda: (
            f"last stable offsets {last_stable_offsets(admin, topic)}, "
            f"the open transaction starts at {open_starts}"
        ),
    )

    committed = read(spark, spark_kafka_source, spark_stream, topic, "read_committed")
    assert committed == sorted(first + second)

    everything = read(spark, spark_kafka_source, spark_stream, topic, "read_uncommitted")
    assert everything == sorted(first + aborted + second + still_open)
