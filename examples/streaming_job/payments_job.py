"""Payments with their fee, written exactly once.

Input records: {"payment": "p-1", "account": "a-7", "cents": 1000}. Output records:
key = payment id, value = {"payment", "account", "cents", "fee_cents"}.

Spark's Kafka sink is at-least-once: when a micro-batch fails after some of its records
were written, the restart from the checkpoint runs the batch again and writes them again.
`TransactionalSink` makes the output exactly-once for consumers that read committed
records only (isolation.level=read_committed): each micro-batch is written in one Kafka
transaction, which also commits the batch id, and a batch id already committed is
skipped when Spark runs its batch again after a restart.
"""

from __future__ import annotations

import contextlib
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

PAYMENT = StructType(
    [
        StructField("payment", StringType()),
        StructField("account", StringType()),
        StructField("cents", LongType()),
    ]
)
FEE_PERCENT = 2
TIMEOUT = 30.0


def with_fees(payments: DataFrame) -> DataFrame:
    parsed = payments.select(F.from_json(F.col("value").cast("string"), PAYMENT).alias("p")).select(
        "p.*"
    )
    return parsed.where(F.col("payment").isNotNull()).select(
        F.col("payment").alias("key"),
        F.to_json(
            F.struct(
                "payment",
                "account",
                "cents",
                (F.col("cents") * FEE_PERCENT / 100).cast("long").alias("fee_cents"),
            )
        ).alias("value"),
    )


class TransactionalSink:
    """A foreachBatch function writing each micro-batch to `topic` in one transaction.

    The transactional id is derived from the query's name and the topic, so a restarted
    query uses the same one, and `init_transactions` fences any earlier instance still
    alive and ends its open transaction. The batch id is committed inside the same
    transaction, as the committed offset of a consumer group named like the
    transactional id (offset = batch id + 1, kept on partition 0 of `topic`; nothing
    consumes with that group). A batch whose id is already committed was written before
    a crash that kept Spark from recording it: it is skipped. Nothing is kept between
    batches, so no client outlives the query.
    """

    def __init__(self, bootstrap_servers: str, topic: str, query_name: str) -> None:
        self.topic = topic
        self.transactional_id = f"{query_name}-to-{topic}"
        self.bootstrap_servers = bootstrap_servers

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "transactional.id": self.transactional_id,
                "partitioner": "murmur2_random",  # the Java client's, so keys land alike
            }
        )
        producer.init_transactions(TIMEOUT)
        last_committed, group = self._last_committed_batch()
        if batch_id <= last_committed:
            return  # written and committed by a run that crashed before Spark noted it
        producer.begin_transaction()
        try:
            for row in batch.select("key", "value").toLocalIterator():
                while True:
                    try:
                        producer.produce(self.topic, row["value"], row["key"])
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.send_offsets_to_transaction(
                [TopicPartition(self.topic, 0, batch_id + 1)], group, TIMEOUT
            )
            # Fails if any record failed: nothing of the batch becomes visible then.
            producer.commit_transaction(TIMEOUT)
        except BaseException:
            with contextlib.suppress(KafkaException):  # fenced or fatal: nothing to undo
                producer.abort_transaction(TIMEOUT)
            raise

    def _last_committed_batch(self) -> tuple[int, Any]:
        """The last batch id committed (-1 for none), and the group's metadata to commit
        the next one with."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": self.transactional_id,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        try:
            [position] = consumer.committed([TopicPartition(self.topic, 0)], TIMEOUT)
            return max(position.offset, 0) - 1, consumer.consumer_group_metadata()
        finally:
            consumer.close()


def start(
    spark: SparkSession,
    kafka_format: str,
    kafka_options: dict[str, str],
    source: str,
    sink: str,
    checkpoint: str,
    *,
    exactly_once: bool = True,
    sink_class: type[TransactionalSink] = TransactionalSink,
    **trigger: Any,
) -> Any:
    """Start the job; with exactly_once=False it writes through Spark's Kafka sink."""
    payments = (
        spark.readStream.format(kafka_format)
        .options(**kafka_options)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    name = f"payments-{sink}"
    writer = with_fees(payments).writeStream.queryName(name)
    if exactly_once:
        bootstrap = kafka_options["kafka.bootstrap.servers"]
        writer = writer.foreachBatch(sink_class(bootstrap, sink, name))
    else:
        writer = writer.format(kafka_format).options(**kafka_options).option("topic", sink)
    writer = writer.option("checkpointLocation", checkpoint)
    return (writer.trigger(**trigger) if trigger else writer).start()
