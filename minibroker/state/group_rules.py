"""The classic consumer-group protocol's states and the rules between them.

States (Kafka's GroupState):
    Empty                 no members; committed offsets are kept until they expire (below).
                          A group that had members keeps their protocol type ("consumer"),
                          so DescribeGroups and ListGroups still show what kind it is; the
                          next member to join sets it anew.
    PreparingRebalance    a rebalance has begun; members must (re)send JoinGroup. The join
                          phase ends when every known member has rejoined and no member id
                          handed out with MEMBER_ID_REQUIRED is still outstanding, or when the
                          rebalance timeout (the largest of the members') runs out; members that
                          did not rejoin by then are removed.
    CompletingRebalance   the generation is bumped and JoinGroup answered (the leader with the
                          member list); waiting for the leader's SyncGroup with the assignment.
    Stable                the assignment has been handed out; heartbeats keep members alive.
    Dead                  the group was deleted, or expired; it is dropped from the coordinator.

Transitions:
    Empty               -> PreparingRebalance   a member joins
    PreparingRebalance  -> CompletingRebalance  join phase complete with members left
    PreparingRebalance  -> Empty                join phase complete with no members left
    CompletingRebalance -> Stable               the leader's SyncGroup arrives
    CompletingRebalance -> PreparingRebalance   a member joins, leaves or expires
    Stable              -> PreparingRebalance   a member joins (new, or with new metadata),
                                                leaves, or misses its session timeout
    Empty               -> Dead                 DeleteGroups, or expiry: Empty with no
                                                offsets left once the retention has run out,
                                                or its last offsets' topic is deleted
    PreparingRebalance, CompletingRebalance, Stable -> Empty
                                                online upgrade: a member of Kafka 4's consumer
                                                protocol joins, and the members move to that
                                                coordinator (consumer_group_rules: Mixed
                                                groups); only the offsets stay here
    Empty               -> PreparingRebalance   online downgrade: the last consumer-protocol
                                                member left; the classic members come back
                                                and must rejoin

Request rules (Kafka's GroupCoordinator; each checks the member first, then the
generation, then the state):
    Group id     "" is INVALID_GROUP_ID for JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
                 OffsetDelete; OffsetCommit and OffsetFetch accept it (old simple
                 consumers), as do DescribeGroups and DeleteGroups.
    JoinGroup    v4+ and no member id: MEMBER_ID_REQUIRED with a fresh id (static members
                 excepted). Unknown member id: UNKNOWN_MEMBER_ID. A static member id that
                 does not match its instance: FENCED_INSTANCE_ID. A protocol type or set of
                 protocols no member shares: INCONSISTENT_GROUP_PROTOCOL. A known
                 group.instance.id with no member id replaces that member (its new
                 protocols and metadata are kept); in a Stable group whose selected protocol
                 stays the same, there is no rebalance: the answer comes at once with the
                 current generation (a restarted Java consumer's subscription differs in its
                 bytes, not its protocol). If the replaced member was the leader, v9+
                 names the new member leader with the member list and skip_assignment;
                 v0-v8 name the replaced (old) member id leader, with no member list, so the
                 new instance runs no assignment (KIP-345). Otherwise it rebalances.
    SyncGroup    wrong generation: ILLEGAL_GENERATION; during PreparingRebalance:
                 REBALANCE_IN_PROGRESS; followers wait for the leader (their session does
                 not run meanwhile); a wait that a rebalance ends is answered
                 REBALANCE_IN_PROGRESS and the member's session starts again from then.
    Heartbeat    unknown member: UNKNOWN_MEMBER_ID; wrong generation: ILLEGAL_GENERATION
                 (also during PreparingRebalance, and it does not keep the member alive);
                 PreparingRebalance: REBALANCE_IN_PROGRESS (the member must rejoin).
    LeaveGroup   an unknown group is no group error: each member is UNKNOWN_MEMBER_ID
                 (v3+ per member under a top-level NONE; v0-v2, one member, at top level).
    OffsetCommit an unknown group: generation -1 creates it (Empty) and commits; a
                 generation >= 0 is from an older generation: ILLEGAL_GENERATION.
                 Generation -1 commits to an Empty group whoever sends it (assign-mode
                 consumers). Otherwise the member must be known and match the generation;
                 generation -1 with no member id to a group with members: UNKNOWN_MEMBER_ID;
                 during CompletingRebalance: REBALANCE_IN_PROGRESS.
    OffsetDelete unknown group: GROUP_ID_NOT_FOUND; a non-consumer group with members:
                 NON_EMPTY_GROUP. A group-level error is answered with no topics.

Offset expiry (Kafka 2.1+, KIP-211; offsets.retention.minutes, default 7 days):
    Offsets expire only while the group is Empty, so a group with members keeps them.
    - A group that has had members: all its offsets expire once it has been Empty for the
      retention period, counted from when it became Empty (Kafka's current state
      timestamp; commits made while Empty do not extend it).
    - A group that never had members (generation -1 commits only): each offset expires the
      retention period after its own last commit, so committing again keeps it.
    - An Empty group left with no offsets by expiry goes with them: Empty -> Dead. One that
      had none (all deleted, or never committed) goes once it has been Empty for the
      retention period. (Kafka drops such a group at its next cleanup pass, every
      offsets.retention.check.interval.ms; waiting the retention period instead keeps a
      member id handed out with MEMBER_ID_REQUIRED usable.)
    Expiry is exact to the deadline (no check interval). Not done: expiry of offsets of
    topics a Stable consumer group no longer subscribes to, and the per-commit
    retention_time_ms of OffsetCommit v2-v4.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from minibroker.protocol.consumer_protocol import parse_subscription
from minibroker.state.offset_store import CommittedOffset


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


ALLOWED_TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.COMPLETING_REBALANCE, GroupState.EMPTY, GroupState.DEAD}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.DEAD, GroupState.EMPTY}
    ),
    GroupState.STABLE: frozenset(
        {GroupState.PREPARING_REBALANCE, GroupState.DEAD, GroupState.EMPTY}
    ),
    GroupState.DEAD: frozenset(),
}


class IllegalTransition(RuntimeError):
    pass


# Error codes of the group protocol (Kafka's Errors.java).
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86


# --- the machine's data: a group, its members, and the answers they wait for ---

log = logging.getLogger("minibroker.groups")
T = TypeVar("T")


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
    # Transactional commits (TxnOffsetCommit) by producer id, until its transaction ends.
    pending_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    # When the group was created or last became Empty, and whether it ever had members:
    # together they decide when an Empty group's offsets expire (see group_rules).
    empty_since: float = 0.0
    had_members: bool = False

    def transition(self, target: GroupState) -> None:
        if target is self.state:
            return
        if target not in ALLOWED_TRANSITIONS[self.state]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        log.debug(
            "group %s: %s -> %s (generation %d)",  # pragma: no mutate
            self.group_id,  # pragma: no mutate
            self.state.value,  # pragma: no mutate
            target.value,  # pragma: no mutate
            self.generation,  # pragma: no mutate
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
