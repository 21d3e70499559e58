"""Segment files: what is written, read back, rolled, rewritten, and recovered byte by byte."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minibroker.protocol.records import build_batch, iter_records, read_header, split_batches
from minibroker.storage.segmented_log import SegmentedLog
from minibroker.storage.segments import START_FILE, RecoveredBatch, SegmentStore, recover


def _store(directory: Path, segment_bytes: int = 1 << 30) -> SegmentStore:
    return SegmentStore(directory, lambda: segment_bytes, lambda store: None)


def _write(directory: Path, batches: int, segment_bytes: int = 1 << 30) -> SegmentedLog:
    log = SegmentedLog(_store(directory, segment_bytes))
    for number in range(batches):
        batch = build_batch([(b"k%d" % number, b"v" * (number + 1))] * 2, timestamp_ms=number)
        log.append(read_header(batch), batch)
    log.store.close()
    return log


def _reopened(directory: Path, segment_bytes: int = 1 << 30) -> SegmentedLog:
    store = _store(directory, segment_bytes)
    log = SegmentedLog(store)
    segments, recovery = recover(
        directory, lambda found: log.restore(found.header, found.length, commit=found.commit)
    )
    store.adopt(segments)
    if recovery.log_start_offset > log.log_start_offset:
        log.delete_before(recovery.log_start_offset)
    return log


def test_a_reopened_log_reads_what_was_written(tmp_path: Path) -> None:
    written = _write(tmp_path, 5)
    reopened = _reopened(tmp_path)
    assert reopened.next_offset == written.next_offset == 10
    assert reopened.batches() == written.batches()
    assert [r.value for r in iter_records(reopened.read(4, 1 << 20))][:2] == [b"vvv", b"vvv"]
    assert reopened.offset_for_timestamp(3) == (6, 3)


def test_segments_roll_at_segment_bytes_and_a_read_spans_them(tmp_path: Path) -> None:
    written = _write(tmp_path, 6, segment_bytes=200)
    files = sorted(p.name for p in tmp_path.glob("*.log"))
    assert len(files) > 2
    assert files[0] == "00000000000000000000.log"
    reopened = _reopened(tmp_path, segment_bytes=200)
    whole = reopened.read(0, 1 << 20)
    assert [h.base_offset for h, _ in split_batches(whole)] == [0, 2, 4, 6, 8, 10]
    assert whole == b"".join(written.batches())


def test_every_torn_tail_is_cut_at_the_last_whole_batch(tmp_path: Path) -> None:
    _write(tmp_path / "whole", 3)
    [segment] = (tmp_path / "whole").glob("*.log")
    data = segment.read_bytes()
    ends = [0]
    for _header, batch in split_batches(data):
        ends.append(ends[-1] + len(batch))
    for cut in range(len(data) + 1):
        directory = tmp_path / f"cut{cut}"
        directory.mkdir()
        (directory / segment.name).write_bytes(data[:cut])
        _segments, recovery = recover(directory)
        whole = max(end for end in ends if end <= cut)
        assert recovery.batch_count == ends.index(whole), cut
        assert (directory / segment.name).stat().st_size == whole, cut
        assert recovery.truncated_bytes == cut - whole


def test_a_corrupt_batch_in_a_sealed_segment_is_set_aside_and_later_segments_stay(
    tmp_path: Path,
) -> None:
    written = _write(tmp_path, 6, segment_bytes=200)
    names = sorted(p.name for p in tmp_path.glob("*.log"))
    second = tmp_path / names[1]
    data = bytearray(second.read_bytes())
    data[-3] ^= 0xFF  # inside the last batch of the second segment, under its CRC
    second.write_bytes(bytes(data))
    found: list[RecoveredBatch] = []
    _segments, recovery = recover(tmp_path, found.append)
    assert sorted(p.name for p in tmp_path.glob("*.log")) == names
    [damage] = recovery.damage
    lost = range(damage.first_offset, damage.last_offset + 1)
    assert damage.kept_as.read_bytes() == bytes(data[damage.position :])
    assert recovery.truncated_bytes == recovery.deleted_segments == 0
    log = _reopened(tmp_path, segment_bytes=200)
    assert log.next_offset == written.next_offset  # the log end did not move back
    kept = [h.base_offset for h, _ in split_batches(log.read(0, 1 << 20))]
    assert kept == [offset for offset in range(0, 12, 2) if offset not in lost]
    assert len(lost) == 2


def test_a_length_field_pointing_past_the_file_is_a_torn_tail(tmp_path: Path) -> None:
    _write(tmp_path, 2)
    [segment] = tmp_path.glob("*.log")
    data = bytearray(segment.read_bytes())
    first_length = len(split_batches(bytes(data))[0][1])
    data[first_length + 8 : first_length + 12] = (10**9).to_bytes(4, "big")
    segment.write_bytes(bytes(data))
    _, recovery = recover(tmp_path)
    assert recovery.batch_count == 1


def test_the_log_start_offset_survives(tmp_path: Path) -> None:
    log = _write(tmp_path, 4, segment_bytes=200)
    log.delete_before(5)
    assert (tmp_path / START_FILE).read_text() == "5"
    reopened = _reopened(tmp_path, segment_bytes=200)
    assert reopened.log_start_offset == 5
    assert read_header(reopened.read(0, 1 << 20)).base_offset == 4  # the batch holding 5


def test_deleting_old_batches_deletes_whole_segments_only(tmp_path: Path) -> None:
    log = _write(tmp_path, 6, segment_bytes=200)
    before = sorted(tmp_path.glob("*.log"))
    log.delete_before(log.next_offset)
    after = sorted(tmp_path.glob("*.log"))
    assert after == before[-1:]  # the active segment stays, so the end offset is kept
    assert _reopened(tmp_path, segment_bytes=200).next_offset == 12


def test_a_rewritten_prefix_is_read_back_and_survives_a_restart(tmp_path: Path) -> None:
    log = _write(tmp_path, 6, segment_bytes=200)
    kept = [log.batches()[2], log.batches()[4]]
    log.replace_before(10, kept)  # the five oldest batches
    assert [h.base_offset for h, _ in split_batches(log.read(0, 1 << 20))] == [4, 8, 10]
    reopened = _reopened(tmp_path, segment_bytes=200)
    assert reopened.batches() == log.batches()
    assert reopened.next_offset == 12


def test_a_compaction_swap_cut_short_leaves_no_duplicates(tmp_path: Path) -> None:
    _write(tmp_path, 6, segment_bytes=200)
    files = sorted(tmp_path.glob("*.log"))
    leftover = files[1].read_bytes()
    log = _reopened(tmp_path, segment_bytes=200)
    log.replace_before(8, log.batches()[:4])
    files[1].write_bytes(leftover)  # as if the process died before deleting it
    found: list[RecoveredBatch] = []
    recover(tmp_path, found.append)
    offsets = [batch.header.base_offset for batch in found]
    assert offsets == [0, 2, 4, 6, 8, 10]
    assert not files[1].exists()


@pytest.mark.parametrize("segment_bytes", [1 << 30, 150])
def test_a_failed_write_leaves_no_half_batch(tmp_path: Path, segment_bytes: int) -> None:
    log = _write(tmp_path, 2, segment_bytes)
    store = log.store
    assert isinstance(store, SegmentStore)
    batch = build_batch([(None, b"x")])
    before = sorted((p.name, p.stat().st_size) for p in tmp_path.glob("*.log"))
    original = os.writev

    def failing_writev(fd: int, pieces: list[memoryview]) -> int:
        original(fd, [pieces[0][:5]])
        raise OSError(28, "No space left on device")

    monkey = pytest.MonkeyPatch()
    monkey.setattr("minibroker.storage.segments.os.writev", failing_writev)
    try:
        with pytest.raises(OSError):
            log.append(read_header(batch), batch)
    finally:
        monkey.undo()
    after = sorted((p.name, p.stat().st_size) for p in tmp_path.glob("*.log"))
    assert [size for _, size in after if size] == [size for _, size in before]
    assert log.next_offset == 4
    assert log.append(read_header(batch), batch).base_offset == 4
    assert _reopened(tmp_path, segment_bytes).next_offset == 5


def test_a_partition_holds_one_open_file_however_many_segments(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    log = SegmentedLog(_store(tmp_path, segment_bytes=100))
    for _ in range(20):
        batch = build_batch([(b"k", b"v" * 40)])
        log.append(read_header(batch), batch)
    assert len(list(tmp_path.glob("*.log"))) == 20
    assert len(os.listdir("/proc/self/fd")) - before == 1
    assert len(split_batches(log.read(0, 1 << 20))) == 20  # sealed ones opened to read
    assert len(os.listdir("/proc/self/fd")) - before == 1
    log.store.close()
