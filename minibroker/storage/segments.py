"""A partition's batches in segment files, and their recovery after a crash.

Layout: one directory per partition holding `<base offset, 20 digits>.log` files, each a
run of record batches exactly as a fetch returns them (base offset, length and leader
epoch set). A batch goes to the newest (active) segment; a new segment starts when the
active one would grow past the topic's segment.bytes, or is segment.ms old by the
broker's clock (counted from its first batch, or from the broker's start for one
recovered). A read is one `pread` per segment it touches, handed to the socket as it
is. Only the active segment keeps a file descriptor open, and only while the data
directory's budget of open segment files allows (storage/open_files.py): past it, the
least recently written one is closed and opened again when next written. A rolled
segment is fsynced and closed, and opened again for each read. Positions are the log's
byte positions (state/log.py): a segment knows where its first byte sits among them.

Recovery rules (every start; `recover` applies them, nothing else reads raw files):
- Segments are read in base-offset order, batch by batch, from the first one after the
  partition's recovery point (storage/checkpoint.py: the segments sealed before it are
  trusted by their sizes and index, and checked when read). A batch is good when its
  length field covers at least a batch header and fits in the file, its leader epoch is
  the one this broker stamps, its magic is 2, its CRC-32C matches, and its offsets come
  after those of the batch before it and before the next segment's first offset.
- After a bad batch the scan looks for the next good batch in the same segment (a
  length field is not trusted: from the bad batch's declared end, then byte by byte).
  None found in the last segment: the bad batch is where the log ends, a write the
  process did not finish, and the segment is truncated there. Otherwise it is damage:
  the bad bytes (up to the next good batch, or to the segment's end) are moved to
  `<segment>.<byte position>.corrupt`, the segment is rewritten without them, and the
  scan goes on; later segments are kept, so the log end never moves back past them.
  Each damage is reported with the offsets it took (Recovery.damage).
- A segment whose first batch starts below the end of the segment before it is the
  leftover of a compaction swap cut short (its batches are already in the rewritten
  segment; its name is below the next offset): it is deleted, and recovery goes on with
  the next one.
- The log start offset kept in `log-start-offset` (moved by retention and DeleteRecords)
  is applied after the scan.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import mmap
import os
import re
import shutil
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from minibroker.protocol import records
from minibroker.protocol.records import BatchHeader
from minibroker.state.log import LEADER_EPOCH
from minibroker.storage.open_files import OpenFiles

SUFFIX = ".log"
NEVER = 2**63 - 1
START_FILE = "log-start-offset"
_MIN_BATCH = records.HEADER_SIZE


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


@dataclass(slots=True)
class Segment:
    path: Path
    start: int  # the log's byte position of the segment's first byte
    size: int
    fd: int | None = None
    created_ms: int = 0  # by the broker's clock: when it began (or the broker started)

    def descriptor(self) -> int:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return self.fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@dataclass(frozen=True, slots=True)
class RecoveredBatch:
    header: BatchHeader
    length: int
    commit: bool | None  # a control batch's marker: commit (True) or abort (False)
    segment_start: bool = False  # the first batch of its segment


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes of a segment that held no good batch, moved aside (recovery rules)."""

    path: Path  # the segment
    position: int  # within the segment file, before it was rewritten
    length: int
    first_offset: int  # the offsets lost with them (none when first > last)
    last_offset: int
    kept_as: Path  # where the bytes went

    def describe(self) -> str:
        lost = (
            f"offsets {self.first_offset}-{self.last_offset}"
            if self.first_offset <= self.last_offset
            else "no offsets"
        )
        return (
            f"{self.path}: corrupt data at byte {self.position} ({self.length} bytes): "
            f"{lost} dropped, the bytes kept in {self.kept_as.name}; the batches after them "
            "are kept"
        )


@dataclass(slots=True)
class Recovery:
    """What a scan found (its good batches went to the caller one by one, in order), and
    what it cut away."""

    batch_count: int = 0
    truncated_bytes: int = 0  # torn tails: writes the process did not finish
    deleted_segments: int = 0
    log_start_offset: int = 0
    damage: list[Damage] = field(default_factory=list)
    torn_tail_offset: int = -1  # the first offset a torn tail would have held


def segment_offset(path: Path) -> int:
    """The base offset a segment file's name gives (its first batch's when written)."""
    return int(path.name.removesuffix(SUFFIX))


def _marker_commit(batch: memoryview) -> bool | None:
    try:
        first = next(records.iter_records(bytes(batch)))
    except (records.InvalidBatch, StopIteration):
        return None
    key = first.key or b""
    return len(key) >= 4 and int.from_bytes(key[2:4], "big") == records.COMMIT_MARKER


def good_batch(
    view: memoryview, position: int, next_offset: int, ceiling: int = NEVER
) -> BatchHeader | None:
    """The header of the batch at `position` when it is good (the recovery rules), else
    None: its offsets at or above `next_offset` and below `ceiling`."""
    size = len(view)
    if position < 0 or position + _MIN_BATCH > size:
        return None
    header = records.read_header(view, position)
    end = position + records.LOG_OVERHEAD + header.batch_length
    if (
        header.batch_length < _MIN_BATCH - records.LOG_OVERHEAD
        or end > size
        or header.partition_leader_epoch < 0
        or header.magic != 2
        or header.base_offset < next_offset
        or header.last_offset_delta < 0
        or header.base_offset + header.last_offset_delta >= ceiling
        or records.crc32c(view[position + records.CRC_START : end]) != header.crc
    ):
        return None
    return header


# What every stored batch holds at bytes 12-17: the leader epoch it was appended in (not
# negative, and far below 2**24), then magic 2. A search for the next good batch after a
# bad one only checks where such bytes occur.
_EPOCH_AND_MAGIC = re.compile(rb"\x00[\x00-\xff]{3}\x02", re.DOTALL)
_EPOCH_AT = 12


def next_good(
    view: memoryview, bad: int, next_offset: int, ceiling: int = NEVER
) -> tuple[int, BatchHeader] | None:
    """The next good batch after a bad one at `bad` (its declared end first)."""
    declared = bad + records.LOG_OVERHEAD + int.from_bytes(view[bad + 8 : bad + 12], "big")
    if declared > bad and (header := good_batch(view, declared, next_offset, ceiling)):
        return declared, header
    data = view.obj if isinstance(view.obj, mmap.mmap) else view.tobytes()
    at = bad + 1 + _EPOCH_AT
    while (match := _EPOCH_AND_MAGIC.search(data, at)) is not None:
        candidate = match.start() - _EPOCH_AT
        if candidate >= 0 and (header := good_batch(view, candidate, next_offset, ceiling)):
            return candidate, header
        at = match.start() + 1
    return None


# base offset, batch length, leader epoch, magic, CRC, attributes, last offset delta
_CHECKED = struct.Struct(">qiibIhi")


def first_bad(view: memoryview, next_offset: int = 0) -> tuple[int, int] | None:
    """(position, offset expected there) of the first bad batch in `view`, which must hold
    whole batches and nothing else; None when every batch is good. A read's check: the
    checks of good_batch, without building headers."""
    position, size = 0, len(view)
    unpack, crc32c = _CHECKED.unpack_from, records.crc32c
    while position < size:
        if position + _MIN_BATCH > size:
            return position, next_offset
        base_offset, length, epoch, magic, crc, _attributes, delta = unpack(view, position)
        end = position + records.LOG_OVERHEAD + length
        if (
            length < _MIN_BATCH - records.LOG_OVERHEAD
            or end > size
            or epoch < 0
            or magic != 2
            or base_offset < next_offset
            or delta < 0
            or crc32c(view[position + records.CRC_START : end]) != crc
        ):
            return position, next_offset
        next_offset = base_offset + delta + 1
        position = end
    return None


@dataclass(slots=True)
class _Scan:
    """One segment's scan: the byte ranges kept and those moved aside."""

    kept: list[tuple[int, int]] = field(default_factory=list)
    bad: list[tuple[int, int, int, int]] = field(default_factory=list)  # start, end, offsets
    torn_at: int = -1  # a torn tail's first byte (the last segment only)


def _scan(
    view: memoryview,
    next_offset: int,
    ceiling: int,
    next_start: int,
    last: bool,
    on_batch: Callable[[RecoveredBatch], None],
) -> tuple[_Scan, int, int]:
    """Scan one segment's bytes: what to keep, the next offset after it, its batches
    (`next_start`: where the next segment's offsets start)."""
    scan = _Scan()
    position, size, count = 0, len(view), 0
    while position < size:
        header = good_batch(view, position, next_offset, ceiling)
        if header is None:
            found = next_good(view, position, next_offset, ceiling)
            if found is None and last:
                scan.torn_at = position
                break
            resume, lost_below = (found[0], found[1].base_offset) if found else (size, next_start)
            scan.bad.append((position, resume, next_offset, lost_below - 1))
            position = resume
            continue
        length = records.LOG_OVERHEAD + header.batch_length
        batch = view[position : position + length]
        commit = _marker_commit(batch) if header.is_control else None
        on_batch(RecoveredBatch(header, length, commit, segment_start=not scan.kept))
        count += 1
        next_offset = header.base_offset + header.last_offset_delta + 1
        if scan.kept and scan.kept[-1][1] == position:
            scan.kept[-1] = (scan.kept[-1][0], position + length)
        else:
            scan.kept.append((position, position + length))
        position += length
    return scan, next_offset, count


def _set_aside(path: Path, view: memoryview, scan: _Scan) -> list[Damage]:
    """Move a segment's bad ranges to `.corrupt` files and rewrite it with the rest (a
    crash on the way leaves the segment as it was, to be scanned again)."""
    damage = []
    for start, end, first_offset, last_offset in scan.bad:
        kept_as = path.with_name(f"{path.name}.{start}.corrupt")
        replace_file(kept_as, bytes(view[start:end]))
        damage.append(Damage(path, start, end - start, first_offset, last_offset, kept_as))
    scratch = path.with_name(path.name + ".repaired")
    with open(scratch, "wb") as file:
        for start, end in scan.kept:
            file.write(view[start:end])
        file.flush()
        os.fsync(file.fileno())
    return damage


def recover(
    directory: Path,
    on_batch: Callable[[RecoveredBatch], None] = lambda found: None,
    *,
    trusted: Sequence[Segment] = (),
    next_offset: int = 0,
) -> tuple[list[Segment], Recovery]:
    """Scan a partition's segment files after the `trusted` ones (a recovery point's, up
    to `next_offset`), following the rules above, repairing them and handing each good
    batch to `on_batch` in order; the segments after the trusted ones, and what was cut."""
    recovery = Recovery()
    segments: list[Segment] = []
    trusted_names = {segment.path.name for segment in trusted}
    paths = sorted(directory.glob(f"*{SUFFIX}")) if directory.is_dir() else []
    paths = [path for path in paths if path.name not in trusted_names]
    for stale in directory.glob(f"*{SUFFIX}.repaired") if directory.is_dir() else ():
        stale.unlink()  # a repair a crash cut short: its segment is scanned again
    position = trusted[-1].start + trusted[-1].size if trusted else 0
    for number, path in enumerate(paths):
        last = number == len(paths) - 1
        if (segments or trusted) and segment_offset(path) < next_offset:
            path.unlink()  # a compaction swap's leftover
            recovery.deleted_segments += 1
            continue
        # No batch of a sealed segment reaches the last segment's first offset (the next
        # segment's name could be a compaction leftover's, below it).
        ceiling = NEVER if last else segment_offset(paths[-1])
        later = [segment_offset(p) for p in paths[number + 1 :]]
        next_start = min((o for o in later if o >= next_offset), default=ceiling)
        size = path.stat().st_size
        with open(path, "rb") as file:
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if size else None
            try:
                view = memoryview(mapped) if mapped is not None else memoryview(b"")
                scan, next_offset, count = _scan(
                    view, next_offset, ceiling, next_start, last, on_batch
                )
                recovery.batch_count += count
                if scan.bad:
                    recovery.damage += _set_aside(path, view, scan)
                view.release()
            finally:
                if mapped is not None:
                    mapped.close()
        kept = sum(end - start for start, end in scan.kept)
        if scan.bad:
            os.replace(path.with_name(path.name + ".repaired"), path)
            _sync_directory(directory)
        elif scan.torn_at >= 0:
            recovery.truncated_bytes += size - scan.torn_at
            recovery.torn_tail_offset = next_offset
            os.truncate(path, scan.torn_at)
        if kept == 0 and (segments or trusted or not last):
            path.unlink()  # nothing left in it; the name of the next says where it goes on
            recovery.deleted_segments += 1
            continue
        segments.append(Segment(path, position, kept))
        position += kept
    start_file = directory / START_FILE
    with contextlib.suppress(FileNotFoundError, ValueError):
        recovery.log_start_offset = int(start_file.read_text())
    return segments, recovery


class SegmentStore:
    """The segment files of one partition with a data directory (SegmentedLog's store)."""

    def __init__(
        self,
        directory: Path,
        segment_bytes: Callable[[], int],
        on_write: Callable[[SegmentStore], None],
        *,
        segment_ms: Callable[[], int] = lambda: NEVER,
        now_ms: Callable[[], int] = lambda: 0,
        open_files: OpenFiles[Segment] | None = None,
    ) -> None:
        self.directory = directory
        self._segment_bytes = segment_bytes
        self._segment_ms = segment_ms
        self._now_ms = now_ms
        self._on_write = on_write  # the data directory learns what awaits a sync
        self._segments: list[Segment] = []
        self._starts: list[int] = []
        # Segments written since the last sync, by id: one closed meanwhile (the budget)
        # is synced through a descriptor opened for it.
        self._unsynced: dict[int, Segment] = {}
        self._open_files = open_files  # shared by the data directory's partitions

    def adopt(self, segments: list[Segment]) -> None:
        """Take over the segments recovery found (before anything is written)."""
        for segment in segments:
            segment.created_ms = self._now_ms()
        self._segments = segments
        self._starts = [segment.start for segment in segments]

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    @property
    def active_start(self) -> int:
        """The log position where the active segment begins (-1 with none)."""
        return self._starts[-1] if self._starts else -1

    def file_position(self, position: int) -> tuple[Path | None, int, int]:
        """The segment file holding the log's byte `position`, where in it, and the log
        position where that segment ends."""
        index = bisect.bisect_right(self._starts, position) - 1
        if index < 0:
            return None, position, position
        segment = self._segments[index]
        return segment.path, position - segment.start, segment.start + segment.size

    def append(
        self,
        base_offset: int,
        batch: bytes | memoryview,
        position: int,
        leader_epoch: int = LEADER_EPOCH,
    ) -> None:
        segments = self._segments
        if not segments or self._full(segments[-1], len(batch)):
            self.directory.mkdir(parents=True, exist_ok=True)
            if segments:
                self._seal(segments[-1])
            path = self.directory / segment_name(base_offset)
            segments.append(Segment(path, position, 0, created_ms=self._now_ms()))
            self._starts.append(position)
        active = segments[-1]
        try:
            fd = self._descriptor(active)
        except OSError as exc:
            raise _naming(exc, active.path) from None
        prefix = records.STORED_PREFIX.pack(
            base_offset, len(batch) - records.LOG_OVERHEAD, leader_epoch
        )
        rest = memoryview(batch)[records.STORED_PREFIX.size :]
        try:
            _write_all(fd, [prefix, rest])
        except OSError as exc:
            # Nothing half-written stays behind: the next batch must follow a whole one.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, active.size)
            raise _naming(exc, active.path) from None
        active.size += len(batch)
        self._unsynced[id(active)] = active
        self._on_write(self)

    def _descriptor(self, segment: Segment) -> int:
        """The segment's descriptor, opened if it is closed; the least recently used
        ones past the budget are closed, and so are more of them while the process is out
        of descriptors (EMFILE, ENFILE) and the budget has some to give back."""
        while True:
            try:
                fd = segment.descriptor()
                break
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE) or self._open_files is None:
                    raise
                oldest = self._open_files.oldest(keep=segment)
                if oldest is None:
                    raise
                oldest.close()
        if self._open_files is not None:
            for least_recent in self._open_files.used(segment):
                least_recent.close()
        return fd

    def _release(self, segment: Segment) -> None:
        if self._open_files is not None:
            self._open_files.closed(segment)
        segment.close()

    def _sync_segment(self, segment: Segment) -> None:
        try:
            if segment.fd is not None:
                os.fsync(segment.fd)
            else:  # closed by the budget since it was written
                fd = os.open(segment.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise _naming(exc, segment.path) from None
        self._unsynced.pop(id(segment), None)

    def _full(self, active: Segment, adding: int) -> bool:
        """Whether a batch of `adding` bytes starts a new segment: the active one would
        pass segment.bytes, or is segment.ms old (never while empty)."""
        if not active.size:
            return False
        if active.size + adding > self._segment_bytes():
            return True
        return self._now_ms() - active.created_ms >= self._segment_ms()

    def _seal(self, segment: Segment) -> None:
        """A segment no longer written: synced (as Kafka flushes a rolled segment) and
        closed, so a partition holds one descriptor however many segments it has."""
        if segment.fd is not None or id(segment) in self._unsynced:
            self._sync_segment(segment)
            self._release(segment)

    def read_pieces(self, start: int, end: int) -> list[bytes | memoryview]:
        """The bytes at the log's positions [start, end), one piece per segment."""
        pieces: list[bytes | memoryview] = []
        if start >= end:
            return pieces
        index = bisect.bisect_right(self._starts, start) - 1
        while start < end and index < len(self._segments):
            segment = self._segments[index]
            within = start - segment.start
            count = min(end - start, segment.size - within)
            if count > 0:
                if segment.fd is not None:
                    data = os.pread(segment.fd, count, within)
                else:  # a sealed segment: opened for the read only
                    fd = os.open(segment.path, os.O_RDONLY)
                    try:
                        data = os.pread(fd, count, within)
                    finally:
                        os.close(fd)
                if len(data) != count:
                    raise OSError(f"{segment.path}: short read at {within}")
                pieces.append(data)
                start += count
            index += 1
        return pieces

    def read(self, start: int, end: int) -> bytes:
        return b"".join(self.read_pieces(start, end))  # one piece: no copy

    def drop_first(self, position: int) -> None:
        """Delete the segments wholly before `position` (never the active one)."""
        while len(self._segments) > 1 and self._segments[0].start + self._segments[0].size <= (
            position
        ):
            gone = self._segments.pop(0)
            self._starts.pop(0)
            self._unsynced.pop(id(gone), None)
            self._release(gone)
            gone.path.unlink(missing_ok=True)

    def log_start_moved(self, offset: int) -> None:
        replace_file(self.directory / START_FILE, str(offset).encode())

    def replace_first(self, batches: Sequence[bytes], position: int) -> None:
        """Rewrite the segments holding the replaced batches as one: the new batches and
        what follows them in the last segment touched. The new file takes the first
        segment's name in one rename; the others are deleted after (see the rules)."""
        old_end = position + sum(len(batch) for batch in batches)  # the replaced range's end
        if not self._segments:
            return
        touched = bisect.bisect_right(self._starts, max(old_end - 1, self._starts[0])) - 1
        last = self._segments[touched]
        last_end = last.start + last.size
        rest = self.read_pieces(old_end, last_end)
        first = self._segments[0]
        scratch = first.path.with_suffix(".cleaned")
        with open(scratch, "wb") as file:
            for piece in (*batches, *rest):
                file.write(piece)
            file.flush()
            os.fsync(file.fileno())
        for segment in self._segments[: touched + 1]:
            self._unsynced.pop(id(segment), None)
            self._release(segment)
        os.replace(scratch, first.path)
        for segment in self._segments[1 : touched + 1]:
            segment.path.unlink(missing_ok=True)
        size = sum(len(batch) for batch in batches) + sum(len(piece) for piece in rest)
        merged = Segment(first.path, position, size, created_ms=last.created_ms)
        self._segments[: touched + 1] = [merged]
        self._starts = [segment.start for segment in self._segments]
        _sync_directory(self.directory)

    def sync(self) -> None:
        for segment in list(self._unsynced.values()):
            self._sync_segment(segment)

    def close(self) -> None:
        self.sync()
        for segment in self._segments:
            self._release(segment)

    def remove(self) -> None:
        for segment in self._segments:
            self._release(segment)
        self._unsynced.clear()
        shutil.rmtree(self.directory, ignore_errors=True)


def _naming(exc: OSError, path: Path) -> OSError:
    """`exc` naming the file it happened to (a write's error names none)."""
    if exc.filename is None:
        exc.filename = str(path)
    return exc


def _write_all(fd: int, pieces: list[bytes | memoryview]) -> None:
    remaining = [memoryview(piece) for piece in pieces]
    while remaining:
        written = os.writev(fd, remaining)
        while remaining and written >= len(remaining[0]):
            written -= len(remaining[0])
            remaining.pop(0)
        if remaining and written:
            remaining[0] = remaining[0][written:]


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(path: Path, content: bytes, mode: int = 0o644) -> None:
    """Write `content` to `path` in one rename, synced: a crash leaves old or new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(path.name + ".tmp")
    with open(os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as file:
        os.fchmod(file.fileno(), mode)
        file.write(content)
        file.flush()
        os.fsync(file.fileno())
    os.replace(scratch, path)
    _sync_directory(path.parent)
