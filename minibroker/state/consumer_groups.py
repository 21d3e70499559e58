"""Group coordinator for Kafka 4's consumer group protocol (KIP-848). Sans-IO.

The rules are in `consumer_group_rules`; the assignors in `server_assignors`. Committed
offsets are kept by the classic coordinator (`GroupCoordinator.hold` and friends), so
OffsetFetch, retention and the data directory treat both kinds of group alike; this
module checks who may commit and with which epoch.

Timing: each member has a session deadline (renewed by every heartbeat) and, while it
must revoke partitions, a revocation deadline (its rebalance timeout). One timer per
member in `state.deadlines`, no later than its earliest deadline and re-armed lazily, so
a heartbeat costs no heap work and `tick` looks only at members whose time may be up.

Over 600 lines because one coordinator serves both kinds of member of a consumer group:
the consumer protocol's and, in mixed groups, the classic protocol's (the last section),
which share its members, epochs and reconciliation.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import re2

from minibroker.config import BrokerConfig
from minibroker.protocol.consumer_protocol import (
    encode_assignment,
    parse_assignment,
    read_subscription,
)
from minibroker.state import consumer_group_rules as rules
from minibroker.state import group_rules as classic_rules
from minibroker.state.consumer_group_rules import (
    Assignment,
    ConsumerGroupState,
    MemberState,
    group_state,
    reconcile,
)
from minibroker.state.deadlines import Deadlines
from minibroker.state.group_configs import GroupConfigs
from minibroker.state.group_rules import JoinOutcome, SyncOutcome
from minibroker.state.group_rules import Member as ClassicMember
from minibroker.state.groups import GroupCoordinator, announces
from minibroker.state.server_assignors import ASSIGNORS

log = logging.getLogger("minibroker.groups")

# Subscription patterns run on RE2, as Kafka's (RE2/J) do: the same syntax, and matching
# in time linear in the name, so no pattern can stall the broker.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


@lru_cache(maxsize=1024)
def compiled_pattern(pattern: str) -> Any:
    """A subscription pattern, compiled (raises re2.error)."""
    return re2.compile(pattern, _RE2_OPTIONS)


TopicInfo = Callable[[str], "tuple[uuid.UUID, int] | None"]


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_epoch: int = -1
    assigned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    pending_revocation: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    session_deadline: float = 0.0
    revocation_deadline: float | None = None
    # A member of the classic protocol in this group (mixed groups): its JoinGroup's
    # session timeout and protocols; None for a consumer-protocol member.
    classic: ClassicProtocol | None = None


@dataclass(slots=True)
class ClassicProtocol:
    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0]


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member
    target: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    # Who holds each partition (assigned or still revoking): member id.
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    # The subscribed topics' (id, partitions) the target was computed from.
    topics_seen: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    topics_version: int = -1
    regex_topics: dict[str, tuple[str, ...]] = field(default_factory=dict)
    assignor: str = "uniform"

    @property
    def state(self) -> ConsumerGroupState:
        return group_state(
            len(self.members),
            self.group_epoch,
            self.assignment_epoch,
            [(m.member_epoch, m.state) for m in self.members.values()],
        )

    def subscribed_topics(self) -> set[str]:
        topics: set[str] = set()
        for member in self.members.values():
            topics.update(member.subscribed_names)
            if member.subscribed_regex is not None:
                topics.update(self.regex_topics.get(member.subscribed_regex, ()))
        return topics


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    error: int
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    assignment: Assignment | None = None


def _fail(code: int, message: str, member_id: str = "") -> HeartbeatOutcome:
    return HeartbeatOutcome(error=code, message=message, member_id=member_id)


def as_assignment(owned: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Assignment:
    merged: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, parts in owned:
        merged[topic_id] = merged.get(topic_id, frozenset()) | frozenset(parts)
    return merged


def regex_problem(pattern: str) -> str | None:
    """Why a subscription regex is refused, or None (Kafka's wording, this engine's
    reason)."""
    try:
        compiled_pattern(pattern)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        reason = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
    else:
        return None
    return f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {reason}."


class ConsumerGroupCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        offsets: GroupCoordinator,
        topic_info: TopicInfo,
        topic_names: Callable[[], Iterable[str]],
        topic_name: Callable[[uuid.UUID], str | None],
        group_configs: GroupConfigs | None = None,
    ) -> None:
        self.config = config
        self.group_configs = group_configs or GroupConfigs(config)
        self.offsets = offsets
        self.groups: dict[str, ConsumerGroup] = {}
        self._topic_info = topic_info
        self._topic_names = topic_names
        self._topic_name = topic_name
        self.topics_version = 0  # bumped by the cluster whenever topics change
        self.deadlines: Deadlines[str] = Deadlines()  # keyed by member id
        offsets.on_group_removed = self._offsets_gone
        offsets.check_elsewhere = self._check_transactional
        # Told of each group whose members' waiting answers or deadlines may have changed.
        self.on_change: Callable[[str], None] | None = None

    def _changed(self, group_id: str) -> None:
        if self.on_change is not None:
            self.on_change(group_id)

    def _offsets_gone(self, group_id: str) -> None:
        """An Empty group's offsets expired (or were deleted): the group goes with them."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_configs.int_value(group_id, "consumer.heartbeat.interval.ms")

    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_configs.int_value(group_id, "consumer.session.timeout.ms")

    def assignors(self) -> list[str]:
        return [a.strip() for a in self.config.group_consumer_assignors.split(",") if a.strip()]

    def topics_changed(self) -> None:
        self.topics_version += 1

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # --- ConsumerGroupHeartbeat ---

    @announces
    def heartbeat(
        self,
        now: float,
        *,
        version: int,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_names: tuple[str, ...] | None,
        subscribed_regex: str | None,
        server_assignor: str | None,
        owned: Assignment | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatOutcome:
        invalid = self._invalid(
            version, group_id, member_id, member_epoch, instance_id, rack_id,
            rebalance_timeout_ms, subscribed_names, subscribed_regex, owned,
        )  # fmt: skip
        if invalid is not None:
            return _fail(rules.INVALID_REQUEST, invalid, member_id)
        if server_assignor is not None and server_assignor not in self.assignors():
            return _fail(
                rules.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.assignors())}.",
                member_id,
            )
        if subscribed_regex is not None and (problem := regex_problem(subscribed_regex)):
            return _fail(rules.INVALID_REGULAR_EXPRESSION, problem, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != rules.JOIN_EPOCH:
                return _fail(rules.GROUP_ID_NOT_FOUND, self._not_found(group_id, member_epoch))
            if self.offsets.has_members(group_id):
                if refused := self.offsets.upgrade_refused(group_id):
                    return _fail(rules.GROUP_ID_NOT_FOUND, refused)
                group = self._upgrade(now, group_id)
            else:
                # A new group starts at epoch 1 (Kafka's too): epoch 0 is a joining member's.
                group = self.groups[group_id] = ConsumerGroup(
                    group_id, group_epoch=1, assignor=self.assignors()[0]
                )
                self.offsets.hold(now, group_id)
        if member_epoch == rules.JOIN_EPOCH and not member_id:
            member_id = str(uuid.uuid4())  # v0: the coordinator names the member
        if member_epoch in (rules.LEAVE_EPOCH, rules.STATIC_LEAVE_EPOCH):
            return self._leave(now, group, member_id, member_epoch, instance_id)

        member = group.members.get(member_id)
        bump = False
        if member_epoch == rules.JOIN_EPOCH:
            if instance_id is not None:
                holder = group.static_members.get(instance_id)
                if holder is not None and holder != member_id:
                    previous = group.members[holder]
                    if previous.member_epoch != rules.STATIC_LEAVE_EPOCH:
                        return _fail(
                            rules.UNRELEASED_INSTANCE_ID,
                            f"Static member {holder} with instance id {instance_id} is not "
                            "released yet.",
                            member_id,
                        )
                    member = self._replace_static(group, previous, member_id)
            if member is None:
                if not group.members:
                    self.offsets.hold(now, group_id)
                member = Member(
                    member_id=member_id,
                    instance_id=instance_id,
                    rack_id=rack_id,
                    client_id=client_id,
                    client_host=client_host,
                    rebalance_timeout_ms=rebalance_timeout_ms,
                )
                group.members[member_id] = member
                if instance_id is not None:
                    group.static_members[instance_id] = member_id
                # Its subscription (below) bumps the group epoch; joining alone does not.
                log.debug("group %s: member %s joined", group_id, member_id)  # pragma: no mutate
        else:
            if member is None:
                return _fail(
                    rules.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group_id}.",
                    member_id,
                )
            if instance_id is not None and member.instance_id != instance_id:
                return _fail(
                    rules.FENCED_INSTANCE_ID,
                    f"Instance id {instance_id} is not member {member_id}'s.",
                    member_id,
                )
            fenced = self._epoch_problem(member, member_epoch, owned)
            if fenced is not None:
                return _fail(rules.FENCED_MEMBER_EPOCH, fenced, member_id)

        # Fields a heartbeat repeats only when they change.
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if subscribed_names is not None and set(subscribed_names) != set(member.subscribed_names):
            member.subscribed_names = tuple(sorted(set(subscribed_names)))
            bump = True
        if subscribed_regex is not None and (subscribed_regex or None) != member.subscribed_regex:
            member.subscribed_regex = subscribed_regex or None
            bump = True
        if server_assignor is not None and server_assignor != member.server_assignor:
            preferred = self._preferred_assignor(group)
            member.server_assignor = server_assignor
            bump = bump or self._preferred_assignor(group) != preferred
        bump = self._topics_moved(group) or bump
        self._advance(group, bump)

        before = member.assigned
        self._reconcile(now, group, member, owned)
        self._touch(now, group, member)
        full = member_epoch == rules.JOIN_EPOCH or (
            rebalance_timeout_ms != -1
            and (subscribed_names is not None or subscribed_regex is not None)
            and owned is not None
        )
        return HeartbeatOutcome(
            error=rules.NONE,
            member_id=member_id,
            member_epoch=member.member_epoch,
            assignment=dict(member.assigned) if full or member.assigned != before else None,
        )

    @staticmethod
    def _invalid(
        version: int,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_names: tuple[str, ...] | None,
        subscribed_regex: str | None,
        owned: Assignment | None,
    ) -> str | None:
        """Why a heartbeat is INVALID_REQUEST (consumer_group_rules), or None: Kafka's
        checks in Kafka's order, with its messages."""
        named = version >= 1 or member_epoch > 0 or member_epoch == rules.LEAVE_EPOCH
        if named and not member_id:
            return "MemberId can't be empty."
        if not group_id:
            return "GroupId can't be empty."
        if instance_id == "":
            return "InstanceId can't be empty."
        if rack_id == "":
            return "RackId can't be empty."
        if member_epoch == rules.JOIN_EPOCH:
            if rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if owned is None or any(owned.values()):
                return "TopicPartitions must be empty when (re-)joining."
            if subscribed_names is None and subscribed_regex is None:
                return (
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                    "when (re-)joining."
                )
        elif member_epoch == rules.STATIC_LEAVE_EPOCH:
            if instance_id is None:
                return "InstanceId can't be null."
        elif member_epoch < rules.STATIC_LEAVE_EPOCH:
            return "MemberEpoch is invalid."
        return None

    def _not_found(self, group_id: str, member_epoch: int) -> str:
        """GROUP_ID_NOT_FOUND's message for a heartbeat (or leave) to a group not here."""
        if self.offsets.has_members(group_id):
            return f"Group {group_id} is not a consumer group."
        if member_epoch < 0:
            return f"Group {group_id} not found."
        return f"Consumer group {group_id} not found."

    @staticmethod
    def _epoch_problem(member: Member, received: int, owned: Assignment | None) -> str | None:
        if received > member.member_epoch:
            return (
                f"The consumer group member has a greater member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin."
            )
        if received < member.member_epoch:
            subset = owned is not None and all(
                parts <= member.assigned.get(topic_id, frozenset())
                for topic_id, parts in owned.items()
            )
            if received != member.previous_epoch or not subset:
                return (
                    f"The consumer group member has a smaller member epoch ({received}) than "
                    f"the one known by the group coordinator ({member.member_epoch}). The "
                    "member must abandon all its partitions and rejoin."
                )
        return None

    def _replace_static(self, group: ConsumerGroup, previous: Member, member_id: str) -> Member:
        """A restarted static member takes its predecessor's place, epoch and partitions."""
        old_id = previous.member_id
        del group.members[old_id]
        previous.member_id = member_id
        previous.member_epoch = previous.previous_epoch
        self.deadlines.forget(group.group_id, old_id)
        group.members[member_id] = previous
        if previous.instance_id is not None:
            group.static_members[previous.instance_id] = member_id
        for key, owner in group.owners.items():
            if owner == old_id:
                group.owners[key] = member_id
        if old_id in group.target:
            group.target[member_id] = group.target.pop(old_id)
        return previous

    def _leave(
        self,
        now: float,
        group: ConsumerGroup,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
    ) -> HeartbeatOutcome:
        member = group.members.get(member_id)
        if member is None and instance_id is not None:
            holder = group.static_members.get(instance_id)
            member = group.members.get(holder) if holder is not None else None
            if member is not None:
                return _fail(
                    rules.FENCED_INSTANCE_ID,
                    f"Instance id {instance_id} is not member {member_id}'s.",
                    member_id,
                )
        if member is None:
            return _fail(
                rules.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {group.group_id}.",
                member_id,
            )
        if member_epoch == rules.STATIC_LEAVE_EPOCH:
            # Kept, partitions and all, until its session runs out or it comes back.
            member.previous_epoch = member.member_epoch
            member.member_epoch = rules.STATIC_LEAVE_EPOCH
            member.revocation_deadline = None
            self._touch(now, group, member)
            return HeartbeatOutcome(error=rules.NONE, member_id=member_id, member_epoch=-2)
        self._remove(now, group, member, "left")
        return HeartbeatOutcome(error=rules.NONE, member_id=member_id, member_epoch=-1)

    def _remove(self, now: float, group: ConsumerGroup, member: Member, why: str) -> None:
        log.debug(
            "group %s: member %s %s",  # pragma: no mutate
            group.group_id,  # pragma: no mutate
            member.member_id,  # pragma: no mutate
            why,  # pragma: no mutate
        )
        del group.members[member.member_id]
        self.deadlines.forget(group.group_id, member.member_id)
        instance_id = member.instance_id
        if instance_id is not None and group.static_members.get(instance_id) == member.member_id:
            del group.static_members[instance_id]
        self._set_owned(group, member, {}, {})
        group.target.pop(member.member_id, None)
        if group.members and all(m.classic is not None for m in group.members.values()):
            self._downgrade(now, group, f"the last consumer-protocol member {why}")
        elif group.members:
            # The target follows at a member's next heartbeat (Kafka's coordinator too):
            # Assigning meanwhile.
            group.group_epoch += 1
        else:
            group.group_epoch += 1
            group.assignment_epoch = group.group_epoch
            self.offsets.release(now, group.group_id)

    # --- the target assignment ---

    def _resolve(self, group: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        """The subscribed topics that exist: name -> (topic id, partitions)."""
        regexes = {m.subscribed_regex for m in group.members.values() if m.subscribed_regex}
        if regexes:
            names = [n for n in self._topic_names() if not n.startswith("__")]
            group.regex_topics = {
                pattern: tuple(n for n in names if compiled_pattern(pattern).fullmatch(n))
                for pattern in regexes
            }
        else:
            group.regex_topics = {}
        seen = {}
        for name in group.subscribed_topics():
            info = self._topic_info(name)
            if info is not None:
                seen[name] = info
        return seen

    def _topics_moved(self, group: ConsumerGroup) -> bool:
        """Whether a subscribed topic was created, deleted or grew since the target."""
        if group.topics_version == self.topics_version:
            return False
        group.topics_version = self.topics_version
        return self._resolve(group) != group.topics_seen

    def _advance(self, group: ConsumerGroup, bump: bool) -> None:
        """Bump the group epoch for a change the target depends on; compute the target
        when it is behind the group epoch (this change, a new group, or a member that
        left or was fenced since the last one)."""
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._new_target(group)

    def _preferred_assignor(self, group: ConsumerGroup) -> str:
        """The server assignor most members ask for; the first configured one if none."""
        chosen = [m.server_assignor for m in group.members.values() if m.server_assignor]
        return max(set(chosen), key=chosen.count) if chosen else self.assignors()[0]

    def _new_target(self, group: ConsumerGroup) -> None:
        """Compute the target assignment for the group epoch."""
        group.topics_version = self.topics_version
        group.topics_seen = self._resolve(group)
        group.assignor = self._preferred_assignor(group)
        subscriptions = {}
        for member in group.members.values():
            names = set(member.subscribed_names)
            if member.subscribed_regex is not None:
                names.update(group.regex_topics.get(member.subscribed_regex, ()))
            subscriptions[member.member_id] = frozenset(
                group.topics_seen[n][0] for n in names if n in group.topics_seen
            )
        counts = dict(group.topics_seen.values())
        group.target = ASSIGNORS[group.assignor](subscriptions, counts, group.target)
        group.assignment_epoch = group.group_epoch
        log.debug(
            "group %s: epoch %d, target %s",  # pragma: no mutate
            group.group_id,  # pragma: no mutate
            group.group_epoch,  # pragma: no mutate
            group.target,  # pragma: no mutate
        )

    def _reconcile(
        self, now: float, group: ConsumerGroup, member: Member, owned: Assignment | None
    ) -> None:
        if member.member_epoch == rules.STATIC_LEAVE_EPOCH:
            return

        def owned_by_other(topic_id: uuid.UUID, partition: int) -> bool:
            owner = group.owners.get((topic_id, partition))
            return owner is not None and owner != member.member_id

        step = reconcile(
            state=member.state,
            member_epoch=member.member_epoch,
            assigned=member.assigned,
            pending_revocation=member.pending_revocation,
            target=group.target.get(member.member_id, {}),
            target_epoch=group.assignment_epoch,
            owned=owned,
            owned_by_other=owned_by_other,
        )
        if step.member_epoch != member.member_epoch:
            member.previous_epoch = member.member_epoch
        if step.state is MemberState.UNREVOKED_PARTITIONS:
            if member.state is not MemberState.UNREVOKED_PARTITIONS:
                member.revocation_deadline = now + member.rebalance_timeout_ms / 1000
        else:
            member.revocation_deadline = None
        member.state = step.state
        member.member_epoch = step.member_epoch
        self._set_owned(group, member, step.assigned, step.pending_revocation)

    @staticmethod
    def _set_owned(
        group: ConsumerGroup,
        member: Member,
        assigned: dict[uuid.UUID, frozenset[int]],
        revoking: dict[uuid.UUID, frozenset[int]],
    ) -> None:
        for held in (member.assigned, member.pending_revocation):
            for topic_id, parts in held.items():
                for index in parts:
                    if group.owners.get((topic_id, index)) == member.member_id:
                        del group.owners[(topic_id, index)]
        for held in (assigned, revoking):
            for topic_id, parts in held.items():
                for index in parts:
                    group.owners[(topic_id, index)] = member.member_id
        member.assigned, member.pending_revocation = assigned, revoking

    # --- time ---

    def _touch(self, now: float, group: ConsumerGroup, member: Member) -> None:
        """The member was heard from: its session starts again (a classic member's is the
        one its JoinGroup asked for, a consumer-protocol member's the group's)."""
        session_ms = (
            member.classic.session_timeout_ms
            if member.classic is not None
            else self.session_timeout_ms(group.group_id)
        )
        member.session_deadline = now + session_ms / 1000
        self._arm(group, member)

    def _deadline(self, member: Member) -> float:
        if member.revocation_deadline is not None:
            return min(member.session_deadline, member.revocation_deadline)
        return member.session_deadline

    def _arm(self, group: ConsumerGroup, member: Member) -> None:
        self.deadlines.arm(group.group_id, member.member_id, self._deadline(member))

    def _actual(self, group_id: str, member_id: str, _scheduled: float) -> float | None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        return None if member is None else self._deadline(member)

    def next_deadline(self) -> float | None:
        return self.deadlines.next_deadline(self._actual)

    def tick(self, now: float) -> None:
        """Fence members whose session or revocation time ran out."""
        for group_id, member_id in self.deadlines.due(now, self._actual):
            # Checked again: fencing an earlier member may have changed this one.
            group = self.groups.get(group_id)
            member = group.members.get(member_id) if group is not None else None
            if group is None or member is None:
                continue
            if self._deadline(member) > now:
                self._arm(group, member)
                continue
            timed_out = "session timed out" if member.session_deadline <= now else "revoke timeout"
            self._remove(now, group, member, timed_out)
            self._changed(group_id)

    # --- offsets ---

    def commit(
        self,
        now: float,
        *,
        version: int,
        group_id: str,
        member_id: str,
        member_epoch: int,
        offsets: list[tuple[str, int, int, int, str | None]],
    ) -> dict[tuple[str, int], int]:
        """OffsetCommit to a consumer group (consumer_group_rules: Offsets)."""
        code = self.check_member(group_id, member_id, member_epoch)
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if code == rules.NONE and member is not None and member.classic is None and version < 9:
            code = rules.UNSUPPORTED_VERSION
        if code != rules.NONE:
            return {(t, p): code for t, p, *_ in offsets}
        return self.offsets.store_offsets(now, group_id, offsets)

    def check_member(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """Whether a member (or, with epoch -1 and no id, anyone) may commit or fetch."""
        group = self.groups.get(group_id)
        if group is None:
            return rules.NONE
        if member_epoch < 0 and not member_id and not group.members:
            return rules.NONE
        if member_epoch < 0 and not member_id:
            return rules.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id or "")
        if member is None:
            return rules.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            if member.classic is not None:
                return classic_rules.ILLEGAL_GENERATION
            return rules.STALE_MEMBER_EPOCH
        return rules.NONE

    def _check_transactional(self, group_id: str, member_id: str, epoch: int) -> int | None:
        """TxnOffsetCommit to a consumer group: None when the group is not one."""
        if group_id not in self.groups:
            return None
        if not member_id and epoch < 0:
            return rules.NONE  # a producer that sends no group metadata
        return self.check_member(group_id, member_id, epoch)

    # --- administration ---

    def delete_group(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return rules.GROUP_ID_NOT_FOUND
        if group.members:
            return 68  # NON_EMPTY_GROUP
        del self.groups[group_id]
        self.offsets.drop(group_id)
        return rules.NONE

    def forget(self, group_id: str) -> None:
        """A classic member joins an empty consumer group: it becomes a classic group."""
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]

    # --- mixed groups: classic members in a consumer group (online migration) ---

    def named(self, assigned: Mapping[uuid.UUID, frozenset[int]]) -> dict[str, list[int]]:
        """An assignment by topic name (topics deleted meanwhile left out)."""
        named = {}
        for topic_id, partitions in assigned.items():
            name = self._topic_name(topic_id)
            if name is not None:
                named[name] = sorted(partitions)
        return named

    def _ids(self, named: Mapping[str, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
        by_id: dict[uuid.UUID, frozenset[int]] = {}
        for name, partitions in named.items():
            info = self._topic_info(name)
            if info is not None:
                by_id[info[0]] = frozenset(p for p in partitions if 0 <= p < info[1])
        return {t: p for t, p in by_id.items() if p}

    def _upgrade(self, now: float, group_id: str) -> ConsumerGroup:
        """A classic group becomes a consumer group (consumer_group_rules: Mixed groups):
        its members stay, as classic members at the generation's epoch, with what they
        own as their target."""
        generation, classic_members = self.offsets.hand_over(group_id)
        group = self.groups[group_id] = ConsumerGroup(group_id, assignor=self.assignors()[0])
        group.group_epoch = group.assignment_epoch = generation
        for old in classic_members:
            subscription = read_subscription(old.metadata_for(old.protocols[0][0]))
            member = Member(
                member_id=old.member_id,
                instance_id=old.group_instance_id,
                rack_id=subscription.rack_id if subscription else None,
                client_id=old.client_id,
                client_host=old.client_host,
                rebalance_timeout_ms=old.rebalance_timeout_ms,
                subscribed_names=tuple(sorted(set(subscription.topics if subscription else ()))),
                member_epoch=generation,
                previous_epoch=generation,
                classic=ClassicProtocol(old.session_timeout_ms, list(old.protocols)),
            )
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            owned = self._ids(parse_assignment(old.assignment))
            free = {
                topic_id: frozenset(p for p in parts if (topic_id, p) not in group.owners)
                for topic_id, parts in owned.items()
            }
            self._set_owned(group, member, {t: p for t, p in free.items() if p}, {})
            group.target[member.member_id] = dict(member.assigned)
            self._touch(now, group, member)
        group.topics_seen = self._resolve(group)
        group.topics_version = self.topics_version
        log.info("group %s: upgraded to the consumer protocol", group_id)  # pragma: no mutate
        return group

    def _downgrade(self, now: float, group: ConsumerGroup, why: str) -> None:
        """Only classic members are left: the group becomes a classic group again."""
        members = []
        for member in group.members.values():
            assert member.classic is not None
            members.append(
                ClassicMember(
                    member_id=member.member_id,
                    group_instance_id=member.instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    session_timeout_ms=member.classic.session_timeout_ms,
                    rebalance_timeout_ms=member.rebalance_timeout_ms,
                    protocol_type="consumer",
                    protocols=list(member.classic.protocols),
                    heartbeat_deadline=member.session_deadline,
                    assignment=encode_assignment(self.named(member.assigned)),
                )
            )
        del self.groups[group.group_id]
        self.offsets.take_back(now, group.group_id, group.group_epoch, members, why)
        log.info(
            "group %s: downgraded to the classic protocol", group.group_id
        )  # pragma: no mutate

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> tuple[Member | None, int]:
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            member = group.members.get(holder) if holder is not None else None
            if member is None:
                return None, rules.UNKNOWN_MEMBER_ID
            if member.member_id != member_id:
                return None, rules.FENCED_INSTANCE_ID
        else:
            member = group.members.get(member_id)
        if member is None or member.classic is None:
            return None, rules.UNKNOWN_MEMBER_ID
        return member, rules.NONE

    @announces
    def classic_join(
        self,
        now: float,
        *,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        version: int,
    ) -> JoinOutcome:
        """JoinGroup of a classic member to a consumer group with members."""
        group = self.groups[group_id]
        subscription = read_subscription(protocols[0][1]) if protocols else None
        if protocol_type != "consumer" or subscription is None:
            return JoinOutcome(error=classic_rules.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        unknown = not member_id
        if unknown:
            member_id = str(uuid.uuid4())
            if version >= 4 and instance_id is None:
                return JoinOutcome(error=classic_rules.MEMBER_ID_REQUIRED, member_id=member_id)
        member = group.members.get(member_id)
        if member is not None and member.classic is None:
            return JoinOutcome(error=rules.UNKNOWN_MEMBER_ID, member_id=member_id)
        bump = False
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is not None and holder != member_id:
                if not unknown:
                    return JoinOutcome(error=rules.FENCED_INSTANCE_ID, member_id=member_id)
                member = self._replace_static(group, group.members[holder], member_id)
        if member is None:
            member = Member(
                member_id=member_id,
                instance_id=instance_id,
                rack_id=subscription.rack_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout_ms=rebalance_timeout_ms,
            )
            group.members[member_id] = member
            if instance_id is not None:
                group.static_members[instance_id] = member_id
            bump = True
        member.classic = ClassicProtocol(session_timeout_ms, list(protocols))
        member.client_id, member.client_host = client_id, client_host
        member.rebalance_timeout_ms = rebalance_timeout_ms
        topics = tuple(sorted(set(subscription.topics)))
        if topics != member.subscribed_names:
            member.subscribed_names = topics
            bump = True
        bump = self._topics_moved(group) or bump
        self._advance(group, bump)
        self._reconcile(now, group, member, self._ids(subscription.owned))
        self._touch(now, group, member)
        return JoinOutcome(
            error=rules.NONE,
            generation=member.member_epoch,
            protocol_type="consumer",
            protocol_name=member.classic.protocol_name,
            leader="",
            member_id=member_id,
        )

    @announces
    def classic_sync(
        self,
        now: float,
        *,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncOutcome:
        group = self.groups[group_id]
        member, code = self._classic_member(group, member_id, instance_id)
        if member is None or member.classic is None:
            return SyncOutcome(error=code)
        if generation != member.member_epoch:
            return SyncOutcome(error=classic_rules.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != "consumer") or (
            protocol_name is not None and protocol_name != member.classic.protocol_name
        ):
            return SyncOutcome(error=classic_rules.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and (
            member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            return SyncOutcome(error=classic_rules.REBALANCE_IN_PROGRESS)
        self._touch(now, group, member)
        return SyncOutcome(
            error=rules.NONE,
            protocol_type="consumer",
            protocol_name=member.classic.protocol_name,
            assignment=encode_assignment(self.named(member.assigned)),
        )

    def classic_heartbeat(
        self,
        now: float,
        *,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
    ) -> int:
        group = self.groups[group_id]
        member, code = self._classic_member(group, member_id, instance_id)
        if member is None:
            return code
        if generation != member.member_epoch:
            return classic_rules.ILLEGAL_GENERATION
        self._touch(now, group, member)
        target = group.target.get(member.member_id, {})
        waiting = any(
            group.owners.get((topic_id, p), member.member_id) != member.member_id
            for topic_id, parts in target.items()
            for p in parts - member.assigned.get(topic_id, frozenset())
        )
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not waiting)
        ):
            return classic_rules.REBALANCE_IN_PROGRESS
        return rules.NONE

    @announces
    def classic_leave(
        self, now: float, group_id: str, members: list[tuple[str, str | None]]
    ) -> list[tuple[str, str | None, int]]:
        results: list[tuple[str, str | None, int]] = []
        for position, (member_id, instance_id) in enumerate(members):
            group = self.groups.get(group_id)
            if group is None:  # downgraded by an earlier leave of this request
                _, rest = self.offsets.leave(now, group_id=group_id, members=members[position:])
                return results + rest
            found, code = self._classic_member(group, member_id, instance_id)
            if found is None and instance_id is None:
                found = group.members.get(member_id)  # a consumer-protocol member's id
                code = rules.NONE if found is not None else code
            if found is None:
                results.append((member_id, instance_id, code))
                continue
            self._remove(now, group, found, "left")
            results.append((member_id, instance_id, rules.NONE))
        return results
