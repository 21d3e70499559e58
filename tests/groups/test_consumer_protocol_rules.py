"""Kafka 4's consumer group protocol as a pure state machine: members, epochs,
reconciliation, fencing, timeouts and offsets, driven with a fake clock and no sockets."""

from __future__ import annotations

import struct
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from minibroker.config import BrokerConfig
from minibroker.protocol.consumer_protocol import encode_assignment, parse_assignment
from minibroker.state import consumer_group_rules as rules
from minibroker.state import group_rules as classic_rules
from minibroker.state.consumer_group_rules import ConsumerGroupState, MemberState, reconcile
from minibroker.state.consumer_groups import (
    ConsumerGroupCoordinator,
    HeartbeatOutcome,
    regex_problem,
)
from minibroker.state.groups import GroupCoordinator
from minibroker.state.server_assignors import range_assignor, uniform

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
SESSION_S = 45.0


@dataclass
class Harness:
    now: float = 0.0
    topics: dict[str, tuple[uuid.UUID, int]] = field(
        default_factory=lambda: {"t": (T1, 6), "u": (T2, 2)}
    )

    def __post_init__(self) -> None:
        config = BrokerConfig(offsets_retention_minutes=1)
        self.offsets = GroupCoordinator(config)
        self.coordinator = ConsumerGroupCoordinator(
            config,
            self.offsets,
            self.topics.get,
            lambda: list(self.topics),
            lambda topic_id: next((n for n, (i, _) in self.topics.items() if i == topic_id), None),
        )
        # member id -> what it owns, as a client that acknowledges at once would say
        self.owned: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        self.epochs: dict[str, int] = {}

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.coordinator.tick(self.now)

    def beat(
        self,
        member: str,
        *,
        epoch: int | None = None,
        topics: tuple[str, ...] | None = None,
        regex: str | None = None,
        instance: str | None = None,
        assignor: str | None = None,
        owned: dict[uuid.UUID, frozenset[int]] | None = None,
        group: str = "g",
        version: int = 1,
    ) -> HeartbeatOutcome:
        joining = epoch == 0 or (epoch is None and member not in self.epochs)
        if joining:
            epoch = 0
            if topics is None and regex is None:
                topics = ("t",)
        outcome = self.coordinator.heartbeat(
            self.now,
            version=version,
            group_id=group,
            member_id=member,
            member_epoch=self.epochs.get(member, 0) if epoch is None else epoch,
            instance_id=instance,
            rack_id=None,
            rebalance_timeout_ms=60_000 if joining else -1,
            subscribed_names=topics,
            subscribed_regex=regex,
            server_assignor=assignor,
            owned={} if joining else (self.owned.get(member, {}) if owned is None else owned),
            client_id="client",
            client_host="127.0.0.1",
        )
        if outcome.error == rules.NONE:
            self.epochs[outcome.member_id] = outcome.member_epoch
            if outcome.assignment is not None:
                self.owned[outcome.member_id] = dict(outcome.assignment)
        return outcome

    def settle(self, members: list[str], rounds: int = 6) -> None:
        for _ in range(rounds):
            for member in members:
                assert self.beat(member).error == rules.NONE

    def partitions(self, member: str) -> set[int]:
        return set(self.owned.get(member, {}).get(T1, frozenset()))

    @property
    def group(self):  # type: ignore[no-untyped-def]
        return self.coordinator.groups["g"]


def test_three_members_on_six_partitions_get_two_each() -> None:
    h = Harness()
    for member in ("a", "b", "c"):
        assert h.beat(member).error == rules.NONE
    h.settle(["a", "b", "c"])
    sizes = sorted(len(h.partitions(m)) for m in "abc")
    assert sizes == [2, 2, 2]
    assert set().union(*(h.partitions(m) for m in "abc")) == set(range(6))
    assert h.group.state is ConsumerGroupState.STABLE
    assert {h.epochs[m] for m in "abc"} == {h.group.group_epoch}


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    h = Harness()
    h.beat("a")
    assert h.partitions("a") == set(range(6))
    joined = h.beat("b")
    # b may not have what a still owns: it waits at the new epoch with nothing.
    assert joined.assignment == {}
    assert h.group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    # a learns it must give up three partitions and stays in its epoch meanwhile (a new
    # group starts at epoch 1; a's subscription made it 2, b's 3).
    told = h.beat("a")
    assert told.member_epoch == 2
    assert told.assignment is not None and len(told.assignment[T1]) == 3
    assert h.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # Not yet released (a heartbeat still listing them): b still waits.
    h.beat("a", owned={T1: frozenset(range(6))})
    assert h.beat("b").assignment is None
    # a acknowledges by listing only what it kept; then b gets the rest.
    acknowledged = h.beat("a")
    assert acknowledged.member_epoch == 3
    got = h.beat("b")
    assert got.assignment is not None
    assert set(got.assignment[T1]) == set(range(6)) - h.partitions("a")
    assert h.group.state is ConsumerGroupState.STABLE


def test_a_heartbeat_without_owned_partitions_is_no_acknowledgement() -> None:
    outcome = reconcile(
        state=MemberState.UNREVOKED_PARTITIONS,
        member_epoch=3,
        assigned={T1: frozenset({0})},
        pending_revocation={T1: frozenset({1})},
        target={T1: frozenset({0})},
        target_epoch=4,
        owned=None,
        owned_by_other=lambda topic, partition: False,
    )
    assert (outcome.state, outcome.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 3)


def test_leaving_member_partitions_go_to_the_others() -> None:
    h = Harness()
    for member in "abc":
        h.beat(member)
    h.settle(list("abc"))
    assert h.beat("c", epoch=rules.LEAVE_EPOCH).member_epoch == -1
    h.settle(["a", "b"])
    assert sorted(len(h.partitions(m)) for m in "ab") == [3, 3]
    assert h.partitions("a") | h.partitions("b") == set(range(6))


def test_session_timeout_fences_a_silent_member() -> None:
    h = Harness()
    h.beat("a")
    h.beat("b")
    h.settle(["a", "b"])
    for _ in range(10):  # a heartbeats; b stays silent
        h.advance(SESSION_S / 10 + 0.1)
        h.beat("a")
    assert "b" not in h.group.members
    assert h.beat("b").error == rules.UNKNOWN_MEMBER_ID
    h.settle(["a"])
    assert h.partitions("a") == set(range(6))


def test_a_member_that_heartbeats_keeps_its_epoch_across_clock_jumps() -> None:
    h = Harness()
    h.beat("a")
    epoch = h.epochs["a"]
    h.advance(SESSION_S * 0.6)
    h.beat("a")
    h.advance(SESSION_S * 0.6)  # past the first deadline, not the renewed one
    assert "a" in h.group.members
    assert h.beat("a").member_epoch == epoch


def test_epochs_other_than_the_members_are_fenced() -> None:
    h = Harness()
    h.beat("a")
    h.beat("b")
    h.settle(["a", "b"])
    current = h.epochs["a"]
    assert h.beat("a", epoch=current + 1).error == rules.FENCED_MEMBER_EPOCH
    previous = h.group.members["a"].previous_epoch
    # The previous epoch is accepted only with a subset of the assignment: the answer
    # that moved the member on may have been lost.
    everything = {T1: frozenset(range(6))}
    assert h.beat("a", epoch=previous, owned=everything).error == rules.FENCED_MEMBER_EPOCH
    accepted = h.beat("a", epoch=previous, owned=h.owned["a"])
    assert accepted.error == rules.NONE
    assert accepted.member_epoch == current


def test_invalid_requests_are_refused_with_reasons() -> None:
    h = Harness()
    assert h.beat("", epoch=0).error == rules.INVALID_REQUEST  # v1: the client names itself
    assert h.beat("", epoch=0, version=0).error == rules.NONE  # v0: the coordinator does
    outcome = h.coordinator.heartbeat(
        0.0, version=1, group_id="g", member_id="x", member_epoch=0, instance_id=None,
        rack_id=None, rebalance_timeout_ms=-1, subscribed_names=("t",), subscribed_regex=None,
        server_assignor=None, owned={}, client_id="c", client_host="h",
    )  # fmt: skip
    assert outcome.error == rules.INVALID_REQUEST
    assert outcome.message == "RebalanceTimeoutMs must be provided in first request."
    assert h.beat("y", epoch=-3).error == rules.INVALID_REQUEST
    assert h.beat("z", assignor="cooperative-sticky").error == rules.UNSUPPORTED_ASSIGNOR
    assert h.beat("r", regex="(?=x)t").error == rules.INVALID_REGULAR_EXPRESSION
    assert h.beat("q", regex="[").error == rules.INVALID_REGULAR_EXPRESSION
    assert h.beat("unknown", epoch=5).error == rules.UNKNOWN_MEMBER_ID


def _classic_join(h: Harness, protocol_type: str, member_id: str = "") -> None:
    slot = h.offsets.join(
        h.now, group_id="g", member_id=member_id, group_instance_id=None, client_id="c",
        client_host="h", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        protocol_type=protocol_type, protocols=[("range", subscription("t"))],
        require_known_member_id=False,
    )  # fmt: skip
    assert slot.result is not None and slot.result.error == rules.NONE


def subscription(*topics: str) -> bytes:
    data = struct.pack(">hi", 0, len(topics))
    for name in topics:
        data += struct.pack(">h", len(name)) + name.encode()
    return data + struct.pack(">i", -1)


def test_a_classic_group_of_another_protocol_type_is_not_taken_over() -> None:
    h = Harness()
    _classic_join(h, "connect")
    outcome = h.beat("x")
    assert outcome.error == rules.GROUP_ID_NOT_FOUND
    assert "g" not in h.coordinator.groups


def _classic_sync(h: Harness, assignment: bytes) -> str:
    """The group's one classic member syncs as its leader, given `assignment`."""
    group = h.offsets.groups["g"]
    (member_id,) = group.members
    slot = h.offsets.sync(
        h.now, group_id="g", generation=group.generation, member_id=member_id,
        group_instance_id=None, protocol_type="consumer", protocol_name="range",
        assignments=[(member_id, assignment)],
    )  # fmt: skip
    assert slot.result is not None and slot.result.error == rules.NONE
    return member_id


def test_a_classic_group_mid_rebalance_is_not_upgraded() -> None:
    h = Harness()
    _classic_join(h, "consumer")  # joined; no assignment until SyncGroup
    outcome = h.beat("x")
    assert outcome.error == rules.GROUP_ID_NOT_FOUND
    assert outcome.message == (
        "Cannot upgrade classic group g to consumer group because the embedded consumer "
        "protocol is malformed."
    )
    assert "g" not in h.coordinator.groups
    _classic_sync(h, encode_assignment({"t": [0, 1, 2, 3, 4, 5]}))
    assert h.beat("x").error == rules.NONE  # once synced, the same join converts it


def test_a_classic_consumer_group_is_upgraded_with_its_members() -> None:
    h = Harness()
    _classic_join(h, "consumer")
    classic_id = _classic_sync(h, encode_assignment({}))
    generation = h.offsets.groups["g"].generation
    joined = h.beat("x")
    assert joined.error == rules.NONE
    group = h.group
    assert set(group.members) == {classic_id, "x"}
    assert group.members[classic_id].classic is not None
    assert group.members[classic_id].member_epoch == generation
    assert h.offsets.groups["g"].members == {}  # the classic coordinator keeps offsets only
    # x waits for what the classic member still owns (it has not been assigned any).
    assert group.group_epoch == generation + 1


def test_a_new_group_starts_at_epoch_one_and_only_subscriptions_bump_it() -> None:
    h = Harness()
    assert h.beat("a").member_epoch == 2  # 1 for the new group, then a's subscription
    assert h.beat("b", epoch=0, topics=()).member_epoch == 2  # no subscription: no bump
    assert h.group.group_epoch == 2
    assert h.beat("c").member_epoch == 3


def test_a_member_that_leaves_leaves_the_target_to_the_next_heartbeat() -> None:
    h = Harness()
    h.beat("a")
    h.beat("b")
    h.settle(["a", "b"])
    before = h.group.assignment_epoch
    h.beat("b", epoch=rules.LEAVE_EPOCH)
    assert h.group.state is ConsumerGroupState.ASSIGNING
    assert (h.group.group_epoch, h.group.assignment_epoch) == (before + 1, before)
    got = h.beat("a")
    assert got.member_epoch == h.group.assignment_epoch == before + 1
    assert h.partitions("a") == set(range(6))
    assert h.group.state is ConsumerGroupState.STABLE


def test_heartbeats_to_a_group_not_here_and_an_empty_rack_id_are_refused() -> None:
    h = Harness()
    assert h.beat("x", epoch=5, group="nowhere").error == rules.GROUP_ID_NOT_FOUND
    assert h.beat("x", epoch=rules.LEAVE_EPOCH, group="nowhere").error == rules.GROUP_ID_NOT_FOUND
    outcome = h.coordinator.heartbeat(
        0.0, version=1, group_id="g", member_id="x", member_epoch=0, instance_id=None,
        rack_id="", rebalance_timeout_ms=1000, subscribed_names=("t",), subscribed_regex=None,
        server_assignor=None, owned={}, client_id="c", client_host="h",
    )  # fmt: skip
    assert (outcome.error, outcome.message) == (rules.INVALID_REQUEST, "RackId can't be empty.")
    assert "g" not in h.coordinator.groups and "nowhere" not in h.coordinator.groups


def test_static_member_restarts_without_a_new_epoch() -> None:
    h = Harness()
    h.beat("a", instance="i-a")
    h.beat("b", instance="i-b")
    h.settle(["a", "b"])
    kept, epoch = h.partitions("a"), h.group.group_epoch
    assert h.beat("a", epoch=rules.STATIC_LEAVE_EPOCH, instance="i-a").member_epoch == -2
    # Another instance with the id while the old one is still active is refused.
    assert h.beat("b2", instance="i-b").error == rules.UNRELEASED_INSTANCE_ID
    back = h.beat("a2", instance="i-a")
    assert back.error == rules.NONE
    assert back.assignment is not None and set(back.assignment[T1]) == kept
    assert h.group.group_epoch == epoch
    assert "a" not in h.group.members


def test_static_member_gone_past_its_session_is_replaced_by_a_rebalance() -> None:
    h = Harness()
    h.beat("a", instance="i-a")
    h.beat("b")
    h.settle(["a", "b"])
    h.beat("a", epoch=rules.STATIC_LEAVE_EPOCH, instance="i-a")
    for _ in range(10):
        h.advance(SESSION_S / 10 + 0.1)
        h.beat("b")
    assert "a" not in h.group.members
    assert h.partitions("b") == set(range(6))


def test_regex_subscription_follows_topics_created_later() -> None:
    h = Harness()
    h.beat("a", regex="orders-.*")
    assert h.owned["a"] == {}
    h.topics["orders-eu"] = (uuid.UUID(int=9), 3)
    h.topics["other"] = (uuid.UUID(int=10), 3)
    h.coordinator.topics_changed()
    got = h.beat("a")
    assert got.assignment == {uuid.UUID(int=9): frozenset({0, 1, 2})}
    assert h.group.group_epoch == 3  # 1 for the new group, then a's regex, then the topic


def test_a_topic_growing_partitions_reaches_the_assignment() -> None:
    h = Harness()
    h.beat("a")
    h.topics["t"] = (T1, 8)
    h.coordinator.topics_changed()
    assert h.partitions("a") == set(range(6))
    h.beat("a")
    assert h.partitions("a") == set(range(8))


def test_commits_need_the_current_member_epoch() -> None:
    h = Harness()
    h.beat("a")
    epoch = h.epochs["a"]
    offsets = [("t", 0, 5, -1, None)]
    commit = h.coordinator.commit
    assert commit(h.now, version=9, group_id="g", member_id="a", member_epoch=epoch,
                  offsets=offsets) == {("t", 0): rules.NONE}  # fmt: skip
    assert commit(h.now, version=9, group_id="g", member_id="a", member_epoch=epoch - 1,
                  offsets=offsets) == {("t", 0): rules.STALE_MEMBER_EPOCH}  # fmt: skip
    assert commit(h.now, version=9, group_id="g", member_id="zz", member_epoch=epoch,
                  offsets=offsets) == {("t", 0): rules.UNKNOWN_MEMBER_ID}  # fmt: skip
    assert commit(h.now, version=8, group_id="g", member_id="a", member_epoch=epoch,
                  offsets=offsets) == {("t", 0): rules.UNSUPPORTED_VERSION}  # fmt: skip
    # Without a member id (admin tools) only once the group has no members.
    assert commit(h.now, version=9, group_id="g", member_id="", member_epoch=-1,
                  offsets=offsets) == {("t", 0): rules.UNKNOWN_MEMBER_ID}  # fmt: skip
    h.beat("a", epoch=rules.LEAVE_EPOCH)
    assert commit(h.now, version=9, group_id="g", member_id="", member_epoch=-1,
                  offsets=offsets) == {("t", 0): rules.NONE}  # fmt: skip
    assert h.offsets.committed("g", [("t", 0)])[("t", 0)] is not None


def test_offsets_outlive_the_retention_while_members_stay_and_expire_after() -> None:
    h = Harness()
    h.beat("a")
    h.coordinator.commit(
        h.now, version=9, group_id="g", member_id="a", member_epoch=h.epochs["a"],
        offsets=[("t", 0, 5, -1, None)],
    )  # fmt: skip
    for _ in range(10):  # two minutes: twice the retention, heartbeating
        h.now += 12
        h.beat("a")
        h.offsets.tick(h.now)
    assert h.offsets.committed("g", [("t", 0)])[("t", 0)] is not None
    h.beat("a", epoch=rules.LEAVE_EPOCH)
    h.now += 61
    h.offsets.tick(h.now)
    assert h.offsets.committed("g", [("t", 0)])[("t", 0)] is None
    assert "g" not in h.coordinator.groups


def test_a_pattern_that_backtracks_exponentially_does_not_stall_the_coordinator() -> None:
    """`(a+)+b` against a 249-character name takes a backtracking engine longer than the
    age of the universe; RE2 answers at once (the heartbeat ran in a thread so that a
    regression fails here instead of hanging the run)."""
    h = Harness()
    h.topics["a" * 249] = (uuid.UUID(int=11), 1)
    h.topics["aab"] = (uuid.UUID(int=12), 1)
    answered: list[HeartbeatOutcome] = []
    worker = threading.Thread(target=lambda: answered.append(h.beat("m", regex="(a+)+b")))
    worker.daemon = True
    worker.start()
    worker.join(30)
    assert answered, "the heartbeat did not come back"
    assert answered[0].assignment == {uuid.UUID(int=12): frozenset({0})}


def test_regex_problems_name_what_is_refused() -> None:
    assert regex_problem("orders-.*") is None
    assert regex_problem("(a)\\1") is not None
    assert regex_problem("(?<!x)y") is not None


# --- assignors ---


def _sizes(target: dict[str, dict[uuid.UUID, frozenset[int]]]) -> list[int]:
    return sorted(sum(len(p) for p in topics.values()) for topics in target.values())


def test_uniform_is_balanced_and_sticky() -> None:
    members = {m: frozenset({T1, T2}) for m in ("a", "b", "c")}
    first = uniform(members, {T1: 6, T2: 2}, {})
    assert _sizes(first) == [2, 3, 3]
    with_d = {**members, "d": frozenset({T1, T2})}
    second = uniform(with_d, {T1: 6, T2: 2}, first)
    assert _sizes(second) == [2, 2, 2, 2]
    moved = sum(
        len(parts - second[m].get(topic, frozenset()))
        for m in members
        for topic, parts in first[m].items()
    )
    assert moved == 2  # only what the new member needs


def test_uniform_with_different_subscriptions_respects_them() -> None:
    members = {"a": frozenset({T1}), "b": frozenset({T1, T2}), "c": frozenset({T2})}
    target = uniform(members, {T1: 4, T2: 4}, {})
    assert all(set(target[m]) <= members[m] for m in members)
    covered = {(t, p) for m in target for t, parts in target[m].items() for p in parts}
    assert len(covered) == 8
    assert _sizes(target) == [2, 3, 3]


def test_eighteen_members_on_six_partitions_leave_twelve_idle() -> None:
    members = {f"m{i:02d}": frozenset({T1}) for i in range(18)}
    assert _sizes(uniform(members, {T1: 6}, {})).count(0) == 12


def test_range_gives_consecutive_partitions_on_every_topic() -> None:
    members = {m: frozenset({T1, T2}) for m in ("a", "b", "c")}
    target = range_assignor(members, {T1: 7, T2: 3}, {})
    assert target["a"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0})}
    assert target["b"] == {T1: frozenset({3, 4}), T2: frozenset({1})}
    assert target["c"] == {T1: frozenset({5, 6}), T2: frozenset({2})}


@pytest.mark.parametrize("assignor", [uniform, range_assignor])
def test_no_members_no_assignment(assignor) -> None:  # type: ignore[no-untyped-def]
    assert assignor({}, {T1: 3}, {}) == {}


# --- mixed groups: classic members in a consumer group ---

CLASSIC_SESSION_MS = 10_000


def subscription_v1(*topics: str, owned: dict[str, list[int]] | None = None) -> bytes:
    """A ConsumerProtocolSubscription v1: topics, no user data, owned partitions."""
    data = struct.pack(">hi", 1, len(topics))
    for name in topics:
        data += struct.pack(">h", len(name)) + name.encode()
    data += struct.pack(">i", -1)
    owned = owned or {}
    data += struct.pack(">i", len(owned))
    for name, partitions in owned.items():
        data += struct.pack(">h", len(name)) + name.encode()
        data += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return data


def cjoin(
    h: Harness,
    member_id: str,
    *,
    version: int = 5,
    instance: str | None = None,
    owned: dict[str, list[int]] | None = None,
    protocol_type: str = "consumer",
    metadata: bytes | None = None,
) -> Any:
    return h.coordinator.classic_join(
        h.now, group_id="g", member_id=member_id, instance_id=instance, client_id="classic",
        client_host="10.0.0.1", session_timeout_ms=CLASSIC_SESSION_MS,
        rebalance_timeout_ms=20_000, protocol_type=protocol_type,
        protocols=[("range", subscription_v1("t", owned=owned) if metadata is None else metadata)],
        version=version,
    )  # fmt: skip


def csync(h: Harness, member_id: str, generation: int, **more: Any) -> Any:
    values = {"instance_id": None, "protocol_type": "consumer", "protocol_name": "range", **more}
    return h.coordinator.classic_sync(
        h.now, group_id="g", member_id=member_id, generation=generation, **values
    )


def cbeat(h: Harness, member_id: str, generation: int, instance: str | None = None) -> int:
    return h.coordinator.classic_heartbeat(
        h.now, group_id="g", member_id=member_id, instance_id=instance, generation=generation
    )


def held(assignment: bytes) -> set[int]:
    return set(parse_assignment(assignment).get("t", []))


def mixed(h: Harness) -> str:
    """A consumer-protocol member `a` owning everything, then a classic member joins
    (after MEMBER_ID_REQUIRED): its id."""
    h.beat("a")
    required = cjoin(h, "")
    assert required.error == classic_rules.MEMBER_ID_REQUIRED and required.member_id
    return str(required.member_id)


def test_a_classic_member_is_assigned_by_the_broker_once_partitions_are_released() -> None:
    h = Harness()
    classic = mixed(h)
    epoch_before = h.group.group_epoch
    joined = cjoin(h, classic)
    assert (joined.error, joined.protocol_type, joined.protocol_name) == (0, "consumer", "range")
    assert (joined.leader, joined.members, joined.member_id) == ("", [], classic)
    assert h.group.group_epoch == epoch_before + 1 == joined.generation
    member = h.group.members[classic]
    assert (member.client_id, member.client_host) == ("classic", "10.0.0.1")
    assert member.state is MemberState.UNRELEASED_PARTITIONS
    synced = csync(h, classic, joined.generation)
    assert (synced.error, held(synced.assignment)) == (0, set())
    # a still owns everything: the classic member is told nothing yet.
    assert cbeat(h, classic, joined.generation) == 0
    h.beat("a")
    h.beat("a")  # a gave up half
    assert len(h.partitions("a")) == 3
    # Released: the classic member must rejoin to collect them.
    assert cbeat(h, classic, joined.generation) == classic_rules.REBALANCE_IN_PROGRESS
    again = cjoin(h, classic)
    assert again.generation == h.group.assignment_epoch
    synced = csync(h, classic, again.generation)
    assert held(synced.assignment) == set(range(6)) - h.partitions("a")
    assert cbeat(h, classic, again.generation) == 0
    assert h.group.state is ConsumerGroupState.STABLE


def test_classic_requests_refused_as_kafka_refuses_them() -> None:
    h = Harness()
    classic = mixed(h)
    joined = cjoin(h, classic)
    generation = joined.generation
    assert cjoin(h, "x", protocol_type="connect").error == classic_rules.INCONSISTENT_GROUP_PROTOCOL
    assert cjoin(h, "x", metadata=b"\x00").error == classic_rules.INCONSISTENT_GROUP_PROTOCOL
    assert cjoin(h, "a").error == rules.UNKNOWN_MEMBER_ID  # a consumer-protocol member
    assert csync(h, classic, generation + 1).error == classic_rules.ILLEGAL_GENERATION
    assert csync(h, classic, generation, protocol_name="roundrobin").error == (
        classic_rules.INCONSISTENT_GROUP_PROTOCOL
    )
    assert csync(h, classic, generation, protocol_type="connect").error == (
        classic_rules.INCONSISTENT_GROUP_PROTOCOL
    )
    assert csync(h, "ghost", generation).error == rules.UNKNOWN_MEMBER_ID
    assert csync(h, "a", h.epochs["a"]).error == rules.UNKNOWN_MEMBER_ID
    assert cbeat(h, classic, generation - 1) == classic_rules.ILLEGAL_GENERATION
    assert cbeat(h, "ghost", generation) == rules.UNKNOWN_MEMBER_ID
    # The group moved on: a sync from the old epoch is told to rejoin.
    h.beat("b")
    assert csync(h, classic, generation).error == classic_rules.REBALANCE_IN_PROGRESS
    assert cbeat(h, classic, generation) == classic_rules.REBALANCE_IN_PROGRESS


def test_a_static_classic_member_is_fenced_or_replaced_by_its_instance() -> None:
    h = Harness()
    h.beat("a")
    first = cjoin(h, "", instance="i-1")
    assert first.error == 0
    assert cjoin(h, "other", instance="i-1").error == rules.FENCED_INSTANCE_ID
    assert cbeat(h, "other", first.generation, instance="i-1") == rules.FENCED_INSTANCE_ID
    assert cbeat(h, first.member_id, first.generation, instance="i-2") == rules.UNKNOWN_MEMBER_ID
    replaced = cjoin(h, "", instance="i-1")  # a restart: no member id, same instance
    assert replaced.error == 0 and replaced.member_id != first.member_id
    assert first.member_id not in h.group.members
    assert h.group.static_members["i-1"] == replaced.member_id


def test_the_last_consumer_protocol_member_leaving_downgrades_the_group() -> None:
    h = Harness()
    classic = mixed(h)
    joined = cjoin(h, classic)
    for _ in range(3):
        h.beat("a")
    rejoined = cjoin(h, classic)
    kept = held(csync(h, classic, rejoined.generation).assignment)
    assert kept
    epoch = h.group.group_epoch
    h.beat("a", epoch=rules.LEAVE_EPOCH)
    assert "g" not in h.coordinator.groups
    group = h.offsets.groups["g"]
    assert group.generation == epoch  # the consumer group's epoch carries over
    assert group.state.value == "PreparingRebalance"
    (member,) = group.members.values()
    assert (member.member_id, member.session_timeout_ms) == (classic, CLASSIC_SESSION_MS)
    assert held(member.assignment) == kept
    assert joined.generation <= group.generation


def test_classic_leaves_and_session_timeouts() -> None:
    h = Harness()
    classic = mixed(h)
    cjoin(h, classic)
    h.beat("b")
    results = h.coordinator.classic_leave(h.now, "g", [("ghost", None), (classic, None)])
    assert results == [("ghost", None, rules.UNKNOWN_MEMBER_ID), (classic, None, rules.NONE)]
    assert classic not in h.group.members
    # A consumer-protocol member named in a LeaveGroup leaves too.
    assert h.coordinator.classic_leave(h.now, "g", [("b", None)]) == [("b", None, 0)]
    second = cjoin(h, "", version=3)  # before v4 no MEMBER_ID_REQUIRED: an id at once
    assert second.error == 0 and second.member_id in h.group.members
    assert h.coordinator.next_deadline() is not None
    h.advance(CLASSIC_SESSION_MS / 1000 + 0.1)  # its own session, not the group's 45 s
    assert second.member_id not in h.group.members
    assert "a" in h.group.members  # a was silent as long: its 45 s are not up


def test_a_downgraded_leave_request_hands_the_rest_to_the_classic_coordinator() -> None:
    h = Harness()
    classic = mixed(h)
    cjoin(h, classic)
    results = h.coordinator.classic_leave(h.now, "g", [("a", None), (classic, None)])
    assert results == [("a", None, 0), (classic, None, 0)]
    assert "g" not in h.coordinator.groups
    assert h.offsets.groups["g"].members == {}


def test_commits_of_classic_members_and_transactional_commits() -> None:
    h = Harness()
    classic = mixed(h)
    generation = cjoin(h, classic).generation
    offsets = [("t", 0, 5, -1, None)]
    commit = h.coordinator.commit
    assert commit(h.now, version=8, group_id="g", member_id=classic, member_epoch=generation,
                  offsets=offsets) == {("t", 0): 0}  # fmt: skip
    assert commit(h.now, version=9, group_id="g", member_id=classic, member_epoch=generation - 1,
                  offsets=offsets) == {("t", 0): classic_rules.ILLEGAL_GENERATION}  # fmt: skip
    txn = h.offsets.commit_transactional
    base = {"group_id": "g", "producer_id": 7, "group_instance_id": None, "offsets": offsets}
    assert txn(h.now, member_id="", generation=-1, **base) == {("t", 0): 0}
    assert txn(h.now, member_id="a", generation=h.epochs["a"], **base) == {("t", 0): 0}
    assert txn(h.now, member_id="a", generation=h.epochs["a"] + 1, **base) == {
        ("t", 0): rules.STALE_MEMBER_EPOCH
    }
    assert txn(h.now, member_id="ghost", generation=1, **base) == {
        ("t", 0): rules.UNKNOWN_MEMBER_ID
    }
    assert h.offsets.has_pending("g", ("t", 0))


def test_delete_forget_and_the_group_configs_interval() -> None:
    h = Harness()
    h.beat("a")
    assert h.coordinator.delete_group("g") == 68  # NON_EMPTY_GROUP
    assert h.coordinator.delete_group("nope") == rules.GROUP_ID_NOT_FOUND
    assert h.coordinator.heartbeat_interval_ms("g") == 500
    h.coordinator.forget("g")  # has members: stays
    assert "g" in h.coordinator.groups
    h.beat("a", epoch=rules.LEAVE_EPOCH)
    assert not h.coordinator.has_members("g")
    h.coordinator.forget("g")  # a classic join to an empty consumer group takes it over
    assert "g" not in h.coordinator.groups
    h.beat("b")
    h.beat("b", epoch=rules.LEAVE_EPOCH)
    assert h.coordinator.delete_group("g") == rules.NONE
    assert "g" not in h.coordinator.groups and "g" not in h.offsets.groups


def test_uniform_keeps_what_each_member_may_keep_and_moves_the_rest() -> None:
    """Three members on 7 partitions: shares of 3, 2, 2. A member keeps at most its share
    (the one holding the most keeps one extra), drops what it no longer subscribes to or
    what no longer exists, and the newcomer gets the rest."""
    members = {m: frozenset({T1}) for m in ("a", "b", "c")}
    previous = {
        "a": {T1: frozenset({0, 1, 2, 3, 4}), T2: frozenset({0})},  # T2: not subscribed
        "b": {T1: frozenset({5, 6, 9})},  # 9: not a partition (7 of them)
    }
    target = uniform(members, {T1: 7}, previous)
    assert target["a"][T1] == frozenset({0, 1, 2})  # its share plus the one extra
    assert target["b"][T1] == frozenset({5, 6})
    assert target["c"][T1] == frozenset({3, 4})
    assert all(set(t) == {T1} for t in target.values())


def test_uniform_with_different_subscriptions_keeps_previous_owners_while_even() -> None:
    members = {"a": frozenset({T1}), "b": frozenset({T1, T2})}
    previous = {"b": {T1: frozenset({0, 1}), T2: frozenset({0, 1})}}
    target = uniform(members, {T1: 2, T2: 2}, previous)
    assert target["b"][T2] == frozenset({0, 1})  # only b may have T2: kept
    assert target["a"][T1] == frozenset({0, 1})  # a takes T1 so the two are even
