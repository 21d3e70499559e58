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
