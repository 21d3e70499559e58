"""Retention as a client sees it: records older than the topic's retention.ms are gone
once the broker's clock passes it, the earliest offset moves up, and a consumer that
asks for a deleted offset is reset to what remains."""

from __future__ import annotations

import time

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from minibroker import Broker

TIMEOUT = 20.0


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "marks"})
    try:
        low, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, 0), timeout=TIMEOUT
        )
        return low, high
    finally:
        consumer.close()


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(TIMEOUT) == 0


def test_records_past_retention_ms_are_deleted_and_consumers_reset() -> None:
    with Broker() as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        aging = NewTopic("aging", 1, 1, config={"retention.ms": "60000"})
        kept = NewTopic("kept", 1, 1, config={"retention.ms": "-1"})
        for future in admin.create_topics([aging, kept]).values():
            future.result(TIMEOUT)
        _produce(bootstrap, "aging", [f"old-{i}".encode() for i in range(5)])
        _produce(bootstrap, "kept", [b"a", b"b"])
        assert _watermarks(bootstrap, "aging") == (0, 5)

        broker.clock.advance(61)  # the broker's time only: retention applies at once
        deadline = time.monotonic() + TIMEOUT
        while _watermarks(bootstrap, "aging") != (5, 5) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _watermarks(bootstrap, "aging") == (5, 5)
        assert _watermarks(bootstrap, "kept") == (0, 2)  # no limit: kept however old

        _produce(bootstrap, "aging", [b"new"])
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "late", "auto.offset.reset": "earliest"}
        )
        try:
            consumer.assign([confluent_kafka.TopicPartition("aging", 0, 0)])  # deleted
            message = None
            while message is None and time.monotonic() < deadline:
                polled = consumer.poll(0.5)
                if polled is not None and polled.error() is None:
                    message = polled
            assert message is not None
            assert (message.offset(), message.value()) == (5, b"new")
        finally:
            consumer.close()
