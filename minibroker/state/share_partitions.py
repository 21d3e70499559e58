"""Share-partition state of share groups (KIP-932). Sans-IO.

SKELETON: the cross-module interface only; the rules, the in-flight records and their
acquisition locks are filled in with ShareFetch and ShareAcknowledge.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable


class SharePartitionStore:
    """Every share group's share-partition state: (group, topic, partition) -> state.

    `ClusterState.share_partitions`. The share-group coordinator (state/share_groups.py)
    calls `member_gone` and `group_deleted`; the share-group offset APIs call the
    `start_offset`/`alter_start_offset`/`delete_partitions` family.
    """

    def __init__(self) -> None:
        # Called with what changed, as ClusterState.announce takes it.
        self.on_change: Callable[[Hashable], None] = lambda key: None

    def member_gone(self, group_id: str, member_id: str, now: float) -> None:
        """A member left or was fenced: the records it holds acquired become available
        again at once (their delivery counts kept)."""

    def group_deleted(self, group_id: str) -> None:
        """DeleteGroups removed the group: its share-partition state goes with it."""

    def initialized(self, group_id: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> share-partition start offset, for every partition of the
        group whose state exists (a member fetched it, or an offset was altered)."""
        return {}

    def lag(self, group_id: str, topic: str, partition: int) -> int | None:
        """Records from the start offset to the log end not yet acknowledged or archived
        (DescribeShareGroupOffsets v1), or None when the partition has no state."""
        return None

    def alter_start_offset(self, group_id: str, topic: str, partition: int, offset: int) -> None:
        """AlterShareGroupOffsets: the share partition starts at `offset` (clamped to the
        log's start and end), its in-flight records dropped. The caller has checked that
        the group has no members."""

    def delete_partitions(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """DeleteShareGroupOffsets: the state of these partitions is dropped; the next
        fetch starts them by share.auto.offset.reset again."""

    def topic_deleted(self, topic: str) -> None:
        """A deleted topic's share partitions go with it."""

    def next_deadline(self) -> float | None:
        """When the earliest acquisition lock expires (monotonic seconds), or None."""
        return None

    def tick(self, now: float) -> None:
        """Expired acquisition locks release their records (or archive them past the
        delivery count limit)."""
