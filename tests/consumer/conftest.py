from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest
from aiokafka import AIOKafkaProducer

from minibroker import Broker


@pytest.fixture
def broker() -> Iterator[Broker]:
    """A broker on its own loop thread, so a busy test loop cannot slow it down."""
    with Broker() as running:
        yield running


async def produce(
    bootstrap: str, topic: str, count: int, partitions: int = 1, size: int = 0
) -> None:
    """`count` records per partition; values are "<partition>:<n>" padded to `size`."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        futures = []
        for n in range(count):
            for partition in range(partitions):
                value = f"{partition}:{n}".encode().ljust(size, b".")
                futures.append(await producer.send(topic, value, partition=partition))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def wait_until(check: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.01)
