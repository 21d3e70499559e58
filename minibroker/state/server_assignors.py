"""The server-side assignors of the consumer group protocol (KIP-848): pure functions.

Each takes the members' subscriptions (member id -> subscribed topic ids), the partition
count of each subscribed topic and the current target assignment, and returns the new
target (member id -> topic id -> partitions); every partition of a subscribed topic goes
to exactly one member subscribed to it.

uniform  (Kafka's default) spreads all partitions evenly over the members and is sticky:
         a member keeps what it has as long as that stays within its share. With the same
         subscription everywhere, shares differ by at most one partition; with different
         subscriptions each partition goes, fewest candidates first, to the candidate
         holding the fewest partitions (its previous owner on a tie).
range    topic by topic, members subscribed to it in member id order get consecutive
         ranges, the first (partitions % members) one more: co-partitioned topics land on
         the same members. Not sticky.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

Subscriptions = Mapping[str, frozenset[uuid.UUID]]
Target = dict[str, dict[uuid.UUID, frozenset[int]]]
Partition = tuple[uuid.UUID, int]


def _to_target(members: Subscriptions, owned: Mapping[str, list[Partition]]) -> Target:
    target: Target = {member_id: {} for member_id in members}
    for member_id, partitions in owned.items():
        grouped: dict[uuid.UUID, set[int]] = {}
        for topic_id, index in partitions:
            grouped.setdefault(topic_id, set()).add(index)
        target[member_id] = {t: frozenset(p) for t, p in grouped.items()}
    return target


def uniform(
    members: Subscriptions,
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> Target:
    if not members:
        return {}
    subscriptions = set(members.values())
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, partition_counts, current)
    return _uniform_heterogeneous(members, partition_counts, current)


def _valid(
    member_id: str,
    topics: frozenset[uuid.UUID],
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> list[Partition]:
    """The member's current partitions it may keep: subscribed, and still there."""
    held = current.get(member_id, {})
    return sorted(
        (topic_id, index)
        for topic_id, parts in held.items()
        if topic_id in topics
        for index in parts
        if index < partition_counts.get(topic_id, 0)
    )


def _uniform_homogeneous(
    members: Subscriptions,
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> Target:
    topics = next(iter(members.values()))
    order = sorted(members)
    everything = [
        (topic_id, index)
        for topic_id in sorted(topics, key=str)
        for index in range(partition_counts.get(topic_id, 0))
    ]
    quota, extras = divmod(len(everything), len(order))
    owned: dict[str, list[Partition]] = {m: [] for m in order}
    taken: set[Partition] = set()
    surplus: dict[str, list[Partition]] = {}
    for member_id in order:
        valid = _valid(member_id, topics, partition_counts, current)
        owned[member_id] = valid[:quota]
        surplus[member_id] = valid[quota:]
        taken.update(valid[:quota])
    # Members with more than their quota keep one extra while extras remain, most first.
    for member_id in sorted(order, key=lambda m: (-len(surplus[m]), m)):
        if extras and surplus[member_id]:
            extra = surplus[member_id][0]
            owned[member_id].append(extra)
            taken.add(extra)
            extras -= 1
    free = [p for p in everything if p not in taken]
    for member_id in order:  # up to the quota first
        while len(owned[member_id]) < quota and free:
            owned[member_id].append(free.pop(0))
    for member_id in order:  # then the extras
        if not free:
            break
        if extras and len(owned[member_id]) == quota:
            owned[member_id].append(free.pop(0))
            extras -= 1
    return _to_target(members, owned)


def _uniform_heterogeneous(
    members: Subscriptions,
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> Target:
    previous: dict[Partition, str] = {}
    for member_id, topics in members.items():
        for partition in _valid(member_id, topics, partition_counts, current):
            previous[partition] = member_id
    candidates: dict[Partition, list[str]] = {}
    for topic_id in sorted({t for topics in members.values() for t in topics}, key=str):
        eligible = sorted(m for m, topics in members.items() if topic_id in topics)
        for index in range(partition_counts.get(topic_id, 0)):
            candidates[(topic_id, index)] = eligible
    owned: dict[str, list[Partition]] = {m: [] for m in members}
    # Sticky first pass: previous owners keep partitions while within an even share.
    share = {m: 0 for m in members}
    for eligible in candidates.values():
        for member_id in eligible:
            share[member_id] += 1
    for partition in sorted(candidates, key=lambda p: (len(candidates[p]), str(p[0]), p[1])):
        eligible = candidates[partition]
        owner = previous.get(partition)
        fewest = min(len(owned[m]) for m in eligible)
        if owner in owned and len(owned[owner]) <= fewest:
            owned[owner].append(partition)
        else:
            chosen = min(eligible, key=lambda m: (len(owned[m]), m))
            owned[chosen].append(partition)
    return _to_target(members, owned)


def range_assignor(
    members: Subscriptions,
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
) -> Target:
    owned: dict[str, list[Partition]] = {m: [] for m in members}
    for topic_id in sorted({t for topics in members.values() for t in topics}, key=str):
        subscribed = sorted(m for m, topics in members.items() if topic_id in topics)
        count = partition_counts.get(topic_id, 0)
        quota, extras = divmod(count, len(subscribed))
        start = 0
        for position, member_id in enumerate(subscribed):
            size = quota + (1 if position < extras else 0)
            owned[member_id].extend((topic_id, index) for index in range(start, start + size))
            start += size
    return _to_target(members, owned)


Assignor = Callable[
    [Subscriptions, Mapping[uuid.UUID, int], Mapping[str, Mapping[uuid.UUID, frozenset[int]]]],
    Target,
]

ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}
