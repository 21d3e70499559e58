"""The sparse index of a log on disk answers every question as the fully indexed
in-memory log does, through appends, deletions and compaction's rewrites."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.protocol.records import build_batch, read_header
from minibroker.state.log import MemoryLog, PartitionLog
from minibroker.storage.segmented_log import MAX_INDEX_INTERVAL, SegmentedLog
from minibroker.storage.segments import SegmentStore

READ_SIZES = (1, 60, 200, 700, 1 << 20)


def _append(logs: tuple[PartitionLog, ...], draw: st.DataObject) -> None:
    count = draw.draw(st.integers(1, 4), label="records")
    size = draw.draw(st.integers(0, 300), label="value size")
    timestamp = draw.draw(st.integers(0, 1000), label="timestamp")
    batch = build_batch([(b"k%d" % i, b"v" * size) for i in range(count)], timestamp_ms=timestamp)
    for log in logs:
        log.append(read_header(batch), batch)


def _compact(memory: MemoryLog, disk: SegmentedLog, draw: st.DataObject) -> None:
    """Keep a drawn subset of the batches before a drawn batch boundary, always the
    newest (as compaction does)."""
    bases = [read_header(b).base_offset for b in memory.batches()]
    if not bases:
        return
    end = draw.draw(st.sampled_from([*bases, memory.next_offset]), label="compaction end")
    replaced = list(memory.stored_batches(end))
    newest = len(replaced) == len(bases)
    kept = [
        batch
        for index, batch in enumerate(replaced)
        if (newest and index == len(replaced) - 1) or draw.draw(st.booleans(), label="keep")
    ]
    if len(kept) == len(replaced):
        return
    memory.replace_before(end, kept)
    disk.replace_before(end, kept)


def _same_answers(memory: MemoryLog, disk: SegmentedLog, draw: st.DataObject) -> None:
    assert (disk.next_offset, disk.log_start_offset, disk.size_bytes) == (
        memory.next_offset,
        memory.log_start_offset,
        memory.size_bytes,
    )
    assert disk.batches() == memory.batches()
    bases = [read_header(b).base_offset for b in memory.batches()]
    ends = [None, *bases, memory.next_offset]
    for offset in range(max(memory.log_start_offset - 1, 0), memory.next_offset + 2):
        max_bytes = draw.draw(st.sampled_from(READ_SIZES), label="max bytes")
        oversized = draw.draw(st.booleans(), label="oversized first")
        end = draw.draw(st.sampled_from(ends), label="end offset")
        answers = []
        for log in (memory, disk):
            pieces, size = log.read_pieces(
                offset, max_bytes, allow_oversized_first=oversized, end_offset=end
            )
            answers.append(
                (
                    b"".join(pieces),
                    size,
                    log.offset_after_read(offset, size),
                    log.bytes_from(offset, end),
                    log.has_batches_before(offset),
                )
            )
        assert answers[1] == answers[0], (offset, max_bytes, oversized, end)
    for timestamp in draw.draw(st.lists(st.integers(-1, 1001), max_size=4), label="timestamps"):
        assert disk.offset_for_timestamp(timestamp) == memory.offset_for_timestamp(timestamp)
    assert disk.max_timestamp() == memory.max_timestamp()
    cutoff = draw.draw(st.none() | st.integers(0, 1001), label="retention cutoff")
    max_bytes = draw.draw(st.none() | st.integers(0, memory.size_bytes + 10), label="bytes")
    assert disk.retained_from(cutoff, max_bytes) == memory.retained_from(cutoff, max_bytes)
    boundaries = [*bases, memory.next_offset]
    first, end = sorted(draw.draw(st.sampled_from(boundaries)) for _ in range(2))
    assert list(disk.batch_timestamps(first, end)) == list(memory.batch_timestamps(first, end))
    assert list(disk.stored_batches(end)) == list(memory.stored_batches(end))


@pytest.mark.parametrize("index_interval", [0, 150, 600, 4096])
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(draw=st.data())
def test_the_sparse_index_answers_as_the_full_one(index_interval: int, draw: st.DataObject) -> None:
    segment_bytes = draw.draw(st.sampled_from([300, 1000, 1 << 30]), label="segment bytes")
    with tempfile.TemporaryDirectory() as directory:
        store = SegmentStore(Path(directory), lambda: segment_bytes, lambda store: None)
        memory, disk = MemoryLog(), SegmentedLog(store, lambda: index_interval)
        try:
            for _ in range(draw.draw(st.integers(1, 12), label="steps")):
                step = draw.draw(st.sampled_from(["append"] * 4 + ["delete", "compact"]))
                if step == "append":
                    _append((memory, disk), draw)
                elif step == "delete":
                    offset = draw.draw(st.integers(0, memory.next_offset + 1), label="delete")
                    assert disk.delete_before(offset) == memory.delete_before(offset)
                else:
                    _compact(memory, disk, draw)
                _same_answers(memory, disk, draw)
        finally:
            store.close()


def test_the_index_keeps_one_entry_per_interval_not_per_batch(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path, lambda: 1 << 30, lambda store: None)
    log = SegmentedLog(store, lambda: 4096)
    batch = build_batch([(b"k", b"v" * 40)])
    for _ in range(10_000):
        log.append(read_header(batch), batch)
    assert log.index_entries <= log.size_bytes // 4096 + 1  # one per 4 KiB, not per batch
    assert log.offset_for_timestamp(0) == (0, 0)
    assert read_header(log.read(7_777, 1)).base_offset == 7_777
    store.close()


def test_a_huge_index_interval_still_indexes_every_64_kib(tmp_path: Path) -> None:
    """However large index.interval.bytes is set, a lookup walks at most 64 KiB of
    headers, so one topic's setting cannot make reads hold the broker."""
    store = SegmentStore(tmp_path, lambda: 1 << 30, lambda store: None)
    log = SegmentedLog(store, lambda: 2**31 - 1)
    batch = build_batch([(b"k", b"v" * 40)])
    for _ in range(10_000):
        log.append(read_header(batch), batch)
    assert log.index_entries >= log.size_bytes // (MAX_INDEX_INTERVAL + len(batch)) > 1
    store.close()
