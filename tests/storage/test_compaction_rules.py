"""Log compaction (state/compaction.py), rule by rule, on logs without sockets."""

from __future__ import annotations

import gzip
import struct

import pytest
import zstandard

from minibroker.protocol import records
from minibroker.protocol.records import build_batch, iter_records, read_header
from minibroker.state import compaction
from minibroker.state.log import LEADER_EPOCH, MemoryLog
from minibroker.state.topics import Partition, TopicRegistry

NOW = 1_700_000_000_000
SECOND = 1000
MINUTE = 60 * SECOND
GZIP, ZSTD = 1, 4

Item = tuple[bytes | None, bytes | None]


def _topics(**configs: str) -> TopicRegistry:
    registry = TopicRegistry(lambda: [0], 1000)
    registry.create("t", 1, configs={"cleanup.policy": "compact", **configs})
    return registry


def _partition(topics: TopicRegistry) -> Partition:
    return topics.get("t").partitions[0]  # type: ignore[union-attr]


def _append(log: MemoryLog, items: list[Item], timestamp: int = NOW, **fields: int) -> int:
    """Append one uncompressed batch of `items`; its base offset."""
    return _append_raw(log, build_batch(items, timestamp_ms=timestamp, **fields))


def _append_raw(log: MemoryLog, batch: bytes) -> int:
    return log.append(read_header(batch), batch).base_offset


def _compressed(codec: int, plain: bytes) -> bytes:
    """`plain`'s records compressed with `codec` as a client does, CRC redone."""
    payload = {GZIP: gzip.compress, ZSTD: zstandard.compress}.get(codec, bytes)(
        plain[records.HEADER_SIZE :]
    )
    head = bytearray(plain[: records.HEADER_SIZE])
    struct.pack_into(">i", head, 8, records.HEADER_SIZE - records.LOG_OVERHEAD + len(payload))
    struct.pack_into(">h", head, 21, codec)
    batch = head + payload
    struct.pack_into(">I", batch, 17, records.crc32c(bytes(batch[records.CRC_START :])))
    return bytes(batch)


def _records(log: MemoryLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in log.batches() for r in iter_records(b)]


def test_the_latest_record_of_each_key_is_kept_at_its_offset() -> None:
    topics = _topics()
    log = _partition(topics).log
    _append(log, [(b"a", b"1"), (b"b", b"1")])
    _append(log, [(b"a", b"2")])  # loses its only record: dropped
    _append(log, [(b"c", b"1"), (b"a", b"3")])
    assert compaction.enforce(topics, NOW) == 1
    assert _records(log) == [(1, b"b", b"1"), (3, b"c", b"1"), (4, b"a", b"3")]
    assert [log.batch_offsets(i) for i in range(log.batch_count)] == [(0, 1), (3, 4)]
    assert (log.log_start_offset, log.next_offset, log.high_watermark) == (0, 5, 5)
    assert _partition(topics).cleaned_offset == 5
    assert compaction.enforce(topics, NOW) == 0  # nothing dirty


def test_records_without_a_key_are_kept() -> None:
    topics = _topics()
    log = _partition(topics).log
    _append(log, [(None, b"x"), (b"k", b"1")])
    _append(log, [(b"k", b"2"), (None, b"y")])
    compaction.enforce(topics, NOW)
    assert _records(log) == [(0, None, b"x"), (2, b"k", b"2"), (3, None, b"y")]


def test_a_tombstone_is_kept_until_delete_retention_ms_after_its_timestamp() -> None:
    topics = _topics(**{"delete.retention.ms": str(MINUTE), "min.cleanable.dirty.ratio": "0.01"})
    log = _partition(topics).log
    _append(log, [(b"k", b"1"), (b"j", b"1")])
    _append(log, [(b"k", None)])
    compaction.enforce(topics, NOW)
    assert _records(log) == [(1, b"j", b"1"), (2, b"k", None)]  # older values of k went
    _append(log, [(b"j", b"2")], NOW + MINUTE - 1)
    compaction.enforce(topics, NOW + MINUTE - 1)
    assert _records(log) == [(2, b"k", None), (3, b"j", b"2")]
    _append(log, [(b"j", b"3")], NOW + MINUTE)
    compaction.enforce(topics, NOW + MINUTE)
    assert _records(log) == [(4, b"j", b"3")]
    assert (log.log_start_offset, log.next_offset) == (0, 5)


def test_a_cleaning_is_due_above_the_dirty_ratio() -> None:
    topics = _topics()  # min.cleanable.dirty.ratio 0.5
    partition = _partition(topics)
    log = partition.log
    _append(log, [(b"k", b"1")])
    _append(log, [(b"k", b"2")])
    assert compaction.enforce(topics, NOW) == 1
    assert (_records(log), partition.cleaned_offset) == ([(1, b"k", b"2")], 2)
    _append(log, [(b"k", b"3")])  # half the bytes are dirty: not more than the ratio
    assert compaction.enforce(topics, NOW) == 0
    assert log.batch_count == 2
    _append(log, [(b"k", b"4")])  # two thirds
    assert compaction.enforce(topics, NOW) == 1
    assert (_records(log), partition.cleaned_offset) == ([(3, b"k", b"4")], 4)


def test_max_compaction_lag_ms_forces_a_cleaning() -> None:
    topics = _topics(**{"min.cleanable.dirty.ratio": "1.0", "max.compaction.lag.ms": str(MINUTE)})
    log = _partition(topics).log
    _append(log, [(b"k", b"1")], NOW)
    _append(log, [(b"k", b"2")], NOW)
    assert compaction.enforce(topics, NOW + MINUTE) == 0  # a ratio of 1.0 is never passed
    assert compaction.enforce(topics, NOW + MINUTE + 2) == 1
    assert _records(log) == [(1, b"k", b"2")]


def test_min_compaction_lag_ms_holds_young_batches_back() -> None:
    topics = _topics(
        **{"min.compaction.lag.ms": str(5 * MINUTE), "min.cleanable.dirty.ratio": "0.1"}
    )
    log = _partition(topics).log
    _append(log, [(b"k", b"1"), (b"j", b"1")], NOW - 10 * MINUTE)
    _append(log, [(b"k", b"2")], NOW - MINUTE)
    _append(log, [(b"j", b"2")], NOW - 20 * MINUTE)  # old, but after a young batch
    compaction.enforce(topics, NOW)
    assert len(_records(log)) == 4  # only the first batch was cleanable: nothing to drop
    assert _partition(topics).cleaned_offset == 2
    compaction.enforce(topics, NOW + 4 * MINUTE)  # exactly min.compaction.lag.ms old
    assert _records(log) == [(2, b"k", b"2"), (3, b"j", b"2")]


def test_aborted_records_go_and_markers_stay() -> None:
    topics = _topics()
    log = _partition(topics).log
    txn = records.TRANSACTIONAL_FLAG
    _append(log, [(b"k", b"committed")])
    _append(log, [(b"k", b"aborted"), (b"j", b"aborted")], producer_id=5, attributes=txn)
    abort = log.append_marker(5, 0, commit=False, coordinator_epoch=0, now_ms=NOW)
    _append(log, [(b"j", b"in-txn")], producer_id=6, attributes=txn)
    commit = log.append_marker(6, 0, commit=True, coordinator_epoch=0, now_ms=NOW)
    assert compaction.enforce(topics, NOW) == 1
    batches = [read_header(b) for b in log.batches()]
    assert [(h.base_offset, h.is_control) for h in batches] == [
        (0, False),
        (abort, True),
        (4, False),
        (commit, True),
    ]
    assert _records(log)[0] == (0, b"k", b"committed")  # the aborted value hid nothing
    assert (4, b"j", b"in-txn") in _records(log)


def test_an_open_transaction_holds_the_cleaning_back_at_its_start() -> None:
    topics = _topics(**{"min.cleanable.dirty.ratio": "0.1"})
    log = _partition(topics).log
    _append(log, [(b"k", b"1")])
    _append(log, [(b"k", b"2")])
    _append(log, [(b"k", b"open")], producer_id=7, attributes=records.TRANSACTIONAL_FLAG)
    _append(log, [(b"k", b"3")])
    compaction.enforce(topics, NOW)
    assert _records(log) == [(1, b"k", b"2"), (2, b"k", b"open"), (3, b"k", b"3")]
    assert _partition(topics).cleaned_offset == log.last_stable_offset == 2


@pytest.mark.parametrize("codec", [GZIP, ZSTD], ids=["gzip", "zstd"])
def test_compressed_batches_are_read_and_rewritten_uncompressed(codec: int) -> None:
    topics = _topics()
    log = _partition(topics).log
    _append_raw(log, _compressed(codec, build_batch([(b"a", b"1"), (b"b", b"1")])))
    untouched = _compressed(codec, build_batch([(b"a", b"2"), (b"c", b"1")], base_offset=2))
    _append_raw(log, untouched)
    compaction.enforce(topics, NOW)
    assert _records(log) == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"c", b"1")]
    first, second = log.batches()
    assert read_header(first).compression == 0
    # Nothing removed: byte for byte as stored (base offset and leader epoch set).
    assert second == records.with_base_offset(untouched, 2, LEADER_EPOCH)


def test_a_batch_that_cannot_be_decoded_stays_as_it_is() -> None:
    topics = _topics()
    log = _partition(topics).log
    unknown_codec = _compressed(7, build_batch([(b"a", b"1")]))
    large = _compressed(GZIP, build_batch([(b"a", b"x" * 5000)], base_offset=1))
    _append_raw(log, unknown_codec)
    _append_raw(log, large)
    _append(log, [(b"a", b"2"), (b"a", b"3")])
    compaction.enforce(topics, NOW, max_decompressed_bytes=1000)
    assert log.batches()[:2] == [
        records.with_base_offset(unknown_codec, 0, LEADER_EPOCH),
        records.with_base_offset(large, 1, LEADER_EPOCH),
    ]
    assert [r.offset for r in iter_records(log.batches()[2])] == [3]


def test_a_rewritten_batch_keeps_its_offsets_and_producer_fields() -> None:
    topics = _topics()
    log = _partition(topics).log
    _append(
        log,
        [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")],
        producer_id=9,
        producer_epoch=2,
        base_sequence=10,
    )
    before = read_header(log.batches()[0])
    _append(log, [(b"a", b"2"), (b"c", b"2")], producer_id=9, producer_epoch=2, base_sequence=13)
    compaction.enforce(topics, NOW)
    after = read_header(log.batches()[0])
    assert [r.offset for r in iter_records(log.batches()[0])] == [1]
    assert (after.record_count, after.last_sequence) == (1, before.last_sequence)
    for name in (
        "base_offset",
        "last_offset_delta",
        "attributes",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "max_timestamp",
    ):
        assert getattr(after, name) == getattr(before, name), name


def test_log_append_time_batches_keep_their_time() -> None:
    topics = _topics()
    log = _partition(topics).log
    batch = build_batch([(b"a", b"1"), (b"b", b"1")], timestamp_ms=NOW - MINUTE)
    log.append(read_header(batch), batch, log_append_time_ms=NOW)
    _append(log, [(b"a", b"2")])
    compaction.enforce(topics, NOW)
    header = read_header(log.batches()[0])
    assert header.attributes & records.TIMESTAMP_TYPE_FLAG
    assert header.max_timestamp == NOW
    assert [(r.offset, r.timestamp) for r in iter_records(log.batches()[0])] == [(1, NOW)]


def test_a_read_starting_in_a_removed_gap_starts_at_the_next_kept_batch() -> None:
    topics = _topics()
    log = _partition(topics).log
    _append(log, [(b"a", b"1"), (b"b", b"1")])
    _append(log, [(b"a", b"2"), (b"b", b"2")])  # both go: a gap at offsets 2-3
    _append(log, [(b"a", b"3"), (b"b", b"3"), (b"c", b"1")])
    _append(log, [(b"a", b"4")])
    compaction.enforce(topics, NOW)
    assert _records(log) == [(5, b"b", b"3"), (6, b"c", b"1"), (7, b"a", b"4")]
    for offset in (0, 2, 3, 4, 5):
        [(header, _), *_] = records.split_batches(log.read(offset, 1 << 20))
        assert header.base_offset == 4, offset
    [(header, _)] = records.split_batches(log.read(7, 1 << 20))
    assert header.base_offset == 7
    assert log.read(8, 1 << 20) == b""
    assert log.offset_for_timestamp(NOW) == (5, NOW)
    assert (log.log_start_offset, log.next_offset) == (0, 8)


def test_cleaning_starts_at_the_log_start_after_records_were_deleted() -> None:
    topics = _topics(**{"cleanup.policy": "compact,delete", "retention.ms": "-1"})
    partition = _partition(topics)
    log = partition.log
    _append(log, [(b"a", b"1")])
    _append(log, [(b"a", b"2"), (b"b", b"1")])
    log.delete_before(2)
    _append(log, [(b"b", b"2")])
    compaction.enforce(topics, NOW)
    assert _records(log) == [(1, b"a", b"2"), (3, b"b", b"2")]
    assert (log.log_start_offset, partition.cleaned_offset) == (2, 4)


@pytest.mark.parametrize("policy", ["delete", "compact"])
def test_delete_only_and_internal_topics_are_not_compacted(policy: str) -> None:
    registry = TopicRegistry(lambda: [0], 1000)
    registry.create("t", 1, configs={"cleanup.policy": policy}, internal=policy == "compact")
    log = _partition(registry).log
    _append(log, [(b"k", b"1")])
    _append(log, [(b"k", b"2")])
    assert compaction.enforce(registry, NOW) == 0
    assert len(_records(log)) == 2
