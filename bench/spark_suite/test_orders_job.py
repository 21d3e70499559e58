"""Eleven tests of orders_job, 17 AvailableNow queries, through the public fixtures only."""

from __future__ import annotations

import json
from typing import Any

import orders_job
from pyspark.sql import functions as F


def order(oid: str, customer: str, amount: float, ts: str) -> tuple[str, str]:
    return customer, json.dumps(
        {"order_id": oid, "customer": customer, "amount": amount, "ts": f"2024-05-01T{ts}Z"}
    )


FIRST_MINUTE = [
    order("o1", "ada", 10.0, "12:00:05"),
    order("o2", "bob", 5.0, "12:00:20"),
    order("o3", "ada", 2.5, "12:00:50"),
    order("o4", "ada", 1.0, "12:02:00"),  # moves the watermark past 12:01
]


def run_totals(spark: Any, source: Any, stream: Any, src: str, dst: str, cp: str) -> None:
    stream.wait(orders_job.start_totals(spark, source.format, source.options, src, dst, cp))


def run_dead_letters(spark: Any, source: Any, stream: Any, src: str, dst: str) -> None:
    query = orders_job.start_dead_letters(
        spark, source.format, source.options, src, dst, stream.checkpoint()
    )
    stream.wait(query)


def totals_of(records: list[Any]) -> dict[tuple[str, str], float]:
    return {
        (v["customer"], v["minute"]): v["total"] for v in (json.loads(r.value) for r in records)
    }


def test_happy_path(spark, spark_kafka_source, spark_stream, kafka_topic, kafka_produce,
                    kafka_consume) -> None:  # fmt: skip
    src, dst = kafka_topic(partitions=3), kafka_topic()
    kafka_produce(src, FIRST_MINUTE)
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, spark_stream.checkpoint())
    assert totals_of(kafka_consume(dst, 2)) == {("ada", "12:00"): 12.5, ("bob", "12:00"): 5.0}


def test_malformed_rows_go_to_dead_letters(spark, spark_kafka_source, spark_stream, kafka_topic,
                                           kafka_produce, kafka_consume) -> None:  # fmt: skip
    src, dead = kafka_topic(partitions=2), kafka_topic()
    kafka_produce(src, [("x", "not json"), order("o1", "ada", 1.0, "12:00:00"), ("y", "{}")])
    run_dead_letters(spark, spark_kafka_source, spark_stream, src, dead)
    assert sorted(r.value for r in kafka_consume(dead, 2)) == ["not json", "{}"]


def test_malformed_rows_do_not_stop_totals(spark, spark_kafka_source, spark_stream, kafka_topic,
                                           kafka_produce, kafka_consume) -> None:  # fmt: skip
    src, dst, dead = kafka_topic(), kafka_topic(), kafka_topic()
    kafka_produce(src, [("x", "garbage"), *FIRST_MINUTE])
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, spark_stream.checkpoint())
    run_dead_letters(spark, spark_kafka_source, spark_stream, src, dead)
    assert totals_of(kafka_consume(dst, 2))[("ada", "12:00")] == 12.5
    assert [r.value for r in kafka_consume(dead, 1)] == ["garbage"]


def test_non_positive_amounts_are_filtered(spark, spark_kafka_source, spark_stream, kafka_topic,
                                           kafka_produce, kafka_consume) -> None:  # fmt: skip
    src, dst = kafka_topic(), kafka_topic()
    kafka_produce(
        src,
        [order("o1", "ada", -3.0, "12:00:01"), order("o2", "ada", 0.0, "12:00:02"),
         order("o3", "ada", 4.0, "12:00:03"), order("o4", "cy", 1.0, "12:05:00")],
    )  # fmt: skip
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, spark_stream.checkpoint())
    assert totals_of(kafka_consume(dst, 1)) == {("ada", "12:00"): 4.0}


def test_late_data_is_dropped(spark, spark_kafka_source, spark_stream, kafka_topic,
                              kafka_produce, kafka_consume) -> None:  # fmt: skip
    src, dst = kafka_topic(), kafka_topic()
    checkpoint = spark_stream.checkpoint("late")
    kafka_produce(src, FIRST_MINUTE)
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, checkpoint)
    kafka_produce(src, [order("o9", "ada", 100.0, "12:00:30"), order("o10", "bob", 1, "12:04:00")])
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, checkpoint)
    totals = totals_of(kafka_consume(dst, 3))
    assert totals[("ada", "12:00")] == 12.5  # the late 100.0 is not counted
    assert totals[("ada", "12:02")] == 1.0


def test_restart_from_checkpoint_reads_only_new_records(spark, spark_kafka_source, spark_stream,
                                                        kafka_topic, kafka_produce,
                                                        kafka_consume) -> None:  # fmt: skip
    src, dst = kafka_topic(partitions=2), kafka_topic()
    checkpoint = spark_stream.checkpoint("restart")
    kafka_produce(src, FIRST_MINUTE)
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, checkpoint)
    kafka_produce(src, [order("o5", "bob", 7.0, "12:03:00"), order("o6", "cy", 1, "12:05:00")])
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, checkpoint)
    kafka_produce(src, [order("o7", "cy", 2.0, "12:07:00")])
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, checkpoint)
    totals = totals_of(kafka_consume(dst, 5))
    assert totals == {
        ("ada", "12:00"): 12.5, ("bob", "12:00"): 5.0, ("ada", "12:02"): 1.0,
        ("bob", "12:03"): 7.0, ("cy", "12:05"): 1.0,
    }  # fmt: skip


def test_output_is_keyed_by_customer(spark, spark_kafka_source, spark_stream, kafka_topic,
                                     kafka_produce, kafka_consume) -> None:  # fmt: skip
    src, dst = kafka_topic(), kafka_topic(partitions=4)
    kafka_produce(src, FIRST_MINUTE)
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, spark_stream.checkpoint())
    records = kafka_consume(dst, 2)
    assert {r.key for r in records} == {"ada", "bob"}
    by_key: dict[str, set[int]] = {}
    for r in records:
        by_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_key.values())


def test_headers_are_read(spark, spark_kafka_source, spark_stream, kafka_topic,
                          kafka_produce) -> None:  # fmt: skip
    src = kafka_topic()
    kafka_produce(src, [order("o1", "ada", 1.0, "12:00:00")], headers={"source": "web"})
    df = spark_kafka_source.read_stream(
        spark, subscribe=src, startingOffsets="earliest", includeHeaders=True
    )
    rows = spark_stream.collect(df.select(F.col("headers")))
    assert [(h.key, bytes(h.value)) for h in rows[0].headers] == [("source", b"web")]


def test_starting_offsets(spark, spark_kafka_source, spark_stream, kafka_topic,
                          kafka_produce) -> None:  # fmt: skip
    src = kafka_topic()
    kafka_produce(src, [("k", f"v{i}") for i in range(5)])
    df = spark_kafka_source.read_stream(
        spark, subscribe=src, startingOffsets=json.dumps({src: {"0": 3}})
    )
    rows = spark_stream.collect(df.select(F.col("value").cast("string").alias("v")))
    assert sorted(r.v for r in rows) == ["v3", "v4"]


def test_job_calling_format_kafka_itself(spark, spark_kafka_source, spark_stream, kafka_topic,
                                         kafka_produce, kafka_consume) -> None:  # fmt: skip
    src, dst, dead = kafka_topic(partitions=2), kafka_topic(), kafka_topic()
    kafka_produce(src, [("x", "oops"), *FIRST_MINUTE])
    options = {"kafka.bootstrap.servers": spark_kafka_source.bootstrap_servers}
    query = orders_job.start_totals(
        spark, spark_kafka_source.format, options, src, dst, spark_stream.checkpoint()
    )
    spark_stream.wait(query)
    query = orders_job.start_dead_letters(
        spark, spark_kafka_source.format, options, src, dead, spark_stream.checkpoint()
    )
    spark_stream.wait(query)
    assert len(kafka_consume(dst, 2)) == 2
    assert [r.value for r in kafka_consume(dead, 1)] == ["oops"]


def test_whole_pipeline(spark, spark_kafka_source, spark_stream, kafka_topic, kafka_produce,
                        kafka_consume) -> None:  # fmt: skip
    src, dst, dead = kafka_topic(partitions=3), kafka_topic(), kafka_topic()
    kafka_produce(src, [*FIRST_MINUTE, ("z", "[1, 2]")])
    run_totals(spark, spark_kafka_source, spark_stream, src, dst, spark_stream.checkpoint())
    run_dead_letters(spark, spark_kafka_source, spark_stream, src, dead)
    assert totals_of(kafka_consume(dst, 2)) == {("ada", "12:00"): 12.5, ("bob", "12:00"): 5.0}
    assert [r.value for r in kafka_consume(dead, 1)] == ["[1, 2]"]
