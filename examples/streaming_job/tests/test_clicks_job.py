"""The clicks job against a real Kafka protocol broker, using the pytest plugin's fixtures:
spark, spark_kafka_source, spark_stream, kafka_topic, kafka_produce, kafka_consume."""

from __future__ import annotations

import json
from typing import Any

import clicks_job


def click(user: str, page: str, ts: str) -> tuple[str, str]:
    return user, json.dumps({"user": user, "page": page, "ts": ts})


def test_counts_clicks_per_page_per_minute_after_the_watermark(
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_topic: Any,
    kafka_produce: Any,
    kafka_consume: Any,
) -> None:
    clicks = kafka_topic(partitions=3)
    counts = kafka_topic()
    kafka_produce(
        clicks,
        [
            click("ada", "/home", "2024-05-01T12:00:05Z"),
            click("bob", "/home", "2024-05-01T12:00:40Z"),
            click("cy", "/cart", "2024-05-01T12:00:59Z"),
            click("ada", "/home", "2024-05-01T12:01:10Z"),
            ("bad", "this is not JSON"),
            # Moves the watermark past 12:02, closing the first two minutes.
            click("dee", "/home", "2024-05-01T12:03:00Z"),
        ],
    )
    checkpoint = spark_stream.checkpoint("clicks")

    def run() -> None:
        query = clicks_job.start(
            spark,
            spark_kafka_source.format,
            spark_kafka_source.options,
            clicks,
            counts,
            checkpoint,
            availableNow=True,
        )
        spark_stream.wait(query)

    run()
    first = sorted((json.loads(r.value) for r in kafka_consume(counts, 3)), key=str)
    assert first == sorted(
        [
            {
                "page": "/home",
                "window_start": "2024-05-01T12:00:00Z",
                "window_end": "2024-05-01T12:01:00Z",
                "clicks": 2,
            },
            {
                "page": "/cart",
                "window_start": "2024-05-01T12:00:00Z",
                "window_end": "2024-05-01T12:01:00Z",
                "clicks": 1,
            },
            {
                "page": "/home",
                "window_start": "2024-05-01T12:01:00Z",
                "window_end": "2024-05-01T12:02:00Z",
                "clicks": 1,
            },
        ],
        key=str,
    )

    # A restart picks up new events only; one far too late is dropped, not counted.
    kafka_produce(
        clicks,
        [
            click("eve", "/home", "2024-05-01T12:00:30Z"),  # behind the watermark
            click("fay", "/home", "2024-05-01T12:03:20Z"),
            click("gus", "/home", "2024-05-01T12:10:00Z"),
        ],
    )
    run()
    everything = [json.loads(r.value) for r in kafka_consume(counts, None)]
    assert len(everything) == 4
    assert everything[3] == {
        "page": "/home",
        "window_start": "2024-05-01T12:03:00Z",
        "window_end": "2024-05-01T12:04:00Z",
        "clicks": 2,
    }
