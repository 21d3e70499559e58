"""The aiokafka-facing assignors: protocol objects in and out, sticky user data."""

from __future__ import annotations

from typing import Any

from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocol

from minibroker.consumer.assignors import (
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    decode_sticky_user_data,
    encode_sticky_user_data,
)


class Cluster:
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.counts[topic])) if topic in self.counts else None


def decoded(assignment: Any) -> list[tuple[str, int]]:
    # Round-trip through the wire format, as SyncGroup would.
    wire = assignment.encode()
    return sorted(
        (tp.topic, tp.partition) for tp in ConsumerProtocol.ASSIGNMENT.decode(wire).partitions()
    )


def metadata_for(assignor: Any, topics: list[str]) -> Any:
    return ConsumerProtocol.METADATA.decode(assignor.metadata(topics).encode())


def test_range_assignor_through_protocol_objects() -> None:
    members = {m: metadata_for(RangeAssignor, ["p"]) for m in ("C1-0", "C2-0", "C3-0")}
    result = RangeAssignor.assign(Cluster({"p": 10}), members)
    assert [len(decoded(result[m])) for m in ("C1-0", "C2-0", "C3-0")] == [4, 3, 3]


def test_roundrobin_assignor_through_protocol_objects() -> None:
    members = {
        "C0": metadata_for(RoundRobinAssignor, ["t0"]),
        "C1": metadata_for(RoundRobinAssignor, ["t0", "t1"]),
        "C2": metadata_for(RoundRobinAssignor, ["t0", "t1", "t2"]),
    }
    result = RoundRobinAssignor.assign(Cluster({"t0": 1, "t1": 2, "t2": 3}), members)
    assert decoded(result["C0"]) == [("t0", 0)]
    assert decoded(result["C1"]) == [("t1", 0)]
    assert decoded(result["C2"]) == [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]


def test_missing_topic_metadata_is_skipped() -> None:
    members = {"a": metadata_for(RangeAssignor, ["known", "gone"])}
    result = RangeAssignor.assign(Cluster({"known": 2}), members)
    assert decoded(result["a"]) == [("known", 0), ("known", 1)]


def test_sticky_user_data_round_trip_and_java_layout() -> None:
    data = encode_sticky_user_data([("b", 1), ("a", 0), ("b", 0)], 7)
    previous = decode_sticky_user_data(data)
    assert previous is not None
    assert sorted(previous.partitions) == [("a", 0), ("b", 0), ("b", 1)]
    assert previous.generation == 7
    # aiokafka's sticky assignor (a port of Java's) reads the same bytes.
    meta = ConsumerProtocol.METADATA.decode(ConsumerProtocol.METADATA(0, ["a", "b"], data).encode())
    parsed = StickyPartitionAssignor.parse_member_metadata(meta)
    assert parsed.generation == 7
    assert sorted((tp.topic, tp.partition) for tp in parsed.partitions) == [
        ("a", 0),
        ("b", 0),
        ("b", 1),
    ]


def test_sticky_user_data_garbage_is_ignored() -> None:
    assert decode_sticky_user_data(b"\x00\x00\x00\x05\xff") is None
    assert decode_sticky_user_data(b"") is None


def test_sticky_assignor_keeps_partitions_across_rebalances() -> None:
    cluster = Cluster({"t": 12})
    members = {name: StickyAssignor() for name in ("a", "b", "c")}
    leader = members["a"]

    def rebalance(active: list[str]) -> dict[str, list[tuple[str, int]]]:
        metadata = {m: metadata_for(members[m], ["t"]) for m in active}
        result = leader.assign(cluster, metadata)
        out = {}
        for member in active:
            wire = ConsumerProtocol.ASSIGNMENT.decode(result[member].encode())
            members[member].on_assignment(wire)
            out[member] = decoded(result[member])
        return out

    first = rebalance(["a", "b", "c"])
    assert sorted(len(v) for v in first.values()) == [4, 4, 4]
    assert members["b"].generation == 0
    second = rebalance(["a", "c"])
    assert set(first["a"]) <= set(second["a"]) and set(first["c"]) <= set(second["c"])
    assert members["a"].generation == 1
    third = rebalance(["a", "b", "c"])
    # b comes back empty-handed; a and c each give up two and keep the rest.
    assert len(set(second["a"]) & set(third["a"])) == 4
    assert len(set(second["c"]) & set(third["c"])) == 4
    assert len(third["b"]) == 4
