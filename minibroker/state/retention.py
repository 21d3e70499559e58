"""Log retention: what topics with cleanup.policy=delete give up as they age and grow.

Rules (Kafka's, each stored batch standing for a segment of its own):
- From the oldest batch on, a batch is deleted while its largest timestamp is more than
  retention.ms before the broker's clock (-1: kept whatever its age), or while the log
  without it still holds at least retention.bytes (-1: no size limit). The first batch
  that meets neither ends the deletion.
- Deleting moves the partition's log start offset, as DeleteRecords does: a consumer
  below it gets OFFSET_OUT_OF_RANGE and resets; ListOffsets earliest answers the new
  start. The log end offset never moves back.
- Internal topics (__consumer_offsets, __transaction_state) and topics whose
  cleanup.policy is only compact are left alone.
- The broker checks every log_retention_check_interval_ms (Kafka's
  log.retention.check.interval.ms) and whenever its clock is advanced.
"""

from __future__ import annotations

from collections.abc import Iterable

from minibroker.state.topics import Topic

UNLIMITED = -1


def _limit(topic: Topic, name: str) -> int | None:
    value = int(topic.config(name))
    return None if value == UNLIMITED else value


def enforce(topics: Iterable[Topic], now_ms: int) -> int:
    """Apply retention to every partition; how many partitions lost batches."""
    trimmed = 0
    for topic in topics:
        policies = {p.strip() for p in topic.config("cleanup.policy").split(",")}
        if topic.internal or "delete" not in policies:
            continue
        retention_ms = _limit(topic, "retention.ms")
        max_bytes = _limit(topic, "retention.bytes")
        if retention_ms is None and max_bytes is None:
            continue
        cutoff = None if retention_ms is None else now_ms - retention_ms
        for partition in topic.partitions:
            log = partition.log
            start = log.retained_from(cutoff, max_bytes)
            if start > log.log_start_offset:
                log.delete_before(start)
                trimmed += 1
    return trimmed
