"""Share-group coordinator (KIP-932): members, epochs and assignment. Sans-IO.

SKELETON: the cross-module interface only; filled in with ShareGroupHeartbeat.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ShareGroupCoordinator:
    """`ClusterState.share_groups`."""

    def __init__(self) -> None:
        self.groups: dict[str, Any] = {}
        self.on_change: Callable[[str], None] = lambda group_id: None

    def is_member(self, group_id: str, member_id: str) -> bool:
        """Whether `member_id` is a member of share group `group_id` now (ShareFetch and
        ShareAcknowledge serve members only)."""
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def next_deadline(self) -> float | None:
        return None

    def tick(self, now: float) -> None:
        """Members whose session timed out leave the group."""
