"""What a PySpark job does with Kafka, through Spark's own connector (format "kafka") and
through the Python "minibroker" source alike (tests/spark/conftest.py runs each test
both ways): reading from timestamps, splitting partitions, a running query that picks up
a new topic, data loss after a topic is recreated. Results are checked with an
independent client (confluent-kafka) where records come back out of Kafka.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.sql import functions as F

from minibroker.testing.spark.session import StreamFailed


def produce_at(helper: Any, topic: str, stamped: list[tuple[int, int, str]]) -> None:
    """(partition, CreateTime ms, value) records, acknowledged before returning."""
    from confluent_kafka import Producer

    producer = Producer(helper.configs.confluent_producer())
    for partition, stamp, value in stamped:
        producer.produce(topic, value=value.encode(), partition=partition, timestamp=stamp)
    assert producer.flush(30) == 0


def values(rows: list[Any]) -> list[str]:
    return sorted(bytes(r.value).decode() for r in rows)


def test_reading_from_a_timestamp(
    spark: Any,
    spark_kafka_source: Any,
    kafka_topic: Callable[..., str],
    kafka_helper: Any,
) -> None:
    topic = kafka_topic(partitions=2)
    produce_at(
        kafka_helper,
        topic,
        [(0, 1_000, "a0"), (0, 2_000, "a1"), (0, 3_000, "a2"), (1, 1_500, "b0"), (1, 4_000, "b1")],
    )
    everywhere = spark_kafka_source.read(spark, subscribe=topic, startingTimestamp="2000")
    assert values(everywhere.collect()) == ["a1", "a2", "b1"]
    per_partition = spark_kafka_source.read(
        spark,
        subscribe=topic,
        startingOffsetsByTimestamp=json.dumps({topic: {"0": 3_000, "1": 1_000}}),
    )
    assert values(per_partition.collect()) == ["a2", "b0", "b1"]


def test_min_partitions_splits_a_partition_without_losing_a_record(
    spark: Any,
    spark_kafka_source: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
) -> None:
    topic = kafka_topic(partitions=1)
    kafka_produce(topic, [str(i) for i in range(400)])
    df = spark_kafka_source.read(spark, subscribe=topic, minPartitions=4)
    assert df.rdd.getNumPartitions() >= 4
    rows = df.select("offset", F.col("value").cast("string").alias("v")).collect()
    assert sorted((r.offset, r.v) for r in rows) == [(i, str(i)) for i in range(400)]


def test_a_running_query_reads_what_arrives_and_a_new_topic_of_its_pattern(
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_wait_for: Callable[..., Any],
) -> None:
    prefix = f"evt-{uuid.uuid4().hex[:8]}"
    first = kafka_topic(f"{prefix}-a")
    kafka_produce(first, ["a0", "a1"])
    df = spark_kafka_source.read_stream(
        spark,
        subscribePattern=f"{prefix}-.*",
        startingOffsets="earliest",
        **{"kafka.metadata.max.age.ms": "500"},
    )
    sink = f"running_{uuid.uuid4().hex[:8]}"
    query = (
        df.select("topic", F.col("value").cast("string").alias("v"))
        .writeStream.format("memory")
        .queryName(sink)
        .option("checkpointLocation", spark_stream.checkpoint())
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        kafka_produce(first, ["a2"])
        query.processAllAvailable()
        seen = {(r.topic, r.v) for r in spark.table(sink).collect()}
        assert seen == {(first, "a0"), (first, "a1"), (first, "a2")}

        second = kafka_topic(f"{prefix}-b", partitions=2)
        kafka_produce(second, ["b0", "b1"])

        def new_topic_read() -> set[tuple[str, str]]:
            query.processAllAvailable()
            return {(r.topic, r.v) for r in spark.table(sink).collect() if r.topic == second}

        kafka_wait_for(
            lambda: new_topic_read() == {(second, "b0"), (second, "b1")},
            timeout=60,
            describe=new_topic_read,
        )
        assert query.exception() is None
    finally:
        query.stop()
        spark.catalog.dropTempView(sink)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_recreated_topic_is_data_loss_unless_told_otherwise(
    fail_on_data_loss: bool,
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_broker: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_consume: Callable[..., Any],
) -> None:
    """A query's checkpoint says offset 5; the topic is deleted and recreated with 2
    records. With failOnDataLoss the restart fails; without, those two are skipped as
    lost and the query reads what arrives after them."""
    topic, sink = kafka_topic(), kafka_topic()
    kafka_produce(topic, [f"old{i}" for i in range(5)])
    df = spark_kafka_source.read_stream(
        spark,
        subscribe=topic,
        startingOffsets="earliest",
        failOnDataLoss=fail_on_data_loss,
    ).select(F.col("value"))
    checkpoint = spark_stream.checkpoint("recreated")
    spark_stream.to_topic(df, sink, checkpoint=checkpoint)
    kafka_broker.delete_topic(topic)
    kafka_topic(topic)
    kafka_produce(topic, ["new0", "new1"])
    if fail_on_data_loss:
        with pytest.raises(StreamFailed):
            spark_stream.to_topic(df, sink, checkpoint=checkpoint)
        expected = [f"old{i}" for i in range(5)]
    else:
        # What went below the checkpoint's offsets is skipped as lost, as Spark does;
        # the query goes on from where the recreated topic ends.
        spark_stream.to_topic(df, sink, checkpoint=checkpoint)
        kafka_produce(topic, ["new2"])
        spark_stream.to_topic(df, sink, checkpoint=checkpoint)
        expected = [f"old{i}" for i in range(5)] + ["new2"]
    assert sorted(r.value for r in kafka_consume(sink, None)) == sorted(expected)


def enrich(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: str) -> Any:
    """A user's job as it runs in production: format("kafka") in its own code."""
    df = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    out = df.select("key", F.upper(F.col("value").cast("string")).alias("value"))
    return (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


@pytest.mark.spark_kafka("kafka")
def test_a_job_that_calls_format_kafka_itself_runs_unchanged(
    spark: Any,
    spark_kafka_source: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_consume: Callable[..., Any],
    tmp_path: Any,
) -> None:
    source, sink = kafka_topic(partitions=2), kafka_topic(partitions=2)
    kafka_produce(source, [(f"k{i}", f"hello {i}") for i in range(50)])
    bootstrap = spark_kafka_source.bootstrap_servers
    query = enrich(spark, bootstrap, source, sink, str(tmp_path / "checkpoint"))
    query.awaitTermination(120)
    assert query.exception() is None
    received = kafka_consume(sink, 50)
    assert sorted((r.key, r.value) for r in received) == sorted(
        (f"k{i}", f"HELLO {i}") for i in range(50)
    )


@pytest.mark.spark_kafka("kafka")
@pytest.mark.parametrize("option", ["groupIdPrefix", "kafka.group.id"])
def test_the_connector_consumers_use_the_group_id_they_are_given(
    option: str,
    spark: Any,
    spark_kafka_source: Any,
    kafka_broker: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
) -> None:
    """The Java consumers Spark's connector starts are named after their group id
    (client.id "consumer-<group>-<n>"), which is how a broker's request log shows it."""
    topic = kafka_topic()
    kafka_produce(topic, ["x", "y"])
    group = f"chosen-{uuid.uuid4().hex[:8]}"
    rows = spark_kafka_source.read(spark, {option: group}, subscribe=topic).collect()
    assert values(rows) == ["x", "y"]
    client_ids = {r.client_id for r in kafka_broker.recent_requests() if r.api == "Fetch"}
    assert any(c and c.startswith(f"consumer-{group}") for c in client_ids), client_ids
