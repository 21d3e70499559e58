"""Shared helpers for the consumer-group tests: real clients, real sockets.

Rebalances are watched twice: through each client's own rebalance callbacks (what the
application sees) and through the coordinator's stored assignments (what the broker
handed out), and the two must agree.
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from minibroker import Broker, Cluster
from minibroker.testing.backends import KafkaService

ROOT = Path(__file__).resolve().parents[2]

# A client stuck on a broker bug must fail the run, never hang it.
TEST_WATCHDOG_SECONDS = 100
SETTLE_TIMEOUT = 20.0  # seconds for a group to settle after a change

# Short timeouts so an expiry takes about a second; the broker's minimum is 100 ms.
SESSION_MS = 1_500
HEARTBEAT_MS = 100
# Kafka's default group.min.session.timeout.ms: Kafka refuses a shorter session
# (INVALID_SESSION_TIMEOUT), so tests marked parity ask a real Kafka for this much.
KAFKA_MIN_SESSION_MS = 6_000


def skip_before_kafka_4(config: pytest.Config) -> None:
    """Kafka 4's group features (the consumer group protocol, group configs) are not
    served by Kafka 3.9 with its default settings: skip against it."""
    backend = config.getoption("kafka_backend") or config.getini("kafka_backend")
    line = config.getoption("kafka_jvm_version") or config.getini("kafka_jvm_version")
    if backend == "kafka-jvm" and str(line) == "3.9":
        pytest.skip("Kafka 3.9 does not serve Kafka 4's group features by default")


def session_ms_for(broker: KafkaService) -> int:
    return SESSION_MS if isinstance(broker, Broker) else KAFKA_MIN_SESSION_MS


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(TEST_WATCHDOG_SECONDS, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def broker(kafka_broker: Any) -> Any:
    """A fresh minibroker; with --kafka-backend, that Kafka (for the tests marked parity)."""
    return kafka_broker


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(
    condition: Callable[[], bool],
    timeout: float,
    *,
    pump: Callable[[], object] | None = None,
    interval: float = 0.02,
) -> bool:
    """Poll `condition` until true or `timeout` seconds pass; `pump` drives the clients."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pump is not None:
            pump()
        if condition():
            return True
        if pump is None:
            time.sleep(interval)
    return condition()


async def eventually(condition: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """`wait_until` for coroutines: the event loop keeps running the clients meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(interval)
    return condition()


# --- what the broker handed out ---


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """A ConsumerProtocolAssignment (any version): topic -> partitions."""
    if not data:
        return {}
    position = 2  # int16 version
    (topics,) = struct.unpack_from(">i", data, position)
    position += 4
    result: dict[str, list[int]] = {}
    for _ in range(topics):
        (length,) = struct.unpack_from(">h", data, position)
        position += 2
        name = data[position : position + length].decode()
        position += length
        (count,) = struct.unpack_from(">i", data, position)
        position += 4
        result[name] = list(struct.unpack_from(f">{count}i", data, position))
        position += 4 * count
    return result


def broker_assignments(cluster: Cluster, group: str, topic: str) -> dict[str, list[int]]:
    """Member id -> partitions of `topic`, as the coordinator stored them."""
    return {
        member_id: sorted(decode_assignment(data).get(topic, []))
        for member_id, data in cluster.group_members(group).items()
    }


def by_client_id(
    assignments: Mapping[str, list[int]], client_ids: Iterable[str]
) -> dict[str, list[int]]:
    """Re-key member ids by the client id they start with (member id = client id + '-' ...)."""
    keyed: dict[str, list[int]] = {}
    for client_id in client_ids:
        owners = [m for m in assignments if m.startswith(f"{client_id}-")]
        assert len(owners) <= 1, f"{client_id} matches several members: {owners}"
        if owners:
            keyed[client_id] = assignments[owners[0]]
    return keyed


def assert_exact_cover(owned: Mapping[str, Iterable[int]], partitions: int) -> None:
    """Every partition owned by exactly one member."""
    flat = sorted(p for parts in owned.values() for p in parts)
    assert flat == list(range(partitions)), f"assignment is not an exact cover: {dict(owned)}"


def left_group(cluster: Cluster, client_id: str) -> bool:
    """Whether the broker received a LeaveGroup from `client_id`."""
    return any(
        r.api == "LeaveGroup" and r.client_id == client_id for r in cluster.recent_requests()
    )


# --- what the clients saw ---


@dataclass
class RebalanceLog:
    """Rebalance callbacks of several members, in arrival order (thread safe)."""

    events: list[tuple[float, str, str, tuple[int, ...]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, member: str, kind: str, partitions: Iterable[int]) -> None:
        with self._lock:
            self.events.append((time.monotonic(), member, kind, tuple(sorted(partitions))))

    def of(self, member: str) -> list[tuple[str, tuple[int, ...]]]:
        with self._lock:
            return [(kind, parts) for _, who, kind, parts in self.events if who == member]

    def owned(self, member: str) -> set[int]:
        """Partitions a member holds after the callbacks so far (eager protocol)."""
        current: set[int] = set()
        for kind, parts in self.of(member):
            if kind == "assigned":
                current = set(parts)
            else:
                current -= set(parts)
        return current

    def count(self, member: str, kind: str) -> int:
        return sum(1 for k, _ in self.of(member) if k == kind)

    def since(self, moment: float) -> list[tuple[float, str, str, tuple[int, ...]]]:
        with self._lock:
            return [event for event in self.events if event[0] >= moment]


def group_snapshot(cluster: Cluster, group: str) -> tuple[str | None, int, dict[str, bytes]]:
    """(state, generation, member id -> assignment bytes), read in one step on the broker's
    loop so that no rebalance can slip in between the parts."""

    def read() -> tuple[str | None, int, dict[str, bytes]]:
        found = cluster.state.groups.groups.get(group)
        if found is None:
            return None, -1, {}
        members = {m.member_id: m.assignment for m in found.members.values()}
        return found.state.value, found.generation, members

    return cluster._on_loop(read)


def settled(
    cluster: Cluster,
    group: str,
    topic: str,
    partitions: int,
    log: RebalanceLog,
    members: Iterable[str],
    prefixes: Mapping[str, str] | None = None,
) -> bool:
    """The group is Stable with exactly `members`, and what each client believes it owns
    is what the coordinator handed it, covering every partition exactly once.

    A member id starts with the client id, or with the group.instance.id of a static
    member: `prefixes` maps a member's name in `log` to that prefix where they differ."""
    names = list(members)
    prefix_of = {name: (prefixes or {}).get(name, name) for name in names}
    state, _, stored_bytes = group_snapshot(cluster, group)
    if state != "Stable":
        return False
    stored = {
        member_id: sorted(decode_assignment(data).get(topic, []))
        for member_id, data in stored_bytes.items()
    }
    if len(stored) != len(names):
        return False
    by_prefix = by_client_id(stored, prefix_of.values())
    if len(by_prefix) != len(names):
        return False
    keyed = {name: by_prefix[prefix_of[name]] for name in names}
    seen = {name: sorted(log.owned(name)) for name in names}
    if seen != keyed:
        return False
    flat = sorted(p for parts in keyed.values() for p in parts)
    return flat == list(range(partitions))


class MemberProcess:
    """`tests.groups.member` in a child process; its callback lines go into `log`."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        topic: str,
        group: str,
        client_id: str,
        log: RebalanceLog,
        session_ms: int = SESSION_MS,
        heartbeat_ms: int = HEARTBEAT_MS,
    ) -> None:
        self.client_id = client_id
        self.log = log
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.groups.member",
                client,
                bootstrap,
                topic,
                group,
                client_id,
                str(session_ms),
                str(heartbeat_ms),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind in ("assigned", "revoked"):
                self.log.record(self.client_id, kind, [int(p) for p in rest.split(",") if p])

    def kill(self) -> None:
        """SIGKILL: the client gets no chance to send LeaveGroup or close its sockets."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def close(self) -> None:
        self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def member_processes() -> Iterator[list[MemberProcess]]:
    """Child-process members started by a test; killed at the end whatever happens."""
    started: list[MemberProcess] = []
    yield started
    for member in started:
        member.close()
