"""Confluent-framed Avro through Structured Streaming with the broker's Schema Registry:
records written by confluent-kafka's AvroSerializer are read by a query with
`from_confluent_avro` (Spark's own `from_avro` behind the 5-byte header), transformed, and
written with `to_confluent_avro` as records AvroDeserializer reads back as dicts. Needs
spark-avro on the classpath (`python -m minibroker jars avro`); without it the tests skip,
unless the run pinned the JVM path, where they fail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

from minibroker.testing.plugin import kafka_backend_of, spark_kafka_pinned
from minibroker.testing.spark import from_confluent_avro, to_confluent_avro
from minibroker.testing.spark.session import jvm_avro_available

ORDER: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "cents", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
INVOICE = {
    "type": "record",
    "name": "Invoice",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "euros", "type": "double"},
        {"name": "gift", "type": "boolean"},
    ],
}
ORDERS: list[dict[str, Any]] = [
    {"id": i, "item": f"item-{i % 3}", "cents": 250 * i, "note": "gift" if i % 4 == 0 else None}
    for i in range(1, 41)
]


@pytest.fixture
def spark_avro(spark: Any, request: pytest.FixtureRequest) -> None:
    if not jvm_avro_available(spark):
        missing = "spark-avro is not on the classpath (`python -m minibroker jars avro`)"
        if spark_kafka_pinned(request.config) or kafka_backend_of(request.config) == "kafka-jvm":
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)


@pytest.mark.spark_kafka("auto")
def test_avro_serializer_records_through_a_stream_and_back_to_avro_deserializer(
    spark: Any,
    spark_avro: None,
    spark_kafka_source: Any,
    spark_stream: Any,
    schema_registry: str,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_consume: Callable[..., Any],
) -> None:
    orders, invoices = kafka_topic(partitions=2), kafka_topic(partitions=2)
    kafka_produce(
        orders, [(str(o["id"]), o) for o in ORDERS], value_schema=ORDER, key_schema='"string"'
    )

    order = from_confluent_avro(
        "value", subject=f"{orders}-value", registry_url=schema_registry
    ).alias("order")
    invoice = F.struct(
        F.col("order.id").alias("order_id"),
        F.upper("order.item").alias("item"),
        (F.col("order.cents") / 100).alias("euros"),
        F.col("order.note").isNotNull().alias("gift"),
    )
    transformed = (
        spark_kafka_source.read_stream(spark, subscribe=orders, startingOffsets="earliest")
        .select(F.col("key"), order)
        .where(F.col("order.cents") >= 1000)
        .select(
            F.col("key"),
            to_confluent_avro(
                invoice, subject=f"{invoices}-value", registry_url=schema_registry, schema=INVOICE
            ).alias("value"),
        )
    )
    query = spark_stream.to_topic(transformed, invoices)
    assert spark_stream.processed_rows(query) == len(ORDERS)

    expected = {
        str(o["id"]): {
            "order_id": o["id"],
            "item": o["item"].upper(),
            "euros": o["cents"] / 100,
            "gift": o["note"] is not None,
        }
        for o in ORDERS
        if o["cents"] >= 1000
    }
    read = kafka_consume(invoices, len(expected), decode_as="avro", key_decode_as="avro")
    assert {r.key: r.value for r in read} == expected


@pytest.mark.spark_kafka("auto")
def test_a_record_of_another_schema_fails_the_query_naming_the_ids(
    spark: Any,
    spark_avro: None,
    spark_kafka_source: Any,
    spark_stream: Any,
    schema_registry: str,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
) -> None:
    topic = kafka_topic()
    kafka_produce(topic, [ORDERS[0]], value_schema=ORDER)
    subject = f"{topic}-value"
    evolved = {**ORDER, "fields": [*ORDER["fields"], {"name": "x", "type": "int", "default": 0}]}
    kafka_produce(topic, [{**ORDERS[1], "x": 5}], value_schema=evolved)

    # Reading with version 1's schema: the second record carries version 2's id.
    first = from_confluent_avro("value", subject=subject, registry_url=schema_registry, version=1)
    rows = spark_kafka_source.read(spark, subscribe=topic, startingOffsets="earliest")
    with pytest.raises(Exception, match="does not carry schema id"):
        rows.select(first.alias("order")).collect()
    lenient = from_confluent_avro(
        "value",
        subject=subject,
        registry_url=schema_registry,
        version=1,
        options={"mode": "PERMISSIVE"},
    )
    decoded = [r.order for r in rows.orderBy("offset").select(lenient.alias("order")).collect()]
    assert decoded[0].asDict() == ORDERS[0] and decoded[1] is None
