"""Partition assignment as pure functions: no client types, no I/O.

A partition is a plain ``(topic, index)`` tuple; aiokafka's ``TopicPartition`` is a
NamedTuple of the same shape, so results can be handed to it unchanged.

Ordering rules follow the Java client so that a group mixing Java and Python members
computes the same assignment whoever is the leader:
- members sort by group instance id when they have one (those come first), else by
  member id, comparing strings by UTF-16 code units as ``String.compareTo`` does;
- topics sort by name, partitions by index.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

Partition = tuple[str, int]
Assignment = dict[str, list[Partition]]

STRATEGIES = ("range", "roundrobin", "sticky")


def java_string_key(value: str) -> bytes:
    """Sort key equal to Java's ``String.compareTo`` (UTF-16 code units, unsigned)."""
    return value.encode("utf-16-be", "surrogatepass")


def member_order(
    members: Iterable[str], instance_ids: Mapping[str, str | None] | None = None
) -> list[str]:
    """Members in the order the Java assignors use (``MemberInfo.compareTo``)."""
    ids = instance_ids or {}

    def key(member: str) -> tuple[int, bytes]:
        instance = ids.get(member)
        if instance is not None:
            return (0, java_string_key(instance))
        return (1, java_string_key(member))

    return sorted(members, key=key)


def _partitions_of(topic: str, partition_counts: Mapping[str, int]) -> list[Partition]:
    return [(topic, index) for index in range(partition_counts.get(topic, 0))]


def _empty(subscriptions: Mapping[str, Collection[str]]) -> Assignment:
    return {member: [] for member in subscriptions}


def range_assign(
    subscriptions: Mapping[str, Collection[str]],
    partition_counts: Mapping[str, int],
    instance_ids: Mapping[str, str | None] | None = None,
) -> Assignment:
    """Java's RangeAssignor (without rack matching).

    Per topic, the subscribed members in sort order each take a contiguous range;
    the first ``partitions % members`` of them take one extra.
    """
    result = _empty(subscriptions)
    ordered = member_order(subscriptions, instance_ids)
    topics = sorted({t for topics in subscriptions.values() for t in topics}, key=java_string_key)
    for topic in topics:
        consumers = [m for m in ordered if topic in subscriptions[m]]
        partitions = _partitions_of(topic, partition_counts)
        if not partitions:
            continue
        per_member, extra = divmod(len(partitions), len(consumers))
        for position, member in enumerate(consumers):
            start = per_member * position + min(position, extra)
            length = per_member + (1 if position < extra else 0)
            result[member].extend(partitions[start : start + length])
    return result


def roundrobin_assign(
    subscriptions: Mapping[str, Collection[str]],
    partition_counts: Mapping[str, int],
    instance_ids: Mapping[str, str | None] | None = None,
) -> Assignment:
    """Java's RoundRobinAssignor.

    All subscribed partitions (topics by name, then index) are dealt to the members in
    sort order, cycling; a member not subscribed to a partition's topic is skipped over
    and the cycle goes on from the member that took it.
    """
    result = _empty(subscriptions)
    ordered = member_order(subscriptions, instance_ids)
    if not ordered:
        return result
    topics = sorted({t for topics in subscriptions.values() for t in topics}, key=java_string_key)
    cursor = 0
    for topic in topics:
        for partition in _partitions_of(topic, partition_counts):
            while topic not in subscriptions[ordered[cursor % len(ordered)]]:
                cursor += 1
            result[ordered[cursor % len(ordered)]].append(partition)
            cursor += 1
    return result


@dataclass(frozen=True)
class PreviousAssignment:
    """What a member owned before this rebalance, and in which generation."""

    partitions: tuple[Partition, ...]
    generation: int = -1


def _resolve_previous(
    subscriptions: Mapping[str, Collection[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, PreviousAssignment],
    ordered: Sequence[str],
) -> dict[str, list[Partition]]:
    """Each still-valid partition goes back to its claimant from the newest generation.

    Two members claiming one partition in the same generation means one of them is
    stale; neither claim can be trusted, so the partition counts as unowned.
    """
    best: dict[Partition, tuple[int, str | None]] = {}
    for member in ordered:
        prior = previous.get(member)
        if prior is None:
            continue
        for partition in set(prior.partitions):
            topic, index = partition
            if topic not in subscriptions[member] or not 0 <= index < partition_counts.get(
                topic, 0
            ):
                continue
            seen = best.get(partition)
            if seen is None or prior.generation > seen[0]:
                best[partition] = (prior.generation, member)
            elif prior.generation == seen[0]:
                best[partition] = (prior.generation, None)
    owned: dict[str, list[Partition]] = {member: [] for member in ordered}
    for partition, (_, owner) in best.items():
        if owner is not None:
            owned[owner].append(partition)
    for partitions in owned.values():
        partitions.sort()
    return owned


def sticky_assign(
    subscriptions: Mapping[str, Collection[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, PreviousAssignment] | None = None,
    instance_ids: Mapping[str, str | None] | None = None,
) -> Assignment:
    """A balanced assignment that moves as few previously owned partitions as it can.

    With identical subscriptions every member ends with ``floor`` or ``ceil`` of
    partitions/members, and the retained share is the largest any such balanced
    assignment can keep. With differing subscriptions, previous owners keep what is
    still valid, new partitions go to the least loaded eligible member, then partitions
    move from a member to an eligible one holding at least two fewer until none can.
    """
    ordered = member_order(subscriptions, instance_ids)
    result = _empty(subscriptions)
    if not ordered:
        return result
    owned = _resolve_previous(subscriptions, partition_counts, previous or {}, ordered)
    topic_sets = {frozenset(subscriptions[m]) for m in ordered}
    if len(topic_sets) == 1:
        assigned = _sticky_identical(ordered, sorted(next(iter(topic_sets))), partition_counts, owned)
    else:
        assigned = _sticky_general(ordered, subscriptions, partition_counts, owned)
    for member in ordered:
        result[member] = sorted(assigned[member])
    return result


def _sticky_identical(
    ordered: Sequence[str],
    topics: Sequence[str],
    partition_counts: Mapping[str, int],
    owned: Mapping[str, list[Partition]],
) -> dict[str, list[Partition]]:
    everything = [p for topic in topics for p in _partitions_of(topic, partition_counts)]
    low, extra = divmod(len(everything), len(ordered))
    position = {member: i for i, member in enumerate(ordered)}
    # The `extra` members allowed one more than `low` are those that already hold more,
    # so that no balanced assignment could keep a larger share.
    candidates = [m for m in ordered if extra and len(owned[m]) > low]
    candidates.sort(key=lambda m: (-len(owned[m]), position[m]))
    high = set(candidates[:extra])
    spare_high = extra - len(high)
    kept: dict[str, list[Partition]] = {}
    for member in ordered:
        quota = low + 1 if member in high else low
        kept[member] = list(owned[member][:quota])
    taken = {p for partitions in kept.values() for p in partitions}
    free = [p for p in everything if p not in taken]
    free.reverse()
    for member in ordered:
        while len(kept[member]) < low:
            kept[member].append(free.pop())
    for member in ordered:
        if not spare_high:
            break
        if member not in high and len(kept[member]) == low:
            kept[member].append(free.pop())
            spare_high -= 1
    assert not free, "every partition is placed"
    return kept


def _sticky_general(
    ordered: Sequence[str],
    subscriptions: Mapping[str, Collection[str]],
    partition_counts: Mapping[str, int],
    owned: Mapping[str, list[Partition]],
) -> dict[str, list[Partition]]:
    position = {member: i for i, member in enumerate(ordered)}
    topics = sorted({t for m in ordered for t in subscriptions[m]}, key=java_string_key)
    eligible: dict[str, list[str]] = {
        topic: [m for m in ordered if topic in subscriptions[m]] for topic in topics
    }
    current: dict[str, set[Partition]] = {m: set(owned[m]) for m in ordered}
    previously: dict[Partition, str] = {p: m for m, ps in owned.items() for p in ps}
    placed = set(previously)
    unplaced = [
        p for topic in topics for p in _partitions_of(topic, partition_counts) if p not in placed
    ]
    # Most constrained first, so flexible partitions fill in around them.
    unplaced.sort(key=lambda p: (len(eligible[p[0]]), java_string_key(p[0]), p[1]))
    for partition in unplaced:
        target = min(eligible[partition[0]], key=lambda m: (len(current[m]), position[m]))
        current[target].add(partition)

    def movable(member: str) -> list[Partition]:
        # Partitions that were not this member's before cost nothing to move.
        return sorted(current[member], key=lambda p: (previously.get(p) == member, p))

    # Each move lowers the sum of squared counts, so this terminates.
    moved = True
    while moved:
        moved = False
        for donor in sorted(ordered, key=lambda m: (-len(current[m]), position[m])):
            for partition in movable(donor):
                takers = [
                    m
                    for m in eligible[partition[0]]
                    if len(current[m]) + 2 <= len(current[donor])
                ]
                if not takers:
                    continue
                taker = min(takers, key=lambda m: (len(current[m]), position[m]))
                current[donor].remove(partition)
                current[taker].add(partition)
                moved = True
                break
            if moved:
                break
    return {m: list(ps) for m, ps in current.items()}


def assign(
    strategy: str,
    subscriptions: Mapping[str, Collection[str]],
    partition_counts: Mapping[str, int],
    *,
    previous: Mapping[str, PreviousAssignment] | None = None,
    instance_ids: Mapping[str, str | None] | None = None,
) -> Assignment:
    """Dispatch by strategy name: ``range``, ``roundrobin`` or ``sticky``."""
    if strategy == "range":
        return range_assign(subscriptions, partition_counts, instance_ids)
    if strategy == "roundrobin":
        return roundrobin_assign(subscriptions, partition_counts, instance_ids)
    if strategy == "sticky":
        return sticky_assign(subscriptions, partition_counts, previous, instance_ids)
    raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")


def retained(previous: Mapping[str, Iterable[Partition]], current: Mapping[str, Iterable[Partition]]) -> int:
    """How many partitions stayed with the member that owned them before."""
    return sum(len(set(previous.get(m, ())) & set(ps)) for m, ps in current.items())


def group_by_topic(partitions: Iterable[Partition]) -> dict[str, list[int]]:
    grouped: defaultdict[str, list[int]] = defaultdict(list)
    for topic, index in partitions:
        grouped[topic].append(index)
    return {topic: sorted(indices) for topic, indices in sorted(grouped.items())}
