"""A partition log: record batches kept as the raw bytes the producer sent.

Appending never decodes or copies records: a batch is kept as it arrived (often a view
of the request frame the socket read it into) and its assigned base offset goes into the
index. A fetch puts each batch's base offset, length and partition leader epoch (the
header fields before the CRC, which Kafka's broker sets when it stores a batch) in front
of a view of the rest of its bytes, pieces the server hands to the socket. Two parallel
arrays index the batches: their base offsets (to find the batch holding an offset) and
the running maximum of their max timestamps (monotonic, so a timestamp lookup is a
bisection, like Kafka's time index).

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
from dataclasses import dataclass

from minibroker.protocol import records
from minibroker.protocol.records import BatchHeader

# The most records one timestamp lookup decodes before it answers at batch granularity.
MAX_RECORDS_SCANNED = 50_000
# Every partition's leader epoch: one leader, never re-elected. Stamped into each batch a
# fetch returns, as Kafka stamps the epoch a batch was appended in (consumers commit it).
LEADER_EPOCH = 0


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
    def __init__(self) -> None:
        self._batches: list[bytes | memoryview] = []
        self._base_offsets = array("q")
        self._max_timestamps = array("q")  # running maximum, for bisection
        self._batch_timestamps = array("q")  # each batch's own max timestamp
        self._positions = array("q")  # byte position of each batch in the log
        self.log_start_offset = 0
        self.next_offset = 0  # log end offset; with no followers also the high watermark
        self.size_bytes = 0
        self._open_transactions: dict[int, int] = {}  # producer id -> first offset
        self.aborted: list[AbortedTransaction] = []  # by marker offset

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

    @property
    def batch_count(self) -> int:
        return len(self._batches)

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
        previous_max = self._max_timestamps[-1] if self._max_timestamps else -1
        self._batches.append(stored)
        self._base_offsets.append(base_offset)
        self._batch_timestamps.append(max_timestamp)
        self._positions.append(self.size_bytes)
        self._max_timestamps.append(max(previous_max, max_timestamp))
        if header.is_transactional and not header.is_control:
            self._open_transactions.setdefault(header.producer_id, base_offset)
        self.next_offset = base_offset + header.last_offset_delta + 1
        self.size_bytes += len(stored)
        return AppendResult(base_offset=base_offset, log_append_time=append_time)

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
        keep_from = self._batch_index(offset) if offset < self.next_offset else len(self._batches)
        if keep_from == 0:
            return offset
        removed = self._positions[keep_from] if keep_from < len(self._batches) else self.size_bytes
        del self._batches[:keep_from]
        del self._base_offsets[:keep_from]
        del self._batch_timestamps[:keep_from]
        self._positions = array(
            "q", (position - removed for position in self._positions[keep_from:])
        )
        self._max_timestamps = array("q", itertools.accumulate(self._batch_timestamps, max))
        self.size_bytes -= removed
        return offset

    def retained_from(self, cutoff_ms: int | None, max_bytes: int | None) -> int:
        """The offset retention lets the log start at (state/retention.py): from the
        oldest batch on, a batch goes while its largest timestamp is before `cutoff_ms`
        or the log without it still holds at least `max_bytes` (None: no such limit)."""
        index, size = 0, self.size_bytes
        count = len(self._batches)
        while index < count:
            length = len(self._batches[index])
            old = cutoff_ms is not None and self._batch_timestamps[index] < cutoff_ms
            large = max_bytes is not None and size - length >= max_bytes
            if not (old or large):
                break
            size -= length
            index += 1
        return self._base_offsets[index] if index < count else self.next_offset

    def bytes_from(self, offset: int, end_offset: int | None = None) -> int:
        """Stored bytes a read at `offset` could return (its batch and all after it, up to
        the batch holding `end_offset` when given)."""
        end = self.next_offset if end_offset is None else end_offset
        if offset >= end or not self._batches:
            return 0
        first = self._positions[self._batch_index(offset)]
        if end >= self.next_offset:
            return self.size_bytes - first
        return self._positions[bisect.bisect_left(self._base_offsets, end)] - first

    def _batch_index(self, offset: int) -> int:
        """Index of the batch that holds `offset` (or the first one after it)."""
        index = bisect.bisect_right(self._base_offsets, offset) - 1
        return max(index, 0)

    def read(self, offset: int, max_bytes: int, *, allow_oversized_first: bool = True) -> bytes:
        """Stored batches from the one holding `offset`, up to `max_bytes` in total.

        Like Kafka, the first batch is returned whole even when it alone exceeds
        `max_bytes` (unless told otherwise), so a consumer can always make progress.
        """
        pieces, _ = self.read_pieces(offset, max_bytes, allow_oversized_first=allow_oversized_first)
        return b"".join(pieces)

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
        if offset >= end or not self._batches:
            return [], 0
        index = self._batch_index(offset)
        pieces: list[bytes | memoryview] = []
        total = 0
        pack_prefix = records.STORED_PREFIX.pack
        after_prefix = records.STORED_PREFIX.size
        length_of = records.LOG_OVERHEAD
        base_offsets = self._base_offsets
        for position in range(index, len(self._batches)):
            if base_offsets[position] >= end:
                break
            batch = self._batches[position]
            if total + len(batch) > max_bytes and (pieces or not allow_oversized_first):
                break
            pieces.append(pack_prefix(base_offsets[position], len(batch) - length_of, LEADER_EPOCH))
            pieces.append(memoryview(batch)[after_prefix:])
            total += len(batch)
            if total >= max_bytes:
                break
        return pieces, total

    def offset_after_read(self, offset: int, size: int) -> int:
        """The first offset after a read of `size` bytes from `offset` (read_pieces)."""
        if not size:
            return offset
        end_position = self._positions[self._batch_index(offset)] + size
        index = bisect.bisect_left(self._positions, end_position)
        return self._base_offsets[index] if index < len(self._batches) else self.next_offset

    def _stored(self, index: int) -> bytes:
        """Batch `index` as stored: its base offset and leader epoch in the header (off the
        hot path)."""
        return records.with_base_offset(
            self._batches[index], self._base_offsets[index], LEADER_EPOCH
        )

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
        index = bisect.bisect_left(self._max_timestamps, timestamp_ms)
        if index >= len(self._batches):
            return None
        batch = self._stored(index)
        start = self.log_start_offset  # records before it were deleted (DeleteRecords)
        try:
            scanned = records.iter_records(batch, max_decompressed_bytes=max_decompressed_bytes)
            for record in itertools.islice(scanned, MAX_RECORDS_SCANNED):
                if record.timestamp >= timestamp_ms and record.offset >= start:
                    return record.offset, record.timestamp
        except records.InvalidBatch:
            pass  # undecodable codec, malformed or over the limit: batch granularity
        return max(self._base_offsets[index], start), self._batch_timestamps[index]

    def max_timestamp(
        self, *, max_decompressed_bytes: int = records.MAX_DECOMPRESSED_BYTES
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (ListOffsets -3).

        Like Kafka 3.7+, the offset is that record's own, not the end of its batch: a
        batch's records need not be in timestamp order. Only the first batch holding the
        largest timestamp (where the running maximum first reaches it) is decoded.
        """
        if not self._batches:
            return None
        best = bisect.bisect_left(self._max_timestamps, self._max_timestamps[-1])
        batch = self._stored(best)
        header = records.read_header(batch)
        try:
            scanned = records.iter_records(batch, max_decompressed_bytes=max_decompressed_bytes)
            for record in itertools.islice(scanned, MAX_RECORDS_SCANNED):
                if record.timestamp == header.max_timestamp:
                    return record.offset, record.timestamp
        except records.InvalidBatch:
            pass  # undecodable codec, malformed or over the limit: batch granularity
        return header.base_offset + header.last_offset_delta, header.max_timestamp

    def batches(self) -> list[bytes]:
        """Every batch as a fetch would return it."""
        return [self._stored(index) for index in range(len(self._batches))]
