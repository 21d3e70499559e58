"""How many segment files a data directory keeps open, and which to close first.

Each open segment file holds a file descriptor, and descriptors are shared with the
listener, every client connection and the broker's own files under one limit per process
(RLIMIT_NOFILE). A data directory keeps at most `max_open_segment_files` of them open;
opening one more closes the least recently used. A closed segment is opened again when it
is next written or read: writes append (O_APPEND), so nothing is lost or reordered, and a
segment written since the last sync is synced through whichever descriptor it has then.

The default takes half of the limit left after DESCRIPTOR_RESERVE, so that the listener
and the connections keep the other half.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

# Descriptors left to the broker's own use whatever the settings: its listening sockets,
# the data directory's lock and offsets journal, a segment opened for one read, the
# interpreter's files.
DESCRIPTOR_RESERVE = 64
# The fewest segment files a data directory keeps open (the limit notwithstanding).
LEAST_OPEN_SEGMENT_FILES = 16

Item = TypeVar("Item")


def default_open_segment_files(descriptor_limit: int) -> int:
    """The budget when none is set: half of what the limit leaves after the reserve."""
    return max(LEAST_OPEN_SEGMENT_FILES, (descriptor_limit - DESCRIPTOR_RESERVE) // 2)


@dataclass(frozen=True, slots=True)
class DescriptorPlan:
    """How a process's descriptor limit is shared out (see the module's notes)."""

    limit: int  # RLIMIT_NOFILE's soft limit; 0 when there is none
    segment_files: int
    connections: int  # max_connections summed over the nodes of the process

    @property
    def left_for_connections(self) -> int:
        return self.limit - self.segment_files - DESCRIPTOR_RESERVE

    def refusal(self) -> str | None:
        """Why the broker cannot start with these settings, or None."""
        if self.limit and self.left_for_connections < 0:
            return (
                f"max_open_segment_files={self.segment_files} leaves no descriptors for the "
                f"listener and clients under the open-files limit of {self.limit} (at most "
                f"{self.limit - DESCRIPTOR_RESERVE}); raise the limit (ulimit -n) or lower it"
            )
        return None

    def warning(self) -> str | None:
        """What an operator should know before connections run out, or None."""
        if not self.limit or self.left_for_connections >= self.connections:
            return None
        return (
            f"open-files limit {self.limit}: {self.segment_files} descriptors for segment "
            f"files leave {self.left_for_connections} for connections, fewer than "
            f"max_connections ({self.connections}); raise the limit (ulimit -n) to serve "
            "that many clients"
        )


class OpenFiles(Generic[Item]):
    """The items (segments) holding a descriptor, least recently used first: a budget."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a budget of {limit} open files")
        self.limit = limit
        self._open: OrderedDict[int, Item] = OrderedDict()  # by id(item)

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, item: Item) -> bool:
        return id(item) in self._open

    def used(self, item: Item) -> list[Item]:
        """`item` holds a descriptor and was just used: the items to close now so that
        the open ones stay within the limit (least recently used first)."""
        key = id(item)
        if key in self._open:
            self._open.move_to_end(key)
            return []
        self._open[key] = item
        surplus = len(self._open) - self.limit
        return [self._open.popitem(last=False)[1] for _ in range(max(surplus, 0))]

    def closed(self, item: Item) -> None:
        """`item` no longer holds a descriptor."""
        self._open.pop(id(item), None)

    def oldest(self, keep: Item) -> Item | None:
        """The least recently used item other than `keep`, taken off the list (to close
        when the process ran out of descriptors), or None."""
        for key, item in self._open.items():
            if item is not keep:
                del self._open[key]
                return item
        return None
