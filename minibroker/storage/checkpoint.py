"""A partition's clean-stop checkpoint: what recovery would rebuild from its batches.

Rules:
- At a clean stop, after every segment is synced, each partition writes `checkpoint` in
  its directory, in one rename: the segment files' names, byte positions and sizes, the
  log's offsets and end position, its sparse index, its open and aborted transactions,
  and its producers' sequence state.
- At start, a partition with a checkpoint whose segment files are all there, with the
  sizes it names, and no others, is loaded from it: its batches are not read. Anything
  else (no checkpoint after a crash, a file changed or removed, an unknown version) and
  the full recovery scan runs (storage/segments.py).
- A checkpoint is deleted when its partition is loaded, before anything is written, and
  when a broker takes its directory again without loading it: it never describes files
  that have changed since.

Recovery point rules (`recovery-point`, for a start after a crash):
- When a segment is sealed (the active one rolls), a line per sealed segment not yet
  described is appended and synced: its name, byte position and size, its index entries
  (a segment's first batch always starts an entry, so a segment's entries are its own),
  and on the last line the log's offsets, transactions and producers' state as they
  stood at its end. The file is rewritten whole when the sealed segments no longer match
  what it describes (retention, compaction, a repair).
- At start, the lines are matched against the segment files in order (lines of segments
  retention deleted from the front are skipped); the segments up to the last matching
  line with a state are trusted: loaded from it without reading their batches, and
  checked batch by batch when read. The segments after them are scanned
  (storage/segments.py). Anything that does not match ends the trusted part there.
- A partition found corrupt while the broker runs writes no recovery point and no
  checkpoint any more: the next start scans it and sets the damage aside.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from minibroker.storage.segments import SUFFIX, Segment, replace_file

FILE = "checkpoint"
VERSION = 1
RECOVERY_FILE = "recovery-point"

Described = tuple[str, int, int]  # a segment's name, byte position and size
Index = tuple[list[int], list[int], list[int]]  # entry offsets, positions, max timestamps


def write(directory: Path, segments: list[Segment], state: dict[str, Any]) -> None:
    if not directory.is_dir():
        return
    content = {
        "version": VERSION,
        "segments": [[s.path.name, s.start, s.size] for s in segments],
        **state,
    }
    replace_file(directory / FILE, json.dumps(content, separators=(",", ":")).encode())


def take(directory: Path) -> tuple[list[Segment], dict[str, Any]] | None:
    """The segments and state a partition's checkpoint describes, when they match its
    files (the rules above); the checkpoint is deleted either way."""
    path = directory / FILE
    try:
        content = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    finally:
        discard(directory)
    try:
        if content.get("version") != VERSION:
            return None
        named = {name: (start, size) for name, start, size in content["segments"]}
        present = {p.name: p.stat().st_size for p in directory.glob(f"*{SUFFIX}")}
        if present != {name: size for name, (_start, size) in named.items()}:
            return None
        segments = [
            Segment(directory / name, start, size) for name, (start, size) in sorted(named.items())
        ]
    except (KeyError, TypeError, ValueError, OSError):
        return None
    return segments, content


def discard(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / FILE)


def describe(segment: Segment) -> Described:
    return segment.path.name, segment.start, segment.size


def recovery_line(segment: Segment, index: Index, state: dict[str, Any] | None) -> bytes:
    line = {"segment": describe(segment), "index": index, "state": state}
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def add_recovery_lines(directory: Path, lines: list[bytes], *, rewrite: bool) -> None:
    """Append `lines` to the recovery point, synced (or replace it with them)."""
    if rewrite:
        replace_file(directory / RECOVERY_FILE, b"".join(lines))
        return
    fd = os.open(directory / RECOVERY_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"".join(lines))
        os.fsync(fd)
    finally:
        os.close(fd)


def discard_recovery_point(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / RECOVERY_FILE)


def _recovery_lines(directory: Path) -> list[dict[str, Any]]:
    try:
        text = (directory / RECOVERY_FILE).read_bytes()
    except OSError:
        return []
    lines = []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            break  # a line a crash cut short: the end
        if not isinstance(line, dict):
            break
        lines.append(line)
    return lines


def take_recovery_point(
    directory: Path,
) -> tuple[list[Described], list[Segment], dict[str, Any] | None]:
    """What a partition's recovery point still describes (the rules above): the sealed
    segments it describes that match the files, and the trusted ones with their state
    (None when nothing can be trusted). The file is cut to what matches."""
    lines = _recovery_lines(directory)
    present = {p.name: p.stat().st_size for p in directory.glob(f"*{SUFFIX}")}
    names = sorted(present)
    matched: list[Described] = []
    index: Index = ([], [], [])
    trusted = 0
    state: dict[str, Any] | None = None
    trusted_index: Index = ([], [], [])
    try:
        lines = [line for line in lines if line["segment"][0] >= (names[0] if names else "")]
        for line, name in zip(lines, names, strict=False):
            line_name, start, size = line["segment"]
            if (
                line_name != name
                or present[name] != size
                or (matched and matched[-1][1] + matched[-1][2] != start)
            ):
                break
            matched.append((str(line_name), int(start), int(size)))
            for column, values in zip(index, line["index"], strict=True):
                column.extend(int(value) for value in values)
            if line["state"] is not None:
                trusted, state = len(matched), dict(line["state"])
                trusted_index = (list(index[0]), list(index[1]), list(index[2]))
    except (KeyError, TypeError, ValueError, IndexError):
        matched, state = [], None
    if len(matched) != len(lines):
        kept = lines[: len(matched)]
        text = b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in kept)
        replace_file(directory / RECOVERY_FILE, text)
    if state is None or not trusted:
        return matched, [], None
    segments = [Segment(directory / name, start, size) for name, start, size in matched[:trusted]]
    first, last = segments[0], segments[-1]
    state["index"] = trusted_index
    state["end_position"] = last.start + last.size
    state["size_bytes"] = last.start + last.size - first.start
    first_offset = int(first.path.name.removesuffix(SUFFIX))
    state["log_start_offset"] = max(int(state.get("log_start_offset", 0)), first_offset)
    return matched, segments, state
