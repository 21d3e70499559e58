"""Group coordinator for the classic consumer-group protocol. Sans-IO.

Every method takes `now` (monotonic seconds) and returns at once. JoinGroup and SyncGroup
answers that must wait for other members come back as a `Slot` that is filled later by
another member's request or by `tick(now)`; `next_deadline()` tells the caller when
`tick` must run next. The rules and states are in `group_rules`.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from minibroker.config import BrokerConfig
from minibroker.state import group_rules as rules
from minibroker.state.group_rules import ALLOWED_TRANSITIONS, GroupState, IllegalTransition

log = logging.getLogger("minibroker.groups")

T = TypeVar("T")
UNKNOWN_MEMBER = ""
MAX_METADATA_BYTES = 4096  # offset.metadata.max.bytes


class Slot(Generic[T]):
    """An answer that may not exist yet."""

    __slots__ = ("result",)

    def __init__(self, result: T | None = None) -> None:
        self.result = result

    def fill(self, result: T) -> None:
        if self.result is None:
            self.result = result


@dataclass(slots=True)
class JoinOutcome:
    error: int
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncOutcome:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    heartbeat_deadline: float
    assignment: bytes = b""
    join_slot: Slot[JoinOutcome] | None = None
    sync_slot: Slot[SyncOutcome] | None = None
    join_version: int = 0

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    @property
    def awaiting(self) -> bool:
        return (self.join_slot is not None and self.join_slot.result is None) or (
            self.sync_slot is not None and self.sync_slot.result is None
        )


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: dict[str, float] = field(default_factory=dict)
    rebalance_deadline: float | None = None
    initial_delay_deadline: float | None = None
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)

    def transition(self, target: GroupState) -> None:
        if target is self.state:
            return
        if target not in ALLOWED_TRANSITIONS[self.state]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        log.debug(
            "group %s: %s -> %s (generation %d)",
            self.group_id,
            self.state.value,
            target.value,
            self.generation,
        )
        self.state = target

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for member in self.members.values():
            mine = {name for name, _ in member.protocols}
            names = mine if names is None else names & mine
        return names or set()

    def subscribed_topics(self) -> set[str] | None:
        """Topics named in consumer-protocol subscriptions; None if not parseable."""
        if self.protocol_type != "consumer":
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription(member.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics


def parse_subscription(metadata: bytes) -> list[str] | None:
    """Topic names of a ConsumerProtocolSubscription (any version), or None."""
    try:
        position = 2  # int16 version
        (count,) = struct.unpack_from(">i", metadata, position)
        position += 4
        topics = []
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", metadata, position)
            position += 2
            topics.append(metadata[position : position + length].decode())
            position += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit overflow)."""
    value = 0
    encoded = text.encode("utf-16-be")
    for index in range(0, len(encoded), 2):
        unit = (encoded[index] << 8) | encoded[index + 1]
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def partition_for(key: str, partitions: int) -> int:
    """The __consumer_offsets (or __transaction_state) partition that owns a key."""
    hashed = java_string_hash(key)
    positive = 0 if hashed == -(2**31) else abs(hashed)  # Kafka's Utils.abs
    return positive % partitions


class GroupCoordinator:
    def __init__(
        self, config: BrokerConfig, partition_exists: Callable[[str, int], bool] | None = None
    ) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self._partition_exists = partition_exists or (lambda topic, partition: True)

    # --- JoinGroup ---

    def join(
        self,
        now: float,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        version: int = 0,
    ) -> Slot[JoinOutcome]:
        def fail(code: int) -> Slot[JoinOutcome]:
            return Slot(JoinOutcome(error=code, member_id=member_id))

        if not group_id:
            return fail(rules.INVALID_GROUP_ID)
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return fail(rules.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER:
                return fail(rules.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = Group(group_id)
        if group.state is GroupState.DEAD:
            return fail(rules.COORDINATOR_NOT_AVAILABLE)
        if not self._protocols_compatible(group, protocol_type, protocols):
            return fail(rules.INCONSISTENT_GROUP_PROTOCOL)

        def new_member(new_id: str) -> Member:
            return Member(
                member_id=new_id,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                protocol_type=protocol_type,
                protocols=list(protocols),
                heartbeat_deadline=now + session_timeout_ms / 1000,
                join_version=version,
            )

        if member_id == UNKNOWN_MEMBER:
            prefix = group_instance_id or client_id
            new_id = f"{prefix}-{uuid.uuid4()}"
            if group_instance_id is not None:
                old_id = group.static_members.get(group_instance_id)
                if old_id is not None and old_id in group.members:
                    return self._replace_static_member(now, group, old_id, new_member(new_id))
                return self._add_member_and_rebalance(now, group, new_member(new_id))
            if require_known_member_id:
                group.pending_members[new_id] = now + session_timeout_ms / 1000
                return Slot(JoinOutcome(error=rules.MEMBER_ID_REQUIRED, member_id=new_id))
            return self._add_member_and_rebalance(now, group, new_member(new_id))

        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(now, group, new_member(member_id))
        _, member, code = self._identify(group_id, member_id, group_instance_id)
        if member is None:
            return fail(code)
        member.join_version = version
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id = client_id
        changed = member.protocols != list(protocols)
        member.protocols = list(protocols)
        member.heartbeat_deadline = now + session_timeout_ms / 1000
        slot: Slot[JoinOutcome] = Slot()
        if group.state is GroupState.PREPARING_REBALANCE:
            self._await_join(member, slot)
            self._maybe_complete_join(now, group)
            return slot
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            if not changed and member.member_id != group.leader_id:
                # A follower repeating its join: answer with the current generation.
                return Slot(self._join_answer(group, member, with_members=False))
            self._await_join(member, slot)
            self._prepare_rebalance(now, group, f"member {member_id} rejoined")
            self._maybe_complete_join(now, group)
            return slot
        return fail(rules.UNKNOWN_MEMBER_ID)

    def _protocols_compatible(
        self, group: Group, protocol_type: str, protocols: list[tuple[str, bytes]]
    ) -> bool:
        if not protocol_type or not protocols:
            return False
        if not group.members:
            return True
        if protocol_type != group.protocol_type:
            return False
        return bool(group.candidate_protocols() & {name for name, _ in protocols})

    def _await_join(self, member: Member, slot: Slot[JoinOutcome]) -> None:
        if member.join_slot is not None:
            member.join_slot.fill(
                JoinOutcome(error=rules.UNKNOWN_MEMBER_ID, member_id=member.member_id)
            )
        member.join_slot = slot

    def _add_member_and_rebalance(
        self, now: float, group: Group, member: Member
    ) -> Slot[JoinOutcome]:
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
        slot: Slot[JoinOutcome] = Slot()
        self._await_join(member, slot)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._extend_initial_delay(now, group)
        else:
            self._prepare_rebalance(now, group, f"member {member.member_id} joined")
        self._maybe_complete_join(now, group)
        return slot

    def _replace_static_member(
        self, now: float, group: Group, old_id: str, member: Member
    ) -> Slot[JoinOutcome]:
        old = group.members.pop(old_id)
        if old.join_slot is not None:
            old.join_slot.fill(JoinOutcome(error=rules.FENCED_INSTANCE_ID, member_id=old_id))
        if old.sync_slot is not None:
            old.sync_slot.fill(SyncOutcome(error=rules.FENCED_INSTANCE_ID))
        member.assignment = old.assignment
        group.members[member.member_id] = member
        assert member.group_instance_id is not None
        group.static_members[member.group_instance_id] = member.member_id
        was_leader = group.leader_id == old_id
        if was_leader:
            group.leader_id = member.member_id
        log.debug(
            "group %s: static member %s replaced %s", group.group_id, member.member_id, old_id
        )
        same_protocols = old.protocols == member.protocols
        if (
            group.state is GroupState.STABLE
            and same_protocols
            and (not was_leader or member.join_version >= 9)
        ):
            # A restart within the session timeout keeps its assignment: no rebalance.
            outcome = self._join_answer(group, member, with_members=was_leader)
            outcome.skip_assignment = was_leader
            return Slot(outcome)
        slot: Slot[JoinOutcome] = Slot()
        self._await_join(member, slot)
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(now, group, f"static member {member.member_id} rejoined")
        self._maybe_complete_join(now, group)
        return slot

    def _join_answer(self, group: Group, member: Member, *, with_members: bool) -> JoinOutcome:
        members = (
            [
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            ]
            if with_members
            else []
        )
        return JoinOutcome(
            error=rules.NONE,
            generation=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    def _prepare_rebalance(self, now: float, group: Group, reason: str) -> None:
        was_empty = group.state is GroupState.EMPTY
        for member in group.members.values():
            if member.sync_slot is not None:
                member.sync_slot.fill(SyncOutcome(error=rules.REBALANCE_IN_PROGRESS))
                member.sync_slot = None
        group.transition(GroupState.PREPARING_REBALANCE)
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.rebalance_deadline = now + timeout / 1000
        delay = self.config.group_initial_rebalance_delay_ms
        group.initial_delay_deadline = now + delay / 1000 if was_empty and delay > 0 else None
        log.debug("group %s: rebalance: %s", group.group_id, reason)

    def _extend_initial_delay(self, now: float, group: Group) -> None:
        if group.initial_delay_deadline is None:
            return
        delay = self.config.group_initial_rebalance_delay_ms / 1000
        limit = group.rebalance_deadline or now
        group.initial_delay_deadline = min(now + delay, max(limit, now))
        timeout = max(m.rebalance_timeout_ms for m in group.members.values())
        group.rebalance_deadline = max(group.rebalance_deadline or now, now + timeout / 1000)

    def _maybe_complete_join(self, now: float, group: Group, *, forced: bool = False) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if not forced:
            if group.initial_delay_deadline is not None and now < group.initial_delay_deadline:
                return
            all_joined = all(
                m.join_slot is not None and m.join_slot.result is None
                for m in group.members.values()
            )
            if not all_joined or group.pending_members:
                return
        for member_id in [
            m.member_id
            for m in group.members.values()
            if m.join_slot is None or m.join_slot.result is not None
        ]:
            log.debug(
                "group %s: member %s did not rejoin in time; removed", group.group_id, member_id
            )
            self._remove_member(group, member_id)
        group.pending_members.clear()
        group.rebalance_deadline = None
        group.initial_delay_deadline = None
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.protocol_type = None
            group.leader_id = None
            group.transition(GroupState.EMPTY)
            return
        group.protocol_name = self._select_protocol(group)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE)
        for member in group.members.values():
            member.assignment = b""
            member.heartbeat_deadline = now + member.session_timeout_ms / 1000
            outcome = self._join_answer(
                group, member, with_members=member.member_id == group.leader_id
            )
            assert member.join_slot is not None
            member.join_slot.fill(outcome)
            member.join_slot = None

    def _select_protocol(self, group: Group) -> str:
        candidates = group.candidate_protocols()
        votes: dict[str, int] = {}
        for member in group.members.values():
            choice = next(name for name, _ in member.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(group.members.values()))
        preference = [name for name, _ in first.protocols if name in candidates]
        return max(preference, key=lambda name: (votes.get(name, 0), -preference.index(name)))

    def _remove_member(self, group: Group, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if member.group_instance_id is not None:
            group.static_members.pop(member.group_instance_id, None)
        if member.join_slot is not None:
            member.join_slot.fill(JoinOutcome(error=rules.UNKNOWN_MEMBER_ID, member_id=member_id))
        if member.sync_slot is not None:
            member.sync_slot.fill(SyncOutcome(error=rules.UNKNOWN_MEMBER_ID))

    def _member_gone(self, now: float, group: Group, member_id: str, reason: str) -> None:
        """A member left or expired: rebalance the others."""
        self._remove_member(group, member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now, group, reason)
        self._maybe_complete_join(now, group)

    def _identify(
        self, group_id: str, member_id: str, group_instance_id: str | None
    ) -> tuple[Group | None, Member | None, int]:
        """Find a request's member; else the error: UNKNOWN_MEMBER_ID, or
        FENCED_INSTANCE_ID when its static instance now belongs to another member id."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        if group is None or member is None:
            fenced = group is not None and group_instance_id in group.static_members
            return group, None, rules.FENCED_INSTANCE_ID if fenced else rules.UNKNOWN_MEMBER_ID
        if group_instance_id is not None and member.group_instance_id != group_instance_id:
            return group, None, rules.FENCED_INSTANCE_ID
        return group, member, rules.NONE

    # --- SyncGroup ---

    def sync(
        self,
        now: float,
        *,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Iterable[tuple[str, bytes]],
    ) -> Slot[SyncOutcome]:
        group, member, code = self._identify(group_id, member_id, group_instance_id)
        if group is None or member is None:
            return Slot(SyncOutcome(error=code))
        if generation != group.generation:
            return Slot(SyncOutcome(error=rules.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return Slot(SyncOutcome(error=rules.INCONSISTENT_GROUP_PROTOCOL))
        member.heartbeat_deadline = now + member.session_timeout_ms / 1000
        if group.state is GroupState.PREPARING_REBALANCE:
            return Slot(SyncOutcome(error=rules.REBALANCE_IN_PROGRESS))
        if group.state is GroupState.STABLE:
            return Slot(self._sync_answer(group, member))
        if group.state is not GroupState.COMPLETING_REBALANCE:
            return Slot(SyncOutcome(error=rules.UNKNOWN_MEMBER_ID))
        slot: Slot[SyncOutcome] = Slot()
        member.sync_slot = slot
        if member_id == group.leader_id:
            given = dict(assignments)
            for each in group.members.values():
                each.assignment = given.get(each.member_id, b"")
            group.transition(GroupState.STABLE)
            for each in group.members.values():
                if each.sync_slot is not None:
                    each.sync_slot.fill(self._sync_answer(group, each))
                    each.sync_slot = None
                each.heartbeat_deadline = now + each.session_timeout_ms / 1000
        return slot

    def _sync_answer(self, group: Group, member: Member) -> SyncOutcome:
        return SyncOutcome(
            error=rules.NONE,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=member.assignment,
        )

    # --- Heartbeat and LeaveGroup ---

    def heartbeat(
        self,
        now: float,
        *,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> int:
        group, member, code = self._identify(group_id, member_id, group_instance_id)
        if group is None or member is None:
            return code
        member.heartbeat_deadline = now + member.session_timeout_ms / 1000
        if group.state is GroupState.PREPARING_REBALANCE:
            return rules.REBALANCE_IN_PROGRESS
        if generation != group.generation:
            return rules.ILLEGAL_GENERATION
        return rules.NONE

    def leave(
        self, now: float, *, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        group = self.groups.get(group_id)
        if group is None:
            return rules.UNKNOWN_MEMBER_ID, [(m, i, rules.UNKNOWN_MEMBER_ID) for m, i in members]
        results: list[tuple[str, str | None, int]] = []
        for member_id, instance_id in members:
            target = member_id
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    results.append((member_id, instance_id, rules.UNKNOWN_MEMBER_ID))
                    continue
                if member_id != UNKNOWN_MEMBER and member_id != known:
                    results.append((member_id, instance_id, rules.FENCED_INSTANCE_ID))
                    continue
                target = known
            if target in group.pending_members:
                del group.pending_members[target]
                self._maybe_complete_join(now, group)
                results.append((member_id, instance_id, rules.NONE))
                continue
            if target not in group.members:
                results.append((member_id, instance_id, rules.UNKNOWN_MEMBER_ID))
                continue
            self._member_gone(now, group, target, f"member {target} left")
            results.append((member_id, instance_id, rules.NONE))
        return rules.NONE, results

    # --- time ---

    def next_deadline(self) -> float | None:
        deadlines: list[float] = []
        for group in self.groups.values():
            deadlines.extend(group.pending_members.values())
            if group.state is GroupState.PREPARING_REBALANCE:
                if group.rebalance_deadline is not None:
                    deadlines.append(group.rebalance_deadline)
                if group.initial_delay_deadline is not None:
                    deadlines.append(group.initial_delay_deadline)
            deadlines.extend(m.heartbeat_deadline for m in group.members.values() if not m.awaiting)
        return min(deadlines, default=None)

    def tick(self, now: float) -> None:
        """Expire members and pending ids, end join phases whose time is up."""
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.pending_members.items()):
                if deadline <= now:
                    del group.pending_members[member_id]
            for member in list(group.members.values()):
                if not member.awaiting and member.heartbeat_deadline <= now:
                    log.debug(
                        "group %s: member %s missed its session timeout",
                        group.group_id,
                        member.member_id,
                    )
                    self._member_gone(
                        now, group, member.member_id, f"member {member.member_id} session timed out"
                    )
            if group.state is GroupState.PREPARING_REBALANCE:
                if group.initial_delay_deadline is not None and now >= group.initial_delay_deadline:
                    group.initial_delay_deadline = None
                if group.rebalance_deadline is not None and now >= group.rebalance_deadline:
                    self._maybe_complete_join(now, group, forced=True)
                else:
                    self._maybe_complete_join(now, group)

    # --- offsets ---

    def commit(
        self,
        now: float,
        *,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
    ) -> dict[tuple[str, int], int]:
        """Store (topic, partition, offset, leader_epoch, metadata); error code per partition."""

        def everywhere(code: int) -> dict[tuple[str, int], int]:
            return {(t, p): code for t, p, *_ in offsets}

        if not group_id:
            return everywhere(rules.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if generation < 0 and member_id == UNKNOWN_MEMBER:
            if group is None:
                group = self.groups[group_id] = Group(group_id)
            if group.state is not GroupState.EMPTY:
                return everywhere(rules.UNKNOWN_MEMBER_ID)
        else:
            group, member, code = self._identify(group_id, member_id, group_instance_id)
            if group is None or member is None:
                return everywhere(code)
            if generation != group.generation:
                return everywhere(rules.ILLEGAL_GENERATION)
            if group.state is GroupState.COMPLETING_REBALANCE:
                return everywhere(rules.REBALANCE_IN_PROGRESS)
            member.heartbeat_deadline = now + member.session_timeout_ms / 1000
        results: dict[tuple[str, int], int] = {}
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if not self._partition_exists(topic, partition):
                results[(topic, partition)] = rules.UNKNOWN_TOPIC_OR_PARTITION
            elif metadata is not None and len(metadata.encode()) > MAX_METADATA_BYTES:
                results[(topic, partition)] = rules.OFFSET_METADATA_TOO_LARGE
            else:
                group.offsets[(topic, partition)] = CommittedOffset(offset, leader_epoch, metadata)
                results[(topic, partition)] = rules.NONE
        return results

    def committed(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], CommittedOffset | None]:
        group = self.groups.get(group_id)
        stored = group.offsets if group else {}
        if partitions is None:
            return dict(stored)
        return {key: stored.get(key) for key in partitions}

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        group = self.groups.get(group_id)
        if group is None:
            return rules.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if group.state is not GroupState.EMPTY:
            topics = group.subscribed_topics()
            if topics is None:
                return rules.NON_EMPTY_GROUP, {}
            subscribed = topics
        results = {}
        for topic, partition in partitions:
            if topic in subscribed:
                results[(topic, partition)] = rules.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                group.offsets.pop((topic, partition), None)
                results[(topic, partition)] = rules.NONE
        return rules.NONE, results

    # --- administration ---

    def delete_group(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return rules.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY:
            return rules.NON_EMPTY_GROUP
        group.transition(GroupState.DEAD)
        del self.groups[group_id]
        return rules.NONE

    def remove_topic(self, topic: str) -> None:
        for group in self.groups.values():
            for key in [k for k in group.offsets if k[0] == topic]:
                del group.offsets[key]
