"""Fetch sans-IO: the long poll (max_wait > 0 with min_bytes > 0) and the per-partition
fields a consumer reads, at a version before topic ids (4), one with them (11), and one
that names topics by id (13).

A waiting fetch is answered as soon as min_bytes are available or a partition it reads
has an error, else at its deadline; it is woken by appends to the partitions it reads
and only those. The clock is a FakeClock and the poll is driven by hand, as the server
does on an append and at the deadline.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Hashable, Sequence
from typing import Any

import pytest

from harness.raw_client import make, produce_batch
from minibroker.dispatch import PendingReply
from minibroker.protocol import records
from minibroker.state.log import PartitionLog
from tests.sansio import SansIOBroker, decode

PRODUCE, FETCH = 0, 1
VERSIONS = [4, 11, 13, 16]

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100

GHOST_ID = uuid.UUID(int=99)
WAIT = datetime.timedelta(milliseconds=500)
LARGE = 1 << 20


def one_batch(value: bytes) -> bytes:
    return records.build_batch([(None, value)], timestamp_ms=1_700_000_000_000)


BATCH = len(one_batch(b"v" * 100))


@dataclasses.dataclass(frozen=True)
class Want:
    topic: str
    partition: int
    fetch_offset: int = 0
    partition_max_bytes: int = LARGE


@dataclasses.dataclass(frozen=True)
class Got:
    """One partition of an answer, as a consumer reads it."""

    topic: str
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    offsets: list[int]


class Broker(SansIOBroker):
    def __init__(self) -> None:
        super().__init__(nodes=1)
        self.cluster.topics.create("orders", 2)
        self.cluster.topics.create("audit", 1)
        self.woken: list[Hashable] = []
        self.cluster.on_change.append(self.woken.append)

    def produce(self, topic: str, partition: int, value: bytes = b"v" * 100) -> None:
        produce_batch(self.request, topic, partition, one_batch(value))

    def log(self, topic: str, partition: int) -> PartitionLog:
        found = self.cluster.topics.get(topic)
        assert found is not None
        return found.partitions[partition].log

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id; a topic this broker does not have gets GHOST_ID."""
        found = self.cluster.topics.get(topic)
        return found.topic_id if found is not None else GHOST_ID

    def fetch(
        self,
        version: int,
        wanted: Sequence[Want],
        *,
        max_wait: datetime.timedelta = WAIT,
        min_bytes: int = 1,
        max_bytes: int = LARGE,
    ) -> bytes | PendingReply | None:
        topics: dict[str, list[Any]] = {}
        for w in wanted:
            topics.setdefault(w.topic, []).append(
                make(
                    FETCH,
                    version,
                    "FetchPartition",
                    partition=w.partition,
                    current_leader_epoch=-1,
                    fetch_offset=w.fetch_offset,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=w.partition_max_bytes,
                )
            )
        fetch_topics = tuple(
            make(
                FETCH,
                version,
                "FetchTopic",
                topic=name,
                topic_id=self.topic_id(name),
                partitions=tuple(partitions),
            )
            for name, partitions in topics.items()
        )
        return self.send(
            FETCH,
            version,
            replica_id=-1,
            max_wait=max_wait,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=fetch_topics,
            forgotten_topics_data=(),
            rack_id="",
        )

    def answer(self, reply: bytes | PendingReply | None, version: int) -> list[Got]:
        assert isinstance(reply, bytes), f"expected an answer, got {reply!r}"
        response = decode(reply, FETCH, version)
        if version >= 7:
            assert response.error_code.value == NONE
            assert response.session_id == 0
        names = {self.topic_id(name): name for name in ("orders", "audit", "ghost")}
        got = []
        for topic in response.responses:
            name = names[topic.topic_id] if version >= 13 else topic.topic
            for p in topic.partitions:
                if version >= 11:
                    assert p.preferred_read_replica == -1
                data = p.records or b""
                got.append(
                    Got(
                        name,
                        int(p.partition_index),
                        p.error_code.value,
                        int(p.high_watermark),
                        int(p.last_stable_offset),
                        int(p.log_start_offset) if version >= 5 else 0,
                        [h.base_offset for h, _ in records.split_batches(data)] if data else [],
                    )
                )
        return got


def ok(topic: str, partition: int, end: int, offsets: list[int]) -> Got:
    return Got(topic, partition, NONE, end, end, 0, offsets)


@pytest.fixture
def broker() -> Broker:
    return Broker()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_fetch_waits_for_data_and_an_append_wakes_it(broker: Broker, version: int) -> None:
    pending = broker.fetch(version, [Want("orders", 0)])
    assert isinstance(pending, PendingReply)
    assert pending.deadline == broker.clock.monotonic() + 0.5
    assert pending.finish(False) is None  # nothing arrived yet
    broker.produce("orders", 0)
    assert broker.woken == [broker.log("orders", 0)]
    assert set(broker.woken) <= set(pending.wait_keys)
    assert broker.answer(pending.finish(False), version) == [ok("orders", 0, 1, [0])]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_waiting_fetch_is_answered_empty_at_its_deadline(broker: Broker, version: int) -> None:
    pending = broker.fetch(version, [Want("orders", 0), Want("audit", 0)])
    assert isinstance(pending, PendingReply)
    broker.clock.advance(0.5)
    assert broker.answer(pending.finish(True), version) == [
        ok("orders", 0, 0, []),
        ok("audit", 0, 0, []),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_only_the_partitions_read_wake_a_fetch(broker: Broker, version: int) -> None:
    pending = broker.fetch(version, [Want("orders", 1), Want("audit", 0)])
    assert isinstance(pending, PendingReply)
    assert set(pending.wait_keys) == {broker.log("orders", 1), broker.log("audit", 0)}
    broker.produce("orders", 0)
    assert not set(broker.woken) & set(pending.wait_keys)
    assert pending.finish(False) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_min_bytes_counts_every_partition_read(broker: Broker, version: int) -> None:
    wanted = [Want("orders", 0), Want("orders", 1)]
    broker.produce("orders", 0)
    pending = broker.fetch(version, wanted, min_bytes=2 * BATCH)
    assert isinstance(pending, PendingReply)
    assert pending.finish(False) is None  # one batch of the two wanted
    broker.produce("orders", 1)
    assert broker.answer(pending.finish(False), version) == [
        ok("orders", 0, 1, [0]),
        ok("orders", 1, 1, [0]),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_exactly_min_bytes_available_is_answered_at_once(broker: Broker, version: int) -> None:
    broker.produce("orders", 0)
    reply = broker.fetch(version, [Want("orders", 0), Want("audit", 0)], min_bytes=BATCH)
    assert broker.answer(reply, version) == [ok("orders", 0, 1, [0]), ok("audit", 0, 0, [])]


@pytest.mark.parametrize("version", VERSIONS)
def test_partition_max_bytes_caps_what_counts_toward_min_bytes(
    broker: Broker, version: int
) -> None:
    for _ in range(3):
        broker.produce("orders", 0)
    pending = broker.fetch(
        version, [Want("orders", 0, partition_max_bytes=BATCH)], min_bytes=2 * BATCH
    )
    assert isinstance(pending, PendingReply)
    assert pending.finish(False) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_data_after_the_fetch_offset_only_counts(broker: Broker, version: int) -> None:
    broker.produce("orders", 0)
    pending = broker.fetch(version, [Want("orders", 0, fetch_offset=1)])
    assert isinstance(pending, PendingReply)
    broker.produce("orders", 0)
    assert broker.answer(pending.finish(False), version) == [ok("orders", 0, 2, [1])]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_partition_error_is_answered_at_once(broker: Broker, version: int) -> None:
    reply = broker.fetch(version, [Want("orders", 0), Want("orders", 0 + 1, fetch_offset=3)])
    assert broker.answer(reply, version) == [
        ok("orders", 0, 0, []),
        Got("orders", 1, OFFSET_OUT_OF_RANGE, -1, -1, -1 if version >= 5 else 0, []),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_partition_the_topic_lacks_is_answered_at_once(broker: Broker, version: int) -> None:
    reply = broker.fetch(version, [Want("audit", 1)])
    assert broker.answer(reply, version) == [
        Got("audit", 1, UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1 if version >= 5 else 0, [])
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_negative_fetch_offset_is_out_of_range_with_no_records(
    broker: Broker, version: int
) -> None:
    broker.produce("orders", 0)
    reply = broker.fetch(version, [Want("orders", 0, fetch_offset=-1)])
    # A partition with an error carries no offsets (-1; log start exists from v5).
    no_start = -1 if version >= 5 else 0
    assert broker.answer(reply, version) == [
        Got("orders", 0, OFFSET_OUT_OF_RANGE, -1, -1, no_start, [])
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_an_unknown_topic_is_answered_at_once(broker: Broker, version: int) -> None:
    reply = broker.fetch(version, [Want("ghost", 0)])
    code = UNKNOWN_TOPIC_ID if version >= 13 else UNKNOWN_TOPIC_OR_PARTITION
    assert broker.answer(reply, version) == [
        Got("ghost", 0, code, -1, -1, -1 if version >= 5 else 0, [])
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_min_bytes_zero_with_nothing_to_read_is_answered_at_once(
    broker: Broker, version: int
) -> None:
    reply = broker.fetch(version, [], min_bytes=0)
    assert broker.answer(reply, version) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_two_topics_are_answered_each_under_its_own_name(broker: Broker, version: int) -> None:
    broker.produce("audit", 0)
    broker.produce("orders", 1)
    broker.produce("orders", 1)
    reply = broker.fetch(version, [Want("orders", 1), Want("audit", 0), Want("orders", 0)])
    assert broker.answer(reply, version) == [
        ok("orders", 1, 2, [0, 1]),
        ok("orders", 0, 0, []),
        ok("audit", 0, 1, [0]),
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("max_bytes", [0, -1])
def test_max_bytes_of_zero_or_less_leaves_the_brokers_limit(
    broker: Broker, version: int, max_bytes: int
) -> None:
    for _ in range(3):
        broker.produce("orders", 0)
    reply = broker.fetch(version, [Want("orders", 0)], max_bytes=max_bytes, max_wait=WAIT * 0)
    assert broker.answer(reply, version) == [ok("orders", 0, 3, [0, 1, 2])]


@pytest.mark.parametrize("version", VERSIONS)
def test_max_bytes_of_one_gets_the_first_batch_alone(broker: Broker, version: int) -> None:
    for _ in range(3):
        broker.produce("orders", 0)
    reply = broker.fetch(version, [Want("orders", 0)], max_bytes=1)
    assert broker.answer(reply, version) == [ok("orders", 0, 3, [0])]
