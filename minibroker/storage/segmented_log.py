"""A partition log whose batches live in segment files, with a sparse index in memory.

It keeps one index entry (32 bytes) per index.interval.bytes of batches, Kafka's offset and
time index, not one per batch, and never the batches: 1 GiB of log costs about 8 MiB of
memory at the default 4096, however small its batches.

Index rules:
- An entry is (base offset, byte position, max timestamp) of a stretch of consecutive
  batches: the first batch of the log starts one, and so does every batch that starts
  index.interval.bytes (at most MAX_INDEX_INTERVAL) or more after the current stretch's
  first byte. The stretch's max timestamp is the largest of its batches'; the running
  maximum over the stretches is monotonic, so a timestamp lookup bisects it.
- The first entry is always at the oldest batch kept: deleting batches (retention,
  DeleteRecords) replaces the entries below the new first batch with one at it.
- A lookup bisects the entries, then reads the batch headers of one stretch from the
  segment files: at most the interval plus one batch.
- A read remembers the offset and position it ended at (a bounded number of them), so a
  consumer reading the log in order finds its next batch without reading headers.
- Compaction's rewrite replaces the entries of the rewritten stretch with ones built from
  the new batches; an entry is added where the rewrite ends, so the stretches after it
  keep their positions.
- A segment's first batch always starts an entry, so each sealed segment's entries are its
  own (a recovery point keeps them with it, storage/checkpoint.py).

Checking what is read:
- Batches loaded without being read (a checkpoint's or a recovery point's segments, below
  `trusted_end`) are checked when a read serves them: every batch header walked must
  have a length that fits the log and offsets after the batch before, and every batch
  served below `trusted_end` must pass recovery's checks (CRC-32C included), each byte
  once. A read serves the batches before a bad one; a read of the bad one raises
  CorruptBatch (Fetch answers CORRUPT_MESSAGE), logged once. Walks go on after a bad
  header at the next good batch of its segment (as recovery finds it), so the offsets
  after the damage stay readable. The log then writes no checkpoint or recovery point,
  so the next start scans it and sets the damage aside (storage/segments.py). Batches
  written or scanned since the start are not checked again.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import struct
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from minibroker.protocol import records
from minibroker.protocol.records import BatchHeader
from minibroker.state.log import CorruptBatch, PartitionLog
from minibroker.storage import checkpoint
from minibroker.storage.segments import SegmentStore, first_bad, next_good

log = logging.getLogger("minibroker.storage")

DEFAULT_INDEX_INTERVAL = 4096
# The widest stretch whatever index.interval.bytes says: a lookup walks at most this much
# of batch headers (about a thousand of the smallest batches), so no topic setting makes
# a read hold the broker for long.
MAX_INDEX_INTERVAL = 65536
# base offset, batch length, last offset delta, max timestamp: the header fields a walk needs
_WALKED = struct.Struct(">qi11xi8xq")
_WINDOW = 16384  # bytes read at once while walking batch headers
_REMEMBERED_READS = 64
_MIN_BATCH = records.HEADER_SIZE
_RESYNC_WINDOW = 16 << 20  # bytes searched for the next good batch after a bad header


class _Batch(NamedTuple):
    position: int
    length: int
    base_offset: int
    last_offset: int
    max_timestamp: int


class SegmentedLog(PartitionLog):
    def __init__(
        self,
        store: SegmentStore,
        index_interval: Callable[[], int] = lambda: DEFAULT_INDEX_INTERVAL,
        on_roll: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__()
        self.store = store
        self._index_interval = index_interval
        self._on_roll = on_roll  # a segment was sealed; called before the next batch counts
        self._segment_starts = False  # the next batch indexed is a segment's first
        self.trusted_end = 0  # batches below this byte were loaded without being read
        self.corrupt = False  # a read met a bad batch (see the checking rules)
        self._reported: set[int] = set()  # positions of the bad batches logged
        self._checked: list[tuple[int, int]] = []  # byte ranges checked: sorted, disjoint
        self._skips: dict[int, int] = {}  # a bad header's position -> where walks go on
        self._resumes: set[int] = set()  # the positions walks go on at
        self._entry_offsets = array("q")
        self._entry_positions = array("q")
        self._entry_max = array("q")  # each stretch's own max timestamp
        self._running_max = array("q")  # running maximum over the stretches
        self._end_position = 0
        self._read_ends: dict[int, int] = {}  # offset -> position where a read ended

    def state(self) -> dict[str, Any]:
        """Everything but the batches, as plain data (storage/checkpoint.py)."""
        return {
            **super().state(),
            "end_position": self._end_position,
            "index": [
                self._entry_offsets.tolist(),
                self._entry_positions.tolist(),
                self._entry_max.tolist(),
            ],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Take what `state()` gave, for the segments the store holds (all of it, or
        nothing when it is malformed: KeyError, TypeError or ValueError)."""
        offsets, positions, maxima = (array("q", column) for column in state["index"])
        end_position = int(state["end_position"])
        if not len(offsets) == len(positions) == len(maxima):
            raise ValueError("index arrays of different lengths")
        segments = self.store.segments
        if segments and end_position != segments[-1].start + segments[-1].size:
            raise ValueError(f"end position {end_position} is not where the segments end")
        first = segments[0].start if segments else end_position
        if list(positions) != sorted(positions) or not all(
            first <= position < end_position for position in positions
        ):
            raise ValueError("index positions outside the segments")
        super().load_state(state)
        self._end_position = end_position
        self._entry_offsets, self._entry_positions, self._entry_max = offsets, positions, maxima
        self._running_max = array("q", itertools.accumulate(maxima, max))

    def sealed_state(self) -> dict[str, Any]:
        """The offsets and transactions without the index (a recovery point's state; at
        a roll, before the new segment's first batch counts)."""
        return {**PartitionLog.state(self), "end_position": self._end_position}

    def index_between(self, start: int, stop: int) -> tuple[list[int], list[int], list[int]]:
        """The index entries at byte positions [start, stop)."""
        low = bisect.bisect_left(self._entry_positions, start)
        high = bisect.bisect_left(self._entry_positions, stop)
        return (
            self._entry_offsets[low:high].tolist(),
            self._entry_positions[low:high].tolist(),
            self._entry_max[low:high].tolist(),
        )

    @property
    def index_entries(self) -> int:
        return len(self._entry_offsets)

    def restore(
        self,
        header: BatchHeader,
        length: int,
        *,
        commit: bool | None = None,
        segment_start: bool = False,
    ) -> None:
        self._segment_starts = segment_start
        super().restore(header, length, commit=commit)

    @property
    def _first_position(self) -> int:
        return self._entry_positions[0] if self._entry_positions else self._end_position

    # --- appending ---

    def _keep(
        self, header: BatchHeader, batch: bytes | memoryview, base_offset: int, max_timestamp: int
    ) -> None:
        self.store.append(base_offset, batch, self._end_position, self.leader_epoch)
        if self.store.active_start == self._end_position:
            self._segment_starts = True
            if self._end_position > self._first_position:
                self._on_roll()
        self._index(header, base_offset, max_timestamp, len(batch))

    def _index(
        self, header: BatchHeader, base_offset: int, max_timestamp: int, length: int
    ) -> None:
        position = self._end_position
        positions = self._entry_positions
        if not positions or self._segment_starts or position - positions[-1] >= self._interval():
            self._segment_starts = False
            previous = self._running_max[-1] if self._running_max else -1
            self._entry_offsets.append(base_offset)
            positions.append(position)
            self._entry_max.append(max_timestamp)
            self._running_max.append(max(previous, max_timestamp))
        elif max_timestamp > self._entry_max[-1]:
            self._entry_max[-1] = max_timestamp
            self._running_max[-1] = max(self._running_max[-1], max_timestamp)
        self.next_offset = base_offset + header.last_offset_delta + 1
        self._end_position += length
        self.size_bytes += length

    def _interval(self) -> int:
        return min(self._index_interval(), MAX_INDEX_INTERVAL)

    # --- walking the batch headers ---

    def _walk(self, start: int, stop: int | None = None) -> Iterator[_Batch]:
        """The batches starting at byte `start` (a batch's first byte) up to `stop`."""
        end = self._end_position if stop is None else min(stop, self._end_position)
        position, buffer, buffer_start = start, b"", start
        unpack = _WALKED.unpack_from
        after = -1  # the last offset of the batch before
        positions = self._entry_positions
        entry = bisect.bisect_right(positions, position)
        while position < end:
            # Entries start at batch starts: no batch reaches past the next one.
            while entry < len(positions) and positions[entry] <= position:
                entry += 1
            limit = positions[entry] if entry < len(positions) else self._end_position
            at = position - buffer_start
            if at + _WALKED.size > len(buffer):
                buffer = self.store.read(position, min(position + _WINDOW, self._end_position))
                buffer_start, at = position, 0
                if at + _WALKED.size > len(buffer):
                    raise self._corrupt(position, after + 1, "a batch header past the log's end")
            base_offset, batch_length, delta, max_timestamp = unpack(buffer, at)
            length = batch_length + records.LOG_OVERHEAD
            # A length or offset a good batch cannot have would send the walk astray.
            reason = ""
            if length < _MIN_BATCH or position + length > limit:
                reason = f"length field {batch_length}"
            elif base_offset <= after or delta < 0:
                reason = f"base offset {base_offset}"
            if reason:
                position = self._skip(position, after + 1, reason)
                buffer = b""
                continue
            yield _Batch(position, length, base_offset, base_offset + delta, max_timestamp)
            after = base_offset + delta
            position += length

    def _skip(self, position: int, expected: int, reason: str) -> int:
        """Where a walk goes on after a bad batch header at `position` (loaded without a
        scan): the next good batch in its segment, found as recovery finds it within
        _RESYNC_WINDOW bytes, else the next segment. Raises CorruptBatch when there is
        none, or for bytes written or scanned since the start."""
        resume = self._skips.get(position)
        if resume is not None:
            return resume
        error = self._corrupt(position, expected, reason)
        if position >= self.trusted_end:
            raise error
        _path, _within, segment_end = self.store.file_position(position)
        window = self.store.read(position, min(segment_end, position + _RESYNC_WINDOW))
        found = next_good(memoryview(window), 0, error.offset)
        if found is None and segment_end >= self._end_position:
            raise error
        resume = position + found[0] if found is not None else segment_end
        self._skips[position] = resume
        self._resumes.add(resume)
        return resume

    def _corrupt(self, position: int, offset: int, reason: str) -> CorruptBatch:
        """The error for a bad batch at log byte `position` (logged the first time)."""
        if offset <= 0 and self._entry_positions:
            entry = max(bisect.bisect_right(self._entry_positions, position) - 1, 0)
            offset = self._entry_offsets[entry]  # at or below the bad batch's
        path, within, _segment_end = self.store.file_position(position)
        error = CorruptBatch(path, within, offset, reason, log_position=position)
        if not self.corrupt:
            self.corrupt = True
            checkpoint.discard_recovery_point(self.store.directory)
        if position not in self._reported:
            self._reported.add(position)
            log.error(
                "%s; reads of it answer CORRUPT_MESSAGE, the next start scans the partition "
                "and sets the damaged bytes aside",
                error,
            )
        return error

    def _check(self, pieces: list[bytes | memoryview], start: int, offset: int) -> None:
        """Recovery's checks on the batches a read serves below trusted_end, each byte
        once (the ranges checked are batch boundaries, as a read's pieces are)."""
        position = start
        for piece in pieces:
            stop = position + len(piece)
            for gap_start, gap_stop in self._unchecked(position, min(stop, self.trusted_end)):
                view = memoryview(piece)[gap_start - position : gap_stop - position]
                bad = first_bad(view)
                if bad is not None:
                    at, expected = bad
                    reason = "fails its checks (CRC-32C, magic, length or offsets)"
                    raise self._corrupt(gap_start + at, max(expected, offset), reason)
                self._mark_checked(gap_start, gap_stop)
            position = stop

    def _unchecked(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The parts of [start, stop) not yet checked."""
        gaps: list[tuple[int, int]] = []
        checked = self._checked
        index = max(bisect.bisect_right(checked, (start, start)) - 1, 0)
        at = start
        while at < stop:
            if index < len(checked) and checked[index][0] < stop:
                low, high = checked[index]
                if low > at:
                    gaps.append((at, low))
                at = max(at, high)
                index += 1
            else:
                gaps.append((at, stop))
                break
        return gaps

    def _mark_checked(self, start: int, stop: int) -> None:
        checked = self._checked
        index = bisect.bisect_left(checked, (start, start))
        if index > 0 and checked[index - 1][1] >= start:  # joins the range before
            index -= 1
            start = checked[index][0]
        end = index
        while end < len(checked) and checked[end][0] <= stop:  # and those it reaches
            stop = max(stop, checked[end][1])
            end += 1
        checked[index:end] = [(start, stop)]

    def _stretch(self, entry: int) -> tuple[int, int]:
        """The byte range of entry `entry`'s stretch."""
        positions = self._entry_positions
        stop = positions[entry + 1] if entry + 1 < len(positions) else self._end_position
        return positions[entry], stop

    def _locate(self, offset: int) -> int | None:
        """Byte position of the batch holding `offset`, or of the first one after it
        (None past the last batch)."""
        if offset >= self.next_offset or not self._entry_offsets:
            return None
        remembered = self._read_ends.get(offset)
        if remembered is not None:
            return remembered
        entry = max(bisect.bisect_right(self._entry_offsets, offset) - 1, 0)
        start, stop = self._stretch(entry)
        for batch in self._walk(start, stop):
            if batch.last_offset >= offset:
                if batch.position in self._resumes and offset < batch.base_offset:
                    raise self._in_skipped(batch.position, offset)
                return batch.position
        if stop in self._resumes:
            raise self._in_skipped(stop, offset)
        return stop  # in a gap at the stretch's end: the next stretch's first batch

    def _in_skipped(self, resume: int, offset: int) -> CorruptBatch:
        """The error for an offset in the bad bytes a walk skipped to go on at `resume`
        (not a compaction gap)."""
        skipped = max(bad for bad, after in self._skips.items() if after == resume)
        return self._corrupt(skipped, offset, "the damaged batch holding it")

    def _holding_position(self, byte: int) -> _Batch | None:
        """The batch whose bytes include position `byte` (None at or past the end)."""
        if byte >= self._end_position or not self._entry_positions:
            return None
        byte = max(byte, self._first_position)
        entry = bisect.bisect_right(self._entry_positions, byte) - 1
        for batch in self._walk(self._entry_positions[entry]):
            if batch.position + batch.length > byte:
                return batch
        return None

    def _first_reaching(self, timestamp_ms: int) -> _Batch | None:
        """The first batch whose own max timestamp is at least `timestamp_ms`."""
        entry = bisect.bisect_left(self._running_max, timestamp_ms)
        if entry >= len(self._running_max):
            return None
        start, stop = self._stretch(entry)
        for batch in self._walk(start, stop):
            if batch.max_timestamp >= timestamp_ms:
                return batch
        return None  # not reached: the stretch's maximum says otherwise

    def _last_boundary(self, start: int, limit: int) -> tuple[int, int]:
        """(position, offset) of the last batch boundary at or before `limit` and after
        `start` (a batch's start, or the log's end), with the first offset after it;
        (start, -1) when the batch at `start` alone passes `limit`."""
        if limit >= self._end_position:
            return self._end_position, self.next_offset
        entry = bisect.bisect_right(self._entry_positions, limit) - 1
        boundary, after = start, -1
        walk_from = start
        if self._entry_positions[entry] > start:
            walk_from = boundary = self._entry_positions[entry]
            after = self._entry_offsets[entry]
        for batch in self._walk(walk_from):
            batch_end = batch.position + batch.length
            if batch_end > limit:
                break
            boundary, after = batch_end, batch.last_offset + 1
        return boundary, after

    def _remember_read_end(self, offset: int, position: int) -> None:
        ends = self._read_ends
        if offset not in ends and len(ends) >= _REMEMBERED_READS:
            del ends[next(iter(ends))]
        ends[offset] = position

    # --- reading ---

    def _pieces(
        self, offset: int, max_bytes: int, allow_oversized_first: bool, end: int
    ) -> tuple[list[bytes | memoryview], int]:
        start = self._locate(offset)
        if start is None:
            return [], 0
        try:
            stop, after = self._last_boundary(start, min(start + max_bytes, self._end_position))
            if stop == start and allow_oversized_first:
                first = next(self._walk(start))
                stop, after = start + first.length, first.last_offset + 1
            if end < self.next_offset:
                cap = self._locate(end)
                if cap is not None and cap < stop:
                    stop, after = cap, end
        except CorruptBatch as error:
            if error.log_position <= start:
                raise
            stop, after = error.log_position, -1  # the batches before the bad one
        if stop <= start:
            return [], 0
        pieces = self.store.read_pieces(start, stop)
        if start < self.trusted_end:
            try:
                self._check(pieces, start, offset)
            except CorruptBatch as error:
                if error.log_position <= start:
                    raise
                stop, after = error.log_position, -1
                pieces = self.store.read_pieces(start, stop)
        if after >= 0:
            self._remember_read_end(after, stop)
        return pieces, stop - start

    def offset_after_read(self, offset: int, size: int) -> int:
        start = self._locate(offset)
        if not size or start is None:
            return offset
        if start + size >= self._end_position:
            return self.next_offset
        try:
            return next(self._walk(start + size)).base_offset
        except CorruptBatch:  # the read stopped before a bad batch: after its own last
            return max(batch.last_offset for batch in self._walk(start, start + size)) + 1

    def bytes_from(self, offset: int, end_offset: int | None = None) -> int:
        end = self.next_offset if end_offset is None else end_offset
        start = None if offset >= end else self._locate(offset)
        if start is None:
            return 0
        if end >= self.next_offset:
            return self._end_position - start
        stop = self._locate(end)
        return (self._end_position if stop is None else stop) - start

    def _batch_reaching(self, timestamp_ms: int) -> tuple[bytes, int, int] | None:
        batch = self._first_reaching(timestamp_ms)
        if batch is None:
            return None
        stored = self.store.read(batch.position, batch.position + batch.length)
        return stored, batch.base_offset, batch.max_timestamp

    def _largest_timestamp(self) -> int | None:
        return self._running_max[-1] if self._running_max else None

    def batches(self) -> list[bytes]:
        return [self.store.read(b.position, b.position + b.length) for b in self._walk_all()]

    def _walk_all(self) -> Iterator[_Batch]:
        return self._walk(self._first_position)

    # --- retention and DeleteRecords ---

    def retained_from(self, cutoff_ms: int | None, max_bytes: int | None) -> int:
        if not self._entry_positions:
            return self.next_offset
        # Kept from the later of the first batch not too old and the first that leaves
        # less than max_bytes after it, then on past any old ones.
        keep_from = self._first_position
        if max_bytes is not None:
            holding = self._holding_position(self._end_position - max_bytes)
            if holding is None:
                return self.next_offset
            keep_from = max(keep_from, holding.position)
        if cutoff_ms is not None:
            young = self._first_reaching(cutoff_ms)
            if young is None:
                return self.next_offset
            keep_from = max(keep_from, young.position)
        for batch in self._walk(keep_from):
            if cutoff_ms is None or batch.max_timestamp >= cutoff_ms:
                return batch.base_offset
        return self.next_offset

    def _drop_before(self, offset: int) -> None:
        self.store.log_start_moved(offset)
        self._read_ends.clear()
        keep = self._locate(offset)
        if keep is None:
            keep = self._end_position
        if keep == self._first_position:
            return
        self.store.drop_first(keep)
        self._reindex_from(keep, [])
        self.size_bytes = self._end_position - keep

    def _reindex_from(self, keep: int, new_entries: list[tuple[int, int, int]]) -> None:
        """Replace the entries below byte `keep` (a batch start, or the end) with
        `new_entries`, adding one at `keep` when none starts there."""
        positions = self._entry_positions
        entry = bisect.bisect_right(positions, keep) - 1
        tail: list[tuple[int, int, int]] = []
        if keep < self._end_position and (entry < 0 or positions[entry] != keep):
            _start, stop = self._stretch(entry)
            walked = list(self._walk(keep, stop))
            tail = [(walked[0].base_offset, keep, max(b.max_timestamp for b in walked))]
        first_kept = entry if entry >= 0 and positions[entry] == keep else entry + 1
        entries = [*new_entries, *tail]
        self._entry_offsets[:first_kept] = array("q", (e[0] for e in entries))
        self._entry_positions[:first_kept] = array("q", (e[1] for e in entries))
        self._entry_max[:first_kept] = array("q", (e[2] for e in entries))
        self._running_max = array("q", itertools.accumulate(self._entry_max, max))

    # --- compaction ---

    def has_batches_before(self, offset: int) -> bool:
        first = next(self._walk_all(), None)
        return first is not None and first.last_offset < offset

    def _end_of(self, end_offset: int) -> int:
        """Byte position after the batches that end before `end_offset`."""
        stop = self._locate(end_offset)
        return self._end_position if stop is None else stop

    def stored_batches(self, end_offset: int) -> Iterator[bytes]:
        for batch in self._walk(self._first_position, self._end_of(end_offset)):
            stored = self.store.read(batch.position, batch.position + batch.length)
            if batch.position < self.trusted_end:
                # Compaction would write a damaged batch's records into a sound new one.
                self._check([stored], batch.position, batch.base_offset)
            yield stored

    def batch_timestamps(self, first_offset: int, end_offset: int) -> Iterator[int]:
        start = self._locate(first_offset)
        if start is None:
            return iter(())
        return (batch.max_timestamp for batch in self._walk(start, self._end_of(end_offset)))

    def replace_before(self, end_offset: int, batches: Sequence[bytes]) -> None:
        stop = self._end_of(end_offset)
        start = stop - sum(len(batch) for batch in batches)
        self.store.replace_first(batches, start)
        self._read_ends.clear()
        self._checked.clear()
        entries: list[tuple[int, int, int]] = []
        interval = self._interval()
        position = start
        for batch in batches:
            header = records.read_header(batch)
            if not entries or position - entries[-1][1] >= interval:
                entries.append((header.base_offset, position, header.max_timestamp))
            elif header.max_timestamp > entries[-1][2]:
                offset, at, _ = entries[-1]
                entries[-1] = (offset, at, header.max_timestamp)
            position += len(batch)
        self._reindex_from(stop, entries)
        self.size_bytes = self._end_position - self._first_position
