"""The group coordinator as a pure state machine: a fake clock, no sockets."""

from __future__ import annotations

from typing import NoReturn

import pytest
from kio.schema.errors import ErrorCode

from harness.raw_client import make, make_request
from minibroker.config import BrokerConfig
from minibroker.handlers import list_groups, offset_commit, offset_fetch
from minibroker.handlers.registry import RequestContext
from minibroker.protocol import messages
from minibroker.protocol.consumer_protocol import parse_subscription
from minibroker.state import group_rules as rules
from minibroker.state.clock import FakeClock
from minibroker.state.cluster import ClusterState, Node
from minibroker.state.group_rules import GroupState, IllegalTransition
from minibroker.state.groups import (
    Group,
    GroupCoordinator,
    JoinOutcome,
    Slot,
    java_string_hash,
    partition_for,
)

SESSION_MS = 10_000
REBALANCE_MS = 30_000


class Harness:
    def __init__(self, **config: int) -> None:
        self.now = 0.0
        self.coordinator = GroupCoordinator(BrokerConfig(**config))  # type: ignore[arg-type]

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.coordinator.tick(self.now)

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        version: int = 9,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        client_id: str = "client",
    ) -> Slot[JoinOutcome]:
        return self.coordinator.join(
            self.now,
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            client_id=client_id,
            client_host="127.0.0.1",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            protocol_type="consumer",
            protocols=protocols or [("range", b"meta-" + member_id.encode())],
            require_known_member_id=version >= 4,
            version=version,
        )

    def new_member(self, **kwargs: object) -> str:
        """Two-step v4+ join: MEMBER_ID_REQUIRED, then the real join (not awaited)."""
        first = self.join(**kwargs)  # type: ignore[arg-type]
        assert first.result is not None
        assert first.result.error == rules.MEMBER_ID_REQUIRED
        return first.result.member_id

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        group: str = "g",
    ) -> Slot:  # type: ignore[type-arg]
        return self.coordinator.sync(
            self.now,
            group_id=group,
            generation=generation,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=list((assignments or {}).items()),
        )

    def heartbeat(self, member_id: str, generation: int, group: str = "g") -> int:
        return self.coordinator.heartbeat(
            self.now,
            group_id=group,
            generation=generation,
            member_id=member_id,
            group_instance_id=None,
        )

    def state(self, group: str = "g") -> GroupState:
        return self.coordinator.groups[group].state


def stable_group(h: Harness, count: int) -> list[str]:
    """Bring `count` members through join and sync, one by one."""
    members: list[str] = []
    for _ in range(count):
        new_id = h.new_member()
        slots = {new_id: h.join(new_id)}
        for existing in members:
            slots[existing] = h.join(existing)
        members.append(new_id)
        outcomes = {m: s.result for m, s in slots.items()}
        assert all(o is not None and o.error == rules.NONE for o in outcomes.values())
        generation = next(iter(outcomes.values())).generation  # type: ignore[union-attr]
        leader = next(iter(outcomes.values())).leader  # type: ignore[union-attr]
        followers = [h.sync(m, generation) for m in members if m != leader]
        h.sync(leader, generation, {m: f"assign-{m}".encode() for m in members})
        assert all(f.result is not None and f.result.error == rules.NONE for f in followers)
    assert h.state() is GroupState.STABLE
    return members


def test_first_join_asks_for_a_member_id_then_completes_at_once() -> None:
    h = Harness()
    member_id = h.new_member(client_id="consumer-1")
    assert member_id.startswith("consumer-1-")
    slot = h.join(member_id)
    assert slot.result is not None
    outcome = slot.result
    assert outcome.error == rules.NONE
    assert outcome.generation == 1
    assert outcome.leader == member_id
    assert outcome.protocol_name == "range"
    assert [m[0] for m in outcome.members] == [member_id]
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_followers_wait_for_the_leaders_assignment() -> None:
    h = Harness()
    a = h.new_member()
    first = h.join(a)
    b = h.new_member()
    joined_b = h.join(b)
    assert joined_b.result is None, "b waits until a rejoins"
    assert h.heartbeat(a, 1) == rules.REBALANCE_IN_PROGRESS
    rejoined_a = h.join(a)
    assert first.result is not None and rejoined_a.result is not None
    assert joined_b.result is not None
    assert rejoined_a.result.generation == joined_b.result.generation == 2
    assert rejoined_a.result.leader == a, "the leader is kept across rebalances"
    assert joined_b.result.members == [], "only the leader gets the member list"
    follower = h.sync(b, 2)
    assert follower.result is None
    leader = h.sync(a, 2, {a: b"A", b: b"B"})
    assert leader.result is not None and leader.result.assignment == b"A"
    assert follower.result is not None and follower.result.assignment == b"B"
    assert h.state() is GroupState.STABLE


def test_rebalance_timeout_expels_a_member_that_never_rejoins() -> None:
    h = Harness()
    a, b = stable_group(h, 2)
    c = h.new_member()
    joined_c = h.join(c)
    rejoined_a = h.join(a)
    assert joined_c.result is None and rejoined_a.result is None
    generation = h.coordinator.groups["g"].generation
    # b keeps heartbeating (so its session stays alive) but never rejoins.
    for _ in range(int(REBALANCE_MS / 1000 / 5) - 1):
        h.advance(5)
        assert h.heartbeat(b, generation) == rules.REBALANCE_IN_PROGRESS
    assert joined_c.result is None, "still inside the rebalance timeout"
    h.advance(6)
    assert joined_c.result is not None and rejoined_a.result is not None
    assert joined_c.result.error == rules.NONE
    members = h.coordinator.groups["g"].members
    assert set(members) == {a, c}, "b never rejoined and was removed"
    assert h.heartbeat(b, rejoined_a.result.generation) == rules.UNKNOWN_MEMBER_ID


def test_missed_session_timeout_removes_the_member_and_rebalances() -> None:
    h = Harness()
    a, b = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    for _ in range(4):
        h.advance(SESSION_MS / 1000 / 3)
        if h.coordinator.groups["g"].state is GroupState.STABLE:
            assert h.heartbeat(a, generation) == rules.NONE
    assert b not in h.coordinator.groups["g"].members
    assert h.heartbeat(a, generation) == rules.REBALANCE_IN_PROGRESS
    again = h.join(a)
    assert again.result is not None and again.result.generation == generation + 1


def test_stale_generation_and_unknown_member_are_refused() -> None:
    h = Harness()
    a, _ = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    assert h.heartbeat(a, generation - 1) == rules.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", generation) == rules.UNKNOWN_MEMBER_ID
    stale = h.sync(a, generation - 1)
    assert stale.result is not None and stale.result.error == rules.ILLEGAL_GENERATION
    h.new_member()  # pending ids do not change the group yet
    assert h.state() is GroupState.STABLE
    joined = h.join("made-up-id")
    assert joined.result is not None and joined.result.error == rules.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("protocol_name", ["range", ""])
def test_sync_before_the_protocol_is_chosen_again_is_inconsistent(protocol_name: str) -> None:
    """A group that emptied has no protocol until its next join phase ends (Kafka's
    protocolName is None then): a SyncGroup v5+ that names one in that phase is
    INCONSISTENT_GROUP_PROTOCOL, whatever name it gives, the empty one included."""
    h = Harness()
    (a,) = stable_group(h, 1)
    h.coordinator.leave(h.now, group_id="g", members=[(a, None)])
    assert h.state() is GroupState.EMPTY
    b = h.new_member()
    h.new_member()  # an outstanding member id holds the join phase open
    joined = h.join(b)
    assert joined.result is None and h.state() is GroupState.PREPARING_REBALANCE
    synced = h.coordinator.sync(
        h.now,
        group_id="g",
        generation=h.coordinator.groups["g"].generation,
        member_id=b,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name=protocol_name,
        assignments=[],
    )
    assert synced.result is not None
    assert synced.result.error == rules.INCONSISTENT_GROUP_PROTOCOL


def test_sync_during_preparing_rebalance_is_told_to_rejoin() -> None:
    h = Harness()
    _, b = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    c = h.new_member()
    h.join(c)
    assert h.state() is GroupState.PREPARING_REBALANCE
    slot = h.sync(b, generation)
    assert slot.result is not None and slot.result.error == rules.REBALANCE_IN_PROGRESS


def test_static_member_restart_keeps_its_assignment_without_rebalance() -> None:
    h = Harness()
    leader = h.new_member()
    h.join(leader)
    static_first = h.join(instance="instance-1")
    assert static_first.result is None
    h.join(leader)
    assert static_first.result is not None
    static_id = static_first.result.member_id
    generation = static_first.result.generation
    h.sync(static_id, generation)
    h.sync(leader, generation, {leader: b"L", static_id: b"S"})
    assert h.state() is GroupState.STABLE

    restarted = h.join(instance="instance-1")
    assert restarted.result is not None and restarted.result.error == rules.NONE
    new_id = restarted.result.member_id
    assert new_id != static_id
    assert restarted.result.generation == generation, "no rebalance"
    assert h.state() is GroupState.STABLE
    synced = h.sync(new_id, generation)
    assert synced.result is not None and synced.result.assignment == b"S"
    fenced = h.coordinator.heartbeat(
        h.now,
        group_id="g",
        generation=generation,
        member_id=static_id,
        group_instance_id="instance-1",
    )
    assert fenced == rules.FENCED_INSTANCE_ID


@pytest.mark.parametrize(("version", "skips"), [(5, False), (8, False), (9, True)])
def test_static_leader_restart_in_a_stable_group_keeps_the_generation(
    version: int, skips: bool
) -> None:
    """KIP-345/KIP-814: a restarted static leader causes no rebalance. v9+ is told it
    leads but must skip the assignment; before v9 the old member id is named leader
    (with no member list), so the new instance acts as a follower."""
    h = Harness()
    old = h.join(instance="i1")
    assert old.result is not None and old.result.error == rules.NONE
    old_id, generation = old.result.member_id, old.result.generation
    h.sync(old_id, generation, {old_id: b"L"})
    assert h.state() is GroupState.STABLE

    restarted = h.join(instance="i1", version=version)
    assert restarted.result is not None and restarted.result.error == rules.NONE
    new_id = restarted.result.member_id
    assert restarted.result.generation == generation
    assert restarted.result.skip_assignment is skips
    if skips:
        assert restarted.result.leader == new_id
        assert [m[0] for m in restarted.result.members] == [new_id]
    else:
        assert (restarted.result.leader, restarted.result.members) == (old_id, [])
    assert h.state() is GroupState.STABLE
    assert h.coordinator.groups["g"].leader_id == new_id, "the group's leader is the new id"
    synced = h.sync(new_id, generation)
    assert synced.result is not None and synced.result.assignment == b"L"
    assert h.heartbeat(new_id, generation) == rules.NONE


def test_heartbeat_checks_the_generation_before_the_state_and_keeps_no_one_alive() -> None:
    h = Harness()
    a, b = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    h.coordinator.leave(h.now, group_id="g", members=[(b, None)])
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, generation + 1) == rules.ILLEGAL_GENERATION
    assert h.heartbeat(a, generation) == rules.REBALANCE_IN_PROGRESS
    rejoined = h.join(a)
    assert rejoined.result is not None
    h.sync(a, generation + 1, {a: b"A"})
    # Heartbeats from another generation do not hold the session open.
    for _ in range(2):
        h.advance(SESSION_MS / 1000 / 3)
        assert h.heartbeat(a, generation) == rules.ILLEGAL_GENERATION
    assert a in h.coordinator.groups["g"].members
    h.advance(SESSION_MS / 1000 / 3)  # a full session since the sync
    assert h.coordinator.groups["g"].members == {}


def test_membership_requests_for_the_empty_group_id_are_invalid() -> None:
    h = Harness()
    assert h.heartbeat("m", 1, group="") == rules.INVALID_GROUP_ID
    synced = h.sync("m", 1, group="")
    assert synced.result is not None and synced.result.error == rules.INVALID_GROUP_ID
    assert h.coordinator.leave(h.now, group_id="", members=[("m", None)]) == (
        rules.INVALID_GROUP_ID,
        [],
    )
    assert h.coordinator.delete_offsets("", [("t", 0)]) == (rules.INVALID_GROUP_ID, {})
    assert h.coordinator.groups == {}


def test_the_empty_group_id_commits_and_fetches_offsets() -> None:
    h = Harness()
    stored = h.coordinator.commit(
        h.now,
        group_id="",
        generation=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, 42, -1, None)],
    )
    assert stored == {("t", 0): rules.NONE}
    fetched = h.coordinator.committed("", [("t", 0)])[("t", 0)]
    assert fetched is not None and fetched.offset == 42
    assert h.state("") is GroupState.EMPTY


def test_leaving_an_unknown_group_is_a_per_member_error() -> None:
    h = Harness()
    top, results = h.coordinator.leave(h.now, group_id="nowhere", members=[("m", None), ("", "i1")])
    assert top == rules.NONE
    assert results == [
        ("m", None, rules.UNKNOWN_MEMBER_ID),
        ("", "i1", rules.UNKNOWN_MEMBER_ID),
    ]
    assert "nowhere" not in h.coordinator.groups


def test_commits_to_an_unknown_group_by_generation() -> None:
    """Generation >= 0: from an older generation (ILLEGAL_GENERATION), no group made.
    Generation -1: a simple commit that creates the group, member id or not."""
    h = Harness()

    def commit(group: str, generation: int, member_id: str) -> dict[tuple[str, int], int]:
        return h.coordinator.commit(
            h.now,
            group_id=group,
            generation=generation,
            member_id=member_id,
            group_instance_id=None,
            offsets=[("t", 0, 5, -1, None)],
        )

    assert commit("nowhere", 1, "m") == {("t", 0): rules.ILLEGAL_GENERATION}
    assert "nowhere" not in h.coordinator.groups
    assert commit("simple", -1, "m") == {("t", 0): rules.NONE}
    assert h.state("simple") is GroupState.EMPTY
    assert commit("simple", -1, "someone-else") == {("t", 0): rules.NONE}
    assert commit("simple", 0, "m") == {("t", 0): rules.UNKNOWN_MEMBER_ID}


def test_leave_group_in_a_batch_and_the_last_one_out_empties_the_group() -> None:
    h = Harness()
    a, b = stable_group(h, 2)
    top, results = h.coordinator.leave(h.now, group_id="g", members=[(a, None), ("ghost", None)])
    assert top == rules.NONE
    assert [code for _, _, code in results] == [rules.NONE, rules.UNKNOWN_MEMBER_ID]
    assert h.state() is GroupState.PREPARING_REBALANCE
    h.join(b)
    assert h.state() is GroupState.COMPLETING_REBALANCE
    h.coordinator.leave(h.now, group_id="g", members=[(b, None)])
    assert h.state() is GroupState.EMPTY
    assert h.coordinator.groups["g"].members == {}


def test_offsets_from_members_are_checked_against_the_generation() -> None:
    h = Harness()
    a, _ = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    ok = h.coordinator.commit(
        h.now,
        group_id="g",
        generation=generation,
        member_id=a,
        group_instance_id=None,
        offsets=[("t", 0, 42, -1, "meta")],
    )
    assert ok == {("t", 0): rules.NONE}
    stale = h.coordinator.commit(
        h.now,
        group_id="g",
        generation=generation - 1,
        member_id=a,
        group_instance_id=None,
        offsets=[("t", 0, 99, -1, None)],
    )
    assert stale == {("t", 0): rules.ILLEGAL_GENERATION}
    outsider = h.coordinator.commit(
        h.now,
        group_id="g",
        generation=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, 99, -1, None)],
    )
    assert outsider == {("t", 0): rules.UNKNOWN_MEMBER_ID}
    committed = h.coordinator.committed("g", [("t", 0), ("t", 1)])
    stored = committed[("t", 0)]
    assert stored is not None and stored.offset == 42 and stored.metadata == "meta"
    assert committed[("t", 1)] is None


def test_assign_mode_commits_create_an_empty_group() -> None:
    h = Harness()
    result = h.coordinator.commit(
        h.now,
        group_id="solo",
        generation=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, 7, -1, None), ("t", 1, 1, -1, "x" * 5000)],
    )
    assert result == {("t", 0): rules.NONE, ("t", 1): rules.OFFSET_METADATA_TOO_LARGE}
    assert h.state("solo") is GroupState.EMPTY
    assert h.coordinator.delete_group("solo") == rules.NONE
    assert h.coordinator.delete_group("solo") == rules.GROUP_ID_NOT_FOUND


def test_a_group_with_members_cannot_be_deleted() -> None:
    h = Harness()
    stable_group(h, 1)
    assert h.coordinator.delete_group("g") == rules.NON_EMPTY_GROUP


def test_members_must_share_the_protocol_type_and_a_protocol() -> None:
    h = Harness()
    stable_group(h, 1)
    other = h.join(protocols=[("roundrobin", b"")], version=3)
    assert other.result is not None
    assert other.result.error == rules.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_chosen_by_votes_among_protocols_everyone_supports() -> None:
    h = Harness()
    a = h.new_member()
    first = h.join(a, protocols=[("sticky", b""), ("range", b"")])
    assert first.result is not None and first.result.protocol_name == "sticky"
    b = h.new_member()
    joined_b = h.join(b, protocols=[("range", b""), ("roundrobin", b"")])
    h.join(a, protocols=[("sticky", b""), ("range", b"")])
    assert joined_b.result is not None and joined_b.result.protocol_name == "range"


def test_initial_rebalance_delay_gathers_early_joiners_into_one_generation() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    a = h.new_member()
    joined_a = h.join(a)
    h.advance(1)
    b = h.new_member()
    joined_b = h.join(b)
    assert joined_a.result is None and joined_b.result is None
    h.advance(3.5)
    assert joined_a.result is not None and joined_b.result is not None
    assert joined_a.result.generation == joined_b.result.generation == 1


def test_pending_member_ids_expire_after_the_session_timeout() -> None:
    h = Harness()
    (a,) = stable_group(h, 1)
    h.new_member()
    assert h.coordinator.groups["g"].pending_members
    h.advance(SESSION_MS / 1000 + 1)
    assert not h.coordinator.groups["g"].pending_members
    del a


def test_session_timeout_outside_the_broker_limits_is_refused() -> None:
    h = Harness()
    slot = h.join(session_ms=10)
    assert slot.result is not None and slot.result.error == rules.INVALID_SESSION_TIMEOUT


def test_transitions_outside_the_rules_raise() -> None:
    group = Group("g")
    with pytest.raises(IllegalTransition):
        group.transition(GroupState.STABLE)
    group.transition(GroupState.PREPARING_REBALANCE)
    group.transition(GroupState.COMPLETING_REBALANCE)
    group.transition(GroupState.STABLE)
    with pytest.raises(IllegalTransition):
        group.transition(GroupState.COMPLETING_REBALANCE)
    group.transition(GroupState.EMPTY)  # handed over to the consumer protocol (upgrade)
    group.transition(GroupState.DEAD)
    with pytest.raises(IllegalTransition):
        group.transition(GroupState.EMPTY)


def test_next_deadline_is_the_earliest_session_expiry() -> None:
    h = Harness()
    assert h.coordinator.next_deadline() is None
    stable_group(h, 1)
    assert h.coordinator.next_deadline() == pytest.approx(h.now + SESSION_MS / 1000)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),
        ("\u20ac", 8364),  # one UTF-16 unit above 0xFF
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # a surrogate pair: two units
    ],
)
def test_java_string_hash_matches_java(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_coordinator_partition_uses_kafkas_abs() -> None:
    # Integer.MIN_VALUE maps to 0 in Kafka's Utils.abs rather than staying negative.
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_subscription_metadata_is_parsed_for_topic_names() -> None:
    metadata = (
        b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc" + b"\xff\xff\xff\xff"
    )
    assert parse_subscription(metadata) == ["a", "bc"]
    assert parse_subscription(b"\x00") is None
    assert parse_subscription(b"\x00\x01\x00\x00\x00\x00") == []
    assert parse_subscription(b"\x00\x01\xff\xff\xff\xff") == [], "a null topic array"


def test_a_negative_topic_name_length_is_not_read_as_a_long_name() -> None:
    """A topic name's length is a signed int16: -1 is no 65535-byte name taking in the
    bytes after it. (Kafka's parser refuses a negative length, which would be None.)"""
    metadata = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\xff\xff" + b"t"
    assert parse_subscription(metadata) in ([""], None)


# --- timers at scale and offset expiry ---


class NoWalkGroups(dict[str, Group]):
    """The coordinator's groups, failing the test if anything walks all of them."""

    def __iter__(self) -> NoReturn:
        raise AssertionError("walked every group")

    def keys(self) -> NoReturn:  # type: ignore[override]
        raise AssertionError("walked every group")

    def values(self) -> NoReturn:  # type: ignore[override]
        raise AssertionError("walked every group")

    def items(self) -> NoReturn:  # type: ignore[override]
        raise AssertionError("walked every group")


def anonymous_commit(h: Harness, group: str, offsets: dict[int, int]) -> dict[tuple[str, int], int]:
    """An assign-mode consumer's commit: generation -1, no member id."""
    return h.coordinator.commit(
        h.now,
        group_id=group,
        generation=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", partition, offset, -1, None) for partition, offset in offsets.items()],
    )


def committed_offsets(h: Harness, group: str, partitions: list[int]) -> dict[int, int | None]:
    stored = h.coordinator.committed(group, [("t", p) for p in partitions])
    return {p: (found.offset if found else None) for (_, p), found in stored.items()}


def spy_on_due_groups(h: Harness, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the groups `tick` runs the group rules for, in order."""
    handled: list[str] = []
    run_due = h.coordinator._run_due

    def spy(now: float, group: Group) -> None:
        handled.append(group.group_id)
        run_due(now, group)

    monkeypatch.setattr(h.coordinator, "_run_due", spy)
    return handled


def test_twenty_thousand_anonymous_groups_add_no_work_to_the_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: groups made by anonymous OffsetCommits took a producer from ~3,000 to
    ~40 msg/s, because next_deadline() and tick() walked every group on every append."""
    h = Harness()
    h.coordinator.groups = NoWalkGroups()
    for index in range(20_000):
        assert anonymous_commit(h, f"solo-{index}", {0: index}) == {("t", 0): rules.NONE}
    a, b = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    handled = spy_on_due_groups(h, monkeypatch)
    for _ in range(10):
        h.advance(3)
        assert h.heartbeat(a, generation) == rules.NONE
        assert h.heartbeat(b, generation) == rules.NONE
        assert h.coordinator.next_deadline() == pytest.approx(h.now + SESSION_MS / 1000)
    assert handled == [], "nothing was due"
    # A heartbeat moves a deadline later without a new heap entry: one per timer.
    assert len(h.coordinator.deadlines) <= 20_000 + 3
    for _ in range(4):
        h.advance(3)
        h.heartbeat(a, generation)  # b went quiet
    assert handled == ["g"], "only the group with a due deadline was looked at"
    assert set(h.coordinator.groups["g"].members) == {a}
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_a_heartbeat_moves_the_session_deadline_later() -> None:
    h = Harness()
    (a,) = stable_group(h, 1)
    generation = h.coordinator.groups["g"].generation
    h.advance(SESSION_MS / 1000 - 1)
    assert h.heartbeat(a, generation) == rules.NONE
    assert h.coordinator.next_deadline() == pytest.approx(h.now + SESSION_MS / 1000)
    h.advance(2)  # past the first deadline: nothing happens
    assert h.state() is GroupState.STABLE
    h.advance(SESSION_MS / 1000 - 2)  # exactly the new deadline
    assert h.state() is GroupState.EMPTY
    assert h.coordinator.groups["g"].members == {}


def test_heartbeats_between_timer_runs_add_no_heap_entries() -> None:
    """A heartbeat moves its member's deadline later in place: however many arrive
    before the timer next runs, the heap holds one entry per timer."""
    h = Harness()
    a, b = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    entries = len(h.coordinator.deadlines)
    for _ in range(100):
        h.now += 0.05
        assert h.heartbeat(a, generation) == rules.NONE
        assert h.heartbeat(b, generation) == rules.NONE
    assert len(h.coordinator.deadlines) == entries


def test_anonymous_groups_offsets_expire_after_the_retention_and_the_group_with_them() -> None:
    h = Harness(offsets_retention_minutes=1)
    anonymous_commit(h, "solo", {0: 7})
    assert h.coordinator.next_deadline() == pytest.approx(60)
    h.advance(59.5)
    assert committed_offsets(h, "solo", [0]) == {0: 7}
    h.advance(0.5)
    assert "solo" not in h.coordinator.groups
    assert committed_offsets(h, "solo", [0]) == {0: None}
    assert h.coordinator.committed("solo", None) == {}
    assert h.coordinator.next_deadline() is None
    assert h.coordinator.delete_group("solo") == rules.GROUP_ID_NOT_FOUND


def test_a_commit_within_the_retention_extends_it_for_that_partition() -> None:
    h = Harness(offsets_retention_minutes=1)
    anonymous_commit(h, "solo", {0: 1, 1: 1})
    h.advance(40)
    anonymous_commit(h, "solo", {0: 2})
    h.advance(20)  # partition 1 was last committed 60 s ago; partition 0, 20 s ago
    assert committed_offsets(h, "solo", [0, 1]) == {0: 2, 1: None}
    assert h.state("solo") is GroupState.EMPTY
    assert h.coordinator.next_deadline() == pytest.approx(100)
    h.advance(39.5)
    assert committed_offsets(h, "solo", [0]) == {0: 2}
    h.advance(0.5)
    assert "solo" not in h.coordinator.groups


def test_a_group_with_members_keeps_its_offsets_past_the_retention() -> None:
    h = Harness(offsets_retention_minutes=1)
    a, b = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    h.coordinator.commit(
        h.now,
        group_id="g",
        generation=generation,
        member_id=a,
        group_instance_id=None,
        offsets=[("t", 0, 5, -1, None)],
    )
    for _ in range(60):  # three minutes of heartbeats, no more commits
        h.advance(3)
        assert h.heartbeat(a, generation) == rules.NONE
        assert h.heartbeat(b, generation) == rules.NONE
    assert h.state() is GroupState.STABLE
    assert committed_offsets(h, "g", [0]) == {0: 5}


def test_a_group_that_had_members_expires_a_retention_after_it_became_empty() -> None:
    h = Harness(offsets_retention_minutes=1)
    a, b = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    h.coordinator.commit(
        h.now,
        group_id="g",
        generation=generation,
        member_id=a,
        group_instance_id=None,
        offsets=[("t", 0, 5, -1, None)],
    )
    h.advance(30)
    h.heartbeat(a, generation)
    h.heartbeat(b, generation)
    h.coordinator.leave(h.now, group_id="g", members=[(a, None), (b, None)])
    assert h.state() is GroupState.EMPTY
    emptied = h.now
    h.advance(30)
    # Kafka counts from when the group became Empty; a commit meanwhile does not extend it.
    assert anonymous_commit(h, "g", {1: 9}) == {("t", 1): rules.NONE}
    h.advance(emptied + 60 - h.now - 0.5)
    assert committed_offsets(h, "g", [0, 1]) == {0: 5, 1: 9}
    h.advance(0.5)
    assert "g" not in h.coordinator.groups
    assert committed_offsets(h, "g", [0, 1]) == {0: None, 1: None}


def test_a_group_that_gets_members_again_stops_expiring() -> None:
    h = Harness(offsets_retention_minutes=1)
    anonymous_commit(h, "g", {0: 3})
    h.advance(50)
    (a,) = stable_group(h, 1)
    generation = h.coordinator.groups["g"].generation
    for _ in range(30):
        h.advance(3)
        assert h.heartbeat(a, generation) == rules.NONE
    assert committed_offsets(h, "g", [0]) == {0: 3}


@pytest.mark.parametrize("created_at", [0.0, 1000.0])
def test_a_group_without_offsets_goes_a_retention_after_it_was_created(created_at: float) -> None:
    """Counted from the group's creation, not from the start of the (monotonic) clock."""
    h = Harness(offsets_retention_minutes=1)
    h.now = created_at
    h.new_member()  # MEMBER_ID_REQUIRED creates the group, Empty, with a pending id
    assert h.state() is GroupState.EMPTY
    h.advance(SESSION_MS / 1000 + 1)
    assert "g" in h.coordinator.groups, "still inside the retention"
    assert h.state() is GroupState.EMPTY
    h.advance(created_at + 60 - h.now)
    assert "g" not in h.coordinator.groups


def test_offset_delete_of_the_last_offset_lets_an_old_group_go() -> None:
    h = Harness(offsets_retention_minutes=1)
    anonymous_commit(h, "solo", {0: 1})
    h.advance(50)
    anonymous_commit(h, "solo", {0: 2})
    h.advance(20)
    assert h.coordinator.delete_offsets("solo", [("t", 0)]) == (
        rules.NONE,
        {("t", 0): rules.NONE},
    )
    assert h.coordinator.next_deadline() == pytest.approx(60), "created at 0, now offset-less"
    h.advance(0)
    assert "solo" not in h.coordinator.groups


def test_deleted_groups_do_not_pile_up_in_the_deadline_heap() -> None:
    h = Harness()
    for index in range(5_000):
        anonymous_commit(h, f"solo-{index}", {0: 1})
        assert h.coordinator.delete_group(f"solo-{index}") == rules.NONE
    assert len(h.coordinator.deadlines) <= 2 * 1024 + 2
    assert h.coordinator.next_deadline() is None


def test_expired_group_answers_offset_fetch_with_minus_one_and_is_not_listed() -> None:
    clock = FakeClock()
    cluster = ClusterState(BrokerConfig(offsets_retention_minutes=1), clock)
    cluster.add_node(Node(0, "127.0.0.1", 9092))
    cluster.topics.create("t", 1)

    def ctx(api_key: int, version: int) -> RequestContext:
        return RequestContext(cluster, 0, messages.RequestHeader(api_key, version, 1, "test"))

    commit = make_request(
        8,
        8,
        group_id="solo",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            make(
                8,
                8,
                "OffsetCommitRequestTopic",
                name="t",
                partitions=(
                    make(
                        8,
                        8,
                        "OffsetCommitRequestPartition",
                        partition_index=0,
                        committed_offset=42,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )
    fetch = make_request(
        9,
        8,
        groups=(
            make(
                9,
                8,
                "OffsetFetchRequestGroup",
                group_id="solo",
                topics=(make(9, 8, "OffsetFetchRequestTopics", name="t", partition_indexes=(0,)),),
            ),
        ),
        require_stable=False,
    )

    def fetched() -> int:
        response = offset_fetch.handle(ctx(9, 8), fetch)
        (group,) = response.groups
        assert group.error_code == ErrorCode.none
        return int(group.topics[0].partitions[0].committed_offset)

    def listed() -> list[str]:
        response = list_groups.handle(ctx(16, 4), make_request(16, 4, states_filter=()))
        return [g.group_id for g in response.groups]

    response = offset_commit.handle(ctx(8, 8), commit)
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    assert fetched() == 42
    assert listed() == ["solo"]
    clock.advance(60)
    cluster.groups.tick(clock.monotonic())
    assert fetched() == -1
    assert listed() == []
