"""Group coordinator for the classic consumer-group protocol. Sans-IO.

Every method takes `now` (monotonic seconds) and returns at once. JoinGroup and SyncGroup
answers that must wait for other members come back as a `Slot` that is filled later by
another member's request or by `tick(now)`; `next_deadline()` tells the caller when
`tick` must run next. The rules and states are in `group_rules`.

How timing works. Every deadline the coordinator keeps -- a member's session (heartbeat)
deadline, a pending member id's, a group's rebalance deadline and initial rebalance
delay, an Empty group's offset expiry -- is a timer in `state.deadlines` (owner: the
group id; key: kind and member id), re-armed lazily: a heartbeat pushes nothing, and
`tick(now)` runs the group rules only for groups with something due. No timing path
walks all groups. Expiry timers are checked exactly by `tick` only (their deadline can
take a scan of the group's offsets), so `next_deadline()` may name an expiry that has
since moved later; the `tick` then finds nothing due and re-arms it.

The group, its members and their transitions are in `group_rules`, committed offsets'
rules in `offset_store`, timers in `deadlines`. Over 600 lines still because the
classic protocol's requests -- join, sync, heartbeat, leave, commits -- each check and
move the same group, and groups move to and from the consumer protocol's coordinator
(the last section) with their members and offsets.
"""

from __future__ import annotations

import enum
import functools
import logging
import uuid
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from minibroker.config import BrokerConfig
from minibroker.protocol.consumer_protocol import parse_subscription, read_assignment
from minibroker.state import group_rules as rules
from minibroker.state import offset_store
from minibroker.state.deadlines import Deadlines
from minibroker.state.group_rules import (
    Group,
    GroupState,
    JoinOutcome,
    Member,
    Slot,
    SyncOutcome,
)
from minibroker.state.offset_store import (
    CommittedOffset,
    OffsetEntry,
    OffsetsListener,
    PartitionKey,
)

log = logging.getLogger("minibroker.groups")

UNKNOWN_MEMBER = ""
MEMBER_ID_PREFIX_CHARS = 1000


class Timer(enum.StrEnum):  # str's hash: Enum's own __hash__ is slow Python
    """What a deadline in the coordinator's heap is for."""

    HEARTBEAT = "heartbeat"  # a member's session timeout (not while it awaits an answer)
    PENDING = "pending"  # a member id handed out with MEMBER_ID_REQUIRED
    REBALANCE = "rebalance"  # the join phase's end (largest rebalance timeout)
    INITIAL_DELAY = "initial-delay"  # group.initial.rebalance.delay.ms of a new group
    EXPIRY = "expiry"  # offsets.retention.minutes of an Empty group


TimerKey = tuple[Timer, str]  # (kind, member id or "" for the group's own timers)
EXPIRY_KEY: TimerKey = (Timer.EXPIRY, "")


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit overflow)."""
    value = 0
    encoded = text.encode("utf-16-be")
    for index in range(0, len(encoded), 2):
        unit = (encoded[index] << 8) | encoded[index + 1]
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


@lru_cache(maxsize=65_536)
def partition_for(key: str, partitions: int) -> int:
    """The __consumer_offsets (or __transaction_state) partition that owns a key (asked on
    every group request, so remembered for the most recent keys)."""
    hashed = java_string_hash(key)
    positive = 0 if hashed == -(2**31) else abs(hashed)  # Kafka's Utils.abs
    return positive % partitions


P = ParamSpec("P")
R = TypeVar("R")


class Announcing(Protocol):
    def _changed(self, group_id: str) -> None: ...


A = TypeVar("A", bound=Announcing)


def announces(
    method: Callable[Concatenate[A, float, P], R],
) -> Callable[Concatenate[A, float, P], R]:
    """The request may change what its group's members wait for (answers, deadlines):
    the coordinator announces the group after it, however it ends."""

    @functools.wraps(method)
    def announced(self: A, now: float, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, now, *args, **kwargs)
        finally:
            group_id = kwargs["group_id"] if "group_id" in kwargs else args[0]
            self._changed(group_id)  # type: ignore[arg-type]

    return announced


class GroupCoordinator:
    def __init__(
        self, config: BrokerConfig, partition_exists: Callable[[str, int], bool] | None = None
    ) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self._partition_exists = partition_exists or (lambda topic, partition: True)
        self.deadlines: Deadlines[TimerKey] = Deadlines()
        # Told of every change to committed offsets (a data directory keeps them):
        # (group id, {partition: offset, or None when deleted}), or (group id, None) when
        # the group is gone.
        self.on_offsets: OffsetsListener | None = None
        # Groups whose members another coordinator runs (the consumer protocol's,
        # state/consumer_groups.py): only their offsets are kept here, and they do not
        # expire while held.
        self.held: set[str] = set()
        # Told of each group removed (deleted or expired), by group id.
        self.on_group_removed: Callable[[str], None] | None = None
        # Checks a transactional commit's member against a group another coordinator
        # runs: (group id, member id, generation or epoch) -> error code, or None when
        # the group is not one of its.
        self.check_elsewhere: Callable[[str, str, int], int | None] | None = None
        # Told of each group whose members' waiting answers or deadlines may have changed
        # (a join, sync or leave, a deadline that fell due, a hand-over), by group id.
        self.on_change: Callable[[str], None] | None = None

    def _changed(self, group_id: str) -> None:
        if self.on_change is not None:
            self.on_change(group_id)

    def _offsets_changed(
        self, group_id: str, changes: dict[tuple[str, int], CommittedOffset | None] | None
    ) -> None:
        if self.on_offsets is not None and (changes is None or changes):
            self.on_offsets(group_id, changes)

    def restore_offsets(
        self, now: float, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]
    ) -> None:
        """An Empty group with these committed offsets (read back at a restart)."""
        group = self._create_group(now, group_id)
        for stored in offsets.values():
            stored.committed_at = now
        group.offsets.update(offsets)

    def _create_group(self, now: float, group_id: str) -> Group:
        group = self.groups[group_id] = Group(group_id, empty_since=now)
        self._arm_expiry(group)
        return group

    # --- JoinGroup ---

    @announces
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
            group = self._create_group(now, group_id)
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
            # Kafka's form, with the prefix cut short: the id must fit a legacy string.
            prefix = (group_instance_id or client_id)[:MEMBER_ID_PREFIX_CHARS]
            new_id = f"{prefix}-{uuid.uuid4()}"
            if group_instance_id is not None:
                old_id = group.static_members.get(group_instance_id)
                if old_id is not None and old_id in group.members:
                    return self._replace_static_member(now, group, old_id, new_member(new_id))
                return self._add_member_and_rebalance(now, group, new_member(new_id))
            if require_known_member_id:
                deadline = now + session_timeout_ms / 1000
                group.pending_members[new_id] = deadline
                self._arm(group, Timer.PENDING, new_id, deadline)
                return Slot(JoinOutcome(error=rules.MEMBER_ID_REQUIRED, member_id=new_id))
            return self._add_member_and_rebalance(now, group, new_member(new_id))

        if member_id in group.pending_members:
            self._drop_pending(group, member_id)
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
        self._touch(now, group, member)
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
        group.had_members = True
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
        old = group.members[old_id]
        # The new member takes the old one's place (the order decides protocol ties).
        group.members = {
            (member.member_id if key == old_id else key): (member if key == old_id else value)
            for key, value in group.members.items()
        }
        self._forget(group, Timer.HEARTBEAT, old_id)
        if old.join_slot is not None:
            old.join_slot.fill(JoinOutcome(error=rules.FENCED_INSTANCE_ID, member_id=old_id))
        if old.sync_slot is not None:
            old.sync_slot.fill(SyncOutcome(error=rules.FENCED_INSTANCE_ID))
        member.assignment = old.assignment
        self._arm(group, Timer.HEARTBEAT, member.member_id, member.heartbeat_deadline)
        assert member.group_instance_id is not None
        group.static_members[member.group_instance_id] = member.member_id
        was_leader = group.leader_id == old_id
        if was_leader:
            group.leader_id = member.member_id
        log.debug(
            "group %s: static member %s replaced %s",  # pragma: no mutate
            group.group_id,  # pragma: no mutate
            member.member_id,  # pragma: no mutate
            old_id,  # pragma: no mutate
        )
        if group.state is GroupState.STABLE and self._select_protocol(group) == group.protocol_name:
            # A restart within the session timeout keeps its assignment: no rebalance.
            skip = was_leader and member.join_version >= 9
            outcome = self._join_answer(group, member, with_members=skip)
            outcome.skip_assignment = skip
            if was_leader and not skip:
                # Without skip_assignment (v9) the new instance must not think it leads:
                # its assignment would never be handed out by a Stable group.
                outcome.leader = old_id
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
                # Answered: its session starts again from now, as Kafka's does, so a member
                # that waited on a slow leader longer than its session can still rejoin.
                member.heartbeat_deadline = now + member.session_timeout_ms / 1000
                self._arm(group, Timer.HEARTBEAT, member.member_id, member.heartbeat_deadline)
        group.transition(GroupState.PREPARING_REBALANCE)
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.rebalance_deadline = now + timeout / 1000
        self._arm(group, Timer.REBALANCE, "", group.rebalance_deadline)
        delay = self.config.group_initial_rebalance_delay_ms
        group.initial_delay_deadline = now + delay / 1000 if was_empty and delay > 0 else None
        if group.initial_delay_deadline is not None:
            self._arm(group, Timer.INITIAL_DELAY, "", group.initial_delay_deadline)
        log.debug(
            "group %s: rebalance: %s",  # pragma: no mutate
            group.group_id,  # pragma: no mutate
            reason,  # pragma: no mutate
        )

    def _extend_initial_delay(self, now: float, group: Group) -> None:
        if group.initial_delay_deadline is None:
            return
        delay = self.config.group_initial_rebalance_delay_ms / 1000
        limit = group.rebalance_deadline or now
        group.initial_delay_deadline = min(now + delay, max(limit, now))
        self._arm(group, Timer.INITIAL_DELAY, "", group.initial_delay_deadline)
        timeout = max(m.rebalance_timeout_ms for m in group.members.values())
        group.rebalance_deadline = max(group.rebalance_deadline or now, now + timeout / 1000)
        self._arm(group, Timer.REBALANCE, "", group.rebalance_deadline)

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
                "group %s: member %s did not rejoin in time; removed",  # pragma: no mutate
                group.group_id,  # pragma: no mutate
                member_id,  # pragma: no mutate
            )
            self._remove_member(group, member_id)
        for pending_id in list(group.pending_members):
            self._drop_pending(group, pending_id)
        group.rebalance_deadline = None
        group.initial_delay_deadline = None
        self._forget(group, Timer.REBALANCE, "")
        self._forget(group, Timer.INITIAL_DELAY, "")
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY)
            group.empty_since = now
            self._arm_expiry(group)
            return
        group.protocol_name = self._select_protocol(group)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE)
        for member in group.members.values():
            member.assignment = b""
            outcome = self._join_answer(
                group, member, with_members=member.member_id == group.leader_id
            )
            assert member.join_slot is not None
            member.join_slot.fill(outcome)
            member.join_slot = None
            self._touch(now, group, member)

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
        self._forget(group, Timer.HEARTBEAT, member_id)
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

    @announces
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
        if not group_id:
            return Slot(SyncOutcome(error=rules.INVALID_GROUP_ID))
        group, member, code = self._identify(group_id, member_id, group_instance_id)
        if group is None or member is None:
            return Slot(SyncOutcome(error=code))
        if generation != group.generation:
            return Slot(SyncOutcome(error=rules.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return Slot(SyncOutcome(error=rules.INCONSISTENT_GROUP_PROTOCOL))
        self._touch(now, group, member)
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
                self._touch(now, group, each)
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
        if not group_id:
            return rules.INVALID_GROUP_ID
        group, member, code = self._identify(group_id, member_id, group_instance_id)
        if group is None or member is None:
            return code
        # The generation before the state: another generation's member must rejoin
        # afresh, even mid-rebalance. Its heartbeat does not keep it alive.
        if generation != group.generation:
            return rules.ILLEGAL_GENERATION
        self._touch(now, group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            return rules.REBALANCE_IN_PROGRESS
        return rules.NONE

    @announces
    def leave(
        self, now: float, *, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        if not group_id:
            return rules.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            # Not a group error: each member is unknown (v0-2 carry the member's code).
            return rules.NONE, [(m, i, rules.UNKNOWN_MEMBER_ID) for m, i in members]
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
                self._drop_pending(group, target)
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

    def _arm(self, group: Group, kind: Timer, member_id: str, deadline: float) -> None:
        self.deadlines.arm(group.group_id, (kind, member_id), deadline)

    def _forget(self, group: Group, kind: Timer, member_id: str) -> None:
        self.deadlines.forget(group.group_id, (kind, member_id))

    def _touch(self, now: float, group: Group, member: Member) -> None:
        """The member was heard from: its session deadline starts again."""
        member.heartbeat_deadline = now + member.session_timeout_ms / 1000
        self._arm(group, Timer.HEARTBEAT, member.member_id, member.heartbeat_deadline)

    def _drop_pending(self, group: Group, member_id: str) -> None:
        del group.pending_members[member_id]
        self._forget(group, Timer.PENDING, member_id)

    def _arm_expiry(self, group: Group) -> None:
        deadline = self._expiry_deadline(group)
        if deadline is not None:
            self._arm(group, Timer.EXPIRY, "", deadline)

    def _expiry_deadline(self, group: Group) -> float | None:
        """When the Empty group's next offset (or, without offsets, the group) expires."""
        if group.state is not GroupState.EMPTY or group.group_id in self.held:
            return None
        retention = self.config.offsets_retention_minutes * 60
        return offset_store.expiry_deadline(
            group.offsets, retention, group.empty_since, group.had_members
        )

    def _deadline_of(self, group: Group, kind: Timer, member_id: str) -> float | None:
        """A timer's real deadline now, or None if it no longer applies."""
        if kind is Timer.HEARTBEAT:
            member = group.members.get(member_id)
            return None if member is None or member.awaiting else member.heartbeat_deadline
        if kind is Timer.PENDING:
            return group.pending_members.get(member_id)
        if kind is Timer.EXPIRY:
            return self._expiry_deadline(group)
        if group.state is not GroupState.PREPARING_REBALANCE:
            return None
        if kind is Timer.REBALANCE:
            return group.rebalance_deadline
        return group.initial_delay_deadline

    def _actual(self, group_id: str, key: TimerKey, _scheduled: float) -> float | None:
        group = self.groups.get(group_id)
        return None if group is None else self._deadline_of(group, *key)

    def _peek(self, group_id: str, key: TimerKey, scheduled: float) -> float | None:
        if key[0] is Timer.EXPIRY:
            # Exact only in tick (it may scan offsets); early here is harmless.
            group = self.groups.get(group_id)
            return scheduled if group is not None and group.state is GroupState.EMPTY else None
        return self._actual(group_id, key, scheduled)

    def next_deadline(self) -> float | None:
        """The earliest time `tick` has something to do, or None."""
        return self.deadlines.next_deadline(self._peek)

    def tick(self, now: float) -> None:
        """Expire members, pending ids and Empty groups' offsets, end join phases whose
        time is up; only groups with something due are looked at."""
        due = {
            group_id: self.groups[group_id] for group_id, _ in self.deadlines.due(now, self._actual)
        }
        for group in due.values():
            self._run_due(now, group)
            if self.groups.get(group.group_id) is group:
                self._rearm(group)
            self._changed(group.group_id)

    def _run_due(self, now: float, group: Group) -> None:
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now:
                self._drop_pending(group, member_id)
        for member in list(group.members.values()):
            if not member.awaiting and member.heartbeat_deadline <= now:
                log.debug(
                    "group %s: member %s missed its session timeout",  # pragma: no mutate
                    group.group_id,  # pragma: no mutate
                    member.member_id,  # pragma: no mutate
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
        if group.state is GroupState.EMPTY:
            self._expire(now, group)

    def _rearm(self, group: Group) -> None:
        """After a group's due work: every deadline it still has gets a timer."""
        for member in group.members.values():
            if not member.awaiting:
                self._arm(group, Timer.HEARTBEAT, member.member_id, member.heartbeat_deadline)
        for member_id, deadline in group.pending_members.items():
            self._arm(group, Timer.PENDING, member_id, deadline)
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.rebalance_deadline is not None:
                self._arm(group, Timer.REBALANCE, "", group.rebalance_deadline)
            if group.initial_delay_deadline is not None:
                self._arm(group, Timer.INITIAL_DELAY, "", group.initial_delay_deadline)
        if not self.deadlines.armed(group.group_id, EXPIRY_KEY):
            self._arm_expiry(group)

    def _expire(self, now: float, group: Group) -> None:
        """Offset retention of an Empty group (group_rules: Offset expiry)."""
        if group.group_id in self.held:
            return
        retention = self.config.offsets_retention_minutes * 60
        since, had_members = group.empty_since, group.had_members
        if now < offset_store.expiry_deadline(group.offsets, retention, since, had_members):
            return
        expired = offset_store.expire(now, group.offsets, retention, since, had_members)
        self._offsets_changed(group.group_id, dict.fromkeys(expired))
        if expired:
            log.info(
                "group %s: %d committed offsets expired",  # pragma: no mutate
                group.group_id,  # pragma: no mutate
                len(expired),  # pragma: no mutate
            )
        if group.offsets:
            return
        self._remove_group(group)
        log.info(
            "group %s: empty and without offsets; removed",  # pragma: no mutate
            group.group_id,  # pragma: no mutate
        )

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

        # Group id "" is allowed: old simple consumers commit for it.
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # A generation for a group not here: from an older one, so refused.
                return everywhere(rules.ILLEGAL_GENERATION)
            group = self._create_group(now, group_id)
        if generation < 0 and group.state is GroupState.EMPTY:
            pass  # no group management: anyone may commit while there are no members
        elif generation >= 0 or member_id != UNKNOWN_MEMBER or group_instance_id is not None:
            _, member, code = self._identify(group_id, member_id, group_instance_id)
            if member is None:
                return everywhere(code)
            if generation != group.generation:
                return everywhere(rules.ILLEGAL_GENERATION)
            if group.state is GroupState.COMPLETING_REBALANCE:
                return everywhere(rules.REBALANCE_IN_PROGRESS)
            self._touch(now, group, member)
        else:
            return everywhere(rules.UNKNOWN_MEMBER_ID)  # only members commit to a live group
        return self._commit_checked(now, group, offsets)

    def _commit_checked(
        self, now: float, group: Group, offsets: list[tuple[str, int, int, int, str | None]]
    ) -> dict[tuple[str, int], int]:
        """Store offsets whose committer has been checked; the error code of each."""
        results = self._store(now, offsets, group.offsets)
        self._offsets_changed(
            group.group_id, {key: group.offsets[key] for key, code in results.items() if not code}
        )
        if group.state is GroupState.EMPTY and not self.deadlines.armed(group.group_id, EXPIRY_KEY):
            # Safety net: an Empty group keeps an expiry timer at or before its real
            # expiry, which a commit can only move later (re-armed lazily).
            self._arm_expiry(group)
        return results

    def commit_transactional(
        self,
        now: float,
        *,
        group_id: str,
        producer_id: int,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: keep the offsets pending for the producer's transaction
        (transaction_rules); error code per partition."""
        if self.check_elsewhere is not None:
            elsewhere = self.check_elsewhere(group_id, member_id, generation)
            if elsewhere is not None:
                if elsewhere != rules.NONE:
                    return {(t, p): elsewhere for t, p, *_ in offsets}
                held = self.groups.get(group_id) or self._create_group(now, group_id)
                return self._store(now, offsets, held.pending_offsets.setdefault(producer_id, {}))
        group = self.groups.get(group_id)
        if group is None:
            group = self._create_group(now, group_id)
        code = rules.NONE
        static_owner = group.static_members.get(group_instance_id or "", member_id)
        if group_instance_id is not None and static_owner != member_id:
            code = rules.FENCED_INSTANCE_ID
        elif member_id != UNKNOWN_MEMBER and member_id not in group.members:
            code = rules.UNKNOWN_MEMBER_ID
        elif generation >= 0 and generation != group.generation:
            code = rules.ILLEGAL_GENERATION
        if code != rules.NONE:
            return {(t, p): code for t, p, *_ in offsets}
        return self._store(now, offsets, group.pending_offsets.setdefault(producer_id, {}))

    def _store(
        self, now: float, offsets: list[OffsetEntry], into: dict[PartitionKey, CommittedOffset]
    ) -> dict[PartitionKey, int]:
        return offset_store.accept(now, offsets, self._partition_exists, into)

    def transaction_ended(self, now: float, group_id: str, producer_id: int, commit: bool) -> None:
        """The producer's transaction marker reached the group: its pending offsets become
        the committed ones (commit) or are dropped (abort)."""
        group = self.groups.get(group_id)
        if group is None:
            return
        ended = offset_store.end_transaction(
            now, group.offsets, group.pending_offsets, producer_id, commit
        )
        if commit:
            self._offsets_changed(group_id, dict(ended))
            if group.state is GroupState.EMPTY:
                self._arm_expiry(group)

    def has_pending(self, group_id: str, key: tuple[str, int]) -> bool:
        """Whether a transactional commit for the partition awaits its transaction's end."""
        group = self.groups.get(group_id)
        return group is not None and any(key in p for p in group.pending_offsets.values())

    def committed(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], CommittedOffset | None]:
        group = self.groups.get(group_id)
        stored = group.offsets if group else {}
        if partitions is None:
            return dict(stored)
        return {key: stored.get(key) for key in partitions}

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]],
        subscribed_elsewhere: set[str] | None = None,
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete; `subscribed_elsewhere`: the topics the members of a group another
        coordinator runs subscribe to."""
        if not group_id:
            return rules.INVALID_GROUP_ID, {}  # "" is for offset commits and fetches only
        group = self.groups.get(group_id)
        if group is None:
            return rules.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = subscribed_elsewhere or set()
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
        self._offsets_changed(group_id, {key: None for key, code in results.items() if not code})
        self._arm_expiry(group)  # no offsets left: the group's expiry may come sooner
        return rules.NONE, results

    # --- administration ---

    def delete_group(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return rules.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY:
            return rules.NON_EMPTY_GROUP
        self._remove_group(group)
        return rules.NONE

    def _remove_group(self, group: Group) -> None:
        group.transition(GroupState.DEAD)
        del self.groups[group.group_id]
        self._offsets_changed(group.group_id, None)
        if self.on_group_removed is not None:
            self.on_group_removed(group.group_id)
        self.deadlines.forget_owner(group.group_id)

    def remove_topic(self, topic: str) -> None:
        """Drop a deleted topic's offsets from every group (an admin operation: O(groups)).
        Then every Empty group without offsets is removed, those that never had any too:
        Kafka's coordinator sweeps all its groups when partitions are deleted."""
        for group in list(self.groups.values()):
            keys = [k for k in group.offsets if k[0] == topic]
            for key in keys:
                del group.offsets[key]
            self._offsets_changed(group.group_id, dict.fromkeys(keys))
            if group.state is GroupState.EMPTY and not group.offsets:
                if group.group_id not in self.held:
                    self._remove_group(group)
            elif keys:
                self._arm_expiry(group)

    # --- offsets of groups another coordinator runs ---

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members or group.pending_members)

    def hold(self, now: float, group_id: str) -> None:
        """Keep the offsets of a group whose members another coordinator runs; they do
        not expire until `release`."""
        group = self.groups.get(group_id)
        if group is None:
            group = self._create_group(now, group_id)
        self.held.add(group_id)
        self._forget(group, Timer.EXPIRY, "")

    def release(self, now: float, group_id: str) -> None:
        """The held group has no members any more: its offsets expire as an Empty
        group's that had members (group_rules: Offset expiry)."""
        self.held.discard(group_id)
        group = self.groups.get(group_id)
        if group is not None and group.state is GroupState.EMPTY:
            group.empty_since = now
            group.had_members = True
            self._arm_expiry(group)

    def upgrade_refused(self, group_id: str) -> str | None:
        """Why a classic group with members may not become a consumer-protocol group (an
        online upgrade), or None when it may: every member speaks the consumer embedded
        protocol and holds an assignment (one that joined, or rejoined after the join
        phase ended, holds none until SyncGroup). The reasons are Kafka's messages."""
        group = self.groups[group_id]
        cannot = f"Cannot upgrade classic group {group_id} to consumer group"
        if not group.members or group.state is GroupState.DEAD:
            return f"{cannot}: it has no members yet."
        if group.protocol_type != "consumer":
            return f"{cannot} because the group does not use the consumer embedded protocol."
        for member in group.members.values():
            if not member.protocols:
                continue
            if (
                parse_subscription(member.metadata_for(member.protocols[0][0])) is None
                or read_assignment(member.assignment) is None
            ):
                return f"{cannot} because the embedded consumer protocol is malformed."
        return None

    def hand_over(self, group_id: str) -> tuple[int, list[Member]]:
        """An online upgrade: the group's members leave this coordinator (waiting joins
        and syncs are answered REBALANCE_IN_PROGRESS) and it keeps only the offsets, held.
        Returns the generation and the members as they were."""
        group = self.groups[group_id]
        members = list(group.members.values())
        for member in members:
            if member.join_slot is not None:
                member.join_slot.fill(JoinOutcome(error=rules.REBALANCE_IN_PROGRESS))
            if member.sync_slot is not None:
                member.sync_slot.fill(SyncOutcome(error=rules.REBALANCE_IN_PROGRESS))
        self.deadlines.forget_owner(group.group_id)
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.rebalance_deadline = group.initial_delay_deadline = None
        group.transition(GroupState.EMPTY)
        self.held.add(group_id)
        self._changed(group_id)
        return group.generation, members

    def take_back(
        self, now: float, group_id: str, generation: int, members: list[Member], reason: str
    ) -> None:
        """An online downgrade: classic members come back under this coordinator at the
        consumer group's epoch, with their partitions, and a rebalance starts so that they
        rejoin as a classic group."""
        group = self.groups.get(group_id) or self._create_group(now, group_id)
        self.held.discard(group_id)
        self._forget(group, Timer.EXPIRY, "")
        group.generation = generation
        group.protocol_type = "consumer"
        group.protocol_name = members[0].protocols[0][0] if members[0].protocols else None
        group.leader_id = members[0].member_id
        group.had_members = True
        for member in members:
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
            self._touch(now, group, member)
        self._prepare_rebalance(now, group, reason)
        self._changed(group_id)

    def drop(self, group_id: str) -> None:
        """The other coordinator deleted the group: its offsets go too."""
        self.held.discard(group_id)
        group = self.groups.get(group_id)
        if group is not None and group.state is GroupState.EMPTY:
            self._remove_group(group)

    def store_offsets(
        self, now: float, group_id: str, offsets: list[tuple[str, int, int, int, str | None]]
    ) -> dict[tuple[str, int], int]:
        """Keep offsets the other coordinator has checked; the error code of each."""
        group = self.groups.get(group_id) or self._create_group(now, group_id)
        return self._commit_checked(now, group, offsets)
