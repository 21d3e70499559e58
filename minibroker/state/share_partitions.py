"""Share-partition state of share groups (KIP-932). Sans-IO.

The rules (Kafka 4.4's SharePartition):
- Each (group, topic, partition) a member fetched has a share-partition start offset
  (SPSO) and an end offset (one past the last offset taken in flight). Every offset in
  between is in flight, in runs of offsets that share one state: Available, Acquired,
  Acknowledged or Archived. A run is split only where a later change covers part of it
  (an acknowledgement of some of its offsets), and runs that end up alike are merged.
- The first fetch of a partition starts it by the group's share.auto.offset.reset:
  `latest` (the default: the log end), `earliest` (the log start) or
  `by_duration:<ISO-8601 duration>` (the first record at or after now minus the
  duration, the log end when there is none).
- A fetch acquires for its member: first Available records already in flight (the
  oldest first), then new records from the end offset on, whole log batches at a time
  (max_records may be exceeded to end on a batch boundary, unless the fetch asks for a
  strict record limit). Acquiring counts a delivery. Offsets between batches
  (compaction's gaps) and control batches are acquired with the batches around them;
  consumers acknowledge them as gaps. New records stop at the high watermark, or under
  share.isolation.level read_committed at the last stable offset, where the records of
  aborted transactions are archived instead of acquired.
- At most share.partition.max.record.locks offsets are in flight (SPSO to end offset):
  a fetch takes no new records past that, though it still gets Available ones again.
- Acquired records are locked for share.record.lock.duration.ms on the broker clock.
  When the lock expires (checked by the housekeeping's tick, and on every fetch and
  acknowledgement of the partition), when the member's share session ends (epoch -1, or
  the connection that opened it closes), or when the member leaves the group with no
  share session open, the records become Available again, or Archived once their
  delivery count reached share.delivery.count.limit. (As on Kafka 4.4, leaving the
  group does not take records from an open session: the member may still acknowledge
  them before it closes the session.)
- Acknowledgements (by the member holding the records acquired): 0 gap and 3 reject
  archive, 1 accept acknowledges, 2 release makes Available again (Archived past the
  delivery count limit), 4 renew locks them again for a full lock duration. An
  acknowledgement of records in flight that are not Acquired, or acquired by another
  member, or made when no record is in flight, is refused whole with
  INVALID_RECORD_STATE; one that reaches past the records in flight with
  INVALID_REQUEST; nothing of that partition's acknowledgement is applied then.
  Offsets before the start offset (done, or deleted from the log) are skipped.
- The SPSO moves past Acknowledged and Archived records at the front, never past an
  Available or Acquired one. When retention or DeleteRecords moves the log start past
  the SPSO, the SPSO follows it and the in-flight records before it are dropped.
- A deleted topic, a deleted group or DeleteShareGroupOffsets drops the state; an altered
  start offset drops the in-flight records.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.protocol import records
from minibroker.state.log import PartitionLog
from minibroker.state.share_sessions import ShareSessions

ACK_GAP = 0
ACK_ACCEPT = 1
ACK_RELEASE = 2
ACK_REJECT = 3
ACK_RENEW = 4

# Kafka 4.4's messages for acknowledgements it refuses.
PAST_ACQUIRED_FIRST = (
    "Batch record not found. The first offset in request is past acquired records."
)
PAST_ACQUIRED_LAST = "Batch record not found. The last offset in request is past acquired records."
NOT_ACQUIRED = "The offset cannot be acknowledged. The offset is not acquired."
NOT_IN_FLIGHT = "Batch record not found. The request batch offsets are not found in the cache."
NOT_OWNER = "Member is not the owner of batch record"

# How many bytes of log an acquisition reads at a time to find batch boundaries.
SCAN_BYTES = 256 * 1024

_ISO_DURATION = re.compile(
    r"P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)


class RecordState(IntEnum):
    """A record's state in flight (Kafka's RecordState ids, which its persister keeps)."""

    AVAILABLE = 0  # may be acquired by the next fetch
    ACQUIRED = 1  # delivered to one member, locked until acknowledged or the lock expires
    ACKNOWLEDGED = 2  # accepted: done
    ARCHIVED = 4  # rejected, a gap, aborted, or past the delivery count limit: done

    @property
    def finished(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True)
class Run:
    """Offsets first..last (inclusive) in one state."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member: str = ""  # the member holding them, while Acquired
    deadline: float = 0.0  # when the acquisition lock expires (monotonic seconds)

    def alike(self, other: Run) -> bool:
        return (
            self.state == other.state
            and self.delivery_count == other.delivery_count
            and self.member == other.member
            and self.deadline == other.deadline
        )


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """A group's settings that govern its share partitions."""

    delivery_limit: int = 5
    max_locks: int = 2000
    lock_seconds: float = 30.0
    read_committed: bool = False
    auto_offset_reset: str = "latest"


@dataclass(frozen=True, slots=True)
class Acquired:
    """Records acquired by one fetch: ranges with their delivery counts."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class LogBatch:
    base: int
    last: int
    size: int
    producer_id: int
    transactional: bool
    control: bool


def duration_seconds(text: str) -> float | None:
    """Seconds of an ISO-8601 duration such as PT1H or P1DT30M (None when it is not one)."""
    found = _ISO_DURATION.fullmatch(text)
    if found is None or text in ("P", "PT"):
        return None
    parts = {name: float(value) for name, value in found.groupdict().items() if value}
    return (
        parts.get("days", 0.0) * 86400
        + parts.get("hours", 0.0) * 3600
        + parts.get("minutes", 0.0) * 60
        + parts.get("seconds", 0.0)
    )


def log_batches(log: PartitionLog, offset: int, end: int) -> Iterator[LogBatch]:
    """The batches of `log` from the one holding `offset` to the last that starts before
    `end`, by their headers (read a bounded stretch at a time)."""
    while offset < end:
        pieces, _ = log.read_pieces(offset, SCAN_BYTES, end_offset=end)
        data = b"".join(pieces)
        if not data:
            return
        position = 0
        last = offset - 1
        while position + records.HEADER_SIZE <= len(data):
            header = records.read_header(data, position)
            if header.base_offset >= end:
                return
            last = header.base_offset + header.last_offset_delta
            yield LogBatch(
                header.base_offset,
                last,
                header.total_size,
                header.producer_id,
                header.is_transactional,
                header.is_control,
            )
            position += header.total_size
        if last < offset:
            return
        offset = last + 1


class SharePartition:
    """One share partition's in-flight records (the rules open this module)."""

    def __init__(self, start_offset: int) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset  # one past the last offset taken in flight
        # Contiguous runs covering start_offset..end_offset-1, oldest first.
        self.runs: list[Run] = []

    # --- queries ---

    @property
    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def finished_count(self) -> int:
        return sum(r.last - r.first + 1 for r in self.runs if r.state.finished)

    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of an in-flight offset, or None."""
        index = self._index_of(offset)
        if index is None:
            return None
        run = self.runs[index]
        return run.state, run.delivery_count

    def next_deadline(self) -> float | None:
        deadlines = [r.deadline for r in self.runs if r.state == RecordState.ACQUIRED]
        return min(deadlines, default=None)

    def archived_past_limit(self, limit: int) -> int:
        """Archived records in flight that were delivered `limit` times."""
        return sum(
            r.last - r.first + 1
            for r in self.runs
            if r.state == RecordState.ARCHIVED and r.delivery_count >= limit
        )

    # --- changes ---

    def expire(self, now: float, limit: int) -> bool:
        """Expired locks release their records; whether any did."""
        changed = False
        for run in self.runs:
            if run.state == RecordState.ACQUIRED and run.deadline <= now:
                self._release(run, limit)
                changed = True
        if changed:
            self._normalize()
        return changed

    def release_member(self, member: str, limit: int) -> bool:
        changed = False
        for run in self.runs:
            if run.state == RecordState.ACQUIRED and run.member == member:
                self._release(run, limit)
                changed = True
        if changed:
            self._normalize()
        return changed

    def follow_log_end(self, log_end: int) -> None:
        """Records past the log end are gone (a machine crash lost what the data
        directory had not synced): they leave flight, and the start offset stays at most
        at the log end."""
        if self.end_offset <= log_end:
            return
        self._split_at(log_end)
        self.runs = [r for r in self.runs if r.first < log_end]
        self.end_offset = max(log_end, 0)
        self.start_offset = min(self.start_offset, self.end_offset)
        self._normalize()

    def follow_log_start(self, log_start: int) -> bool:
        """Records before the log start were deleted: drop them from flight."""
        if log_start <= self.start_offset:
            return False
        if log_start < self.end_offset:
            self._split_at(log_start)
            self.runs = [r for r in self.runs if r.first >= log_start]
        else:
            self.runs = []
            self.end_offset = log_start
        self.start_offset = log_start
        self._normalize()
        return True

    def acquire(
        self,
        member: str,
        now: float,
        log: PartitionLog,
        settings: ShareSettings,
        max_records: int,
        *,
        strict: bool = False,
        max_bytes: int = 2**31 - 1,
    ) -> list[Acquired]:
        """Acquire records for `member` (see the rules); the ranges acquired. New
        records stop before the batch that would pass `max_bytes` (the first is always
        taken whole, as Fetch returns it)."""
        self.follow_log_start(log.log_start_offset)
        self.follow_log_end(log.high_watermark)
        self.expire(now, settings.delivery_limit)
        deadline = now + settings.lock_seconds
        taken: list[Run] = []
        count = 0
        index = 0
        while index < len(self.runs) and count < max_records:
            run = self.runs[index]
            if run.state == RecordState.AVAILABLE:
                size = run.last - run.first + 1
                if strict and count + size > max_records:
                    self._split_at(run.first + max_records - count)
                    run = self.runs[index]
                    size = run.last - run.first + 1
                run.state = RecordState.ACQUIRED
                run.delivery_count += 1
                run.member = member
                run.deadline = deadline
                taken.append(run)
                count += size
            index += 1
        room = min(max_records - count, settings.max_locks - self.in_flight)
        if room > 0:
            taken.extend(
                self._acquire_new(member, deadline, log, settings, room, strict, max_bytes)
            )
        ranges = [Acquired(r.first, r.last, r.delivery_count) for r in taken]
        self._normalize()
        return _merged(ranges)

    def _acquire_new(
        self,
        member: str,
        deadline: float,
        log: PartitionLog,
        settings: ShareSettings,
        room: int,
        strict: bool,
        max_bytes: int,
    ) -> list[Run]:
        end = log.last_stable_offset if settings.read_committed else log.high_watermark
        if self.end_offset >= end:
            return []
        aborted = (
            log.aborted_between(self.end_offset, end)
            if settings.read_committed and log.aborted
            else []
        )
        taken: list[Run] = []
        count = 0
        size = 0
        for batch in log_batches(log, self.end_offset, end):
            size += batch.size
            if taken and size > max_bytes:
                break
            first = self.end_offset  # gaps before the batch go with it
            last = batch.last
            if strict and last - first + 1 > room - count:
                last = first + room - count - 1
            if batch.transactional and not batch.control and _is_aborted(batch, aborted):
                run = Run(first, last, RecordState.ARCHIVED)
            else:
                run = Run(first, last, RecordState.ACQUIRED, 1, member, deadline)
                taken.append(run)
                count += last - first + 1
            self.runs.append(run)
            self.end_offset = last + 1
            if count >= room:
                break
        return taken

    def acknowledge(
        self,
        member: str,
        batches: Iterable[tuple[int, int, tuple[int, ...]]],
        now: float,
        settings: ShareSettings,
        log_start: int,
    ) -> tuple[ErrorCode, str | None]:
        """Apply (first, last, types) acknowledgements of `member`, all or none; the
        error and Kafka 4.4's message for it."""
        self.follow_log_start(log_start)
        self.expire(now, settings.delivery_limit)
        pieces: list[tuple[int, int, int]] = []
        if not self.runs:
            return ErrorCode.invalid_record_state, NOT_IN_FLIGHT
        for first, last, types in batches:
            if first >= self.end_offset:
                return ErrorCode.invalid_request, PAST_ACQUIRED_FIRST
            if last >= self.end_offset:
                return ErrorCode.invalid_request, PAST_ACQUIRED_LAST
            # Offsets before the start offset are done (or deleted): skipped, as Kafka
            # skips them.
            clamped = max(first, self.start_offset)
            if clamped > last:
                continue
            if len(types) == 1:
                pieces.append((clamped, last, types[0]))
                continue
            # One type per offset: consecutive offsets of one type as one piece.
            offset = clamped
            for kind, same in itertools.groupby(types[clamped - first :]):
                count = sum(1 for _ in same)
                pieces.append((offset, offset + count - 1, kind))
                offset += count
        previous_last = -1
        for first, last, _ in pieces:
            # A batch starting at the previous one's last offset names that record twice:
            # it is no longer Acquired when the second comes to it.
            if first <= previous_last:
                return ErrorCode.invalid_record_state, NOT_ACQUIRED
            refusal = self._refusal(member, first, last)
            if refusal is not None:
                return ErrorCode.invalid_record_state, refusal
            previous_last = last
        for first, last, kind in pieces:
            self._split_at(first)
            self._split_at(last + 1)
            start = self._index_of(first)
            assert start is not None
            for run in self.runs[start:]:
                if run.first > last:
                    break
                self._apply(run, kind, now, settings)
        self._normalize()
        return ErrorCode.none, None

    def _refusal(self, member: str, first: int, last: int) -> str | None:
        """Why `member` may not acknowledge first..last (all in flight), or None."""
        index = self._index_of(first)
        assert index is not None
        for run in self.runs[index:]:
            if run.first > last:
                break
            if run.state != RecordState.ACQUIRED:
                return NOT_ACQUIRED
            if run.member != member:
                return NOT_OWNER
        return None

    def _apply(self, run: Run, kind: int, now: float, settings: ShareSettings) -> None:
        if kind == ACK_ACCEPT:
            run.state = RecordState.ACKNOWLEDGED
        elif kind == ACK_RELEASE:
            self._release(run, settings.delivery_limit)
            return
        elif kind == ACK_RENEW:
            run.deadline = now + settings.lock_seconds
            return
        else:  # gap or reject
            run.state = RecordState.ARCHIVED
        run.member = ""
        run.deadline = 0.0

    @staticmethod
    def _release(run: Run, limit: int) -> None:
        run.state = RecordState.ARCHIVED if run.delivery_count >= limit else RecordState.AVAILABLE
        run.member = ""
        run.deadline = 0.0

    # --- runs ---

    def _index_of(self, offset: int) -> int | None:
        index = bisect.bisect_right(self.runs, offset, key=lambda r: r.first) - 1
        if index < 0 or self.runs[index].last < offset:
            return None
        return index

    def _split_at(self, offset: int) -> None:
        """Make a run start at `offset` (when it is inside one)."""
        index = self._index_of(offset)
        if index is None:
            return
        run = self.runs[index]
        if run.first == offset:
            return
        tail = Run(offset, run.last, run.state, run.delivery_count, run.member, run.deadline)
        run.last = offset - 1
        self.runs.insert(index + 1, tail)

    def _normalize(self) -> None:
        """Merge alike neighbours; move the SPSO past finished records at the front."""
        merged: list[Run] = []
        for run in self.runs:
            if merged and merged[-1].alike(run) and merged[-1].last + 1 == run.first:
                merged[-1].last = run.last
            else:
                merged.append(run)
        drop = 0
        while drop < len(merged) and merged[drop].state.finished:
            drop += 1
        if drop:
            self.start_offset = merged[drop - 1].last + 1
            merged = merged[drop:]
        self.runs = merged

    # --- persistence ---

    def snapshot(self) -> dict[str, Any]:
        """Plain data: acquired records are kept as Available (their locks end with the
        process), delivery counts kept."""
        return {
            "start": self.start_offset,
            "end": self.end_offset,
            "runs": [
                [
                    r.first,
                    r.last,
                    int(RecordState.AVAILABLE if r.state == RecordState.ACQUIRED else r.state),
                    r.delivery_count,
                ]
                for r in self.runs
            ],
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> SharePartition:
        partition = cls(int(data["start"]))
        partition.end_offset = int(data["end"])
        partition.runs = [
            Run(int(first), int(last), RecordState(int(state)), int(count))
            for first, last, state, count in data["runs"]
        ]
        partition._normalize()
        return partition


def _is_aborted(batch: LogBatch, aborted: list[Any]) -> bool:
    return any(
        t.producer_id == batch.producer_id and t.first_offset <= batch.base <= t.last_offset
        for t in aborted
    )


def _merged(ranges: list[Acquired]) -> list[Acquired]:
    """Adjacent ranges with one delivery count as one (the response's form)."""
    ranges.sort(key=lambda r: r.first)
    out: list[Acquired] = []
    for item in ranges:
        previous = out[-1] if out else None
        if (
            previous is not None
            and previous.last + 1 == item.first
            and previous.delivery_count == item.delivery_count
        ):
            out[-1] = Acquired(previous.first, item.last, item.delivery_count)
        else:
            out.append(item)
    return out


Key = tuple[str, str, int]  # group, topic, partition


def group_settings(value_of: Callable[[str, str], str], group_id: str) -> ShareSettings:
    """A group's share settings from its configs (GroupConfigs.value)."""
    return ShareSettings(
        delivery_limit=int(value_of(group_id, "share.delivery.count.limit")),
        max_locks=int(value_of(group_id, "share.partition.max.record.locks")),
        lock_seconds=int(value_of(group_id, "share.record.lock.duration.ms")) / 1000,
        read_committed=value_of(group_id, "share.isolation.level") == "read_committed",
        auto_offset_reset=value_of(group_id, "share.auto.offset.reset"),
    )


class SharePartitionStore:
    """Every share group's share-partition state: (group, topic, partition) -> state.

    `ClusterState.share_partitions`. The share-group coordinator (state/share_groups.py)
    calls `member_gone` and `group_deleted`; the share-group offset APIs call the
    `start_offset`/`alter_start_offset`/`delete_partitions` family.
    """

    def __init__(self) -> None:
        # Called with what changed, as ClusterState.announce takes it.
        self.on_change: Callable[[Hashable], None] = lambda key: None
        # (topic, partition) -> its log, or None when there is no such partition
        # (set by ClusterState).
        self.log_of: Callable[[str, int], PartitionLog | None] = lambda topic, index: None
        # group -> its share settings (set by ClusterState from the group configs).
        self.settings_of: Callable[[str], ShareSettings] = lambda group_id: ShareSettings()
        # The broker's monotonic and wall clocks (set by ClusterState).
        self.wall_ms: Callable[[], int] = lambda: 0
        self.partitions: dict[Key, SharePartition] = {}
        # Each node's share sessions (a session lives on the broker it was opened with).
        self.node_sessions: dict[int, ShareSessions] = {}
        # Called with a share partition's key and its state (None: gone) after a change
        # worth keeping (a data directory's journal, storage/share_state.py).
        self.on_persist: Callable[[Key, SharePartition | None], None] = lambda key, state: None

    # --- fetch and acknowledge ---

    def sessions(self, node_id: int) -> ShareSessions:
        """Node `node_id`'s share sessions."""
        found = self.node_sessions.get(node_id)
        if found is None:
            found = self.node_sessions[node_id] = ShareSessions()
        return found

    def release(self, group_id: str, member_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """A closed share session: the member's acquired records of these partitions
        become available again at once (delivery counts kept)."""
        limit = self.settings_of(group_id).delivery_limit
        for topic, index in partitions:
            partition = self.partitions.get((group_id, topic, index))
            if partition is not None and partition.release_member(member_id, limit):
                self._changed((group_id, topic, index))

    def partition(self, group_id: str, topic: str, index: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic, index))

    def _started(
        self, group_id: str, topic: str, index: int, log: PartitionLog, settings: ShareSettings
    ) -> SharePartition:
        key = (group_id, topic, index)
        found = self.partitions.get(key)
        if found is None:
            found = SharePartition(self._first_offset(log, settings.auto_offset_reset))
            self.partitions[key] = found
        return found

    def _first_offset(self, log: PartitionLog, reset: str) -> int:
        if reset == "earliest":
            return log.log_start_offset
        if reset.startswith("by_duration:"):
            seconds = duration_seconds(reset.removeprefix("by_duration:"))
            if seconds is not None:
                found = log.offset_for_timestamp(self.wall_ms() - int(seconds * 1000))
                return log.high_watermark if found is None else found[0]
        return log.high_watermark

    def acquire(
        self,
        group_id: str,
        topic: str,
        index: int,
        member_id: str,
        now: float,
        max_records: int,
        *,
        strict: bool = False,
        max_bytes: int = 2**31 - 1,
    ) -> list[Acquired]:
        """ShareFetch: acquire records of the partition for the member (the partition is
        started by share.auto.offset.reset on its first fetch)."""
        log = self.log_of(topic, index)
        if log is None or max_records <= 0:
            return []
        settings = self.settings_of(group_id)
        partition = self._started(group_id, topic, index, log, settings)
        acquired = partition.acquire(
            member_id, now, log, settings, max_records, strict=strict, max_bytes=max_bytes
        )
        if acquired:
            self._persist((group_id, topic, index))
        return acquired

    def acknowledge(
        self,
        group_id: str,
        topic: str,
        index: int,
        member_id: str,
        batches: Iterable[tuple[int, int, tuple[int, ...]]],
        now: float,
    ) -> tuple[ErrorCode, str | None]:
        """ShareFetch/ShareAcknowledge acknowledgements of one partition (validated for
        form by the caller): NONE, or why not (nothing applied then) with Kafka's message:
        INVALID_REQUEST past the records in flight, INVALID_RECORD_STATE for records the
        member does not hold acquired."""
        partition = self.partitions.get((group_id, topic, index))
        log = self.log_of(topic, index)
        if partition is None or log is None:
            return ErrorCode.invalid_record_state, NOT_IN_FLIGHT
        settings = self.settings_of(group_id)
        before = partition.start_offset
        code, message = partition.acknowledge(
            member_id, list(batches), now, settings, log.log_start_offset
        )
        if code == ErrorCode.none:
            self._persist((group_id, topic, index))
            if any(r.state == RecordState.AVAILABLE for r in partition.runs):
                self.on_change(log)  # released records: waiting fetches can take them
            elif partition.start_offset != before:
                self.on_change(log)
        return code, message

    # --- the coordinator's and offset APIs' calls ---

    def member_gone(self, group_id: str, member_id: str, now: float) -> None:
        """A member left or was fenced: the records it holds acquired become available
        again at once (their delivery counts kept). While the member still has a share
        session open, its records stay with it instead, as on Kafka 4.4 (a leaving
        consumer may acknowledge them before closing the session): they are released
        when the session closes (epoch -1, or its connection closes) or their locks
        expire."""
        if any(s.get(group_id, member_id) for s in self.node_sessions.values()):
            return
        for (group, topic, index), partition in self.partitions.items():
            if group != group_id:
                continue
            limit = self.settings_of(group).delivery_limit
            if partition.release_member(member_id, limit):
                self._changed((group, topic, index))

    def group_deleted(self, group_id: str) -> None:
        """DeleteGroups removed the group: its share-partition state goes with it."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
            self._persist(key)
        for sessions in self.node_sessions.values():
            sessions.group_deleted(group_id)

    def initialized(self, group_id: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> share-partition start offset, for every partition of the
        group whose state exists (a member fetched it, or an offset was altered)."""
        return {
            (topic, index): partition.start_offset
            for (group, topic, index), partition in self.partitions.items()
            if group == group_id
        }

    def lag(self, group_id: str, topic: str, partition: int) -> int | None:
        """Records from the start offset to the log end not yet acknowledged or archived
        (DescribeShareGroupOffsets v1), or None when the partition has no state."""
        state = self.partitions.get((group_id, topic, partition))
        if state is None:
            return None
        log = self.log_of(topic, partition)
        end = state.end_offset if log is None else max(log.high_watermark, state.end_offset)
        return max(0, end - state.start_offset - state.finished_count())

    def alter_start_offset(self, group_id: str, topic: str, partition: int, offset: int) -> None:
        """AlterShareGroupOffsets: the share partition starts at `offset` (clamped to the
        log's start and end), its in-flight records dropped. The caller has checked that
        the group has no members."""
        log = self.log_of(topic, partition)
        if log is not None:
            offset = min(max(offset, log.log_start_offset), log.high_watermark)
        self.partitions[(group_id, topic, partition)] = SharePartition(offset)
        self._persist((group_id, topic, partition))

    def delete_partitions(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """DeleteShareGroupOffsets: the state of these partitions is dropped; the next
        fetch starts them by share.auto.offset.reset again."""
        for topic, index in partitions:
            if self.partitions.pop((group_id, topic, index), None) is not None:
                self._persist((group_id, topic, index))

    def topic_deleted(self, topic: str) -> None:
        """A deleted topic's share partitions go with it."""
        for key in [k for k in self.partitions if k[1] == topic]:
            del self.partitions[key]
            self._persist(key)

    def next_deadline(self) -> float | None:
        """When the earliest acquisition lock expires (monotonic seconds), or None."""
        deadlines = (p.next_deadline() for p in self.partitions.values())
        return min((d for d in deadlines if d is not None), default=None)

    def tick(self, now: float) -> None:
        """Expired acquisition locks release their records (or archive them past the
        delivery count limit)."""
        for (group, topic, index), partition in self.partitions.items():
            deadline = partition.next_deadline()
            if deadline is None or deadline > now:
                continue
            if partition.expire(now, self.settings_of(group).delivery_limit):
                self._changed((group, topic, index))

    def _changed(self, key: Key) -> None:
        """Records were released: kept, and the fetches waiting on the log woken."""
        self._persist(key)
        log = self.log_of(key[1], key[2])
        if log is not None:
            self.on_change(log)

    def _persist(self, key: Key) -> None:
        self.on_persist(key, self.partitions.get(key))

    # --- persistence ---

    def load(self, data: list[dict[str, Any]]) -> None:
        """Take share partitions as `SharePartition.snapshot` gives them (with "group",
        "topic" and "partition" keys), as a data directory keeps them; malformed entries
        are skipped."""
        for item in data:
            try:
                key = (str(item["group"]), str(item["topic"]), int(item["partition"]))
                self.partitions[key] = SharePartition.from_snapshot(item)
            except (KeyError, TypeError, ValueError):
                continue
