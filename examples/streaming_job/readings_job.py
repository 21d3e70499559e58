"""Sensor readings per 10-second window, in event time: the time of a reading is its
Kafka record timestamp (set by the device's producer), not a field of the value.

Input records: key = sensor id, value = the reading as text ("21.5"), timestamp = when
it was measured. Output records: key = sensor id, value = {"sensor", "window_start",
"readings", "max"}, one per sensor and window once the watermark (the newest timestamp
seen minus LATENESS) has passed the window's end; later readings of a closed window are
dropped.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

WINDOW = "10 seconds"
LATENESS = "5 seconds"


def per_window(readings: DataFrame) -> DataFrame:
    measured = readings.select(
        F.col("key").cast("string").alias("sensor"),
        F.col("value").cast("string").cast("double").alias("reading"),
        F.col("timestamp").alias("measured_at"),
    ).where(F.col("reading").isNotNull())
    windows = (
        measured.withWatermark("measured_at", LATENESS)
        .groupBy(F.window("measured_at", WINDOW), F.col("sensor"))
        .agg(F.count("*").alias("readings"), F.max("reading").alias("max"))
    )
    return windows.select(
        F.col("sensor").alias("key"),
        F.to_json(
            F.struct(
                F.col("sensor"),
                F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
                F.col("readings"),
                F.col("max"),
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
    readings = (
        spark.readStream.format(kafka_format)
        .options(**kafka_options)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    writer = (
        per_window(readings)
        .writeStream.format(kafka_format)
        .options(**kafka_options)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
    )
    return (writer.trigger(**trigger) if trigger else writer).start()
