"""MemoryLog: offsets, reads under a byte budget, timestamp lookups, LogAppendTime."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol import records
from minibroker.protocol.records import build_batch, iter_records, read_header, split_batches
from minibroker.state.log import MemoryLog
from tests.record_bytes import zigzag_varint


def _append(log: MemoryLog, count: int, timestamp: int = 1000, value: bytes = b"v") -> int:
    batch = build_batch([(None, value)] * count, timestamp_ms=timestamp)
    return log.append(read_header(batch), batch).base_offset


def test_empty_log() -> None:
    log = MemoryLog()
    assert log.next_offset == log.high_watermark == log.log_start_offset == 0
    assert log.read(0, 1 << 20) == b""
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp() is None


def test_append_assigns_consecutive_offsets() -> None:
    log = MemoryLog()
    assert _append(log, 3) == 0
    assert _append(log, 1) == 3
    assert _append(log, 5) == 4
    assert log.next_offset == log.high_watermark == 9
    assert log.batch_count == 3
    stored = log.batches()
    assert [read_header(b).base_offset for b in stored] == [0, 3, 4]
    assert log.size_bytes == sum(len(b) for b in stored)
    # Stored batches stay valid (the base offset is outside the CRC).
    assert [r.offset for b in stored for r in iter_records(b)] == list(range(9))


def test_append_ignores_the_producers_base_offset() -> None:
    log = MemoryLog()
    batch = build_batch([(b"k", b"v")], base_offset=777)
    assert log.append(read_header(batch), batch).base_offset == 0
    assert read_header(log.batches()[0]).base_offset == 0


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch() -> None:
    log = MemoryLog()
    _append(log, 5)
    _append(log, 5)
    data = log.read(7, 1 << 20)
    [(header, _)] = split_batches(data)
    assert header.base_offset == 5
    assert log.read(10, 1 << 20) == b""
    assert log.read(11, 1 << 20) == b""


def test_read_respects_max_bytes() -> None:
    log = MemoryLog()
    for _ in range(4):
        _append(log, 1, value=b"x" * 100)
    size = len(log.batches()[0])
    assert len(split_batches(log.read(0, size * 2))) == 2
    assert len(split_batches(log.read(0, size * 2 + size // 2))) == 2
    assert len(split_batches(log.read(0, size * 10))) == 4
    assert len(split_batches(log.read(2, size * 10))) == 2


def test_oversized_first_batch_is_returned_whole() -> None:
    log = MemoryLog()
    _append(log, 1, value=b"x" * 5000)
    _append(log, 1, value=b"y")
    data = log.read(0, 100)
    [(header, batch)] = split_batches(data)
    assert header.base_offset == 0
    assert len(batch) > 5000
    assert log.read(0, 100, allow_oversized_first=False) == b""


@given(sizes=st.lists(st.integers(1, 300), min_size=1, max_size=15), budget=st.integers(1, 3000))
@settings(max_examples=100, deadline=None)
def test_read_budget_property(sizes: list[int], budget: int) -> None:
    log = MemoryLog()
    for size in sizes:
        _append(log, 1, value=b"z" * size)
    lengths = [len(b) for b in log.batches()]
    got = [len(b) for _, b in split_batches(log.read(0, budget))]
    assert got == lengths[: len(got)]
    assert got, "the first batch always comes back"
    assert sum(got) <= budget or len(got) == 1
    if len(got) < len(lengths):
        assert sum(got) + lengths[len(got)] > budget or sum(got) >= budget


def test_offset_for_timestamp_with_non_monotonic_timestamps() -> None:
    log = MemoryLog()
    _append(log, 2, timestamp=100)  # offsets 0-1
    _append(log, 2, timestamp=500)  # offsets 2-3
    _append(log, 2, timestamp=300)  # offsets 4-5: older than the batch before
    _append(log, 2, timestamp=900)  # offsets 6-7
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(100) == (0, 100)
    assert log.offset_for_timestamp(101) == (2, 500)
    # 300 <= 500: the first record at or after 300 is offset 2, not the 300 batch.
    assert log.offset_for_timestamp(300) == (2, 500)
    assert log.offset_for_timestamp(501) == (6, 900)
    assert log.offset_for_timestamp(901) is None
    assert log.max_timestamp() == (6, 900)  # the first record holding the maximum


def test_a_first_batch_stamped_zero_does_not_hide_the_next() -> None:
    log = MemoryLog()
    _append(log, 1, timestamp=0)
    _append(log, 1, timestamp=1)
    assert log.offset_for_timestamp(1) == (1, 1)
    assert log.max_timestamp() == (1, 1)


def test_timestamp_lookups_after_delete_records() -> None:
    log = MemoryLog()
    for timestamp in (5, 10, 20, 30):
        _append(log, 1, timestamp=timestamp)
    assert log.delete_before(1) == 1
    assert log.offset_for_timestamp(25) == (3, 30)
    assert log.offset_for_timestamp(0) == (1, 10)
    assert log.max_timestamp() == (3, 30)


def test_batches_without_timestamps_are_stored_and_cut() -> None:
    """NO_TIMESTAMP (-1) records, which Produce takes unless a topic bounds timestamps."""
    log = MemoryLog()
    for _ in range(3):
        _append(log, 1, timestamp=-1)
    assert log.delete_before(1) == 1
    assert [read_header(b).base_offset for b in log.batches()] == [1, 2]
    assert log.offset_for_timestamp(0) is None


@given(
    timestamps=st.lists(st.integers(0, 10_000), min_size=1, max_size=20),
    target=st.integers(0, 11_000),
)
@settings(max_examples=150, deadline=None)
def test_offset_for_timestamp_matches_a_linear_scan(timestamps: list[int], target: int) -> None:
    log = MemoryLog()
    for timestamp in timestamps:
        _append(log, 1, timestamp=timestamp)
    expected = next(((offset, ts) for offset, ts in enumerate(timestamps) if ts >= target), None)
    assert log.offset_for_timestamp(target) == expected


def _batch_with_timestamp_deltas(base_timestamp: int, deltas: list[int]) -> bytes:
    payload = bytearray()
    for index, delta in enumerate(deltas):
        record = (
            b"\x00"
            + zigzag_varint(delta)
            + zigzag_varint(index)
            + zigzag_varint(-1)
            + zigzag_varint(1)
            + b"v"
        )
        record += zigzag_varint(0)
        payload += zigzag_varint(len(record)) + record
    head = bytearray(build_batch([(None, b"v")] * len(deltas), timestamp_ms=base_timestamp))
    del head[records.HEADER_SIZE :]
    struct.pack_into(">q", head, 35, base_timestamp + max(deltas))
    struct.pack_into(">i", head, 8, records.HEADER_SIZE - 12 + len(payload))
    full = head + payload
    struct.pack_into(">I", full, 17, records.crc32c(bytes(full[records.CRC_START :])))
    return bytes(full)


def test_offset_for_timestamp_inside_a_batch() -> None:
    log = MemoryLog()
    [(header, raw)] = split_batches(_batch_with_timestamp_deltas(100, [0, 10, 20]))
    log.append(header, raw)
    assert log.offset_for_timestamp(105) == (1, 110)
    assert log.offset_for_timestamp(111) == (2, 120)
    assert log.offset_for_timestamp(121) is None


def test_offset_for_timestamp_inside_a_batch_with_unordered_records() -> None:
    log = MemoryLog()
    [(header, raw)] = split_batches(_batch_with_timestamp_deltas(100, [30, 0, 50, 10]))
    log.append(header, raw)
    assert log.offset_for_timestamp(5) == (0, 130)
    assert log.offset_for_timestamp(131) == (2, 150)
    assert log.max_timestamp() == (2, 150)


def test_log_append_time_rewrite_keeps_a_valid_crc() -> None:
    log = MemoryLog()
    _append(log, 1)
    batch = build_batch([(b"k", b"v"), (b"k2", b"v2")], timestamp_ms=5)
    result = log.append(read_header(batch), batch, log_append_time_ms=1_234_567)
    assert result.base_offset == 1
    assert result.log_append_time == 1_234_567
    stored = log.batches()[1]
    [(header, _)] = split_batches(stored)  # CRC checked here
    assert header.base_offset == 1
    assert header.attributes & records.TIMESTAMP_TYPE_FLAG
    assert [r.timestamp for r in iter_records(stored)] == [1_234_567, 1_234_567]
    assert log.offset_for_timestamp(1_000_000) == (1, 1_234_567)


def test_create_time_append_reports_no_append_time() -> None:
    log = MemoryLog()
    batch = build_batch([(b"k", b"v")], timestamp_ms=5)
    assert log.append(read_header(batch), batch).log_append_time == -1


def test_timestamp_lookups_decode_only_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    log = MemoryLog()
    for timestamp in (100, 900, 300, 900, 200):
        _append(log, 2, timestamp=timestamp)
    decoded: list[int] = []
    real = records.iter_records

    def counting(batch: bytes, **kwargs: int) -> Iterator[records.Record]:
        decoded.append(read_header(batch).base_offset)
        return real(batch, **kwargs)

    monkeypatch.setattr(records, "iter_records", counting)
    assert log.max_timestamp() == (2, 900)
    assert decoded == [2]
    assert log.offset_for_timestamp(250) == (2, 900)
    assert decoded == [2, 2]
    assert log.offset_for_timestamp(50) == (0, 100)
    assert decoded == [2, 2, 0]


def _bomb(max_timestamp: int) -> bytes:
    """A zstd batch of one record whose 16 MiB value is zeros, CRC valid."""
    head = bytearray(build_batch([(None, b"")], timestamp_ms=1000)[: records.HEADER_SIZE])
    size = 16 << 20
    body = b"\x00" + zigzag_varint(0) + zigzag_varint(0) + zigzag_varint(-1) + zigzag_varint(size)
    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    payload = compressor.compress(zigzag_varint(len(body) + size + 1) + body)
    for _ in range(16):
        payload += compressor.compress(bytes(1 << 20))
    payload += compressor.compress(b"\x00") + compressor.flush()
    struct.pack_into(">h", head, 21, 4)  # zstd
    struct.pack_into(">q", head, 35, max_timestamp)
    struct.pack_into(">i", head, 8, records.HEADER_SIZE - 12 + len(payload))
    full = head + payload
    struct.pack_into(">I", full, 17, records.crc32c(bytes(full[records.CRC_START :])))
    return bytes(full)


def test_timestamp_lookups_over_a_bomb_answer_at_batch_granularity() -> None:
    log = MemoryLog()
    _append(log, 2, timestamp=100)
    bomb = _bomb(max_timestamp=5000)
    log.append(read_header(bomb), bomb)
    limit = 1 << 20
    assert log.offset_for_timestamp(2000, max_decompressed_bytes=limit) == (2, 5000)
    assert log.max_timestamp(max_decompressed_bytes=limit) == (2, 5000)
    assert log.offset_for_timestamp(1000, max_decompressed_bytes=limit) == (2, 5000)
    # Under a limit it fits in, the record itself is found.
    assert log.offset_for_timestamp(1000, max_decompressed_bytes=32 << 20) == (2, 1000)
    assert log.offset_for_timestamp(50, max_decompressed_bytes=limit) == (0, 100)


def test_a_timestamp_lookup_decodes_a_bounded_number_of_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from minibroker.state import log as log_module

    count = log_module.MAX_RECORDS_SCANNED + 5_000
    batch = bytearray(build_batch([(None, b"")] * count, timestamp_ms=1000))
    struct.pack_into(">q", batch, 35, 5000)  # the header claims a later record exists
    struct.pack_into(">I", batch, 17, records.crc32c(bytes(batch[records.CRC_START :])))
    log = MemoryLog()
    log.append(read_header(bytes(batch)), bytes(batch))
    decoded = 0
    real_iter_records = records.iter_records

    def counting(*args: object, **kwargs: object) -> Iterator[records.Record]:
        nonlocal decoded
        for record in real_iter_records(*args, **kwargs):  # type: ignore[arg-type]
            decoded += 1
            yield record

    monkeypatch.setattr(records, "iter_records", counting)
    # No record reaches 2000: the lookup gives up at the limit, at batch granularity.
    assert log.offset_for_timestamp(2000) == (0, 5000)
    assert decoded <= log_module.MAX_RECORDS_SCANNED
    decoded = 0
    assert log.max_timestamp() == (count - 1, 5000)
    assert decoded <= log_module.MAX_RECORDS_SCANNED


def test_a_record_past_the_scan_limit_is_answered_at_batch_granularity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lookup decodes at most MAX_RECORDS_SCANNED records of its batch (lowered here: a
    batch past the real limit takes too long to build in every run); a record past them
    is answered with the batch's base offset and max timestamp, which is never after it."""
    from minibroker.state import log as log_module

    monkeypatch.setattr(log_module, "MAX_RECORDS_SCANNED", 3)
    log = MemoryLog()
    _append(log, 2, timestamp=50)
    [(header, raw)] = split_batches(_batch_with_timestamp_deltas(100, [0, 5, 0, 0, 10]))
    log.append(header, raw)
    assert log.offset_for_timestamp(105) == (3, 105), "the second record: within the limit"
    assert log.offset_for_timestamp(110) == (2, 110), "the fifth record: past it"


def test_bytes_from_counts_the_batch_holding_the_offset_and_all_after_it() -> None:
    """What a Fetch at `offset` could return, for deciding whether min_bytes is met."""
    log = MemoryLog()
    assert log.bytes_from(0) == 0
    _append(log, 3)
    _append(log, 2, value=b"x" * 50)
    _append(log, 1, value=b"y" * 10)
    sizes = [len(b) for b in log.batches()]
    assert log.bytes_from(0) == log.size_bytes == sum(sizes)
    assert log.bytes_from(2) == sum(sizes)
    assert log.bytes_from(3) == log.bytes_from(4) == sizes[1] + sizes[2]
    assert log.bytes_from(5) == sizes[2]
    assert log.bytes_from(6) == 0, "the log end: nothing to read yet"
    assert log.bytes_from(100) == 0


def test_delete_before_drops_the_batches_that_end_before_the_new_start() -> None:
    log = MemoryLog()
    _append(log, 3, timestamp=5000)  # offsets 0-2, the latest timestamp of all
    _append(log, 2, timestamp=1000)  # 3-4
    _append(log, 2, timestamp=2000)  # 5-6
    assert log.delete_before(4) == 4
    assert log.log_start_offset == 4
    kept = log.batches()
    assert [read_header(b).base_offset for b in kept] == [3, 5]
    assert log.size_bytes == sum(len(b) for b in kept) == log.bytes_from(4)
    assert [h.base_offset for h, _ in split_batches(log.read(4, 1 << 20))] == [3, 5]
    # The dropped batch's timestamp no longer counts: 1500 is first reached at offset 5.
    assert log.offset_for_timestamp(1500) == (5, 2000)
    # A record before the start is never the answer, even in a batch still kept.
    assert log.offset_for_timestamp(0) == (4, 1000)
    assert log.delete_before(2) == 4  # never backwards
    assert log.delete_before(100) == 7  # at most the log end: everything goes
    assert (log.batch_count, log.size_bytes, log.read(7, 1 << 20)) == (0, 0, b"")
    assert _append(log, 1) == 7
    assert log.bytes_from(7) == log.size_bytes


def test_a_rewritten_prefix_keeps_offsets_and_reads_skip_its_gaps() -> None:
    log = MemoryLog()
    for _ in range(4):
        _append(log, 3)  # offsets 0-2, 3-5, 6-8, 9-11
    kept = [log.stored_batch(1), log.stored_batch(2)]  # the first batch goes: a gap at 0-2
    log.replace_first(3, kept)
    assert (log.log_start_offset, log.next_offset, log.batch_count) == (0, 12, 3)
    assert log.size_bytes == sum(len(b) for b in log.batches())
    [(header, _), *_] = split_batches(log.read(0, 1 << 20))
    assert header.base_offset == 3  # a read in the gap starts at the next batch
    assert [h.base_offset for h, _ in split_batches(log.read(7, 1 << 20))] == [6, 9]
    assert log.bytes_from(1) == log.size_bytes
    assert log.offset_after_read(0, len(kept[0])) == 6
