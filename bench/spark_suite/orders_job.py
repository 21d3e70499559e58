"""A streaming job as a downstream project writes one, for `python -m bench.spark --suite`:
JSON orders from one topic, parsed and filtered, per-customer totals per minute with a
watermark into a second topic, malformed records into a dead-letter topic.

Input: {"order_id": "o1", "customer": "ada", "amount": 12.5, "ts": "2024-05-01T12:00:05Z"}.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

ORDER = StructType(
    [
        StructField("order_id", StringType()),
        StructField("customer", StringType()),
        StructField("amount", DoubleType()),
        StructField("ts", StringType()),
    ]
)
WINDOW = "1 minute"
LATENESS = "30 seconds"


def read_orders(
    spark: SparkSession, kafka_format: str, options: Mapping[str, str], topic: str, **more: str
) -> DataFrame:
    raw = (
        spark.readStream.format(kafka_format)
        .options(**options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**more)
        .load()
    )
    return raw.select(
        F.col("key"),
        F.col("value").cast("string").alias("raw"),
        F.from_json(F.col("value").cast("string"), ORDER).alias("order"),
    )


def valid_orders(parsed: DataFrame) -> DataFrame:
    orders = parsed.select(
        F.col("order.customer").alias("customer"),
        F.col("order.amount").alias("amount"),
        F.to_timestamp(F.col("order.ts")).alias("event_time"),
    )
    return orders.where(
        F.col("customer").isNotNull() & F.col("event_time").isNotNull() & (F.col("amount") > 0)
    )


def dead_letters(parsed: DataFrame) -> DataFrame:
    bad = F.col("order").isNull() | F.col("order.customer").isNull()
    return parsed.where(bad).select(F.col("key"), F.col("raw").alias("value"))


def totals(orders: DataFrame) -> DataFrame:
    summed = (
        orders.withWatermark("event_time", LATENESS)
        .groupBy(F.window("event_time", WINDOW), F.col("customer"))
        .agg(F.sum("amount").alias("total"), F.count("*").alias("orders"))
    )
    return summed.select(
        F.col("customer").alias("key"),
        F.to_json(
            F.struct(
                F.col("customer"),
                F.date_format("window.start", "HH:mm").alias("minute"),
                F.col("total"),
                F.col("orders"),
            )
        ).alias("value"),
    )


def start_totals(
    spark: SparkSession,
    kafka_format: str,
    options: Mapping[str, str],
    source: str,
    sink: str,
    checkpoint: str,
) -> Any:
    parsed = read_orders(spark, kafka_format, options, source)
    return (
        totals(valid_orders(parsed))
        .writeStream.format(kafka_format)
        .options(**options)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )


def start_dead_letters(
    spark: SparkSession,
    kafka_format: str,
    options: Mapping[str, str],
    source: str,
    sink: str,
    checkpoint: str,
) -> Any:
    parsed = read_orders(spark, kafka_format, options, source)
    return (
        dead_letters(parsed)
        .writeStream.format(kafka_format)
        .options(**options)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
