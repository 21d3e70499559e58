"""Shared helpers for the interop tests: real clients, real sockets, one broker per test."""

from __future__ import annotations

import faulthandler
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from minibroker import Broker
from minibroker.protocol import records
from minibroker.protocol.records import BatchHeader

# Seconds a single interop test may run before the process dumps every thread's stack
# and exits: a client stuck on a broker bug must fail the run, never hang it.
TEST_WATCHDOG_SECONDS = 90

CODECS = ("gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {name: code for code, name in records.CODEC_NAMES.items()}

ONE_MIB = 1024 * 1024
# Room for a 1 MiB value plus batch and record overhead.
LARGE_TOPIC_CONFIGS = {"max.message.bytes": str(2 * ONE_MIB)}
LARGE_CLIENT_LIMIT = 4 * ONE_MIB
SMALL_FETCH_LIMIT = 64 * 1024  # well below one 1 MiB record

# An explicit CreateTime far from the wall clock, so a broker that rewrote it would show.
CREATE_TIME_MS = 1_600_000_000_123


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(TEST_WATCHDOG_SECONDS, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


def unique_client_id(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns()}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def stored_batch_headers(broker: Broker, topic: str, partition: int = 0) -> list[BatchHeader]:
    """The headers of the batches the broker stored, as clients sent them."""

    def read() -> list[BatchHeader]:
        found = broker.state.topics.get(topic)
        assert found is not None, f"topic {topic} is not on the broker"
        return [records.read_header(batch) for batch in found.partitions[partition].log.batches()]

    return broker._on_loop(read)


def answer_times(broker: Broker, client_id: str, api: str) -> list[float]:
    """When the broker answered the `api` requests one client sent (seconds), oldest first."""
    # On the broker's loop: its request log is appended to there.
    records = broker._on_loop(broker.recent_requests)
    return [r.at for r in records if r.api == api and r.client_id == client_id]


def fetch_arrivals(broker: Broker, client_id: str) -> list[float]:
    """When the broker answered the Fetch requests one client sent (seconds), oldest first."""
    return answer_times(broker, client_id, "Fetch")


# Enough answered fetches for assert_fetches_waited to see two gaps.
WAITED_FETCHES = 3
# Slack over max_wait for a gap between two empty fetches: the client's own turnaround
# on a loaded machine. Only a hold far past max_wait (a fetch left hanging) exceeds it.
FETCH_GAP_SLACK = 5.0


def assert_fetches_waited(broker: Broker, client_id: str, max_wait_ms: int) -> None:
    """Each empty fetch must be held for about max_wait before the next one can follow.

    A client keeps at most one fetch in flight per broker and sends the next as soon as the
    previous is answered, so the spacing between the answers to its fetches is how long the
    broker held each one. A broker that answered an empty fetch at once would show a tight
    loop; one that held it far past max_wait, gaps of seconds.
    """
    arrivals = fetch_arrivals(broker, client_id)
    assert len(arrivals) >= 2, f"expected repeated fetches from {client_id}, got {arrivals}"
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert min(gaps) >= max_wait_ms / 1000 / 2, f"fetches were not held: gaps {gaps}"
    ceiling = max_wait_ms / 1000 + FETCH_GAP_SLACK
    assert max(gaps) <= ceiling, f"fetches were held past max_wait: gaps {gaps}"


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2: 32-bit MurmurHash2, seed 0x9747b28c, as a signed Java int."""
    mask = 0xFFFFFFFF
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, partitions: int) -> int:
    """The partition Java's default partitioner picks for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def key_for_each_partition(partitions: int, prefix: str = "key") -> list[bytes]:
    """One key per partition (index = partition) under Java's default partitioner."""
    found: dict[int, bytes] = {}
    counter = 0
    while len(found) < partitions:
        key = f"{prefix}-{counter}".encode()
        found.setdefault(java_partition(key, partitions), key)
        counter += 1
    return [found[p] for p in range(partitions)]


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Poll `condition` until it returns true or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())
