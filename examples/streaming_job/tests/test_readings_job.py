"""The event-time job fed records with explicit timestamps: the windows follow the
record timestamps, whatever the order or the time they are produced at."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import readings_job

NOON = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> int:
    """A record timestamp, in milliseconds since the epoch, `seconds` after noon."""
    return int(NOON.timestamp() * 1000 + seconds * 1000)


def reading(sensor: str, value: str, seconds: float) -> dict[str, Any]:
    return {"key": sensor, "value": value, "timestamp": at(seconds)}


def test_windows_follow_the_record_timestamps(
    spark: Any,
    spark_kafka_source: Any,
    spark_stream: Any,
    kafka_topic: Any,
    kafka_produce: Any,
    kafka_consume: Any,
) -> None:
    readings = kafka_topic(partitions=2)
    windows = kafka_topic()
    checkpoint = spark_stream.checkpoint("readings")

    def run() -> None:
        spark_stream.wait(
            readings_job.start(
                spark,
                spark_kafka_source.format,
                spark_kafka_source.options,
                readings,
                windows,
                checkpoint,
                availableNow=True,
            )
        )

    kafka_produce(
        readings,
        [
            reading("s1", "20.5", 1),
            reading("s2", "18.0", 3),
            reading("s1", "22.0", 9.5),
            reading("s1", "19.0", 4),  # produced after 9.5, measured before: same window
            reading("s1", "23.0", 12),
            reading("s2", "17.5", 21),  # the watermark passes 12:00:16: [0, 10) closes
        ],
    )
    run()
    first = {
        (r.key, r.value["window_start"]): r.value
        for r in kafka_consume(windows, 2, decode_as="json")
    }
    assert first == {
        ("s1", "2024-05-01T12:00:00Z"): {
            "sensor": "s1",
            "window_start": "2024-05-01T12:00:00Z",
            "readings": 3,
            "max": 22.0,
        },
        ("s2", "2024-05-01T12:00:00Z"): {
            "sensor": "s2",
            "window_start": "2024-05-01T12:00:00Z",
            "readings": 1,
            "max": 18.0,
        },
    }

    # Late for a closed window: dropped (nothing for [0, 10) again). In time for [10, 20):
    # counted when it closes.
    kafka_produce(
        readings,
        [
            reading("s1", "99.0", 2),
            reading("s1", "21.0", 15),
            reading("s2", "16.0", 40),
        ],
    )
    run()
    everything = [r.value for r in kafka_consume(windows, None, decode_as="json")]
    assert len(everything) == 4, everything
    assert {json.dumps(w, sort_keys=True) for w in everything[2:]} == {
        json.dumps(w, sort_keys=True)
        for w in (
            {"sensor": "s1", "window_start": "2024-05-01T12:00:10Z", "readings": 2, "max": 23.0},
            {"sensor": "s2", "window_start": "2024-05-01T12:00:20Z", "readings": 1, "max": 17.5},
        )
    }
