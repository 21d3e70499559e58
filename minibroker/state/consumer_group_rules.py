"""Kafka 4's consumer group protocol (KIP-848): the states and the rules between them.

The broker, not a member, decides the assignment. Members send ConsumerGroupHeartbeat
every heartbeat interval; each answer may carry the member's new assignment.

Epochs:
    group epoch          1 for a new group; bumped whenever what the assignment depends
                         on changes: a member's subscription (names, regex; a member joining
                         with one, as a member joins), the group's server assignor (the one
                         most members ask for), a member leaving or fenced, or a subscribed
                         topic created, deleted or grown.
    assignment epoch     the group epoch the target assignment was computed for. A heartbeat
                         that bumps the group epoch computes the target at once (Kafka with
                         group.consumer.assignment.interval.ms=0 and no offloading; its
                         defaults compute it at most once a second, on another thread); a
                         member leaving or fenced bumps it alone, and the next heartbeat of
                         any member computes the target.
    member epoch         the target epoch the member has reconciled to; 0 to join, -1 to
                         leave, -2 for a static member leaving for a restart.

Group states (Kafka's ConsumerGroupState):
    Empty        no members. Committed offsets stay until offsets.retention.minutes after
                 the last member left (as for classic groups).
    Assigning    the group epoch is ahead of the target assignment's: after a member
                 left or was fenced, until another member's heartbeat.
    Reconciling  some member is not yet at the target epoch, or is waiting on partitions.
    Stable       every member is at the target epoch with its target partitions.
    Dead         deleted (DeleteGroups) or expired; dropped from the coordinator.

Member states (Kafka's MemberState) and reconciliation (Kafka's CurrentAssignmentBuilder),
run at each of the member's heartbeats:
    stable                  at the target epoch with its target partitions. When the
                            target epoch moves, the next assignment is computed (below).
    unrevoked_partitions    it must give up partitions first. It stays in its epoch, keeps
                            only current ∩ target, and waits until a heartbeat's owned
                            partitions no longer hold the revoked ones (a heartbeat that
                            does not list them, owned = null, is not an acknowledgement).
                            Then it moves to min(epoch + 1, target epoch) and is
                            reconciled again. Past its rebalance timeout it is fenced.
    unreleased_partitions   at the target epoch, but some target partitions are still
                            owned (assigned or being revoked) by other members; each
                            heartbeat hands over those that have been released since.
    Next assignment, per topic: assigned = current ∩ target; revoked = current - target;
    newly = target - current, less the partitions another member still owns. Revoked
    partitions the member still owns -> unrevoked_partitions (epoch unchanged, newly
    withheld); else newly added -> the target epoch, unreleased_partitions if some were
    withheld, stable otherwise.

Request rules (ConsumerGroupHeartbeat; Kafka's GroupMetadataManager):
    INVALID_REQUEST       checked in this order: member id empty (v1+, where the client
                          makes it; in v0 with an epoch above 0 or -1: v0 lets the
                          coordinator make it on join); group id empty; instance id or rack
                          id ""; join (epoch 0) without rebalance timeout, without owned
                          partitions (an empty list) or without a subscription (names or
                          regex; an empty list of names is one); epoch -2 without an
                          instance id; an epoch below -2. (A regex of "" clears the regex
                          subscription.)
    GROUP_ID_NOT_FOUND    a join to a classic group with members that cannot become a
                          consumer group; an epoch other than 0 (a heartbeat, a leave) to a
                          group that is not a consumer group here.
    UNKNOWN_MEMBER_ID     an epoch other than 0 from a member not in the group.
    FENCED_MEMBER_EPOCH   an epoch above the member's, or below it unless it is the
                          member's previous epoch and the owned partitions are a subset of
                          its assignment (the answer that bumped it may have been lost).
    FENCED_INSTANCE_ID    an instance id whose member is another member id.
    UNRELEASED_INSTANCE_ID a join with an instance id whose member is still active
                          (it has not left with epoch -2 nor expired).
    UNSUPPORTED_ASSIGNOR  a server assignor that is not one of group_consumer_assignors.
    INVALID_REGULAR_EXPRESSION a regex RE2 cannot compile (Kafka's engine is RE2/J: the
                          same syntax, so look-around and back references are refused).
                          A topic matches when the whole name matches; topics whose names
                          start with "__" (internal) never do.
    A static member that left with epoch -2 keeps its partitions until its session timeout;
    a join with its instance id takes its place, epoch and partitions, with no new epoch.

Offsets (OffsetCommit, OffsetFetch on a consumer group):
    A member commits with its member epoch: an unknown member id is UNKNOWN_MEMBER_ID, any
    other epoch STALE_MEMBER_EPOCH, OffsetCommit below v9 UNSUPPORTED_VERSION. Epoch -1
    with no member id commits only while the group has no members (admin tools, assign-mode
    consumers). OffsetFetch v9+ with a member id checks it the same way; without one (epoch
    -1) anyone may fetch. A classic member of a consumer group (below) commits with its
    generation, its member epoch: another one is ILLEGAL_GENERATION, at any version.
    TxnOffsetCommit checks the member the same way, and accepts a producer that sends no
    member (epoch -1).

Mixed groups (Kafka 4's default group.consumer.migration.policy, bidirectional):
    Upgrade      a join (epoch 0) to a classic group with members converts it when every
                 member speaks the consumer embedded protocol (protocol type "consumer",
                 subscriptions that parse) and holds an assignment (one that joined, or
                 rejoined after the join phase ended, holds none until SyncGroup): else
                 GROUP_ID_NOT_FOUND, so mid-rebalance it is refused. Waiting JoinGroup and
                 SyncGroup answers are REBALANCE_IN_PROGRESS; each classic member becomes a
                 classic member of the consumer group at the generation as its epoch, with
                 what it was assigned as its assignment and target, and the group epoch is
                 the generation; then the joining member bumps it as any join does.
    Classic members of a consumer group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup):
                 JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED; a protocol type
                 other than "consumer" or metadata that is not a subscription:
                 INCONSISTENT_GROUP_PROTOCOL. A join updates the subscription (bumping the
                 epoch if it changed), reconciles with the owned partitions the
                 subscription lists (v1+; none for eager members, which give up everything
                 before rejoining) and is answered at once: generation = member epoch, the
                 member's first protocol, no leader and no member list (the broker
                 assigns). SyncGroup: ILLEGAL_GENERATION for another generation,
                 INCONSISTENT_GROUP_PROTOCOL for another protocol, REBALANCE_IN_PROGRESS
                 while the group epoch is ahead of the member's (unless it is revoking);
                 else the member's assignment. Heartbeat: ILLEGAL_GENERATION for another
                 generation; REBALANCE_IN_PROGRESS when the group epoch is ahead of the
                 member's, when it must revoke, or when partitions it waits for have been
                 released, so that it rejoins. The session is the one its JoinGroup asked.
    Downgrade    when the last consumer-protocol member leaves or is fenced and classic
                 members remain, the group becomes a classic group again at the group epoch
                 as its generation, with each member's assignment, and a rebalance starts
                 so that they rejoin.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


# Error codes (Kafka's Errors.java).
NONE = 0
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
UNKNOWN_MEMBER_ID = 25
FENCED_INSTANCE_ID = 82
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
INVALID_REGULAR_EXPRESSION = 128

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# topic id -> partitions
Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class Reconciled:
    """A member's assignment after one reconciliation step."""

    state: MemberState
    member_epoch: int
    assigned: dict[uuid.UUID, frozenset[int]]
    pending_revocation: dict[uuid.UUID, frozenset[int]]


def reconcile(
    *,
    state: MemberState,
    member_epoch: int,
    assigned: Assignment,
    pending_revocation: Assignment,
    target: Assignment,
    target_epoch: int,
    owned: Assignment | None,
    owned_by_other: Callable[[uuid.UUID, int], bool],
) -> Reconciled:
    """The member's next state (module docstring: member states and reconciliation).
    `owned` is what the heartbeat says the member holds (None: not said); `owned_by_other`
    whether a partition is assigned to, or being revoked from, another member."""
    if state is MemberState.STABLE:
        if member_epoch == target_epoch:
            return Reconciled(state, member_epoch, dict(assigned), dict(pending_revocation))
        return _next_assignment(member_epoch, assigned, target, target_epoch, owned, owned_by_other)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, pending_revocation):
            return Reconciled(state, member_epoch, dict(assigned), dict(pending_revocation))
        return _next_assignment(
            min(member_epoch + 1, target_epoch), assigned, target, target_epoch, owned,
            owned_by_other,
        )  # fmt: skip
    return _next_assignment(member_epoch, assigned, target, target_epoch, owned, owned_by_other)


def _still_owns(owned: Assignment | None, revoked: Assignment) -> bool:
    if owned is None:
        return True  # not told otherwise
    return any(owned.get(topic_id, frozenset()) & parts for topic_id, parts in revoked.items())


def _next_assignment(
    member_epoch: int,
    assigned: Assignment,
    target: Assignment,
    target_epoch: int,
    owned: Assignment | None,
    owned_by_other: Callable[[uuid.UUID, int], bool],
) -> Reconciled:
    kept: dict[uuid.UUID, frozenset[int]] = {}
    revoked: dict[uuid.UUID, frozenset[int]] = {}
    newly: dict[uuid.UUID, frozenset[int]] = {}
    withheld = False
    for topic_id in set(assigned) | set(target):
        current = assigned.get(topic_id, frozenset())
        wanted = target.get(topic_id, frozenset())
        if current & wanted:
            kept[topic_id] = current & wanted
        if current - wanted:
            revoked[topic_id] = current - wanted
        free = frozenset(p for p in wanted - current if not owned_by_other(topic_id, p))
        withheld = withheld or len(free) < len(wanted - current)
        if free:
            newly[topic_id] = free
    if revoked and _still_owns(owned, revoked):
        return Reconciled(MemberState.UNREVOKED_PARTITIONS, member_epoch, kept, revoked)
    for topic_id, parts in newly.items():
        kept[topic_id] = kept.get(topic_id, frozenset()) | parts
    state = MemberState.UNRELEASED_PARTITIONS if withheld else MemberState.STABLE
    return Reconciled(state, target_epoch, kept, {})


def group_state(
    member_count: int,
    group_epoch: int,
    assignment_epoch: int,
    members: list[tuple[int, MemberState]],
) -> ConsumerGroupState:
    """Kafka's ConsumerGroup state from its epochs and members' (epoch, state)."""
    if member_count == 0:
        return ConsumerGroupState.EMPTY
    if group_epoch > assignment_epoch:
        return ConsumerGroupState.ASSIGNING
    for epoch, state in members:
        if epoch != assignment_epoch or state is not MemberState.STABLE:
            return ConsumerGroupState.RECONCILING
    return ConsumerGroupState.STABLE
