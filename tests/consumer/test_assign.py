"""The pure assignors: worked examples of range and round-robin, Java ordering, properties."""

from __future__ import annotations

from collections import Counter
from typing import Any

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from hypothesis import example, given, settings
from hypothesis import strategies as st

from minibroker.consumer.assign import (
    Assignment,
    PreviousAssignment,
    assign,
    member_order,
    range_assign,
    retained,
    roundrobin_assign,
    sticky_assign,
)


def counts(assignment: Assignment) -> dict[str, int]:
    return {member: len(parts) for member, parts in assignment.items()}


# --- worked examples of range and round-robin ---


def test_range_ten_partitions_over_three_consumers_is_4_3_3() -> None:
    members = {"C1-0": ["p"], "C2-0": ["p"], "C3-0": ["p"]}
    result = range_assign(members, {"p": 10})
    assert result == {
        "C1-0": [("p", 0), ("p", 1), ("p", 2), ("p", 3)],
        "C2-0": [("p", 4), ("p", 5), ("p", 6)],
        "C3-0": [("p", 7), ("p", 8), ("p", 9)],
    }


def test_roundrobin_identical_subscriptions_example() -> None:
    members = {m: ["t0", "t1"] for m in ("C0", "C1", "C2")}
    result = roundrobin_assign(members, {"t0": 3, "t1": 3})
    assert result == {
        "C0": [("t0", 0), ("t1", 0)],
        "C1": [("t0", 1), ("t1", 1)],
        "C2": [("t0", 2), ("t1", 2)],
    }


def test_roundrobin_unequal_subscriptions_example() -> None:
    members = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    result = roundrobin_assign(members, {"t0": 1, "t1": 2, "t2": 3})
    assert result == {
        "C0": [("t0", 0)],
        "C1": [("t1", 0)],
        "C2": [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)],
    }


def test_range_extra_partition_repeats_for_every_topic() -> None:
    # Range's drawback: the first member takes the extra of every topic.
    members = {m: ["a", "b", "c"] for m in ("C0", "C1")}
    result = range_assign(members, {"a": 3, "b": 3, "c": 3})
    assert counts(result) == {"C0": 6, "C1": 3}


def test_eighteen_consumers_six_partitions() -> None:
    members = {f"{host}-{i}": ["my-topic"] for host in "ABC" for i in range(6)}
    result = range_assign(members, {"my-topic": 6})
    owners = [m for m, parts in result.items() if parts]
    assert sorted(owners) == [f"A-{i}" for i in range(6)]
    assert all(len(result[m]) == 1 for m in owners)


# --- Java ordering ---


def test_members_sort_by_utf16_code_units_like_java() -> None:
    # U+10000 is the surrogate pair D800 DC00 in Java, which sorts before U+FFFF;
    # Python's code-point order would put it last.
    assert member_order(["\uffff", "\U00010000"]) == ["\U00010000", "\uffff"]
    result = range_assign({"\uffff": ["t"], "\U00010000": ["t"]}, {"t": 1})
    assert result["\U00010000"] == [("t", 0)]


def test_group_instance_ids_sort_first_and_by_instance_id() -> None:
    order = member_order(["a", "b", "c"], {"c": "static-1", "b": "static-0", "a": None})
    assert order == ["b", "c", "a"]


def test_topic_without_partition_count_is_skipped() -> None:
    result = assign("roundrobin", {"m": ["known", "unknown"]}, {"known": 2})
    assert result == {"m": [("known", 0), ("known", 1)]}


# --- sticky, direct cases ---


def test_sticky_keeps_survivors_partitions_when_a_member_leaves() -> None:
    subs = {m: ["t"] for m in ("a", "b", "c")}
    first = sticky_assign(subs, {"t": 12})
    assert sorted(counts(first).values()) == [4, 4, 4]
    previous = {m: PreviousAssignment(tuple(first[m]), 1) for m in ("a", "c")}
    second = sticky_assign({"a": ["t"], "c": ["t"]}, {"t": 12}, previous)
    assert counts(second) == {"a": 6, "c": 6}
    assert set(first["a"]) <= set(second["a"])
    assert set(first["c"]) <= set(second["c"])


def test_sticky_conflicting_claims_resolved_by_generation() -> None:
    subs = {"a": ["t"], "b": ["t"]}
    previous = {
        "a": PreviousAssignment((("t", 0), ("t", 1)), 5),
        "b": PreviousAssignment((("t", 0),), 4),  # stale claim on t-0
    }
    result = sticky_assign(subs, {"t": 2}, previous)
    assert result == {"a": [("t", 0)], "b": [("t", 1)]}


def test_sticky_same_generation_double_claim_trusts_neither() -> None:
    subs = {"a": ["t"], "b": ["t"], "c": ["t"]}
    previous = {
        "a": PreviousAssignment((("t", 0),), 3),
        "b": PreviousAssignment((("t", 0),), 3),
        "c": PreviousAssignment((("t", 1),), 3),
    }
    result = sticky_assign(subs, {"t": 3}, previous)
    check_valid(result, subs, {"t": 3})
    assert result["c"] == [("t", 1)]


def test_sticky_unequal_subscriptions_balances_what_can_move() -> None:
    members = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    result = sticky_assign(members, {"t0": 1, "t1": 2, "t2": 3})
    assert counts(result) == {"C0": 1, "C1": 2, "C2": 3}


# --- properties ---

TOPICS = ["t0", "t1", "t2", "t3"]
member_ids = st.lists(
    st.text(alphabet="abcAB-_0\u00e9\U00010000", min_size=1, max_size=4),
    min_size=1,
    max_size=7,
    unique=True,
)
partition_counts = st.fixed_dictionaries({t: st.integers(0, 9) for t in TOPICS})


@st.composite
def groups(draw: Any, identical: bool = False) -> tuple[dict[str, list[str]], dict[str, int]]:
    members = draw(member_ids)
    pcounts = draw(partition_counts)
    if identical:
        topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))
        subs = {m: sorted(topics) for m in members}
    else:
        subs = {
            m: sorted(draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True)))
            for m in members
        }
    return subs, pcounts


def expected_partitions(subs: dict[str, list[str]], pcounts: dict[str, int]) -> list[Any]:
    topics = {t for ts in subs.values() for t in ts}
    return sorted((t, i) for t in topics for i in range(pcounts[t]))


def check_valid(result: Assignment, subs: dict[str, list[str]], pcounts: dict[str, int]) -> None:
    assert set(result) == set(subs)
    owned = Counter(p for parts in result.values() for p in parts)
    assert sorted(owned) == expected_partitions(subs, pcounts)
    assert set(owned.values()) <= {1}, "each partition exactly once"
    for member, parts in result.items():
        assert all(topic in subs[member] for topic, _ in parts)


@settings(max_examples=150, deadline=None)
@given(groups(), st.sampled_from(["range", "roundrobin", "sticky"]))
def test_every_partition_owned_exactly_once(group: Any, strategy: str) -> None:
    subs, pcounts = group
    check_valid(assign(strategy, subs, pcounts), subs, pcounts)


@settings(max_examples=150, deadline=None)
@given(groups(identical=True), st.sampled_from(["roundrobin", "sticky"]))
def test_identical_subscriptions_balance_within_one(group: Any, strategy: str) -> None:
    subs, pcounts = group
    sizes = counts(assign(strategy, subs, pcounts)).values()
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(groups())
def test_range_balances_each_topic_within_one(group: Any) -> None:
    subs, pcounts = group
    result = range_assign(subs, pcounts)
    for topic in {t for ts in subs.values() for t in ts}:
        per_member = [sum(1 for t, _ in result[m] if t == topic) for m in subs if topic in subs[m]]
        assert max(per_member) - min(per_member) <= 1
        # The members with the extra partition are the first in sort order.
        ordered = [m for m in member_order(subs) if topic in subs[m]]
        taken = [sum(1 for t, _ in result[m] if t == topic) for m in ordered]
        assert taken == sorted(taken, reverse=True)


@settings(max_examples=150, deadline=None)
@given(groups())
def test_sticky_leaves_no_partition_that_could_even_things_out(group: Any) -> None:
    subs, pcounts = group
    result = sticky_assign(subs, pcounts)
    size = counts(result)
    for member, parts in result.items():
        for topic, _ in parts:
            for other in subs:
                assert not (topic in subs[other] and size[other] + 2 <= size[member])


class _Cluster:
    """Just enough of aiokafka's ClusterMetadata for its assignors."""

    def __init__(self, pcounts: dict[str, int]) -> None:
        self._counts = pcounts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._counts.get(topic, 0)
        return set(range(count)) if count else None

    def topics(self) -> set[str]:
        return {t for t, c in self._counts.items() if c}


def _aiokafka(assignor: Any, subs: dict[str, list[str]], pcounts: dict[str, int]) -> Assignment:
    members = {m: ConsumerProtocolMemberMetadata(0, ts, b"") for m, ts in subs.items()}
    result = assignor.assign(_Cluster(pcounts), members)
    return {m: sorted((t, p) for t, ps in a.assignment for p in ps) for m, a in result.items()}


@settings(max_examples=150, deadline=None)
@given(groups())
def test_range_and_roundrobin_agree_with_aiokafka_ports_of_java(group: Any) -> None:
    # aiokafka's range and round-robin assignors are ports of the Java ones; member
    # ids here include characters whose order differs between UTF-16 and code points,
    # so compare only when both orders agree.
    subs, pcounts = group
    if member_order(subs) != sorted(subs):
        return
    ours_range = {m: sorted(ps) for m, ps in range_assign(subs, pcounts).items()}
    assert ours_range == _aiokafka(RangePartitionAssignor, subs, pcounts)
    ours_rr = {m: sorted(ps) for m, ps in roundrobin_assign(subs, pcounts).items()}
    assert ours_rr == _aiokafka(RoundRobinPartitionAssignor, subs, pcounts)


@st.composite
def rebalances(draw: Any, identical: bool) -> Any:
    """A group, its assignment, then some members leave and new ones join."""
    subs, pcounts = draw(groups(identical=identical))
    before = sticky_assign(subs, pcounts)
    stay = draw(st.lists(st.sampled_from(sorted(subs)), unique=True, min_size=1))
    joiners = draw(st.lists(st.sampled_from(["n1", "n2", "n3"]), unique=True))
    topics = next(iter(subs.values()))
    after_subs = {m: subs[m] for m in stay}
    for joiner in joiners:
        after_subs[joiner] = (
            topics
            if identical
            else sorted(draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True)))
        )
    new_counts = {t: c + draw(st.integers(0, 2)) for t, c in pcounts.items()}
    return before, after_subs, new_counts


def java_constrained_retention(
    previous: Assignment, subs: dict[str, list[str]], pcounts: dict[str, int]
) -> int:
    """What Java's sticky assignor keeps when subscriptions are identical.

    Its constrained path lets every member keep up to floor(P/M) of what it owned,
    and up to `P % M` members that owned more keep one more.
    """
    total = len(expected_partitions(subs, pcounts))
    low, extra = divmod(total, len(subs))
    valid = set(expected_partitions(subs, pcounts))
    owned = {m: len(set(previous.get(m, [])) & valid) for m in subs}
    over = sum(1 for m in subs if owned[m] > low)
    return sum(min(o, low) for o in owned.values()) + min(over, extra)


@settings(max_examples=200, deadline=None)
@given(rebalances(identical=True))
def test_sticky_retains_at_least_java_constrained_share(case: Any) -> None:
    before, subs, pcounts = case
    previous = {m: PreviousAssignment(tuple(before.get(m, ())), 1) for m in subs}
    after = sticky_assign(subs, pcounts, previous)
    check_valid(after, subs, pcounts)
    assert retained(before, after) >= java_constrained_retention(before, subs, pcounts)


def _java_sticky_port(
    before: Assignment, subs: dict[str, list[str]], pcounts: dict[str, int]
) -> Assignment:
    members = {}
    for member, topics in subs.items():
        owned = [(t, p) for t, p in before.get(member, [])]
        members[member] = StickyPartitionAssignor._metadata(topics, _tps(owned), 1)
    result = StickyPartitionAssignor.assign(_Cluster(pcounts), members)
    return {m: sorted((t, p) for t, ps in a.assignment for p in ps) for m, a in result.items()}


def _tps(parts: list[tuple[str, int]]) -> list[Any]:
    from aiokafka.structs import TopicPartition

    return [TopicPartition(t, p) for t, p in parts]


@settings(max_examples=200, deadline=None)
@given(rebalances(identical=True))
def test_sticky_retains_at_least_aiokafkas_port_of_java_sticky(case: Any) -> None:
    # With differing subscriptions both sides are greedy heuristics; over 3,000 random
    # rebalances ours kept more in 356, the same in 2,640 and one partition less in 4
    # (docs/consumer.md), so only identical subscriptions are held to it here.
    before, subs, pcounts = case
    previous = {m: PreviousAssignment(tuple(before.get(m, ())), 1) for m in subs}
    after = sticky_assign(subs, pcounts, previous)
    check_valid(after, subs, pcounts)
    java = _java_sticky_port(before, subs, pcounts)
    assert retained(before, after) >= retained(before, java)


def test_cluster_metadata_shape_matches_aiokafka() -> None:
    # _Cluster stands in for ClusterMetadata; keep it honest about the method it mimics.
    assert hasattr(ClusterMetadata, "partitions_for_topic")
    assert hasattr(ClusterMetadata, "topics")


@settings(max_examples=200, deadline=None)
@given(groups())
def test_sticky_changes_nothing_when_the_group_did_not_change(group: Any) -> None:
    subs, pcounts = group
    first = sticky_assign(subs, pcounts)
    previous = {m: PreviousAssignment(tuple(first[m]), 1) for m in subs}
    assert sticky_assign(subs, pcounts, previous) == first


@settings(max_examples=200, deadline=None)
@given(rebalances(identical=False))
# Found by this test: handing t0-0 back to its previous owner in exchange for a t2
# partition kept every count but let n1 (t0 only) take from it.
@example(
    case=(
        {
            "0": [("t0", 0), ("t0", 1), ("t0", 2), ("t2", 0), ("t2", 1)],
            "A": [("t2", 2), ("t2", 3), ("t2", 4), ("t2", 5), ("t2", 6)],
        },
        {
            "0": ["t0", "t1", "t2"],
            "A": ["t0", "t1", "t2"],
            "n1": ["t0"],
            "n2": ["t0"],
            "n3": ["t0", "t2"],
        },
        {"t0": 3, "t1": 0, "t2": 7, "t3": 0},
    )
)
def test_sticky_differing_subscriptions_valid_and_balanced_after_rebalance(case: Any) -> None:
    before, subs, pcounts = case
    previous = {m: PreviousAssignment(tuple(before.get(m, ())), 1) for m in subs}
    after = sticky_assign(subs, pcounts, previous)
    check_valid(after, subs, pcounts)
    size = counts(after)
    for member, parts in after.items():
        for topic, _ in parts:
            assert all(not (topic in subs[o] and size[o] + 2 <= size[member]) for o in subs)
