"""Spark's Avro functions beside the Kafka source and sink: a record written with `to_avro`
lands on the broker as Avro's binary encoding and reads back with `from_avro`. Needs
spark-avro on the classpath (`python -m minibroker jars avro`); without it the test skips,
unless the run pinned the JVM path, where it fails."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import pytest

from minibroker.testing.plugin import kafka_backend_of, spark_kafka_pinned
from minibroker.testing.spark.session import jvm_avro_available

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "item", "type": "string"},
            {"name": "price", "type": "double"},
        ],
    }
)


@pytest.mark.spark_kafka("auto")
def test_a_record_round_trips_through_to_avro_and_from_avro(
    spark: Any,
    spark_kafka_source: Any,
    kafka_topic: Callable[..., str],
    kafka_consume: Callable[..., Any],
    request: pytest.FixtureRequest,
) -> None:
    if not jvm_avro_available(spark):
        missing = "spark-avro is not on the classpath (`python -m minibroker jars avro`)"
        if spark_kafka_pinned(request.config) or kafka_backend_of(request.config) == "kafka-jvm":
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro, to_avro

    topic = kafka_topic()
    orders = spark.createDataFrame([(7, "book", 12.5)], "id long, item string, price double")
    spark_kafka_source.write(
        orders.select(
            F.col("id").cast("string").alias("key"),
            to_avro(F.struct("id", "item", "price"), ORDER).alias("value"),
        ),
        topic,
    )

    [record] = kafka_consume(topic, 1, decode_as="bytes")
    # Avro's binary encoding: zig-zag varint long, length-prefixed string, little-endian double.
    assert record.value == b"\x0e" + b"\x08book" + struct.pack("<d", 12.5)

    read = spark_kafka_source.read(spark, subscribe=topic, startingOffsets="earliest")
    rows = read.select(from_avro("value", ORDER).alias("order")).select("order.*").collect()
    assert [row.asDict() for row in rows] == [{"id": 7, "item": "book", "price": 12.5}]
