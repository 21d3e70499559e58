"""Share-group members for tests of ShareFetch and ShareAcknowledge, set up directly in
the coordinator's state (the way a heartbeat would leave them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minibroker.state.cluster import ClusterState


@dataclass
class StubShareGroup:
    members: dict[str, Any] = field(default_factory=dict)


def add_member(cluster: ClusterState, group_id: str, member_id: str) -> None:
    """`member_id` is a member of share group `group_id` from now on."""
    group = cluster.share_groups.groups.setdefault(group_id, StubShareGroup())
    group.members[member_id] = object()


def remove_member(cluster: ClusterState, group_id: str, member_id: str) -> None:
    """The member leaves: its records are released, its sessions closed."""
    cluster.share_groups.groups[group_id].members.pop(member_id, None)
    cluster.share_partitions.member_gone(group_id, member_id, cluster.clock.monotonic())
