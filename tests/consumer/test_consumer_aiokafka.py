"""The `Consumer` engine (on aiokafka) against minibroker, with assigned partitions."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from minibroker import Broker
from minibroker.consumer import Consumer, HandlerError, RetryPolicy
from tests.consumer.conftest import produce, wait_until

FAST_RETRY = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.02)


def all_partitions(topic: str, count: int) -> list[tuple[str, int]]:
    return [(topic, p) for p in range(count)]


async def test_order_kept_per_partition_and_partitions_run_in_parallel(broker: Broker) -> None:
    broker.create_topic("orders", 4)
    await produce(broker.bootstrap_servers, "orders", 200, partitions=4)
    seen: dict[int, list[int]] = defaultdict(list)
    partner_started = asyncio.Event()

    async def handle(record: Any) -> None:
        # Partition 0's first record cannot finish until partition 1 is being handled:
        # with one partition at a time this would never complete.
        if record.partition == 1:
            partner_started.set()
        if record.partition == 0 and record.offset == 0:
            await asyncio.wait_for(partner_started.wait(), 10)
        seen[record.partition].append(record.offset)

    consumer = Consumer(
        handle, bootstrap_servers=broker.bootstrap_servers, partitions=all_partitions("orders", 4)
    )
    async with consumer:
        await wait_until(lambda: sum(map(len, seen.values())) == 800, what="800 records")
    assert {p: offsets == list(range(200)) for p, offsets in seen.items()} == {
        p: True for p in range(4)
    }


async def test_sync_handlers_run_in_threads_in_parallel_and_in_order(broker: Broker) -> None:
    broker.create_topic("jobs", 3)
    await produce(broker.bootstrap_servers, "jobs", 100, partitions=3)
    barrier = threading.Barrier(3, timeout=10)
    seen: dict[int, list[int]] = defaultdict(list)
    threads: set[str] = set()
    lock = threading.Lock()

    def handle(record: Any) -> None:
        if record.offset == 0:
            barrier.wait()  # all three partitions' first records at once
        with lock:
            seen[record.partition].append(record.offset)
            threads.add(threading.current_thread().name)

    consumer = Consumer(
        handle,
        bootstrap_servers=broker.bootstrap_servers,
        partitions=all_partitions("jobs", 3),
        concurrency=3,
    )
    async with consumer:
        await wait_until(lambda: sum(map(len, seen.values())) == 300, what="300 records")
    assert all(seen[p] == list(range(100)) for p in range(3))
    assert threading.current_thread().name not in threads
    assert len(threads) >= 3


async def test_concurrency_bounds_handlers_in_flight(broker: Broker) -> None:
    broker.create_topic("t", 6)
    await produce(broker.bootstrap_servers, "t", 30, partitions=6)
    running = 0
    peak = 0
    done = 0
    two_at_once = asyncio.Event()

    async def handle(record: Any) -> None:
        nonlocal running, peak, done
        running += 1
        peak = max(peak, running)
        if running == 2:
            two_at_once.set()
        # The first handler holds until a second runs beside it, so the bound is reached
        # whatever the scheduling; a third, were it allowed, would start meanwhile.
        await asyncio.wait_for(two_at_once.wait(), 10)
        await asyncio.sleep(0.001)  # the handler's work: in flight across a yield
        running -= 1
        done += 1

    consumer = Consumer(
        handle,
        bootstrap_servers=broker.bootstrap_servers,
        partitions=all_partitions("t", 6),
        concurrency=2,
    )
    async with consumer:
        await wait_until(lambda: done == 180, what="180 records")
    assert peak == 2


async def _one_topic_stopped(broker: Broker, *, block: bool, topic_limit: bool = False) -> None:
    """Three topics; one is blocked (its handler never returns) or paused."""
    for topic in ("slow", "a", "b"):
        broker.create_topic(topic, 4)
    await produce(broker.bootstrap_servers, "slow", 300, partitions=4)
    await produce(broker.bootstrap_servers, "a", 300, partitions=4)
    await produce(broker.bootstrap_servers, "b", 300, partitions=4)
    release = asyncio.Event()
    processed: dict[str, int] = defaultdict(int)

    async def slow(record: Any) -> None:
        if block:
            await release.wait()
        processed["slow"] += 1

    async def fast(record: Any) -> None:
        processed[record.topic] += 1

    bound = 25
    consumer = Consumer(
        {"slow": slow, "a": fast, "b": fast},
        bootstrap_servers=broker.bootstrap_servers,
        partitions=[(t, p) for t in ("slow", "a", "b") for p in range(4)],
        concurrency=4 if topic_limit else 8,
        topic_concurrency={"slow": 1} if topic_limit else None,
        max_buffered_records=bound,
        revoke_timeout=2,
    )
    if not block:
        consumer.pause("slow")
    peaks: list[int] = []

    def others_done() -> bool:
        peaks.append(max((p.buffered for p in consumer.describe().partitions), default=0))
        return processed["a"] == 1200 and processed["b"] == 1200

    async with consumer:
        await wait_until(others_done, what="topics a and b to finish")
        snapshot = consumer.describe()
        slow_parts = [p for p in snapshot.partitions if p.topic == "slow"]
        assert all(p.fetch_paused for p in slow_parts)
        assert all(p.max_buffered <= bound for p in snapshot.partitions)
        assert max(peaks) <= bound
        assert processed["slow"] == 0
        if block:
            assert snapshot.in_flight == (1 if topic_limit else 4)
            # The blocked partitions filled up to the bound (less the record in flight).
            assert all(bound - 1 <= p.buffered <= bound for p in slow_parts)
            release.set()
        else:
            assert all(p.in_flight == 0 and p.paused for p in slow_parts)
            consumer.resume("slow")
        await wait_until(lambda: processed["slow"] == 1200, what="the slow topic after release")
        assert all(p.max_buffered <= bound for p in consumer.describe().partitions)


async def test_one_stopped_topic_blocked_topic_does_not_stall_the_others(broker: Broker) -> None:
    await _one_topic_stopped(broker, block=True)


async def test_one_stopped_topic_paused_topic_does_not_stall_the_others(broker: Broker) -> None:
    await _one_topic_stopped(broker, block=False)


async def test_topic_concurrency_keeps_workers_for_other_topics(
    broker: Broker,
) -> None:
    # Four workers, four blocked partitions: without the per-topic cap the blocked
    # topic would hold every worker.
    await _one_topic_stopped(broker, block=True, topic_limit=True)


async def test_pause_and_resume_single_partition_at_run_time(broker: Broker) -> None:
    broker.create_topic("t", 2)
    await produce(broker.bootstrap_servers, "t", 50, partitions=2)
    seen: dict[int, int] = defaultdict(int)

    async def handle(record: Any) -> None:
        seen[record.partition] += 1

    consumer = Consumer(
        handle, bootstrap_servers=broker.bootstrap_servers, partitions=all_partitions("t", 2)
    )
    consumer.pause(("t", 1))
    async with consumer:
        await wait_until(lambda: seen[0] == 50, what="partition 0")
        assert seen[1] == 0
        assert consumer.paused() == {("t", 1)}
        await produce(broker.bootstrap_servers, "t", 10, partitions=2)
        await wait_until(lambda: seen[0] == 60, what="partition 0 again")
        assert seen[1] == 0
        consumer.resume(("t", 1))
        await wait_until(lambda: seen[1] == 60, what="partition 1 after resume")
        assert consumer.paused() == set()


async def test_retry_with_backoff_then_success_keeps_order(broker: Broker) -> None:
    broker.create_topic("t", 1)
    await produce(broker.bootstrap_servers, "t", 10)
    failures = 0
    seen: list[int] = []

    async def handle(record: Any) -> None:
        nonlocal failures
        if record.offset == 3 and failures < 2:
            failures += 1
            raise RuntimeError("flaky")
        seen.append(record.offset)

    consumer = Consumer(
        handle,
        bootstrap_servers=broker.bootstrap_servers,
        partitions=[("t", 0)],
        retry=FAST_RETRY,
    )
    async with consumer:
        await wait_until(lambda: len(seen) == 10, what="10 records")
        assert consumer.describe().retried == 2
    assert seen == list(range(10))


async def test_dead_letter_after_retries_then_continue(broker: Broker) -> None:
    broker.create_topic("t", 1)
    broker.create_topic("t.dlt", 1)
    await produce(broker.bootstrap_servers, "t", 10)
    attempts = 0
    seen: list[int] = []

    def handle(record: Any) -> None:  # sync: exercises retries in the thread pool
        nonlocal attempts
        if record.offset == 5:
            attempts += 1
            raise ValueError("poison")
        seen.append(record.offset)

    consumer = Consumer(
        handle,
        bootstrap_servers=broker.bootstrap_servers,
        partitions=[("t", 0)],
        retry=FAST_RETRY,
        dead_letter_topic="t.dlt",
    )
    async with consumer:
        await wait_until(lambda: len(seen) == 9, what="9 good records")
        snapshot = consumer.describe()
        assert snapshot.dead_lettered == 1
        assert snapshot.partition("t", 0).position == 10
    assert seen == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert attempts == 3

    reader = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    await reader.start()
    try:
        reader.assign([TopicPartition("t.dlt", 0)])
        await reader.seek_to_beginning(TopicPartition("t.dlt", 0))
        batch = await reader.getmany(timeout_ms=5000)
    finally:
        await reader.stop()
    (records,) = batch.values()
    assert [r.value for r in records] == [b"0:5"]
    headers = dict(records[0].headers)
    assert headers["dlt.original.topic"] == b"t"
    assert headers["dlt.original.offset"] == b"5"
    assert b"poison" in headers["dlt.error"]
    assert headers["dlt.attempts"] == b"3"


async def committed(broker: Broker, group: str, topic: str, partition: int) -> int | None:
    reader = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group)
    await reader.start()
    try:
        value: int | None = await reader.committed(TopicPartition(topic, partition))
        return value
    finally:
        await reader.stop()


async def test_stop_on_failure_commits_only_before_the_failed_record(broker: Broker) -> None:
    broker.create_topic("t", 2)
    await produce(broker.bootstrap_servers, "t", 20, partitions=2)
    seen: dict[int, list[int]] = defaultdict(list)

    async def handle(record: Any) -> None:
        if record.partition == 0 and record.offset == 5:
            raise KeyError("broken")
        seen[record.partition].append(record.offset)

    consumer = Consumer(
        handle,
        bootstrap_servers=broker.bootstrap_servers,
        group_id="stopper",
        partitions=all_partitions("t", 2),
        retry=RetryPolicy(attempts=2, backoff=0.01),
        max_buffered_records=4,
    )
    with pytest.raises(HandlerError) as raised:
        await asyncio.wait_for(consumer.run(), 30)
    assert raised.value.record.offset == 5
    assert isinstance(raised.value.error, KeyError)
    assert consumer.state == "stopped"
    assert seen[0] == [0, 1, 2, 3, 4]  # nothing after the failed record ran
    assert await committed(broker, "stopper", "t", 0) == 5
    assert await committed(broker, "stopper", "t", 1) == len(seen[1])


async def test_manual_commit_stores_only_the_finished_prefix(broker: Broker) -> None:
    broker.create_topic("t", 1)
    await produce(broker.bootstrap_servers, "t", 30)
    gate = asyncio.Event()
    seen: list[int] = []

    async def handle(record: Any) -> None:
        if record.offset == 10:
            await gate.wait()
        seen.append(record.offset)

    consumer = Consumer(
        handle,
        bootstrap_servers=broker.bootstrap_servers,
        group_id="manual",
        partitions=[("t", 0)],
        commit="manual",
    )
    async with consumer:
        await wait_until(lambda: len(seen) == 10, what="first ten")
        await wait_until(lambda: consumer.describe().partition("t", 0).buffered > 0)
        snapshot = consumer.describe().partition("t", 0)
        assert snapshot.in_flight == 1
        assert snapshot.position == 10
        assert snapshot.highwater == 30
        assert snapshot.lag == 20
        assert await consumer.commit() == {("t", 0): 10}
        assert await committed(broker, "manual", "t", 0) == 10
        gate.set()
        await wait_until(lambda: len(seen) == 30, what="the rest")
        assert await consumer.commit() == {("t", 0): 30}
        assert await consumer.commit() == {}  # nothing new
    assert await committed(broker, "manual", "t", 0) == 30


async def test_restart_resumes_from_the_committed_offset(broker: Broker) -> None:
    broker.create_topic("t", 1)
    await produce(broker.bootstrap_servers, "t", 40)
    seen: list[int] = []

    async def handle(record: Any) -> None:
        seen.append(record.offset)

    first = Consumer(
        handle,
        bootstrap_servers=broker.bootstrap_servers,
        group_id="restart",
        partitions=[("t", 0)],
        commit="per_batch",
    )
    async with first:
        await wait_until(lambda: len(seen) == 40)
        await wait_until(lambda: first.describe().partition("t", 0).committed == 40)
    await produce(broker.bootstrap_servers, "t", 5)
    seen.clear()
    second = Consumer(
        handle,
        bootstrap_servers=broker.bootstrap_servers,
        group_id="restart",
        partitions=[("t", 0)],
    )
    async with second:
        await wait_until(lambda: len(seen) == 5)
    assert seen == list(range(40, 45))


async def test_describe_reports_rates_and_buffers(broker: Broker) -> None:
    broker.create_topic("t", 2)
    await produce(broker.bootstrap_servers, "t", 100, partitions=2, size=50)
    count = 0

    async def handle(record: Any) -> None:
        nonlocal count
        count += 1

    consumer = Consumer(
        handle, bootstrap_servers=broker.bootstrap_servers, partitions=all_partitions("t", 2)
    )
    async with consumer:
        await wait_until(lambda: count == 200)
        snapshot = consumer.describe()
    assert snapshot.processed == 200
    assert snapshot.records_per_second > 0
    assert snapshot.bytes_per_second >= 50 * snapshot.records_per_second
    assert [p.processed for p in snapshot.partitions] == [100, 100]
    assert all(p.lag == 0 and p.buffered == 0 for p in snapshot.partitions)
    assert snapshot.to_dict()["partitions"][0]["topic"] == "t"


def test_configuration_errors_are_reported_up_front() -> None:
    async def handle(record: Any) -> None:
        return None

    with pytest.raises(ValueError, match="no handler for topic 'other'"):
        Consumer({"t": handle}, bootstrap_servers="x:1", partitions=[("other", 0)])
    with pytest.raises(ValueError, match="dead_letter_topic"):
        Consumer(handle, bootstrap_servers="x:1", topics=["t"], on_failure="dead_letter")
    with pytest.raises(ValueError, match="not both"):
        Consumer(handle, bootstrap_servers="x:1", topics=["t"], partitions=[("t", 0)])
    with pytest.raises(ValueError, match="batch_size"):
        Consumer(handle, bootstrap_servers="x:1", topics=["t"], concurrency=0)
