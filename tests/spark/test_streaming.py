"""PySpark Structured Streaming against the broker, through Spark's own Kafka connector
and through the "minibroker" data source (tests/spark/conftest.py runs each both ways):
records produced by confluent-kafka go through a query and back into Kafka exactly once
and in partition order; restarts resume from the checkpoint; bad options say why.

One SparkSession serves the whole module (the session-scoped `spark` fixture).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.sql import functions as F

from minibroker.testing.spark.options import supports_read_limits
from minibroker.testing.spark.session import StreamFailed
from minibroker.testing.spark.source import kafka_schema


def by_partition(records: list[Any]) -> dict[int, list[Any]]:
    grouped: dict[int, list[Any]] = {}
    for record in records:
        grouped.setdefault(record.partition, []).append(record)
    return grouped


def check_exactly_once_in_order(
    sent: dict[int, list[int]], received: list[Any], expected_total: int
) -> None:
    """Every sequence number once; each output partition holds its input partition's
    sequence numbers in the order they were produced."""
    seqs = [r.value["seq"] for r in received]
    assert len(seqs) == expected_total
    assert sorted(seqs) == list(range(expected_total)), "a record was lost or duplicated"
    for partition, records in by_partition(received).items():
        assert [r.value["src_partition"] for r in records] == [partition] * len(records)
        assert [r.value["seq"] for r in records] == sent[partition]
        assert [r.offset for r in records] == list(range(len(records)))


def test_confluent_kafka_records_through_a_stream_exactly_once_in_order_and_restart(
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_consume: Callable[..., Any],
) -> None:
    source = kafka_topic(partitions=4)
    sink = kafka_topic(partitions=4)
    sent: dict[int, list[int]] = {p: [] for p in range(4)}

    def produce(first: int, count: int) -> None:
        batch = [
            (f"user-{i % 97}", {"seq": i, "amount": i % 13}) for i in range(first, first + count)
        ]
        for delivered, (_, value) in zip(kafka_produce(source, batch), batch, strict=True):
            sent[delivered.partition].append(value["seq"])

    produce(0, 10_000)
    body = F.col("value").cast("string")
    transformed = spark_kafka_source.read_stream(
        spark, subscribe=source, startingOffsets="earliest"
    ).select(
        F.col("key"),
        F.to_json(
            F.struct(
                F.get_json_object(body, "$.seq").cast("long").alias("seq"),
                (F.get_json_object(body, "$.amount").cast("int") * 2).alias("doubled"),
                F.col("partition").alias("src_partition"),
                F.col("offset").alias("src_offset"),
            )
        ).alias("value"),
    )
    checkpoint = spark_stream.checkpoint("pipeline")
    query = spark_stream.to_topic(transformed, sink, checkpoint=checkpoint)
    assert spark_stream.processed_rows(query) == 10_000

    received = kafka_consume(sink, 10_000, timeout=60, decode_as="json")
    check_exactly_once_in_order(sent, received, 10_000)
    assert all(r.value["doubled"] == (r.value["seq"] % 13) * 2 for r in received)
    # The sink partitions keys with the Java client's murmur2, as the producer did.
    assert all(r.key == f"user-{r.value['seq'] % 97}" for r in received)

    produce(10_000, 1_000)
    again = spark_stream.to_topic(transformed, sink, checkpoint=checkpoint)
    assert spark_stream.processed_rows(again) == 1_000, "the restart re-read old records"
    check_exactly_once_in_order(sent, kafka_consume(sink, None, decode_as="json"), 11_000)


def test_batch_read_of_an_offset_slice_and_batch_write(
    spark: Any,
    spark_kafka_source: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_consume: Callable[..., Any],
) -> None:
    source = kafka_topic(partitions=2)
    sink = kafka_topic(partitions=2)
    kafka_produce(
        source, [(f"a{i}", f"A{i}") for i in range(10)], partition=0, headers={"trace": "t1"}
    )
    kafka_produce(source, [(f"b{i}", f"B{i}") for i in range(6)], partition=1)
    df = spark_kafka_source.read(
        spark,
        subscribe=source,
        startingOffsets=json.dumps({source: {"0": 2, "1": -2}}),
        endingOffsets=json.dumps({source: {"0": 5, "1": -1}}),
        includeHeaders=True,
    )
    assert df.schema == kafka_schema(include_headers=True)
    rows = df.orderBy("partition", "offset").collect()
    assert [(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows] == [
        (0, 2, b"a2", b"A2"),
        (0, 3, b"a3", b"A3"),
        (0, 4, b"a4", b"A4"),
        *[(1, i, f"b{i}".encode(), f"B{i}".encode()) for i in range(6)],
    ]
    assert rows[0].topic == source and rows[0].timestampType == 0
    assert rows[0].timestamp.year >= 2024
    assert [(h.key, bytes(h.value)) for h in rows[0].headers] == [("trace", b"t1")]
    assert rows[-1].headers is None  # no headers: null, as Spark's connector gives

    spark_kafka_source.write(
        df.select(
            "key", F.upper(F.col("value").cast("string")).alias("value"), "headers", "partition"
        ),
        sink,
    )
    written = kafka_consume(sink, 9)
    assert sorted((r.partition, r.key, r.value) for r in written) == sorted(
        [(0, f"a{i}", f"A{i}") for i in (2, 3, 4)] + [(1, f"b{i}", f"B{i}") for i in range(6)]
    )
    assert [r.headers for r in written if r.key == "a2"] == [[("trace", b"t1")]]


@pytest.mark.skipif(not supports_read_limits(), reason="read limits need Spark 4.2+")
def test_max_offsets_per_trigger_splits_an_available_now_run(
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
) -> None:
    source = kafka_topic(partitions=2)
    kafka_produce(source, [(f"k{i}", str(i)) for i in range(1_000)])
    df = spark_kafka_source.read_stream(
        spark, subscribe=source, startingOffsets="earliest", maxOffsetsPerTrigger=300
    )
    rows = spark_stream.collect(df.select(F.col("value").cast("string").alias("v")))
    assert sorted(int(r.v) for r in rows) == list(range(1_000))
    sizes = [p["numInputRows"] for p in spark_stream.last_query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 1_000 and max(sizes) <= 300 and len(sizes) >= 4, sizes


def test_subscribe_pattern_streams_from_matching_topics(
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
) -> None:
    kafka_topic("clicks-eu")
    kafka_topic("clicks-us", partitions=2)
    kafka_topic("views")
    for topic in ("clicks-eu", "clicks-us", "views"):
        kafka_produce(topic, [topic] * 3)
    df = spark_kafka_source.read_stream(
        spark, subscribePattern="clicks-.*", startingOffsets="earliest"
    )
    rows = spark_stream.collect(df.groupBy("topic").count(), output_mode="complete")
    assert sorted((r["topic"], r["count"]) for r in rows) == [("clicks-eu", 3), ("clicks-us", 3)]


BAD_STREAMS = {
    "unknown topic": (
        {"subscribe": "no-such-topic"},
        "KafkaSourceError: topic(s) 'no-such-topic' named by subscribe=no-such-topic do not "
        "exist at",
    ),
    "malformed startingOffsets": (
        {"subscribe": "TOPIC", "startingOffsets": '{"TOPIC":{"0":1'},
        "KafkaOptionError: option 'startingOffsets' is neither 'earliest', 'latest' nor valid JSON",
    ),
    "unreachable bootstrap": (
        {
            "subscribe": "TOPIC",
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "kafkaConsumer.pollTimeoutMs": "1500",
        },
        "KafkaSourceError: cannot reach Kafka at 127.0.0.1:1 (kafka.bootstrap.servers) within 1.5s",
    ),
}


@pytest.mark.spark_kafka("minibroker")  # the Python source's own messages
@pytest.mark.parametrize("case", sorted(BAD_STREAMS))
def test_bad_stream_options_fail_with_a_clear_first_line(
    case: str,
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_topic: Callable[..., str],
) -> None:
    topic = kafka_topic()
    options, expected = BAD_STREAMS[case]
    options = {k: v.replace("TOPIC", topic) for k, v in options.items()}
    df = spark_kafka_source.read_stream(spark, options)
    with pytest.raises(StreamFailed) as failure:
        spark_stream.collect(df)
    first_line = str(failure.value).splitlines()[0]
    assert first_line.startswith("the streaming query failed: " + expected.split(" at")[0]), (
        first_line
    )
    assert expected in first_line


@pytest.mark.spark_kafka("minibroker")
def test_bad_batch_options_carry_the_message_in_spark_errors(
    spark: Any, spark_kafka_source: Any, kafka_topic: Callable[..., str]
) -> None:
    with pytest.raises(Exception, match=r"topic\(s\) 'absent' named by subscribe=absent"):
        spark_kafka_source.read(spark, subscribe="absent").collect()
    with pytest.raises(Exception, match="exactly one of the options 'subscribe'"):
        spark_kafka_source.read(spark).collect()
    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="the sink needs a 'value' column"):
        spark_kafka_source.write(no_value, kafka_topic())


def test_arrow_batches_match_what_spark_expects() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from minibroker.testing.spark.kafka_io import kafka_arrow_schema

    for headers in (False, True):
        assert kafka_arrow_schema(headers).equals(
            to_arrow_schema(kafka_schema(headers), timezone="UTC")
        )
