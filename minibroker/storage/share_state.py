"""Share-partition state in a data directory: `share-state.jsonl`.

One line per change of a share partition: its whole state (start and end offsets, runs of
record states with delivery counts; state/share_partitions.py `SharePartition.snapshot`)
or that it is gone. Lines are appended as the changes happen, so a killed process keeps
every line it wrote; at the next start the lines are replayed (the last per partition
wins; a line the process did not finish ends the replay) and the file is rewritten with
one line per partition, as it is whenever the lines appended since outgrow COMPACT_BYTES
and four times the state they describe. Acquired records are written as Available with
their delivery counts: after a restart they are delivered again, acknowledged ones
never. The file is
synced with the rest of the directory (its flush policy).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from minibroker.state.share_partitions import Key, SharePartition, SharePartitionStore
from minibroker.storage.segments import replace_file

SHARE_STATE_FILE = "share-state.jsonl"
COMPACT_BYTES = 4 * 1024 * 1024


def _line(key: Key, partition: SharePartition | None) -> str:
    group, topic, index = key
    entry: dict[str, Any] = {"group": group, "topic": topic, "partition": index}
    if partition is None:
        entry["gone"] = True
    else:
        entry.update(partition.snapshot())
    return json.dumps(entry, separators=(",", ":")) + "\n"


class ShareStateJournal:
    def __init__(self, directory: Path) -> None:
        self.path = directory / SHARE_STATE_FILE
        self._fd: int | None = None
        self.unsynced = False
        self._store: SharePartitionStore | None = None
        self._size = 0  # bytes in the file
        self._compacted_size = 0  # bytes in it when it was last rewritten

    def load(self, store: SharePartitionStore) -> None:
        """Replay the file into `store`, rewrite it compacted and open it for appends."""
        latest: dict[Key, dict[str, Any] | None] = {}
        if self.path.exists():
            with open(self.path, encoding="utf-8") as file:
                for text in file:
                    try:
                        entry = json.loads(text)
                        key = (str(entry["group"]), str(entry["topic"]), int(entry["partition"]))
                    except (ValueError, KeyError, TypeError):
                        break  # a line the process did not finish writing: the end
                    latest[key] = None if entry.get("gone") else entry
        store.load([entry for entry in latest.values() if entry is not None])
        self._store = store
        self._rewrite()

    def _rewrite(self) -> None:
        """The file as one line per share partition, open for appends."""
        assert self._store is not None
        lines = [_line(key, partition) for key, partition in self._store.partitions.items()]
        content = "".join(lines).encode()
        if self._fd is not None:
            os.close(self._fd)
        replace_file(self.path, content)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = self._compacted_size = len(content)

    def reopen(self) -> None:
        """Open the file for appends again after `close` (the directory taken again)."""
        if self._fd is None and self.path.exists():
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def changed(self, key: Key, partition: SharePartition | None) -> None:
        if self._fd is None:
            return
        data = _line(key, partition).encode()
        os.write(self._fd, data)
        self.unsynced = True
        self._size += len(data)
        if self._size > max(COMPACT_BYTES, 4 * self._compacted_size):
            self._rewrite()  # replace_file syncs the new file before it takes the name

    def sync(self) -> None:
        if self.unsynced and self._fd is not None:
            os.fsync(self._fd)
        self.unsynced = False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
