"""Group coordinator timing as the server drives it, and static membership edge cases.

The broker's housekeeping calls `tick(now)` only once `next_deadline()` says something is
due (minibroker/housekeeping.py), so `ServerLoop.advance` moves time the same way: a deadline
the coordinator forgets to name is an event that never happens, and one named late or
early is an event that happens at the wrong time.
"""

from __future__ import annotations

import pytest

from minibroker.state import group_rules as rules
from minibroker.state.group_rules import GroupState, JoinOutcome, Slot, SyncOutcome
from tests.groups.test_classic_coordinator import REBALANCE_MS, SESSION_MS, Harness, stable_group

SESSION = SESSION_MS / 1000
REBALANCE = REBALANCE_MS / 1000


class ServerLoop(Harness):
    def advance(self, seconds: float) -> None:
        target = self.now + seconds
        for _ in range(10_000):
            deadline = self.coordinator.next_deadline()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            self.coordinator.tick(self.now)
        else:
            raise AssertionError("the coordinator's timers never settle")
        self.now = target

    def advance_to(self, when: float) -> None:
        self.advance(when - self.now)

    def keep_alive(self, members: list[str], generation: int, until: float) -> None:
        """Heartbeat every 3 s (a third of the session) until `until`."""
        while self.now < until:
            self.advance(min(3.0, until - self.now))
            for member_id in members:
                self.heartbeat(member_id, generation)

    def members(self, group: str = "g") -> set[str]:
        return set(self.coordinator.groups[group].members)

    def leave(self, member_id: str, instance: str | None = None) -> list[int]:
        _, results = self.coordinator.leave(self.now, group_id="g", members=[(member_id, instance)])
        return [code for _, _, code in results]


def outcome(slot: Slot[JoinOutcome]) -> JoinOutcome:
    assert slot.result is not None, "no answer yet"
    return slot.result


def synced(slot: Slot[SyncOutcome]) -> SyncOutcome:
    assert slot.result is not None, "no answer yet"
    return slot.result


# --- join phase timing ---


def test_the_join_phase_ends_exactly_at_the_rebalance_timeout() -> None:
    h = ServerLoop()
    a, b = stable_group(h, 2)
    start = h.now
    rejoined = h.join(a)
    assert h.state() is GroupState.PREPARING_REBALANCE
    generation = h.coordinator.groups["g"].generation
    h.keep_alive([b], generation, start + REBALANCE - 0.001)
    assert rejoined.result is None, "b still has time to rejoin"
    h.advance_to(start + REBALANCE)
    assert outcome(rejoined).error == rules.NONE
    assert h.members() == {a}, "b did not rejoin in time"
    del b


def test_the_initial_delay_holds_a_new_groups_first_join_for_exactly_the_delay() -> None:
    h = ServerLoop(group_initial_rebalance_delay_ms=3000)
    joined = h.join(version=3)
    assert joined.result is None
    assert h.coordinator.next_deadline() == pytest.approx(3.0, abs=1e-9)
    h.advance_to(2.999)
    assert joined.result is None
    h.advance_to(3.0)
    assert outcome(joined).generation == 1


def test_an_initial_delay_of_one_millisecond_still_delays() -> None:
    h = ServerLoop(group_initial_rebalance_delay_ms=1)
    joined = h.join(version=3)
    assert joined.result is None
    h.advance(0.001)
    assert outcome(joined).error == rules.NONE


def test_a_join_during_the_initial_delay_restarts_it() -> None:
    """Each new member pushes the delay to `delay` after its join (within the rebalance
    timeout), so early joiners end up in one generation."""
    h = ServerLoop(group_initial_rebalance_delay_ms=3000)
    first = h.join(version=3)
    h.advance_to(2.0)
    second = h.join(version=3)
    h.advance_to(4.999)
    assert first.result is None and second.result is None, "the delay now ends at 5"
    h.advance_to(5.0)
    assert outcome(first).generation == outcome(second).generation == 1


def test_the_initial_delay_applies_only_to_a_group_that_was_empty() -> None:
    h = ServerLoop(group_initial_rebalance_delay_ms=3000)
    first = h.join(version=3)
    h.advance(3)
    a = outcome(first).member_id
    h.sync(a, 1, {a: b"A"})
    assert h.state() is GroupState.STABLE
    newcomer = h.join(version=3)
    rejoined = h.join(a, version=3)
    assert outcome(newcomer).generation == outcome(rejoined).generation == 2, "no delay"


@pytest.mark.parametrize(("left_at", "ends"), [(2.999, False), (3.0, True)])
def test_a_request_at_the_end_of_the_initial_delay_ends_the_join_phase_at_once(
    left_at: float, ends: bool
) -> None:
    """The join phase is held by an outstanding member id; when that id leaves at the
    very end of the delay, before the server's timer has run, the phase ends then."""
    h = ServerLoop(group_initial_rebalance_delay_ms=3000)
    joined = h.join(version=3)
    pending = h.new_member()
    h.advance_to(2.999)
    h.now = left_at  # the leave arrives before the timer runs
    assert h.leave(pending) == [rules.NONE]
    if ends:
        assert outcome(joined).generation == 1
    else:
        assert joined.result is None, "the delay is not over"
        h.advance_to(3.0)
        assert outcome(joined).generation == 1


def test_a_member_id_that_expires_during_the_initial_delay_does_not_end_it() -> None:
    """The timer runs for the group inside its initial delay (an unused member id
    expires at 1) and the delay still ends the join phase at its own time."""
    h = ServerLoop(group_initial_rebalance_delay_ms=3000)
    h.new_member(session_ms=1000)  # never comes back with its id
    h.advance_to(0.5)
    joined = h.join(version=3)  # the delay ends at 3.5
    h.advance_to(1.0)
    assert not h.coordinator.groups["g"].pending_members
    h.advance_to(3.499)
    assert joined.result is None
    h.advance_to(3.5)
    assert outcome(joined).generation == 1
    assert h.members() == {outcome(joined).member_id}


@pytest.mark.parametrize(("late_rebalance_ms", "forced_at"), [(5_000, 10.0), (20_000, 22.0)])
def test_a_join_during_the_initial_delay_can_only_lengthen_the_rebalance_timeout(
    late_rebalance_ms: int, forced_at: float
) -> None:
    """The join phase is held by an outstanding MEMBER_ID_REQUIRED id until the rebalance
    timeout forces it: 10 s from the first join, or the later joiner's own timeout if that
    ends later, never earlier (even after the first member lowered its own timeout)."""
    h = ServerLoop(group_initial_rebalance_delay_ms=3000)
    first = h.join(version=3, rebalance_ms=10_000)
    a = h.coordinator.groups["g"].members.copy().popitem()[0]
    h.advance_to(0.5)
    h.new_member(session_ms=120_000)  # never comes back with its id
    h.advance_to(1.0)
    again = h.join(a, version=3, rebalance_ms=5_000)
    replaced = outcome(first)
    assert (replaced.error, replaced.member_id) == (rules.UNKNOWN_MEMBER_ID, a)
    h.advance_to(2.0)
    late = h.join(version=3, rebalance_ms=late_rebalance_ms)
    h.advance_to(forced_at - 0.001)
    assert again.result is None and late.result is None
    h.advance_to(forced_at)
    assert outcome(again).generation == outcome(late).generation == 1
    assert not h.coordinator.groups["g"].pending_members


@pytest.mark.parametrize("late_at", [0.0, 5.0])
def test_without_an_initial_delay_a_later_join_does_not_extend_the_rebalance_timeout(
    late_at: float,
) -> None:
    h = ServerLoop()
    h.new_member(session_ms=120_000)  # outstanding: holds the join phase open
    first = h.join(version=3, rebalance_ms=10_000)
    if late_at:  # else both joins come before the timer runs
        h.advance_to(late_at)
    late = h.join(version=3, rebalance_ms=30_000)
    h.advance_to(9.999)
    assert first.result is None and late.result is None
    h.advance_to(10.0)
    assert outcome(first).generation == outcome(late).generation == 1


def test_the_last_member_leaving_ends_the_join_phase_at_once() -> None:
    h = ServerLoop()
    (a,) = stable_group(h, 1)
    pending = h.new_member()
    assert h.leave(a) == [rules.NONE]
    h.advance(0)
    assert h.state() is GroupState.EMPTY
    assert not h.coordinator.groups["g"].pending_members
    late = h.join(pending)
    assert outcome(late).error == rules.UNKNOWN_MEMBER_ID


# --- SyncGroup cut short by a rebalance ---


def test_a_waiting_sync_is_told_to_rejoin_when_a_rebalance_starts() -> None:
    h = ServerLoop()
    a = h.new_member()
    h.join(a)
    b = h.new_member()
    joined_b = h.join(b)
    h.join(a)
    generation = outcome(joined_b).generation
    waiting = h.sync(b, generation)
    assert waiting.result is None, "b waits for the leader's assignment"
    newcomer = h.join(version=3)
    assert synced(waiting).error == rules.REBALANCE_IN_PROGRESS
    rejoined_a = h.join(a)
    rejoined_b = h.join(b)
    for slot in (newcomer, rejoined_a, rejoined_b):
        assert outcome(slot).generation == generation + 1
    leader = h.sync(a, generation + 1, {a: b"A", b: b"B"})
    follower = h.sync(b, generation + 1)
    assert synced(leader).assignment == b"A" and synced(follower).assignment == b"B"


def test_a_member_whose_sync_was_cut_short_then_goes_silent_expires_on_time() -> None:
    """While b waits for SyncGroup its session does not run; the rebalance that answers
    that wait starts it again (as Kafka does), so a b that never rejoins goes one session
    later and does not hold the others until the rebalance timeout."""
    h = ServerLoop()
    a = h.new_member()
    h.join(a)
    b = h.new_member()
    joined_b = h.join(b)
    h.join(a)
    generation = outcome(joined_b).generation
    h.advance(1)
    waiting = h.sync(b, generation)
    h.advance(1)
    assert h.heartbeat(a, generation) == rules.NONE
    h.advance(1)
    newcomer = h.join(version=3)  # at 3: b's session now ends one session later
    assert synced(waiting).error == rules.REBALANCE_IN_PROGRESS
    rejoined_a = h.join(a)
    h.advance_to(3 + SESSION - 0.001)
    assert newcomer.result is None and rejoined_a.result is None
    h.advance_to(3 + SESSION)
    assert b not in h.members()
    assert outcome(rejoined_a).generation == generation + 1
    assert {m for m, _, _ in outcome(rejoined_a).members} == {a, outcome(newcomer).member_id}


def test_a_member_that_waited_on_a_slow_leader_past_its_session_can_still_rejoin() -> None:
    """b waits in SyncGroup longer than its session while the leader is slow; when a
    rebalance answers that wait, b has a whole session to rejoin, not an expired one."""
    h = ServerLoop()
    a = h.new_member()
    h.join(a)
    b = h.new_member()
    joined_b = h.join(b)
    h.join(a)
    generation = outcome(joined_b).generation
    waiting = h.sync(b, generation)
    h.keep_alive([a], generation, until=SESSION + 2)
    newcomer = h.join(version=3)
    assert synced(waiting).error == rules.REBALANCE_IN_PROGRESS
    h.advance(0)  # the server's timer runs before b's rejoin arrives
    assert b in h.members()
    rejoined_b = h.join(b)
    rejoined_a = h.join(a)
    for slot in (newcomer, rejoined_a, rejoined_b):
        assert outcome(slot).generation == generation + 1


# --- static members ---


def static_pair(h: Harness) -> tuple[str, str, int]:
    """A Stable group of a dynamic leader and a static member with instance id "i1"."""
    leader = h.new_member()
    h.join(leader)
    static = h.join(instance="i1")
    h.join(leader)
    static_id = outcome(static).member_id
    generation = outcome(static).generation
    h.sync(static_id, generation)
    h.sync(leader, generation, {leader: b"L", static_id: b"S"})
    assert h.state() is GroupState.STABLE
    return leader, static_id, generation


def test_a_replaced_static_member_waiting_to_rejoin_is_fenced_with_its_old_id() -> None:
    h = ServerLoop()
    leader, old_id, generation = static_pair(h)
    h.advance(1)
    h.join(version=3)  # a newcomer starts a rebalance at 1: it must end by 31
    waiting = h.join(old_id, instance="i1")
    assert waiting.result is None
    h.keep_alive([leader], generation, 10)  # the leader is alive but does not rejoin
    restarted = h.join(instance="i1")
    fenced = outcome(waiting)
    assert (fenced.error, fenced.member_id) == (rules.FENCED_INSTANCE_ID, old_id)
    assert restarted.result is None, "the rebalance goes on"
    h.keep_alive([leader], generation, 1 + REBALANCE - 0.001)
    assert restarted.result is None, "the leader has not rejoined"
    h.advance_to(1 + REBALANCE)
    new_id = outcome(restarted).member_id
    assert new_id != old_id
    assert outcome(restarted).generation == generation + 1
    assert leader not in h.members() and new_id in h.members()


def test_a_replaced_static_member_waiting_for_sync_is_fenced() -> None:
    h = ServerLoop()
    leader = h.new_member()
    h.join(leader)
    static = h.join(instance="i1")
    h.join(leader)
    old_id = outcome(static).member_id
    waiting = h.sync(old_id, outcome(static).generation)
    assert waiting.result is None
    h.join(instance="i1")
    assert synced(waiting).error == rules.FENCED_INSTANCE_ID


def test_a_static_restart_while_completing_the_rebalance_rejoins_at_once() -> None:
    h = ServerLoop()
    first = h.join(instance="i1")
    assert outcome(first).generation == 1
    assert h.state() is GroupState.COMPLETING_REBALANCE
    restarted = h.join(instance="i1")
    assert outcome(restarted).error == rules.NONE
    assert outcome(restarted).generation == 2
    assert outcome(restarted).leader == outcome(restarted).member_id
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_a_static_restart_with_new_metadata_keeps_the_generation() -> None:
    """Same protocol, other bytes (a Java consumer's subscription names its last
    generation): no rebalance, as on Kafka; the next rebalance hands the new bytes on."""
    h = ServerLoop()
    first = h.join(instance="i1")
    old_id = outcome(first).member_id
    h.sync(old_id, 1, {old_id: b"A"})
    restarted = h.join(instance="i1", protocols=[("range", b"other-subscription")])
    new_id = outcome(restarted).member_id
    assert (outcome(restarted).error, outcome(restarted).generation) == (rules.NONE, 1)
    assert h.state() is GroupState.STABLE
    rejoined = h.join(new_id, instance="i1", protocols=[("range", b"other-subscription")])
    h.advance(0)
    assert outcome(rejoined).generation == 2
    assert outcome(rejoined).members == [(new_id, "i1", b"other-subscription")]


def test_a_static_restart_that_changes_the_chosen_protocol_rebalances() -> None:
    h = ServerLoop()
    first = h.join(instance="i1")
    old_id = outcome(first).member_id
    h.sync(old_id, 1, {old_id: b"A"})
    restarted = h.join(instance="i1", protocols=[("sticky", b"s"), ("range", b"r")])
    assert (outcome(restarted).generation, outcome(restarted).protocol_name) == (2, "sticky")
    assert outcome(restarted).members == [(outcome(restarted).member_id, "i1", b"s")]


def test_a_restarted_static_member_that_goes_silent_expires_at_its_session_deadline() -> None:
    h = ServerLoop()
    first = h.join(instance="i1")
    old_id = outcome(first).member_id
    h.sync(old_id, 1, {old_id: b"A"})
    h.advance(4)
    restarted = h.join(instance="i1")
    assert outcome(restarted).generation == 1, "no rebalance"
    h.advance_to(4 + SESSION - 0.001)
    assert h.members() == {outcome(restarted).member_id}
    h.advance_to(4 + SESSION)
    assert h.state() is GroupState.EMPTY


def test_a_restarted_static_member_can_leave_and_restart_again_by_instance_id() -> None:
    h = ServerLoop()
    leader, old_id, generation = static_pair(h)
    second = h.join(instance="i1")
    third = h.join(instance="i1")
    assert outcome(third).generation == generation, "replaced again without a rebalance"
    assert h.members() == {leader, outcome(third).member_id}
    assert h.leave(old_id, "i1") == [rules.FENCED_INSTANCE_ID]
    assert h.leave(outcome(second).member_id, "i1") == [rules.FENCED_INSTANCE_ID]
    assert h.leave("", "i1") == [rules.NONE]
    assert h.members() == {leader}


# --- JoinGroup answers ---


def test_a_follower_repeating_its_join_is_answered_at_once_without_a_rebalance() -> None:
    h = ServerLoop()
    a, b = stable_group(h, 2)
    generation = h.coordinator.groups["g"].generation
    again = h.join(b)
    answer = outcome(again)
    assert (answer.error, answer.generation, answer.member_id) == (rules.NONE, generation, b)
    assert (answer.protocol_type, answer.protocol_name) == ("consumer", "range")
    assert answer.leader == a and answer.members == []
    assert h.state() is GroupState.STABLE
    changed = h.join(b, protocols=[("range", b"new-subscription")])
    assert changed.result is None
    assert h.state() is GroupState.PREPARING_REBALANCE
    rejoined = h.join(a)
    assert outcome(rejoined).generation == outcome(changed).generation == generation + 1
    assert outcome(rejoined).protocol_type == "consumer"
    assert (b, None, b"new-subscription") in outcome(rejoined).members


def test_join_errors_echo_the_member_id() -> None:
    h = ServerLoop()
    stable_group(h, 1)
    ghost = outcome(h.join("ghost"))
    assert (ghost.error, ghost.member_id) == (rules.UNKNOWN_MEMBER_ID, "ghost")
    nowhere = outcome(h.join("ghost", group="nowhere"))
    assert (nowhere.error, nowhere.member_id) == (rules.UNKNOWN_MEMBER_ID, "ghost")


@pytest.mark.parametrize("session_ms", [100, 1_800_000])
def test_session_timeouts_at_the_broker_limits_are_accepted(session_ms: int) -> None:
    h = ServerLoop()
    assert outcome(h.join(version=3, session_ms=session_ms)).error == rules.NONE


def test_a_newcomer_must_share_a_protocol_with_every_member() -> None:
    h = ServerLoop()
    a = outcome(h.join(version=3, protocols=[("sticky", b""), ("range", b"")])).member_id
    b_slot = h.join(version=3, protocols=[("range", b""), ("roundrobin", b"")])
    h.join(a, version=3, protocols=[("sticky", b""), ("range", b"")])
    assert outcome(b_slot).protocol_name == "range"
    refused = h.join(version=3, protocols=[("roundrobin", b"")])
    assert outcome(refused).error == rules.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize(("used_at", "works"), [(10.999, True), (11.0, False)])
def test_a_member_id_handed_out_expires_after_the_session_timeout(
    used_at: float, works: bool
) -> None:
    h = ServerLoop()
    (a,) = stable_group(h, 1)
    generation = h.coordinator.groups["g"].generation
    h.advance_to(1.0)
    pending = h.new_member()
    h.keep_alive([a], generation, used_at)
    joined = h.join(pending)
    if works:
        assert joined.result is None, "a rebalance starts"
        assert h.state() is GroupState.PREPARING_REBALANCE
    else:
        assert outcome(joined).error == rules.UNKNOWN_MEMBER_ID
        assert h.state() is GroupState.STABLE


@pytest.mark.parametrize(
    ("second", "third", "chosen"),
    [
        (["roundrobin", "range"], ["roundrobin", "range"], "roundrobin"),  # 2 votes to 1
        (["roundrobin", "range"], ["range", "roundrobin"], "range"),  # 2 votes to 1
        (["roundrobin", "range"], None, "range"),  # a tie: the first member's order
    ],
)
def test_the_protocol_is_chosen_by_first_choices_then_the_first_members_order(
    second: list[str], third: list[str] | None, chosen: str
) -> None:
    h = ServerLoop()
    preferences = [["range", "roundrobin"], second] + ([third] if third else [])
    slots = [h.join(version=3, protocols=[(p, b"") for p in ps]) for ps in preferences[:1]]
    first_id = outcome(slots[0]).member_id
    slots += [h.join(version=3, protocols=[(p, b"") for p in ps]) for ps in preferences[1:]]
    slots.append(h.join(first_id, version=3, protocols=[(p, b"") for p in preferences[0]]))
    assert {outcome(s).protocol_name for s in slots[1:]} == {chosen}


def test_a_member_that_leaves_while_waiting_gets_its_answer() -> None:
    h = ServerLoop()
    a, b = stable_group(h, 2)
    h.join(version=3)  # a newcomer: the group rebalances
    waiting_join = h.join(a)
    assert h.leave(a) == [rules.NONE]
    left = outcome(waiting_join)
    assert (left.error, left.member_id) == (rules.UNKNOWN_MEMBER_ID, a)
    rejoined = h.join(b)
    generation = outcome(rejoined).generation
    follower = outcome(rejoined).member_id != outcome(rejoined).leader
    waiting = b if follower else next(iter(h.members() - {b}))
    waiting_sync = h.sync(waiting, generation)
    assert waiting_sync.result is None
    assert h.leave(waiting) == [rules.NONE]
    assert synced(waiting_sync).error == rules.UNKNOWN_MEMBER_ID


def test_the_leaders_assignment_gives_nothing_to_members_it_leaves_out() -> None:
    h = ServerLoop()
    a = h.new_member()
    h.join(a)
    b = h.new_member()
    joined_b = h.join(b)
    h.join(a)
    generation = outcome(joined_b).generation
    follower = h.sync(b, generation)
    h.sync(a, generation, {a: b"everything"})
    assert synced(follower) == SyncOutcome(rules.NONE, "consumer", "range", b"")


def test_leaving_a_batch_answers_every_member_in_order() -> None:
    h = ServerLoop()
    leader, static_id, _ = static_pair(h)
    pending = h.new_member()
    _, results = h.coordinator.leave(
        h.now,
        group_id="g",
        members=[
            ("", "unknown-instance"),
            ("wrong-id", "i1"),
            (pending, None),
            ("ghost", None),
            (leader, None),
        ],
    )
    assert results == [
        ("", "unknown-instance", rules.UNKNOWN_MEMBER_ID),
        ("wrong-id", "i1", rules.FENCED_INSTANCE_ID),
        (pending, None, rules.NONE),
        ("ghost", None, rules.UNKNOWN_MEMBER_ID),
        (leader, None, rules.NONE),
    ]
    assert h.members() == {static_id}
    assert outcome(h.join(pending)).error == rules.UNKNOWN_MEMBER_ID


def test_a_pending_member_id_that_leaves_no_longer_holds_the_join_phase() -> None:
    h = ServerLoop()
    (a,) = stable_group(h, 1)
    pending = h.new_member()
    newcomer = h.join(version=3)
    rejoined = h.join(a)
    assert rejoined.result is None, "waiting for the member id handed out"
    assert h.leave(pending) == [rules.NONE]
    assert outcome(rejoined).generation == outcome(newcomer).generation


def test_a_late_tick_keeps_deadlines_that_moved_later() -> None:
    """The server ticks when it gets to it, possibly well after a deadline; a member
    whose deadline a heartbeat moved past that tick still expires at its new one."""
    h = Harness()
    (a,) = stable_group(h, 1)
    generation = h.coordinator.groups["g"].generation
    h.now = 5.0
    assert h.heartbeat(a, generation) == rules.NONE  # session now ends at 15
    h.coordinator.tick(12.0)  # late, past the first deadline
    assert h.state() is GroupState.STABLE
    h.coordinator.tick(14.999)
    assert h.state() is GroupState.STABLE
    h.coordinator.tick(15.0)
    assert h.state() is GroupState.EMPTY


def test_a_group_with_members_outlives_the_expiry_it_was_created_with() -> None:
    """A new group is armed to expire a retention after its creation; once it has
    members, that timer no longer applies and the server's timer keeps running."""
    h = ServerLoop(offsets_retention_minutes=1)
    (a,) = stable_group(h, 1)
    generation = h.coordinator.groups["g"].generation
    h.keep_alive([a], generation, 120)
    assert h.state() is GroupState.STABLE and h.members() == {a}
    assert h.coordinator.next_deadline() == pytest.approx(120 + SESSION)


def commit(h: Harness, offsets: list[tuple[str, int]], group: str = "g") -> None:
    results = h.coordinator.commit(
        h.now,
        group_id=group,
        generation=-1,
        member_id="",
        group_instance_id=None,
        offsets=[(t, p, 1, -1, None) for t, p in offsets],
    )
    assert set(results.values()) == {rules.NONE}


def test_deleting_offsets_never_committed_succeeds() -> None:
    h = Harness()
    commit(h, [("t", 0)])
    assert h.coordinator.delete_offsets("g", [("t", 0), ("t", 1), ("u", 0)]) == (
        rules.NONE,
        {("t", 0): rules.NONE, ("t", 1): rules.NONE, ("u", 0): rules.NONE},
    )
    assert h.coordinator.committed("g", None) == {}


def test_a_deleted_topics_offsets_go_from_every_group() -> None:
    h = Harness(offsets_retention_minutes=1)
    commit(h, [("t", 0), ("t", 1), ("u", 0)])
    h.coordinator.remove_topic("t")
    assert set(h.coordinator.committed("g", None)) == {("u", 0)}
    assert "g" in h.coordinator.groups
    h.coordinator.remove_topic("u")
    assert h.coordinator.committed("g", None) == {}
    # Empty and without offsets: the group is gone, as on Kafka (ListGroups no longer
    # lists it) and no timer of it fires later.
    assert "g" not in h.coordinator.groups
    assert h.coordinator.remove_topic("t") is None  # nothing left to do


def test_deleting_any_topic_removes_empty_groups_that_never_had_offsets() -> None:
    """Kafka's coordinator sweeps every group when partitions are deleted: an Empty group
    without offsets goes, whatever topic was deleted; one with members stays."""
    h = ServerLoop()
    (member,) = stable_group(h, 1)
    h.coordinator.remove_topic("unrelated")
    assert "g" in h.coordinator.groups  # it has a member
    assert h.leave(member) == [rules.NONE]
    h.advance(0)
    assert h.state() is GroupState.EMPTY
    h.coordinator.remove_topic("unrelated")
    assert "g" not in h.coordinator.groups


def test_a_deleted_topics_offsets_go_from_groups_after_one_without_them() -> None:
    h = Harness(offsets_retention_minutes=1)
    commit(h, [("t", 0)], group="first")
    commit(h, [("u", 0), ("t", 0)], group="second")
    h.coordinator.remove_topic("u")
    assert set(h.coordinator.committed("first", None)) == {("t", 0)}
    assert set(h.coordinator.committed("second", None)) == {("t", 0)}


def test_a_deleted_topic_leaves_a_group_with_members_or_other_offsets() -> None:
    h = Harness(offsets_retention_minutes=1)
    commit(h, [("t", 0), ("u", 0)])
    h.coordinator.remove_topic("t")
    assert "g" in h.coordinator.groups  # it still has offsets of "u"


def test_offset_commits_are_checked_against_the_member_and_generation() -> None:
    h = ServerLoop()
    leader, static_id, generation = static_pair(h)

    def commit_as(generation: int, member_id: str, instance: str | None = None) -> int:
        results = h.coordinator.commit(
            h.now,
            group_id="g",
            generation=generation,
            member_id=member_id,
            group_instance_id=instance,
            offsets=[("t", 0, 1, -1, "m" * 4096)],
        )
        return results[("t", 0)]

    assert commit_as(generation, leader) == rules.NONE, "4096 bytes of metadata fit"
    assert commit_as(-1, leader) == rules.ILLEGAL_GENERATION
    assert commit_as(-1, "", "i1") == rules.FENCED_INSTANCE_ID
    assert commit_as(-1, "") == rules.UNKNOWN_MEMBER_ID
    del static_id
    unknown = h.coordinator.commit(
        h.now,
        group_id="nowhere",
        generation=0,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, 1, -1, None)],
    )
    assert unknown == {("t", 0): rules.ILLEGAL_GENERATION}
