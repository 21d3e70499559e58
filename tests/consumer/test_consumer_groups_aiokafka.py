"""Library consumers (on aiokafka) in real groups on minibroker: rebalances and a kill."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from minibroker import Broker
from minibroker.consumer import Consumer
from tests.consumer.conftest import produce, wait_until

ROOT = Path(__file__).resolve().parents[2]
GROUP_SETTINGS: dict[str, Any] = {
    "heartbeat_interval_ms": 100,
    "session_timeout_ms": 1500,
    "retry_backoff_ms": 50,
}


def member(
    broker: Broker, group: str, topic: str, seen: list[tuple[str, int, int]], name: str, **kw: Any
) -> Consumer:
    async def handle(record: Any) -> None:
        await asyncio.sleep(0.002)
        seen.append((name, record.partition, record.offset))

    return Consumer(
        handle,
        bootstrap_servers=broker.bootstrap_servers,
        group_id=group,
        topics=[topic],
        concurrency=4,
        **GROUP_SETTINGS,
        **kw,
    )


async def test_rebalances_while_consuming_lose_and_repeat_nothing(broker: Broker) -> None:
    # Members join and leave mid-stream. Each revocation stops handing out records,
    # waits for in-flight handlers, commits, then releases, so the next owner starts
    # exactly after the last finished record: no record twice, none lost.
    broker.create_topic("events", 12)
    produced = 0  # records per partition

    async def more(count: int) -> None:
        # Records produced once a member holds partitions: it has work to do whatever
        # the others got through before, and the stream goes on while members change.
        nonlocal produced
        await produce(broker.bootstrap_servers, "events", count, partitions=12)
        produced += count

    def consuming(name: str) -> bool:
        return any(n == name for n, _, _ in seen)

    await more(150)
    seen: list[tuple[str, int, int]] = []
    first = member(broker, "rebalancing", "events", seen, "first", assignor="range")
    second = member(broker, "rebalancing", "events", seen, "second", assignor="range")
    third = member(broker, "rebalancing", "events", seen, "third", assignor="range")
    await first.start()
    await wait_until(lambda: len(seen) > 100, what="first member consuming")
    await second.start()
    await wait_until(lambda: bool(second.assignment()), what="second assigned")
    await more(50)
    await wait_until(lambda: consuming("second"), what="second consuming")
    await third.start()
    await wait_until(lambda: bool(third.assignment()), what="third assigned")
    await more(50)
    await wait_until(lambda: consuming("third"), what="third consuming")
    await more(50)
    await first.stop()  # leaves the group with records of its partitions still to handle
    everything = {(p, o) for p in range(12) for o in range(produced)}
    await wait_until(lambda: {(p, o) for _, p, o in seen} == everything, what="all records")
    await asyncio.gather(second.stop(), third.stop())

    handled = Counter((p, o) for _, p, o in seen)
    assert set(handled) == everything
    assert [key for key, times in handled.items() if times > 1] == []
    assert {name for name, _, _ in seen} == {"first", "second", "third"}
    per_partition: dict[int, list[int]] = defaultdict(list)
    for _, partition, offset in seen:
        per_partition[partition].append(offset)
    assert all(offsets == sorted(offsets) for offsets in per_partition.values())


def read_log(path: Path) -> tuple[list[tuple[int, int]], dict[int, int]]:
    records: list[tuple[int, int]] = []
    commits: dict[int, int] = {}
    for line in path.read_text().splitlines():
        kind, partition, offset = line.split()
        if kind == "r":
            records.append((int(partition), int(offset)))
        else:
            commits[int(partition)] = max(commits.get(int(partition), 0), int(offset))
    return records, commits


async def test_member_killed_mid_stream_loses_nothing(broker: Broker, tmp_path: Path) -> None:
    """Three members share 12 partitions; one is SIGKILLed (no LeaveGroup, no commit)."""
    broker.create_topic("orders", 12)
    await produce(broker.bootstrap_servers, "orders", 200, partitions=12)
    # 100 more per partition are produced just before the kill (below).
    everything = {(p, o) for p in range(12) for o in range(300)}
    log = tmp_path / "killed.log"
    log.touch()
    command = [sys.executable, "-m", "tests.consumer._member", broker.bootstrap_servers]
    victim = subprocess.Popen(
        [*command, "killing", "orders", str(log)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    seen: list[tuple[str, int, int]] = []
    survivors = [
        member(broker, "killing", "orders", seen, f"s{i}", assignor="sticky", commit="per_batch")
        for i in range(2)
    ]
    try:
        await wait_until(lambda: len(read_log(log)[0]) >= 20, what="victim consuming")
        for survivor in survivors:
            await survivor.start()
        await wait_until(
            lambda: (
                all(s.assignment() for s in survivors)
                and sum(len(s.assignment()) for s in survivors) < 12
                and len(read_log(log)[0]) >= 200
            ),
            what="a three-member group with the victim mid-stream",
        )
        # Fresh records on every partition just before the kill: the victim dies with
        # work left on its partitions however far it had got, and cannot have handled
        # those of the survivors' partitions.
        await produce(broker.bootstrap_servers, "orders", 100, partitions=12)
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed_at = len(seen)
        victim_records, victim_commits = read_log(log)
        assert len({(p, o) for p, o in victim_records}) < len(everything)

        def all_done() -> bool:
            return {(p, o) for _, p, o in seen} | set(victim_records) == everything

        await wait_until(all_done, timeout=30, what="survivors to finish the victim's share")
        assert len(seen) > killed_at
        assert sum(len(s.assignment()) for s in survivors) == 12
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        await asyncio.gather(*(s.stop() for s in survivors))

    survivor_counts = Counter((p, o) for _, p, o in seen)
    assert [key for key, times in survivor_counts.items() if times > 1] == []
    repeated = sorted(set(survivor_counts) & set(victim_records))
    # Every repeat is a record the victim finished after its last commit of that
    # partition: the only work a dead member can leave unrecorded.
    assert all(offset >= victim_commits.get(partition, 0) for partition, offset in repeated)
    uncommitted = [(p, o) for p, o in victim_records if o >= victim_commits.get(p, 0)]
    assert len(repeated) <= len(uncommitted)
