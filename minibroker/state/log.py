"""A partition log: its offsets, transactions and index, above where its batches are kept.

Two kinds share the rules here and differ in where the batches go:
- MemoryLog (the default) keeps each batch as the producer sent it (often a view of the
  request frame the socket read it into) and indexes every batch: parallel arrays of
  base offsets, last offsets, own and running-maximum max timestamps and byte positions.
- SegmentedLog (minibroker/storage/segmented_log.py, with a data directory) writes the
  batches to segment files and keeps a sparse index: an entry per index.interval.bytes
  of batches, not per batch.

Appending never decodes or copies records. A fetch puts each batch's base offset, length
and partition leader epoch (the header fields before the CRC, which Kafka's broker sets
when it stores a batch) in front of the rest of its bytes. The running maximum of the max
timestamps is monotonic, so a timestamp lookup is a bisection, like Kafka's time index.
Byte positions count from the partition's creation and never move back, so deleting old
batches leaves the others' positions alone. Compaction (state/compaction.py) can leave
gaps between batches: a read at an offset in a gap starts at the next batch.

Transactions: a transactional batch opens its producer's transaction in the partition (at
its base offset) unless one is open; a control batch (a commit or abort marker) closes it.
The last stable offset (LSO) is the first offset of the oldest open transaction, or the
high watermark when none is open: read_committed readers read below it. Each aborted
transaction is kept as (producer id, first offset, marker offset), Kafka's transaction
index, for read_committed fetches to list.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibroker.protocol import records
from minibroker.protocol.records import BatchHeader

# The most records one timestamp lookup decodes before it answers at batch granularity.
MAX_RECORDS_SCANNED = 50_000
# Every partition's leader epoch: one leader, never re-elected. Stamped into each batch a
# fetch returns, as Kafka stamps the epoch a batch was appended in (consumers commit it).
LEADER_EPOCH = 0


class CorruptBatch(Exception):
    """A stored batch that fails its checks when read (a data directory's log,
    storage/segmented_log.py); Fetch answers CORRUPT_MESSAGE."""

    def __init__(
        self, path: Path | None, position: int, offset: int, reason: str, *, log_position: int
    ) -> None:
        where = f"{path}: byte {position}" if path is not None else f"log byte {position}"
        super().__init__(f"{where}: corrupt batch (offset {offset} or after): {reason}")
        self.path = path
        self.position = position  # in the file
        self.offset = offset  # the first offset the batch should hold, or one below it
        self.reason = reason
        self.log_position = log_position  # the log's byte position (state/log.py)


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime


class PartitionLog:
    """What every partition log does; subclasses keep the batches and index them."""

    def __init__(self) -> None:
        self.log_start_offset = 0
        self.next_offset = 0  # log end offset; with no followers also the high watermark
        self.size_bytes = 0
        self._open_transactions: dict[int, int] = {}  # producer id -> first offset
        self.aborted: list[AbortedTransaction] = []  # by marker offset
        # Kafka's leader epoch cache: each leader epoch and the offset where it began,
        # both increasing; the last is the epoch stamped into new batches.
        self._epoch_starts = array("q", [0])
        self._epochs = array("q", [LEADER_EPOCH])

    @property
    def leader_epoch(self) -> int:
        """The partition's leader epoch, stamped into the batches appended from now on."""
        return self._epochs[-1]

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        self.begin_epoch(epoch, self.next_offset)

    def begin_epoch(self, epoch: int, start: int) -> None:
        """Leader epoch `epoch` begins at offset `start` (entries it supersedes go)."""
        if epoch == self._epochs[-1]:
            return
        while self._epochs and (self._epochs[-1] >= epoch or self._epoch_starts[-1] >= start):
            self._epochs.pop()
            self._epoch_starts.pop()
        self._epochs.append(epoch)
        self._epoch_starts.append(start)

    def epoch_at(self, offset: int) -> int:
        """The leader epoch the batch holding `offset` was appended in."""
        found = bisect.bisect_right(self._epoch_starts, offset) - 1
        return self._epochs[found] if found >= 0 else LEADER_EPOCH

    def _epoch_and_end(self, offset: int) -> tuple[int, int]:
        """The epoch of the batch holding `offset`, and where the next epoch begins
        (past the log end when none has)."""
        found = bisect.bisect_right(self._epoch_starts, offset)
        epoch = self._epochs[found - 1] if found > 0 else LEADER_EPOCH
        starts = self._epoch_starts
        return epoch, starts[found] if found < len(starts) else self.next_offset + 1

    def epoch_end(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer for `epoch`: the largest epoch at most `epoch`
        and the offset where the next one began (the latest: the log end), as Kafka's
        leader epoch cache answers; (-1, -1) for a later or negative epoch."""
        latest = self._epochs[-1]
        if epoch == latest:
            return latest, self.next_offset
        if epoch > latest or epoch < 0:
            return -1, -1
        higher = bisect.bisect_right(self._epochs, epoch)
        floor = self._epochs[higher - 1] if higher > 0 else epoch
        return floor, self._epoch_starts[higher]

    @property
    def high_watermark(self) -> int:
        return self.next_offset

    @property
    def last_stable_offset(self) -> int:
        if not self._open_transactions:
            return self.next_offset
        # Records deleted below the log start leave it there (Kafka moves its first
        # unstable offset up to the log start too).
        return max(min(self._open_transactions.values()), self.log_start_offset)

    def open_transaction_start(self, producer_id: int) -> int | None:
        """First offset of the producer's open transaction here, or None."""
        return self._open_transactions.get(producer_id)

    def append_marker(
        self, producer_id: int, epoch: int, *, commit: bool, coordinator_epoch: int, now_ms: int
    ) -> int:
        """Append a commit or abort marker for the producer's transaction; its offset."""
        batch = records.control_batch(
            producer_id, epoch, commit=commit, coordinator_epoch=coordinator_epoch, now_ms=now_ms
        )
        offset = self.append(records.read_header(batch), batch).base_offset
        first = self._open_transactions.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted.append(AbortedTransaction(producer_id, first, offset))
        return offset

    def aborted_between(self, first: int, upper: int) -> list[AbortedTransaction]:
        """Aborted transactions a read of offsets [first, upper) touches (Kafka's
        collectAbortedTxns: marker at or after `first`, begun before `upper`)."""
        aborted = self.aborted
        start = bisect.bisect_left(aborted, first, key=lambda t: t.last_offset)
        return [t for t in aborted[start:] if t.first_offset < upper]

    def append(
        self,
        header: BatchHeader,
        batch: bytes | memoryview,
        *,
        log_append_time_ms: int | None = None,
    ) -> AppendResult:
        base_offset = self.next_offset
        if log_append_time_ms is None:
            stored = batch
            max_timestamp = header.max_timestamp
            append_time = -1
        else:
            stored = records.with_log_append_time(batch, base_offset, log_append_time_ms)
            max_timestamp = log_append_time_ms
            append_time = log_append_time_ms
        self._keep(header, stored, base_offset, max_timestamp)
        if header.is_transactional and not header.is_control:
            self._open_transactions.setdefault(header.producer_id, base_offset)
        return AppendResult(base_offset=base_offset, log_append_time=append_time)

    def restore(self, header: BatchHeader, length: int, *, commit: bool | None = None) -> None:
        """Index a batch the store already holds at the end (recovery from segment
        files): its offsets, timestamps and transaction bookkeeping as append would
        have left them. `commit` tells a control batch's marker type."""
        self.begin_epoch(header.partition_leader_epoch, header.base_offset)
        self._index(header, header.base_offset, header.max_timestamp, length)
        if header.is_control:
            first = self._open_transactions.pop(header.producer_id, None)
            if first is not None and commit is False:
                self.aborted.append(
                    AbortedTransaction(header.producer_id, first, header.base_offset)
                )
        elif header.is_transactional:
            self._open_transactions.setdefault(header.producer_id, header.base_offset)

    def delete_before(self, offset: int) -> int:
        """Move the log start offset up to `offset` (DeleteRecords; at most the log end)
        and drop the batches that end before it; return the log start offset.

        The batch holding the new start is kept whole, as Kafka keeps the segment holding
        it: a fetch from the start returns it and the consumer skips the records before
        its fetch offset. A lower offset than the current start changes nothing.
        """
        offset = min(offset, self.next_offset)
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        self.aborted = [t for t in self.aborted if t.last_offset >= offset]
        self._drop_before(offset)
        return offset

    def state(self) -> dict[str, Any]:
        """The offsets and the open and aborted transactions, as plain data (a data
        directory's checkpoint, storage/checkpoint.py)."""
        return {
            "log_start_offset": self.log_start_offset,
            "next_offset": self.next_offset,
            "size_bytes": self.size_bytes,
            "open_transactions": sorted(self._open_transactions.items()),
            "aborted": [[t.producer_id, t.first_offset, t.last_offset] for t in self.aborted],
            "epochs": [list(pair) for pair in zip(self._epoch_starts, self._epochs, strict=True)],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Take what `state()` gave (all of it, or nothing when it is malformed:
        KeyError, TypeError or ValueError)."""
        parsed = (
            int(state["log_start_offset"]),
            int(state["next_offset"]),
            int(state["size_bytes"]),
            {int(p): int(f) for p, f in state["open_transactions"]},
            [AbortedTransaction(int(p), int(f), int(m)) for p, f, m in state["aborted"]],
            [(int(start), int(epoch)) for start, epoch in state.get("epochs") or [[0, 0]]],
        )
        (
            self.log_start_offset,
            self.next_offset,
            self.size_bytes,
            self._open_transactions,
            self.aborted,
            epochs,
        ) = parsed
        self._epoch_starts = array("q", [start for start, _ in epochs])
        self._epochs = array("q", [epoch for _, epoch in epochs])

    def read(self, offset: int, max_bytes: int, *, allow_oversized_first: bool = True) -> bytes:
        """Stored batches from the one holding `offset`, up to `max_bytes` in total.

        Like Kafka, the first batch is returned whole even when it alone exceeds
        `max_bytes` (unless told otherwise), so a consumer can always make progress.
        """
        pieces, _ = self.read_pieces(offset, max_bytes, allow_oversized_first=allow_oversized_first)
        return b"".join(pieces)

    # --- kept and indexed by each kind of log ---

    def _keep(
        self, header: BatchHeader, batch: bytes | memoryview, base_offset: int, max_timestamp: int
    ) -> None:
        """Store `batch` (its header's base offset not yet set) at the end and index it."""
        raise NotImplementedError

    def _index(
        self, header: BatchHeader, base_offset: int, max_timestamp: int, length: int
    ) -> None:
        """Index a batch of `length` bytes stored at the end."""
        raise NotImplementedError

    def _drop_before(self, offset: int) -> None:
        """Forget the batches that end before `offset` (the new log start)."""
        raise NotImplementedError

    def _batch_reaching(self, timestamp_ms: int) -> tuple[bytes, int, int] | None:
        """(batch as stored, base offset, own max timestamp) of the first batch whose
        max timestamp is at least `timestamp_ms`, or None."""
        raise NotImplementedError

    def read_pieces(
        self,
        offset: int,
        max_bytes: int,
        *,
        allow_oversized_first: bool = True,
        end_offset: int | None = None,
    ) -> tuple[list[bytes | memoryview], int]:
        """What `read` returns, as pieces (views of the stored batches) and their total
        size: a Fetch answer copies them once, into its frame. With `end_offset` (the last
        stable offset of a read_committed fetch), only batches before it."""
        end = self.next_offset if end_offset is None else end_offset
        if offset >= end:
            return [], 0
        return self._pieces(offset, max_bytes, allow_oversized_first, end)

    def _pieces(
        self, offset: int, max_bytes: int, allow_oversized_first: bool, end: int
    ) -> tuple[list[bytes | memoryview], int]:
        """read_pieces below `end`, which is above `offset`."""
        raise NotImplementedError

    def offset_after_read(self, offset: int, size: int) -> int:
        """The first offset after a read of `size` bytes from `offset` (read_pieces)."""
        raise NotImplementedError

    def bytes_from(self, offset: int, end_offset: int | None = None) -> int:
        """Stored bytes a read at `offset` could return (its batch and all after it, up to
        the batch holding `end_offset` when given)."""
        raise NotImplementedError

    def retained_from(self, cutoff_ms: int | None, max_bytes: int | None) -> int:
        """The offset retention lets the log start at (state/retention.py): from the
        oldest batch on, a batch goes while its largest timestamp is before `cutoff_ms`
        or the log without it still holds at least `max_bytes` (None: no such limit)."""
        raise NotImplementedError

    def has_batches_before(self, offset: int) -> bool:
        """Whether the oldest batch ends before `offset`."""
        raise NotImplementedError

    def stored_batches(self, end_offset: int) -> Iterator[bytes]:
        """The batches that end before `end_offset`, oldest first, as a fetch returns them."""
        raise NotImplementedError

    def batch_timestamps(self, first_offset: int, end_offset: int) -> Iterator[int]:
        """Each batch's own max timestamp, from the one holding `first_offset` to the
        last that ends before `end_offset` (from the index where it has them)."""
        raise NotImplementedError

    def replace_before(self, end_offset: int, batches: Sequence[bytes]) -> None:
        """Put `batches` (complete, base offsets set, in offset order, within the offsets
        they replace) in place of the batches that end before `end_offset`: compaction's
        rewrite. Offsets, the log start and the end stay; the rewritten batches end where
        the replaced ones ended."""
        raise NotImplementedError

    def batches(self) -> list[bytes]:
        """Every batch as a fetch would return it (tests and tools; not the hot path)."""
        raise NotImplementedError

    # --- lookups by timestamp, the same for both ---

    def offset_for_timestamp(
        self, timestamp_ms: int, *, max_decompressed_bytes: int = records.MAX_DECOMPRESSED_BYTES
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp_ms`.

        Only one batch is decoded: the first whose running maximum reaches the target
        (every batch before it ends earlier, and its own maximum is the one that reached
        it). Decoding streams and stops at the record found, or after
        MAX_RECORDS_SCANNED records: a batch of millions of tiny records would otherwise
        hold the broker for seconds. The answer is then the batch's base offset, which
        is never after the record asked for.
        """
        found = self._batch_reaching(timestamp_ms)
        if found is None:
            return None
        batch, base_offset, batch_timestamp = found
        start = self.log_start_offset  # records before it were deleted (DeleteRecords)
        try:
            scanned = records.iter_records(batch, max_decompressed_bytes=max_decompressed_bytes)
            for record in itertools.islice(scanned, MAX_RECORDS_SCANNED):
                if record.timestamp >= timestamp_ms and record.offset >= start:
                    return record.offset, record.timestamp
        except records.InvalidBatch:
            pass  # undecodable codec, malformed or over the limit: batch granularity
        return max(base_offset, start), batch_timestamp

    def max_timestamp(
        self, *, max_decompressed_bytes: int = records.MAX_DECOMPRESSED_BYTES
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (ListOffsets -3).

        Like Kafka 3.7+, the offset is that record's own, not the end of its batch: a
        batch's records need not be in timestamp order. Only the first batch holding the
        largest timestamp (where the running maximum first reaches it) is decoded.
        """
        largest = self._largest_timestamp()
        found = None if largest is None else self._batch_reaching(largest)
        if found is None:
            return None
        batch = found[0]
        header = records.read_header(batch)
        try:
            scanned = records.iter_records(batch, max_decompressed_bytes=max_decompressed_bytes)
            for record in itertools.islice(scanned, MAX_RECORDS_SCANNED):
                if record.timestamp == header.max_timestamp:
                    return record.offset, record.timestamp
        except records.InvalidBatch:
            pass  # undecodable codec, malformed or over the limit: batch granularity
        return header.base_offset + header.last_offset_delta, header.max_timestamp

    def _largest_timestamp(self) -> int | None:
        """The largest max timestamp of any batch kept, or None when there are none."""
        raise NotImplementedError


class MemoryLog(PartitionLog):
    """Batches in memory, each as the producer sent it, every one indexed."""

    def __init__(self) -> None:
        super().__init__()
        self._batches: list[bytes | memoryview] = []
        self._base_offsets = array("q")
        self._last_offsets = array("q")  # each batch's last offset: finds a batch by offset
        self._max_timestamps = array("q")  # running maximum, for bisection
        self._batch_timestamps = array("q")  # each batch's own max timestamp
        self._positions = array("q")  # byte position of each batch since the log began
        self._end_position = 0  # byte position after the last batch

    @property
    def batch_count(self) -> int:
        return len(self._base_offsets)

    def _position_of(self, index: int) -> int:
        """Byte position where batch `index` starts (the batch count: the end)."""
        return self._positions[index] if index < len(self._positions) else self._end_position

    def _length(self, index: int) -> int:
        return self._position_of(index + 1) - self._positions[index]

    def _keep(
        self, header: BatchHeader, batch: bytes | memoryview, base_offset: int, max_timestamp: int
    ) -> None:
        self._batches.append(batch)
        self._index(header, base_offset, max_timestamp, len(batch))

    def _index(
        self, header: BatchHeader, base_offset: int, max_timestamp: int, length: int
    ) -> None:
        previous_max = self._max_timestamps[-1] if self._max_timestamps else -1
        self._base_offsets.append(base_offset)
        self._last_offsets.append(base_offset + header.last_offset_delta)
        self._batch_timestamps.append(max_timestamp)
        self._positions.append(self._end_position)
        self._max_timestamps.append(max(previous_max, max_timestamp))
        self.next_offset = base_offset + header.last_offset_delta + 1
        self._end_position += length
        self.size_bytes += length

    def _drop_before(self, offset: int) -> None:
        keep_from = self._batch_index(offset)
        if keep_from == 0:
            return
        kept_at = self._position_of(keep_from)
        del self._batches[:keep_from]
        del self._base_offsets[:keep_from]
        del self._last_offsets[:keep_from]
        del self._batch_timestamps[:keep_from]
        del self._positions[:keep_from]
        self._max_timestamps = array("q", itertools.accumulate(self._batch_timestamps, max))
        self.size_bytes = self._end_position - kept_at

    def replace_first(self, count: int, batches: Sequence[bytes]) -> None:
        """replace_before, by the number of batches replaced."""
        count = min(count, len(self._base_offsets))
        end = self._position_of(count)
        start = end - sum(len(batch) for batch in batches)
        self._batches[:count] = batches
        headers = [records.read_header(batch) for batch in batches]
        lengths = itertools.accumulate((len(batch) for batch in batches), initial=start)
        self._base_offsets[:count] = array("q", (h.base_offset for h in headers))
        self._last_offsets[:count] = array(
            "q", (h.base_offset + h.last_offset_delta for h in headers)
        )
        self._batch_timestamps[:count] = array("q", (h.max_timestamp for h in headers))
        self._positions[:count] = array("q", itertools.islice(lengths, len(batches)))
        self._max_timestamps = array("q", itertools.accumulate(self._batch_timestamps, max))
        self.size_bytes = self._end_position - self._position_of(0)

    def replace_before(self, end_offset: int, batches: Sequence[bytes]) -> None:
        self.replace_first(self._batch_index(end_offset), batches)

    def has_batches_before(self, offset: int) -> bool:
        return self._batch_index(offset) > 0

    def stored_batches(self, end_offset: int) -> Iterator[bytes]:
        for index in range(self._batch_index(end_offset)):
            yield self.stored_batch(index)

    def batch_timestamps(self, first_offset: int, end_offset: int) -> Iterator[int]:
        first, stop = self._batch_index(first_offset), self._batch_index(end_offset)
        return iter(self._batch_timestamps[first:stop])

    def batch_offsets(self, index: int) -> tuple[int, int]:
        """(base offset, last offset) of batch `index`."""
        return self._base_offsets[index], self._last_offsets[index]

    def stored_batch(self, index: int) -> bytes:
        """Batch `index` as a fetch returns it: its base offset and leader epoch in the
        header (off the hot path)."""
        base_offset = self._base_offsets[index]
        return records.with_base_offset(
            self._batches[index], base_offset, self.epoch_at(base_offset)
        )

    def batches(self) -> list[bytes]:
        return [self.stored_batch(index) for index in range(len(self._base_offsets))]

    def retained_from(self, cutoff_ms: int | None, max_bytes: int | None) -> int:
        index, size = 0, self.size_bytes
        count = len(self._base_offsets)
        while index < count:
            length = self._length(index)
            old = cutoff_ms is not None and self._batch_timestamps[index] < cutoff_ms
            large = max_bytes is not None and size - length >= max_bytes
            if not (old or large):
                break
            size -= length
            index += 1
        return self._base_offsets[index] if index < count else self.next_offset

    def bytes_from(self, offset: int, end_offset: int | None = None) -> int:
        end = self.next_offset if end_offset is None else end_offset
        index = self._batch_index(offset)
        if offset >= end or index >= len(self._positions):
            return 0
        first = self._positions[index]
        if end >= self.next_offset:
            return self._end_position - first
        stop = bisect.bisect_left(self._base_offsets, end)
        return (
            self._positions[stop] if stop < len(self._positions) else self._end_position
        ) - first

    def _batch_index(self, offset: int) -> int:
        """Index of the batch that holds `offset`, or of the first one after it (past the
        last batch: the batch count)."""
        return bisect.bisect_left(self._last_offsets, offset)

    def _pieces(
        self, offset: int, max_bytes: int, allow_oversized_first: bool, end: int
    ) -> tuple[list[bytes | memoryview], int]:
        first = self._batch_index(offset)
        count = len(self._positions)
        if first >= count:
            return [], 0
        positions = self._positions
        start = positions[first]
        # The batches that fit in max_bytes whole, and none at or after `end`.
        stop = bisect.bisect_right(positions, start + max_bytes, lo=first + 1)
        if stop < count or self._end_position - start > max_bytes:
            stop -= 1
        if stop == first and allow_oversized_first:
            stop = first + 1
        if end < self.next_offset:
            stop = min(stop, bisect.bisect_left(self._base_offsets, end, lo=first))
        if stop == first:
            return [], 0
        total = self._position_of(stop) - start
        pieces: list[bytes | memoryview] = []
        pack_prefix = records.STORED_PREFIX.pack
        after_prefix = records.STORED_PREFIX.size
        length_of = records.LOG_OVERHEAD
        batches, base_offsets = self._batches, self._base_offsets
        # The epoch of each batch: looked up again only where the next epoch begins.
        epoch, next_epoch_at = self._epoch_and_end(base_offsets[first])
        for index in range(first, stop):
            batch, base_offset = batches[index], base_offsets[index]
            if base_offset >= next_epoch_at:
                epoch, next_epoch_at = self._epoch_and_end(base_offset)
            pieces.append(pack_prefix(base_offset, len(batch) - length_of, epoch))
            pieces.append(memoryview(batch)[after_prefix:])
        return pieces, total

    def offset_after_read(self, offset: int, size: int) -> int:
        if not size:
            return offset
        end_position = self._positions[self._batch_index(offset)] + size
        index = bisect.bisect_left(self._positions, end_position)
        return self._base_offsets[index] if index < len(self._positions) else self.next_offset

    def _batch_reaching(self, timestamp_ms: int) -> tuple[bytes, int, int] | None:
        index = bisect.bisect_left(self._max_timestamps, timestamp_ms)
        if index >= len(self._base_offsets):
            return None
        return self.stored_batch(index), self._base_offsets[index], self._batch_timestamps[index]

    def _largest_timestamp(self) -> int | None:
        return self._max_timestamps[-1] if self._max_timestamps else None
