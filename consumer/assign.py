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

from collections import Counter, defaultdict
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
        assigned = _sticky_identical(
            ordered, sorted(next(iter(topic_sets))), partition_counts, owned
        )
    else:
        # Greedy moves can paint themselves into a corner; the same greedy with other
        # tie-breaks (who takes a moved partition) often keeps more: keep the best.
        tries = [
            _sticky_general(ordered, subscriptions, partition_counts, owned, wide, narrow_gap)
            for wide in (False, True)
            for narrow_gap in (False, True)
        ]
        assigned = max(tries, key=lambda result: retained(owned, result))
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
    prefer_wide: bool,
    narrow_gap: bool,
) -> dict[str, list[Partition]]:
    position = {member: i for i, member in enumerate(ordered)}
    width = {m: -len(subscriptions[m]) if prefer_wide else 0 for m in ordered}
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

    # Move a partition from a member to an eligible one holding at least two fewer, until
    # none can. Among possible moves: free ones first (the donor did not own the
    # partition before), then those leaving the fewest such imbalances, since one move
    # can settle two of them. Each move lowers the sum of squared counts: this ends.
    topics_of = {m: frozenset(subscriptions[m]) for m in ordered}
    held: dict[str, Counter[str]] = {m: Counter(t for t, _ in current[m]) for m in ordered}

    def pulls(a: str, b: str) -> bool:
        # b could take one of a's partitions and holds at least two fewer
        return len(current[a]) >= len(current[b]) + 2 and any(held[a][t] for t in topics_of[b])

    def imbalances(x: str, y: str) -> int:
        total = 0
        for other in ordered:
            for member in (x, y):
                if other != member:
                    total += pulls(member, other) + pulls(other, member)
        return total - pulls(x, y) - pulls(y, x)

    def move(partition: Partition, source: str, target: str) -> None:
        current[source].remove(partition)
        held[source][partition[0]] -= 1
        current[target].add(partition)
        held[target][partition[0]] += 1

    while True:
        best: tuple[tuple[int, int, int, int, int, Partition], Partition, str, str] | None
        best = None
        for donor in ordered:
            load = len(current[donor])
            cheapest: dict[str, Partition] = {}
            for partition in sorted(current[donor], key=lambda p: (previously.get(p) == donor, p)):
                cheapest.setdefault(partition[0], partition)
            for topic, partition in cheapest.items():
                cost = 1 if previously.get(partition) == donor else 0
                for taker in eligible[topic]:
                    if len(current[taker]) + 2 > load:
                        continue
                    before = imbalances(donor, taker)
                    move(partition, donor, taker)
                    after = imbalances(donor, taker)
                    move(partition, taker, donor)
                    key = (
                        cost,
                        after - before,
                        (load - len(current[taker])) * (1 if narrow_gap else -1),
                        width[taker],
                        position[donor] * len(ordered) + position[taker],
                        partition,
                    )
                    if best is None or key < best[0]:
                        best = (key, partition, donor, taker)
        if best is None:
            break
        _, partition, donor, taker = best
        move(partition, donor, taker)
    _give_back(ordered, eligible, topics_of, previously, current)
    return {m: list(ps) for m, ps in current.items()}


def _give_back(
    ordered: Sequence[str],
    eligible: Mapping[str, list[str]],
    topics_of: Mapping[str, frozenset[str]],
    previously: Mapping[Partition, str],
    current: dict[str, set[Partition]],
) -> None:
    """Return partitions to their previous owner where balance allows.

    A single move back, or an exchange with a partition the owner did not own before, is
    kept if neither side ends up able to take from, or give to, an eligible member two
    partitions away (an exchange keeps every count, but the topics held change).
    """

    def unbalanced(member: str) -> bool:
        load = len(current[member])
        for other in ordered:
            if other == member:
                continue
            if len(current[other]) >= load + 2 and any(
                p[0] in topics_of[member] for p in current[other]
            ):
                return True
            if len(current[other]) + 2 <= load and any(
                other in eligible[p[0]] for p in current[member]
            ):
                return True
        return False

    holder_of = {p: m for m, ps in current.items() for p in ps}
    improved = True
    while improved:
        improved = False
        for partition, owner in sorted(previously.items()):
            holder = holder_of[partition]
            if holder == owner:
                continue
            current[holder].remove(partition)
            current[owner].add(partition)
            if not unbalanced(holder) and not unbalanced(owner):
                holder_of[partition] = owner
                improved = True
                continue
            current[owner].remove(partition)
            current[holder].add(partition)
            for other in sorted(current[owner]):
                if previously.get(other) != owner and other[0] in topics_of[holder]:
                    current[owner].remove(other)
                    current[holder].add(other)
                    current[holder].remove(partition)
                    current[owner].add(partition)
                    if unbalanced(holder) or unbalanced(owner):
                        # Same counts, other topics: a member subscribed to fewer topics
                        # may now be able to take from one of them.
                        current[owner].remove(partition)
                        current[holder].add(partition)
                        current[holder].remove(other)
                        current[owner].add(other)
                        continue
                    holder_of[partition], holder_of[other] = owner, holder
                    improved = True
                    break


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


def retained(
    previous: Mapping[str, Iterable[Partition]], current: Mapping[str, Iterable[Partition]]
) -> int:
    """How many partitions stayed with the member that owned them before."""
    return sum(len(set(previous.get(m, ())) & set(ps)) for m, ps in current.items())


def group_by_topic(partitions: Iterable[Partition]) -> dict[str, list[int]]:
    grouped: defaultdict[str, list[int]] = defaultdict(list)
    for topic, index in partitions:
        grouped[topic].append(index)
    return {topic: sorted(indices) for topic, indices in sorted(grouped.items())}
