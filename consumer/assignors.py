"""Assignors for aiokafka group members, wrapping the pure logic in `consumer.assign`.

Pass them as ``partition_assignment_strategy`` to ``AIOKafkaConsumer`` (the library's
``Consumer`` does this for you). Protocol names and the sticky user-data layout are
the Java client's (``range``, ``roundrobin``, ``sticky``), so mixed groups agree.

Range and round-robin are stateless and may be passed as classes or instances. The
sticky assignor remembers what its member owned: give each consumer its own instance.

There is no cooperative (incremental) variant: aiokafka's coordinator is eager only.
It revokes every owned partition before each JoinGroup and sends consumer-protocol
metadata v0, which has no "owned partitions" field, so a second rebalance round that
hands over only the moved partitions cannot be driven from an assignor.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from minibroker.consumer.assign import (
    Assignment,
    Partition,
    PreviousAssignment,
    group_by_topic,
    range_assign,
    roundrobin_assign,
    sticky_assign,
)

log = logging.getLogger(__name__)


def _partition_counts(cluster: Any, topics: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for topic in topics:
        partitions = cluster.partitions_for_topic(topic)
        if partitions is None:
            log.warning("no partition metadata for topic %s; it gets no owners", topic)
            continue
        counts[topic] = len(partitions)
    return counts


def _subscriptions(members: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    return {member: frozenset(meta.subscription) for member, meta in members.items()}


def _to_protocol(
    assignment: Assignment, version: int, user_data: Mapping[str, bytes] | None = None
) -> dict[str, Any]:
    data = user_data or {}
    return {
        member: ConsumerProtocolMemberAssignment(
            version, list(group_by_topic(partitions).items()), data.get(member, b"")
        )
        for member, partitions in assignment.items()
    }


class _StatelessAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """An aiokafka assignor around one of the pure functions of `consumer.assign`."""

    name = ""
    version = 0
    strategy: Callable[[Mapping[str, frozenset[str]], Mapping[str, int]], Assignment]

    @classmethod
    def assign(cls, cluster: Any, members: Mapping[str, Any]) -> dict[str, Any]:
        subscriptions = _subscriptions(members)
        topics = {t for topics in subscriptions.values() for t in topics}
        result = cls.strategy(subscriptions, _partition_counts(cluster, topics))
        return _to_protocol(result, cls.version)

    @classmethod
    def metadata(cls, topics: Iterable[str]) -> Any:
        return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), b"")

    @classmethod
    def on_assignment(cls, assignment: Any) -> None:
        return None


class RangeAssignor(_StatelessAssignor):
    """Java's RangeAssignor: contiguous ranges per topic, extras to the first members."""

    name = "range"
    strategy = staticmethod(range_assign)


class RoundRobinAssignor(_StatelessAssignor):
    """Java's RoundRobinAssignor: deal partitions to members in sort order."""

    name = "roundrobin"
    strategy = staticmethod(roundrobin_assign)


# Sticky user data, the Java StickyAssignor's layout (v1):
#   previous_assignment: [topic: int16-length string, partitions: [int32]], generation: int32
# v0 is the same without the generation.


def encode_sticky_user_data(partitions: Iterable[Partition], generation: int) -> bytes:
    grouped = group_by_topic(partitions)
    out = [struct.pack(">i", len(grouped))]
    for topic, indices in grouped.items():
        name = topic.encode()
        out.append(struct.pack(">h", len(name)) + name)
        out.append(struct.pack(f">i{len(indices)}i", len(indices), *indices))
    out.append(struct.pack(">i", generation))
    return b"".join(out)


def decode_sticky_user_data(data: bytes) -> PreviousAssignment | None:
    """The member's previous assignment, or None if the bytes are not sticky user data."""
    try:
        (topics,) = struct.unpack_from(">i", data, 0)
        offset = 4
        partitions: list[Partition] = []
        for _ in range(topics):
            (length,) = struct.unpack_from(">h", data, offset)
            offset += 2
            topic = data[offset : offset + length].decode()
            offset += length
            (count,) = struct.unpack_from(">i", data, offset)
            offset += 4
            indices = struct.unpack_from(f">{count}i", data, offset)
            offset += 4 * count
            partitions.extend((topic, index) for index in indices)
        generation = -1
        if len(data) >= offset + 4:
            (generation,) = struct.unpack_from(">i", data, offset)
        return PreviousAssignment(tuple(partitions), generation)
    except (struct.error, UnicodeDecodeError, ValueError):
        return None


class StickyAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """Balanced, and keeps as many partitions with their previous owner as it can.

    Each member sends what it owned (and the generation it owned it in) as user data,
    in the Java StickyAssignor's format. The leader stamps the next generation into
    every assignment's user data, so members agree on it without the coordinator's
    generation id (aiokafka does not hand that to assignors).
    """

    name = "sticky"
    version = 0

    def __init__(self) -> None:
        self.owned: tuple[Partition, ...] = ()
        self.generation = -1

    def assign(self, cluster: Any, members: Mapping[str, Any]) -> dict[str, Any]:
        subscriptions = _subscriptions(members)
        topics = {t for topics in subscriptions.values() for t in topics}
        previous: dict[str, PreviousAssignment] = {}
        for member, meta in members.items():
            decoded = decode_sticky_user_data(bytes(meta.user_data or b""))
            if decoded is not None:
                previous[member] = decoded
        result = sticky_assign(subscriptions, _partition_counts(cluster, topics), previous)
        generation = max((p.generation for p in previous.values()), default=-1) + 1
        stamp = struct.pack(">i", generation)
        return _to_protocol(result, self.version, {member: stamp for member in result})

    def metadata(self, topics: Iterable[str]) -> Any:
        user_data = encode_sticky_user_data(self.owned, self.generation)
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), user_data)

    def on_assignment(self, assignment: Any) -> None:
        self.owned = tuple((tp.topic, tp.partition) for tp in assignment.partitions())
        data = bytes(assignment.user_data or b"")
        if len(data) == 4:
            (self.generation,) = struct.unpack(">i", data)
        else:
            # A leader that stamps nothing (another client): count rebalances locally.
            self.generation += 1


def assignor_for(strategy: str | Any) -> Any:
    """An assignor object for a strategy name, or the object itself if it is one."""
    if not isinstance(strategy, str):
        return strategy
    if strategy == "range":
        return RangeAssignor
    if strategy == "roundrobin":
        return RoundRobinAssignor
    if strategy == "sticky":
        return StickyAssignor()
    raise ValueError(f"unknown assignment strategy {strategy!r}")
