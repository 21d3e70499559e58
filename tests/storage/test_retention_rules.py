"""Log retention (state/retention.py), rule by rule, on logs without sockets."""

from __future__ import annotations

import pytest

from minibroker.protocol.records import build_batch, read_header
from minibroker.state import retention
from minibroker.state.log import MemoryLog
from minibroker.state.topics import TopicRegistry

NOW = 1_700_000_000_000
MINUTE = 60_000


def _append(log: MemoryLog, timestamp: int, records: int = 2, value: bytes = b"v") -> int:
    batch = build_batch([(None, value)] * records, timestamp_ms=timestamp)
    log.append(read_header(batch), batch)
    return len(batch)


def _topics(**configs: str) -> TopicRegistry:
    registry = TopicRegistry(lambda: [0], 1000)
    registry.create("t", 1, configs=configs)
    return registry


def test_batches_older_than_retention_ms_go_oldest_first() -> None:
    topics = _topics(**{"retention.ms": str(10 * MINUTE)})
    log = topics.get("t").partitions[0].log  # type: ignore[union-attr]
    for minutes_ago in (30, 20, 5, 25, 1):  # the 25-minute-old batch comes after a young one
        _append(log, NOW - minutes_ago * MINUTE)
    assert retention.enforce(topics, NOW) == 1
    # The first young batch ends the deletion: the older one after it stays, as on Kafka.
    assert (log.log_start_offset, log.next_offset, log.batch_count) == (4, 10, 3)
    assert retention.enforce(topics, NOW) == 0  # nothing more to do
    assert retention.enforce(topics, NOW + 30 * MINUTE) == 1
    assert (log.log_start_offset, log.next_offset, log.batch_count) == (10, 10, 0)


def test_retention_bytes_keeps_at_least_that_much() -> None:
    size = _append(MemoryLog(), NOW, value=b"x" * 100)
    topics = _topics(**{"retention.bytes": str(2 * size + 1), "retention.ms": "-1"})
    target = topics.get("t").partitions[0].log  # type: ignore[union-attr]
    for _ in range(5):
        _append(target, NOW, value=b"x" * 100)
    retention.enforce(topics, NOW)
    # Without its oldest batch the log must still hold retention.bytes: three batches stay.
    assert (target.batch_count, target.log_start_offset, target.size_bytes) == (3, 4, 3 * size)
    topics.get("t").configs["retention.bytes"] = str(size)  # type: ignore[union-attr]
    retention.enforce(topics, NOW)
    assert target.batch_count == 1


@pytest.mark.parametrize(
    "configs",
    [
        {"retention.ms": "-1", "retention.bytes": "-1"},
        {"cleanup.policy": "compact", "retention.ms": "1"},
    ],
)
def test_unlimited_or_compacted_topics_keep_everything(configs: dict[str, str]) -> None:
    topics = _topics(**configs)
    log = topics.get("t").partitions[0].log  # type: ignore[union-attr]
    _append(log, 0)
    assert retention.enforce(topics, NOW) == 0
    assert (log.log_start_offset, log.batch_count) == (0, 1)


def test_compact_and_delete_topics_are_trimmed_by_age() -> None:
    topics = _topics(**{"cleanup.policy": "compact,delete", "retention.ms": "1000"})
    log = topics.get("t").partitions[0].log  # type: ignore[union-attr]
    _append(log, NOW - 5000)
    assert retention.enforce(topics, NOW) == 1
    assert log.log_start_offset == log.next_offset == 2
