"""Reading a whole topic back, as a consumer sees it after a restart."""

from __future__ import annotations

import time

import confluent_kafka
from confluent_kafka import TopicPartition

TIMEOUT = 30.0

Stored = tuple[int, int, bytes | None, bytes | None, tuple[int, int]]


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[Stored]:
    """(partition, offset, key, value, timestamp) of every record, from each partition's
    start to its end."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",  # below the log start: from what is left
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=TIMEOUT).topics[topic]
        consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
        found: list[Stored] = []
        ended: set[int] = set()
        deadline = time.monotonic() + TIMEOUT
        while len(ended) < len(metadata.partitions) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                continue
            found.append(
                (
                    message.partition(),
                    message.offset(),
                    message.key(),
                    message.value(),
                    message.timestamp(),
                )
            )
        assert len(ended) == len(metadata.partitions), "not every partition read to its end"
        return sorted(found)
    finally:
        consumer.close()
