"""Streaming queries with the trigger a job sets, tested the way jobs run: feed, wait,
assert, feed more, wait again, stop. `spark_stream.wait` drains a processingTime query,
which keeps running, and awaits the end of an AvailableNow or once query, which a new
run from the same checkpoint then continues.

The cases are the ones whose code paths differ: processingTime (the drain) through both
formats; AvailableNow (the Python source caps its reads at the offsets of the query's
start) and once through the Python source. AvailableNow through Spark's connector runs
in most of the other Spark tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.sql import functions as F

# The cases below choose the format themselves (see tests/spark/conftest.py).
pytestmark = pytest.mark.spark_kafka("auto")

PROCESSING_TIME = {"processingTime": "200 milliseconds"}
CASES = [
    pytest.param(PROCESSING_TIME, "kafka", id="processingTime-kafka"),
    pytest.param(PROCESSING_TIME, "minibroker", id="processingTime-minibroker"),
    pytest.param({"availableNow": True}, "minibroker", id="availableNow-minibroker"),
    pytest.param({"once": True}, "minibroker", id="once-minibroker"),
]


@pytest.mark.parametrize(("trigger", "spark_kafka_format"), CASES, indirect=["spark_kafka_format"])
def test_feed_wait_assert_feed_wait_stop(
    trigger: dict[str, Any],
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_consume: Callable[..., Any],
) -> None:
    source = kafka_topic(partitions=2)
    sink = kafka_topic()
    shouted = spark_kafka_source.read_stream(
        spark, subscribe=source, startingOffsets="earliest"
    ).select("key", F.upper(F.col("value").cast("string")).alias("value"))
    writer = spark_kafka_source.write_stream(shouted, sink).trigger(**trigger)
    checkpoint = spark_stream.checkpoint()
    query = None
    fed: list[str] = []
    for words in (["ada", "bob", "cy"], ["dee", "eve"]):
        kafka_produce(source, [(word, word) for word in words])
        fed += words
        if query is None or not query.isActive:
            # The first start; for AvailableNow and once, a new run from the checkpoint.
            query = spark_stream.start(writer, checkpoint=checkpoint)
        spark_stream.wait(query, timeout=60)
        # Everything fed so far, once: the wait returned after the sink had written it.
        assert sorted(r.value for r in kafka_consume(sink, None)) == sorted(
            word.upper() for word in fed
        )
    assert query is not None
    assert query.isActive == (trigger is PROCESSING_TIME), "only processingTime keeps running"
    spark_stream.stop(query)
    assert not query.isActive
