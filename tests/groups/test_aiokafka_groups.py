"""aiokafka consumer groups: growth 1 -> 2 -> 3, a killed member, committed offsets."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from minibroker import Broker
from minibroker.testing.backends import KafkaService
from tests.groups.conftest import (
    HEARTBEAT_MS,
    SESSION_MS,
    SETTLE_TIMEOUT,
    MemberProcess,
    RebalanceLog,
    eventually,
    left_group,
    session_ms_for,
    settled,
    unique,
)

PARTITIONS = 6


async def produce(
    bootstrap: str, topic: str, per_partition: dict[int, int], start: int = 0
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        sent = [
            await producer.send(topic, f"{partition}:{i}".encode(), partition=partition)
            for partition, count in per_partition.items()
            for i in range(start, start + count)
        ]
        await asyncio.wait_for(asyncio.gather(*sent), 15)
    finally:
        await producer.stop()


def consumer_settings(bootstrap: str, group: str, **overrides: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "session_timeout_ms": SESSION_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "auto_offset_reset": "earliest",
        "retry_backoff_ms": 50,
        "request_timeout_ms": 10_000,
        **overrides,
    }


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, name: str, log: RebalanceLog) -> None:
        self.name = name
        self.log = log

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.log.record(self.name, "revoked", (tp.partition for tp in revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.log.record(self.name, "assigned", (tp.partition for tp in assigned))


class Member:
    """An aiokafka consumer on the test's event loop, fetching in a task of its own."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, name: str, log: RebalanceLog
    ) -> None:
        self.name = name
        self.topic = topic
        self.log = log
        self.records: list[tuple[int, int]] = []
        self.consumer = AIOKafkaConsumer(**consumer_settings(bootstrap, group, client_id=name))
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Member:
        await self.consumer.start()
        self.consumer.subscribe([self.topic], listener=Listener(self.name, self.log))
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=100)
            for tp, found in batches.items():
                self.records.extend((tp.partition, r.offset) for r in found)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()


@pytest.fixture
async def members() -> AsyncIterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        await member.stop()


async def test_aiokafka_group_grows_one_two_three(broker: Broker, members: list[Member]) -> None:
    topic, group, log = unique("grow"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    names = ["a1", "a2", "a3"]
    for count, name in enumerate(names, start=1):
        mark = time.monotonic()
        members.append(await Member(broker.bootstrap_servers, topic, group, name, log).start())
        present = names[:count]
        assert await eventually(
            lambda present=present: settled(broker, group, topic, PARTITIONS, log, present),
            SETTLE_TIMEOUT,
        ), f"{count} members did not settle: {log.events}"
        for earlier in present[:-1]:
            kinds = [kind for _, who, kind, _ in log.since(mark) if who == earlier]
            assert "revoked" in kinds and kinds[-1] == "assigned", (earlier, kinds)
        sizes = sorted(len(log.owned(name)) for name in present)
        assert sizes == {1: [6], 2: [3, 3], 3: [2, 2, 2]}[count]

    await produce(broker.bootstrap_servers, topic, dict.fromkeys(range(PARTITIONS), 10))
    assert await eventually(
        lambda: sum(len(m.records) for m in members) >= 10 * PARTITIONS, SETTLE_TIMEOUT
    )
    for member in members:
        assert {p for p, _ in member.records} <= log.owned(member.name)
    read = sorted(r for m in members for r in m.records)
    assert read == [(p, o) for p in range(PARTITIONS) for o in range(10)]


async def test_aiokafka_killed_member_expelled_after_session_timeout(
    broker: Broker, members: list[Member], member_processes: list[MemberProcess]
) -> None:
    topic, group, log = unique("kill"), unique("group"), RebalanceLog()
    broker.create_topic(topic, PARTITIONS)
    survivors = ["s1", "s2"]
    for name in survivors:
        members.append(await Member(broker.bootstrap_servers, topic, group, name, log).start())
    # In a child process so that SIGKILL cuts its connections with no LeaveGroup.
    victim = MemberProcess("aiokafka", broker.bootstrap_servers, topic, group, "victim", log)
    member_processes.append(victim)
    everyone = [*survivors, "victim"]
    assert await eventually(
        lambda: settled(broker, group, topic, PARTITIONS, log, everyone), SETTLE_TIMEOUT
    ), log.events
    held = log.owned("victim")
    assert held

    killed_at = time.monotonic()
    victim.kill()
    assert await eventually(
        lambda: settled(broker, group, topic, PARTITIONS, log, survivors), SETTLE_TIMEOUT
    ), log.events
    assert not left_group(broker, "victim"), "SIGKILL must leave no LeaveGroup behind"
    moves = [at for at, who, kind, _ in log.since(killed_at) if kind == "assigned"]
    # Moved by the session timeout (not at once), and not long after it expired.
    assert SESSION_MS / 2000 <= min(moves) - killed_at <= SESSION_MS / 1000 + 10, (
        min(moves) - killed_at
    )
    assert held <= log.owned("s1") | log.owned("s2")


@pytest.mark.parity
async def test_aiokafka_committed_offsets_survive_restart(broker: KafkaService) -> None:
    topic, group = unique("commit"), unique("group")
    partitions, per_partition = 3, 20
    broker.create_topic(topic, partitions)
    await produce(broker.bootstrap_servers, topic, dict.fromkeys(range(partitions), per_partition))
    settings = consumer_settings(
        broker.bootstrap_servers,
        group,
        enable_auto_commit=False,
        session_timeout_ms=session_ms_for(broker),
    )

    async def read(consumer: AIOKafkaConsumer, count: int) -> list[tuple[int, int]]:
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                record = await asyncio.wait_for(consumer.getone(), 0.5)
                got.append((record.partition, record.offset))
        return got

    first = AIOKafkaConsumer(**settings)
    await first.start()
    try:
        first.subscribe([topic])
        processed = await read(first, 30)
        assert len(processed) == 30
        committed = {p: max(o for q, o in processed if q == p) + 1 for p, _ in processed}
        await first.commit({TopicPartition(topic, p): o for p, o in committed.items()})
        tail = await read(first, partitions * per_partition - 30)
    finally:
        await first.stop()
    assert sorted(processed + tail) == [
        (p, o) for p in range(partitions) for o in range(per_partition)
    ]

    await produce(
        broker.bootstrap_servers, topic, dict.fromkeys(range(partitions), 5), start=per_partition
    )
    second = AIOKafkaConsumer(**settings)
    await second.start()
    try:
        second.subscribe([topic])
        starts = {p: committed.get(p, 0) for p in range(partitions)}
        expected = [(p, o) for p in range(partitions) for o in range(starts[p], per_partition + 5)]
        resumed = await read(second, len(expected))
        extra = await second.getmany(timeout_ms=500)
        assert not any(extra.values()), "records beyond the end"
        stored = {p: await second.committed(TopicPartition(topic, p)) for p in committed}
    finally:
        await second.stop()
    assert stored == committed
    assert sorted(resumed) == expected
    for p in range(partitions):
        mine = [o for q, o in resumed if q == p]
        assert mine[0] == starts[p], f"partition {p} resumed at {mine[0]}, not {starts[p]}"
    duplicates = set(processed + tail) & set(resumed)
    assert duplicates == {r for r in tail if r[1] >= committed.get(r[0], 0)}
    assert set(processed) & set(resumed) == set()
    assert 0 < sum(committed.values()) < partitions * per_partition
