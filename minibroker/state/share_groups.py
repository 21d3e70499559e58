"""Share-group coordinator (KIP-932): members, epochs and assignment. Sans-IO.

Rules (Kafka 4.4's GroupMetadataManager, share group paths; ShareGroupHeartbeat v1):
    Members      named by the client: a member id it keeps for its whole life, at most
                 36 characters (a UUID). Epoch 0 joins (or rejoins with the same id) and
                 must name the subscribed topics; -1 leaves. A heartbeat repeats the
                 subscription only when it changes (null: unchanged).
    Requests     INVALID_REQUEST, in Kafka's order and words: "Invalid member id in the
                 request." (empty, or over 36 characters), "MemberId can't be empty.",
                 "GroupId can't be empty.", "RackId can't be empty.",
                 "SubscribedTopicNames must be set in first request." (epoch 0 with
                 none), "MemberEpoch is invalid." (below -1).
    Groups       a join creates the group; a heartbeat (or leave) with another epoch to a
                 group not here is GROUP_ID_NOT_FOUND "Share group G not found."; a group
                 id held by a classic or consumer group is GROUP_ID_NOT_FOUND "Group G is
                 not a share group." (Kafka converts nothing to or from share groups). An
                 empty share group stays (state Empty) until DeleteGroups removes it.
    Size         a member not yet in a group of group.share.max.size members is refused
                 with GROUP_MAX_SIZE_REACHED ("The share group has reached its maximum
                 capacity of N members.").
    Epochs       the group epoch is bumped by every change the assignment depends on: a
                 member's subscription (joining is one), a member leaving or timing out,
                 a subscribed topic created, deleted or grown. The target assignment is
                 computed when a heartbeat finds the group epoch ahead of the assignment
                 epoch, and the assignment epoch set to the group epoch. A member not at
                 the assignment epoch takes its target at once, with the assignment epoch
                 as its epoch (previous epoch kept): there is no revocation handshake in
                 share groups, as a partition may be read by several members anyway.
                 A known member's heartbeat whose epoch is above the member's, or below it
                 and not its previous epoch, is FENCED_MEMBER_EPOCH; an unknown member with
                 an epoch other than 0 is UNKNOWN_MEMBER_ID ("Member M is not a member of
                 group G."); epoch 0 is always accepted.
    Answers      the member id, its epoch and the heartbeat interval; the assignment (by
                 topic id) when the request was a join or the member's partitions changed.
                 A leave is answered with epoch -1.
    Sessions     each heartbeat restarts a member's session (the group's
                 share.session.timeout.ms, by default group.share.session.timeout.ms) on
                 the broker clock; a member whose session runs out is removed as if it had
                 left. Members are told the group's share.heartbeat.interval.ms.
    Gone         a member that leaves or times out: `SharePartitionStore.member_gone`
                 releases the records it holds acquired.
    Assignment   Kafka's "simple" share assignor (SimpleAssignor): when every member
                 subscribes to the same topics, all their partitions are one pool; else each
                 topic is a pool of its own, shared by the members subscribed to it. In a
                 pool of P partitions and M members each partition goes to
                 S = ceil(M / P) members, and member i (in join order) is given
                 ceil(S*P*(i+1)/M) - ceil(S*P*i/M) partitions. A member keeps what it had
                 as far as that allows (first what it may no longer have is taken back,
                 then what it has beyond its count, then sharers beyond S), and the
                 partitions still short of S sharers go round the members still short of
                 their count. So 18 members on 6 partitions read 3 to a partition.
    States       Empty (no members) and Stable; Dead once deleted.
Not done: rack-aware assignment (rack ids are kept and described only); Kafka's
assignment interval (group.share.assignment.interval.ms): the target is computed at once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from minibroker.config import BrokerConfig
from minibroker.state.deadlines import Deadlines
from minibroker.state.group_configs import GroupConfigs

log = logging.getLogger("minibroker.groups")

# Error codes (Kafka's Errors.java).
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68
GROUP_MAX_SIZE_REACHED = 81
FENCED_MEMBER_EPOCH = 110

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
MAX_MEMBER_ID_LENGTH = 36
ASSIGNOR_NAME = "simple"

TopicInfo = Callable[[str], "tuple[uuid.UUID, int] | None"]
# topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None = None
    subscribed_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)
    session_deadline: float = 0.0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # The subscribed topics (id, partitions) the target was computed from.
    topics_seen: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    topics_version: int = -1

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        topics: set[str] = set()
        for member in self.members.values():
            topics.update(member.subscribed_names)
        return topics


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    error: int
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    assignment: Assignment | None = None


def _fail(code: int, message: str | None) -> HeartbeatOutcome:
    return HeartbeatOutcome(error=code, message=message)


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def share_pool(
    partitions: Sequence[Any], members: Sequence[str], current: dict[str, set[Any]]
) -> dict[str, set[Any]]:
    """One pool of the simple assignor (module docstring: Assignment): member -> the
    partitions of `partitions` it reads, keeping what `current` gives it where it can."""
    position = {p: i for i, p in enumerate(partitions)}
    if not partitions or not members:
        return {m: set() for m in members}
    sharing = _ceil_div(len(members), len(partitions))
    wanted_total = sharing * len(partitions)
    wanted = {
        m: _ceil_div(wanted_total * (i + 1), len(members))
        - _ceil_div(wanted_total * i, len(members))
        for i, m in enumerate(members)
    }
    held = {
        m: sorted((p for p in current.get(m, ()) if p in position), key=position.__getitem__)
        for m in members
    }
    for member in members:  # beyond its count: the last ones go back
        del held[member][wanted[member] :]
    sharers: dict[Any, list[str]] = {p: [] for p in partitions}
    for member in members:
        for partition in held[member]:
            sharers[partition].append(member)
    for partition in partitions:  # shared by more than S: the last sharers give it up
        for member in sharers[partition][sharing:]:
            held[member].remove(partition)
        del sharers[partition][sharing:]
    short = [m for m in members if len(held[m]) < wanted[m]]
    turn = 0
    for partition in partitions:
        if not short:
            break
        missing = sharing - len(sharers[partition])
        tried = 0  # a whole round of members that all have it: leave it short
        while missing > 0 and short and tried < len(short):
            turn %= len(short)
            member = short[turn]
            if partition in held[member]:
                turn += 1
                tried += 1
                continue
            held[member].append(partition)
            sharers[partition].append(member)
            missing -= 1
            tried = 0
            if len(held[member]) >= wanted[member]:
                short.pop(turn)
            else:
                turn += 1
    return {m: set(held[m]) for m in members}


def simple_assignor(
    subscriptions: dict[str, frozenset[uuid.UUID]],
    partition_counts: dict[uuid.UUID, int],
    current: dict[str, Assignment],
) -> dict[str, Assignment]:
    """Kafka's "simple" share assignor: member -> topic id -> partitions. `subscriptions`
    is in join order and names existing topics only."""
    members = list(subscriptions)
    pools: list[tuple[list[tuple[uuid.UUID, int]], list[str]]] = []
    if len(set(subscriptions.values())) <= 1:
        topics = sorted(next(iter(subscriptions.values()), frozenset()), key=str)
        pool = [(t, p) for t in topics for p in range(partition_counts[t])]
        pools.append((pool, members))
    else:
        for topic in sorted(set().union(*subscriptions.values()), key=str):
            pool = [(topic, p) for p in range(partition_counts[topic])]
            pools.append((pool, [m for m in members if topic in subscriptions[m]]))
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for pool, sharers in pools:
        held = {
            m: {(t, p) for t, parts in current.get(m, {}).items() for p in parts} for m in sharers
        }
        for member, partitions in share_pool(pool, sharers, held).items():
            for topic, index in partitions:
                result[member].setdefault(topic, set()).add(index)
    return {m: {t: frozenset(p) for t, p in parts.items()} for m, parts in result.items()}


class ShareGroupCoordinator:
    """`ClusterState.share_groups`."""

    def __init__(
        self,
        topic_info: TopicInfo | None = None,
        group_configs: GroupConfigs | None = None,
        *,
        max_size: Callable[[], int] = lambda: 200,
        other_type: Callable[[str], str | None] = lambda group_id: None,
        member_gone: Callable[[str, str, float], None] = lambda group, member, now: None,
    ) -> None:
        self.groups: dict[str, ShareGroup] = {}
        self.on_change: Callable[[str], None] = lambda group_id: None
        self._topic_info: TopicInfo = topic_info or (lambda name: None)
        self.group_configs = group_configs or GroupConfigs(BrokerConfig())
        self._max_size = max_size
        self._other_type = other_type  # "classic" or "consumer" for another kind's group
        self._member_gone = member_gone
        self.topics_version = 0  # bumped whenever topics change
        self.deadlines: Deadlines[str] = Deadlines()  # keyed by member id

    def is_member(self, group_id: str, member_id: str) -> bool:
        """Whether `member_id` is a member of share group `group_id` now (ShareFetch and
        ShareAcknowledge serve members only)."""
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def topics_changed(self) -> None:
        self.topics_version += 1

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_configs.int_value(group_id, "share.heartbeat.interval.ms")

    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_configs.int_value(group_id, "share.session.timeout.ms")

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # --- ShareGroupHeartbeat ---

    def heartbeat(
        self,
        now: float,
        *,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_names: Sequence[str] | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatOutcome:
        try:
            return self._heartbeat(
                now, group_id, member_id, member_epoch, rack_id, subscribed_names,
                client_id, client_host,
            )  # fmt: skip
        finally:
            self.on_change(group_id)

    def _heartbeat(
        self,
        now: float,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_names: Sequence[str] | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatOutcome:
        invalid = invalid_heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_names)
        if invalid is not None:
            return _fail(INVALID_REQUEST, invalid)
        group = self.groups.get(group_id)
        if group is None:
            if self._other_type(group_id) is not None:
                return _fail(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
            if member_epoch != JOIN_EPOCH:
                return _fail(GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            group = self.groups[group_id] = ShareGroup(group_id)
        if member_epoch == LEAVE_EPOCH:
            return self._leave(now, group, member_id)
        max_size = self._max_size()
        if len(group.members) >= max_size and member_id not in group.members:
            return _fail(
                GROUP_MAX_SIZE_REACHED,
                f"The share group has reached its maximum capacity of {max_size} members.",
            )
        member = group.members.get(member_id)
        if member is None:
            if member_epoch != JOIN_EPOCH:
                return _fail(
                    UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
                )
            member = group.members[member_id] = ShareMember(member_id, client_id, client_host)
            log.debug("share group %s: member %s joined", group_id, member_id)  # pragma: no mutate
        elif member_epoch != JOIN_EPOCH and (fenced := _epoch_problem(member, member_epoch)):
            return _fail(FENCED_MEMBER_EPOCH, fenced)

        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        bump = False
        subscription_changed = False
        if subscribed_names is not None:
            names = tuple(sorted(set(subscribed_names)))
            if names != member.subscribed_names:
                member.subscribed_names = names
                bump = subscription_changed = True
        bump = self._topics_moved(group) or bump
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._new_target(group)
        before = member.assigned
        if member.member_epoch != group.assignment_epoch or subscription_changed:
            if member.member_epoch != group.assignment_epoch:
                member.previous_epoch = member.member_epoch
                member.member_epoch = group.assignment_epoch
            member.assigned = self._subscribed_part(group, member)
        self._touch(now, group, member)
        return HeartbeatOutcome(
            error=NONE,
            member_id=member_id,
            member_epoch=member.member_epoch,
            assignment=(
                dict(member.assigned)
                if member_epoch == JOIN_EPOCH or member.assigned != before
                else None
            ),
        )

    def _subscribed_part(self, group: ShareGroup, member: ShareMember) -> Assignment:
        """The member's target, less topics it no longer subscribes to."""
        ids = {group.topics_seen[n][0] for n in member.subscribed_names if n in group.topics_seen}
        target = group.target.get(member.member_id, {})
        return {t: parts for t, parts in target.items() if t in ids and parts}

    def _leave(self, now: float, group: ShareGroup, member_id: str) -> HeartbeatOutcome:
        member = group.members.get(member_id)
        if member is None:
            return _fail(
                UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
            )
        self._remove(now, group, member, "left")
        return HeartbeatOutcome(error=NONE, member_id=member_id, member_epoch=LEAVE_EPOCH)

    def _remove(self, now: float, group: ShareGroup, member: ShareMember, why: str) -> None:
        log.debug(
            "share group %s: member %s %s",  # pragma: no mutate
            group.group_id,  # pragma: no mutate
            member.member_id,  # pragma: no mutate
            why,  # pragma: no mutate
        )
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        self.deadlines.forget(group.group_id, member.member_id)
        group.group_epoch += 1
        if not group.members:
            group.assignment_epoch = group.group_epoch
        self._member_gone(group.group_id, member.member_id, now)

    # --- the target assignment ---

    def _resolve(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        """The subscribed topics that exist: name -> (topic id, partitions)."""
        seen = {}
        for name in sorted(group.subscribed_topics()):
            info = self._topic_info(name)
            if info is not None:
                seen[name] = info
        return seen

    def _topics_moved(self, group: ShareGroup) -> bool:
        """Whether a subscribed topic was created, deleted or grew since the target."""
        if group.topics_version == self.topics_version:
            return False
        group.topics_version = self.topics_version
        return self._resolve(group) != group.topics_seen

    def _new_target(self, group: ShareGroup) -> None:
        group.topics_version = self.topics_version
        group.topics_seen = self._resolve(group)
        subscriptions = {
            m.member_id: frozenset(
                group.topics_seen[n][0] for n in m.subscribed_names if n in group.topics_seen
            )
            for m in group.members.values()
        }
        counts = dict(group.topics_seen.values())
        group.target = simple_assignor(subscriptions, counts, group.target)
        group.assignment_epoch = group.group_epoch
        log.debug(
            "share group %s: epoch %d, target %s",  # pragma: no mutate
            group.group_id,  # pragma: no mutate
            group.group_epoch,  # pragma: no mutate
            group.target,  # pragma: no mutate
        )

    # --- time ---

    def _touch(self, now: float, group: ShareGroup, member: ShareMember) -> None:
        member.session_deadline = now + self.session_timeout_ms(group.group_id) / 1000
        self.deadlines.arm(group.group_id, member.member_id, member.session_deadline)

    def _actual(self, group_id: str, member_id: str, _scheduled: float) -> float | None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        return None if member is None else member.session_deadline

    def next_deadline(self) -> float | None:
        return self.deadlines.next_deadline(self._actual)

    def tick(self, now: float) -> None:
        """Members whose session timed out leave the group."""
        for group_id, member_id in self.deadlines.due(now, self._actual):
            group = self.groups.get(group_id)
            member = group.members.get(member_id) if group is not None else None
            if group is None or member is None:
                continue
            if member.session_deadline > now:
                self.deadlines.arm(group_id, member_id, member.session_deadline)
                continue
            self._remove(now, group, member, "session timed out")
            self.on_change(group_id)

    # --- group-level operations ---

    def delete(self, group_id: str) -> int:
        """DeleteGroups: NONE, or why not (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP)."""
        group = self.groups.get(group_id)
        if group is None:
            return GROUP_ID_NOT_FOUND
        if group.members:
            return NON_EMPTY_GROUP
        del self.groups[group_id]
        self.deadlines.forget_owner(group_id)
        self.on_change(group_id)
        return NONE

    def offsets_changeable(self, group_id: str, *, create: bool) -> tuple[int, str | None]:
        """Whether a share group's start offsets may be altered or deleted now (Kafka's
        AlterShareGroupOffsets creates the group if need be; DeleteShareGroupOffsets
        needs it): (NONE, None), or the error and Kafka's message."""
        if group_id not in self.groups:
            if self._other_type(group_id) is not None:
                return GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            if not create:
                return GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            self.groups[group_id] = ShareGroup(group_id)
            self.on_change(group_id)
        if self.groups[group_id].members:
            return NON_EMPTY_GROUP, "The group is not empty."
        return NONE, None

    def assigned_members(self, group_id: str) -> dict[tuple[str, int], list[str]]:
        """(topic, partition) -> the members reading it now (for inspection)."""
        group = self.groups.get(group_id)
        found: dict[tuple[str, int], list[str]] = {}
        if group is None:
            return found
        names = {topic_id: name for name, (topic_id, _) in group.topics_seen.items()}
        for member in group.members.values():
            for topic_id, parts in member.assigned.items():
                for index in parts:
                    key = (names.get(topic_id, str(topic_id)), index)
                    found.setdefault(key, []).append(member.member_id)
        return dict(sorted(found.items()))


def invalid_heartbeat(
    group_id: str,
    member_id: str,
    member_epoch: int,
    rack_id: str | None,
    subscribed_names: Iterable[str] | None,
) -> str | None:
    """Why a heartbeat is INVALID_REQUEST (module docstring: Requests), or None."""
    if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
        return "Invalid member id in the request."
    if not member_id.strip():
        return "MemberId can't be empty."
    if not group_id.strip():
        return "GroupId can't be empty."
    if rack_id is not None and not rack_id.strip():
        return "RackId can't be empty."
    if member_epoch == JOIN_EPOCH:
        if not subscribed_names:
            return "SubscribedTopicNames must be set in first request."
    elif member_epoch < LEAVE_EPOCH:
        return "MemberEpoch is invalid."
    return None


def _epoch_problem(member: ShareMember, received: int) -> str | None:
    if received > member.member_epoch:
        return (
            f"The share group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin."
        )
    if received < member.member_epoch and received != member.previous_epoch:
        return (
            f"The share group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}), and it does not match "
            f"the previous member epoch ({member.previous_epoch}). The member must abandon "
            "all its partitions and rejoin."
        )
    return None
