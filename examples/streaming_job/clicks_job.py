"""Clicks per page per minute, from a topic of JSON click events to a topic of counts.

Input records: {"user": "ada", "page": "/home", "ts": "2024-05-01T12:00:05Z"}.
Output records: key = page, value = {"page", "window_start", "window_end", "clicks"},
one per page and minute once the watermark has passed the minute's end; events more
than `LATENESS` behind the newest event seen are dropped.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

CLICK = StructType(
    [
        StructField("user", StringType()),
        StructField("page", StringType()),
        StructField("ts", StringType()),
    ]
)
WINDOW = "1 minute"
LATENESS = "30 seconds"


def read_clicks(
    spark: SparkSession, kafka_format: str, kafka_options: dict[str, str], topic: str
) -> DataFrame:
    """The click events of `topic`; `kafka_format` is "kafka" in production and the
    test fixtures' format in tests, with the same options."""
    raw = (
        spark.readStream.format(kafka_format)
        .options(**kafka_options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    parsed = raw.select(F.from_json(F.col("value").cast("string"), CLICK).alias("click"))
    return parsed.select(
        F.col("click.page").alias("page"),
        F.col("click.user").alias("user"),
        F.to_timestamp(F.col("click.ts")).alias("event_time"),
    ).where(F.col("page").isNotNull() & F.col("event_time").isNotNull())


def clicks_per_minute(clicks: DataFrame) -> DataFrame:
    counted = (
        clicks.withWatermark("event_time", LATENESS)
        .groupBy(F.window("event_time", WINDOW), F.col("page"))
        .agg(F.count("*").alias("clicks"))
    )
    return counted.select(
        F.col("page").alias("key"),
        F.to_json(
            F.struct(
                F.col("page"),
                F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
                F.col("clicks"),
            )
        ).alias("value"),
    )


def start(
    spark: SparkSession,
    kafka_format: str,
    kafka_options: dict[str, str],
    source: str,
    sink: str,
    checkpoint: str,
    **trigger: Any,
) -> Any:
    """Start the job; `trigger` is passed to DataStreamWriter.trigger (default: continuous
    micro-batches)."""
    writer = (
        clicks_per_minute(read_clicks(spark, kafka_format, kafka_options, source))
        .writeStream.format(kafka_format)
        .options(**kafka_options)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
    )
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
