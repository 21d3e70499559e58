"""Log compaction: what topics with cleanup.policy=compact keep of each key.

Rules (Kafka's LogCleaner, each stored batch standing for a segment of its own):
- Topics whose cleanup.policy includes compact (compact, or compact,delete) are cleaned.
  Internal topics (__consumer_offsets, __transaction_state) are left alone.
- The cleanable range runs from the log start to the first batch that is not cleanable:
  one that ends at or after the last stable offset (an open transaction's records wait
  for its end), or whose largest timestamp is less than min.compaction.lag.ms before the
  broker's clock. No active segment is held back: the newest batch is cleanable too.
- A partition remembers the offset its last cleaning reached (Kafka's cleaner
  checkpoint; the log start when that is below it); the cleanable bytes after it are
  dirty. The partition is cleaned when its dirty bytes are more than
  min.cleanable.dirty.ratio of the cleanable range's bytes, or, with some dirty bytes,
  when a dirty batch's largest timestamp is more than max.compaction.lag.ms ago.
- Cleaning keeps, of each key, the record with the highest offset in the range; older
  ones go. Records without a key are kept (a compacted topic refuses them at produce
  time, so they date from before the topic was compacted; Kafka's cleaner drops them).
- A tombstone (a null value) that is the latest of its key is kept until a cleaning at
  or after its timestamp + delete.retention.ms on the broker's clock.
- Records of aborted transactions go, and never hide a committed record of their key.
  Control batches (commit and abort markers) stay.
- A batch that loses records is rewritten, uncompressed, with its base offset, last
  offset delta (so its producer's last sequence stays valid), attributes, producer id,
  epoch and base sequence; its base timestamp becomes its first kept record's and its
  max timestamp the largest kept one (under LogAppendTime, the one it had). A batch that
  loses every record is dropped. A batch that loses none, and one that cannot be decoded
  (an unknown codec or one without its library, corrupt records, or expanding past
  max_decompressed_batch_bytes), stays byte for byte. So does the log's newest batch
  when cleaning would leave nothing of it: it marks where the log ends, which a data
  directory reads back at a restart.
- Offsets never change: a read from an offset cleaning removed starts at the next kept
  record. The log start offset and the log end offset stay where they were.
- The broker cleans every log_cleaner_backoff_ms (Kafka's log.cleaner.backoff.ms) and
  whenever its clock is advanced.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from minibroker.protocol import records
from minibroker.protocol.records import BatchHeader, Record
from minibroker.state.log import PartitionLog
from minibroker.state.topics import Partition, Topic


@dataclass(frozen=True, slots=True)
class _Settings:
    min_lag: int  # min.compaction.lag.ms
    max_lag: int  # max.compaction.lag.ms
    dirty_ratio: float  # min.cleanable.dirty.ratio
    delete_retention: int  # delete.retention.ms


def enforce(
    topics: Iterable[Topic],
    now_ms: int,
    *,
    max_decompressed_bytes: int = records.MAX_DECOMPRESSED_BYTES,
) -> int:
    """Clean every compacted partition that is due; how many lost records."""
    cleaned = 0
    for topic in topics:
        if topic.internal or not topic.compacted:
            continue
        settings = _Settings(
            min_lag=int(topic.config("min.compaction.lag.ms")),
            max_lag=int(topic.config("max.compaction.lag.ms")),
            dirty_ratio=float(topic.config("min.cleanable.dirty.ratio")),
            delete_retention=int(topic.config("delete.retention.ms")),
        )
        for partition in topic.partitions:
            if _clean_if_due(partition, settings, now_ms, max_decompressed_bytes):
                cleaned += 1
    return cleaned


def _clean_if_due(partition: Partition, settings: _Settings, now_ms: int, limit: int) -> bool:
    log = partition.log
    end = log.last_stable_offset
    if settings.min_lag > 0:
        # The first batch whose largest timestamp is within the lag (read off the
        # index, no batch decoded).
        end = min(end, log.retained_from(now_ms - settings.min_lag + 1, None))
    if not log.has_batches_before(end):
        return False
    first_dirty = partition.cleaned_offset
    if not log.log_start_offset <= first_dirty <= log.next_offset:
        first_dirty = log.log_start_offset
    dirty = log.bytes_from(first_dirty, end)
    total = log.bytes_from(log.log_start_offset, end)
    if dirty == 0 or total == 0:
        return False
    due = dirty / total > settings.dirty_ratio or _waited_too_long(
        log, first_dirty, end, now_ms - settings.max_lag
    )
    if not due:
        return False
    changed = _clean(log, end, now_ms, settings.delete_retention, limit)
    partition.cleaned_offset = end
    return changed


def _waited_too_long(log: PartitionLog, first_dirty: int, end: int, cutoff_ms: int) -> bool:
    """Whether a dirty batch's largest timestamp is before `cutoff_ms` (now less
    max.compaction.lag.ms; at its default, Long.MAX, never)."""
    if cutoff_ms <= 0:
        return False
    return any(0 < timestamp < cutoff_ms for timestamp in log.batch_timestamps(first_dirty, end))


def _decoded(batch: bytes, limit: int) -> list[Record] | None:
    """The batch's records, or None when they cannot be read (the batch stays as it is)."""
    try:
        return list(records.iter_records(batch, max_decompressed_bytes=limit))
    except records.InvalidBatch:
        return None


def _clean(log: PartitionLog, end: int, now_ms: int, delete_retention: int, limit: int) -> bool:
    """Rewrite the batches that end before `end` keeping the latest record of each key; whether
    anything went. Two passes over the batches (the keys' latest offsets, then the
    rewrite), so only the keys and the rewritten batches are held at once."""
    aborted: dict[int, list[tuple[int, int]]] = {}
    for txn in log.aborted:
        aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def is_aborted(header: BatchHeader) -> bool:
        spans = aborted.get(header.producer_id, ())
        return any(first <= header.base_offset < marker for first, marker in spans)

    latest: dict[bytes, int] = {}
    for batch in log.stored_batches(end):
        header = records.read_header(batch)
        if header.is_control or (header.is_transactional and is_aborted(header)):
            continue
        for record in _decoded(batch, limit) or ():
            if record.key is not None:
                latest[record.key] = record.offset

    kept_batches: list[bytes] = []
    changed = False
    for batch in log.stored_batches(end):
        header = records.read_header(batch)
        if header.is_control:
            kept_batches.append(batch)
            continue
        if header.is_transactional and is_aborted(header):
            changed = True
            continue
        decoded = _decoded(batch, limit)
        if decoded is None:
            kept_batches.append(batch)
            continue
        kept = [
            record
            for record in decoded
            if record.key is None
            or (
                latest.get(record.key) == record.offset
                and (record.value is not None or now_ms < record.timestamp + delete_retention)
            )
        ]
        newest = header.base_offset + header.last_offset_delta + 1 == log.next_offset
        if len(kept) == len(decoded) or (not kept and newest):
            # The newest batch of the log is never dropped whole: a data directory
            # finds where the log ends from it after a restart.
            kept_batches.append(batch)
            continue
        changed = True
        if kept:
            kept_batches.append(_rewritten(header, kept))
    if changed:
        log.replace_before(end, kept_batches)
    return changed


def _rewritten(header: BatchHeader, kept: list[Record]) -> bytes:
    log_append_time = header.attributes & records.TIMESTAMP_TYPE_FLAG
    return records.encode_batch(
        kept,
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=kept[0].timestamp,
        max_timestamp=(header.max_timestamp if log_append_time else max(r.timestamp for r in kept)),
        attributes=header.attributes,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )
