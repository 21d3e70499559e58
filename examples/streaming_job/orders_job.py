"""Orders priced with tax, as a job that runs all the time: every second it reads the
orders that arrived (JSON, {"order": "o-1", "cents": 1000, "country": "DE"}) and writes
each priced order to another topic, key = order id, value =
{"order", "cents", "tax_cents", "total_cents"}. Rows that are not orders are skipped.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

ORDER = StructType(
    [
        StructField("order", StringType()),
        StructField("cents", LongType()),
        StructField("country", StringType()),
    ]
)
TAX_PERCENT = {"DE": 19, "FR": 20}
DEFAULT_TAX_PERCENT = 0
TRIGGER = "1 second"


def priced(orders: DataFrame) -> DataFrame:
    order = F.from_json(F.col("value").cast("string"), ORDER).alias("order")
    parsed = (
        orders.select(order)
        .select("order.*")
        .where(F.col("order").isNotNull() & F.col("cents").isNotNull())
    )
    rate = F.coalesce(
        F.element_at(
            F.create_map(*[F.lit(x) for kv in TAX_PERCENT.items() for x in kv]), F.col("country")
        ),
        F.lit(DEFAULT_TAX_PERCENT),
    )
    tax = (F.col("cents") * rate / 100).cast("long")
    return parsed.select(
        F.col("order").alias("key"),
        F.to_json(
            F.struct(
                F.col("order"),
                F.col("cents"),
                tax.alias("tax_cents"),
                (F.col("cents") + tax).alias("total_cents"),
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
) -> Any:
    """Start the job, which then runs until stopped, a micro-batch every TRIGGER."""
    orders = (
        spark.readStream.format(kafka_format)
        .options(**kafka_options)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    return (
        priced(orders)
        .writeStream.format(kafka_format)
        .options(**kafka_options)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=TRIGGER)
        .start()
    )
