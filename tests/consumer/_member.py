"""A group member in its own process, so a test can kill it without a LeaveGroup.

    python -m tests.consumer._member BOOTSTRAP GROUP TOPIC LOG

Appends "r <partition> <offset>" for every record handled and "c <partition> <offset>"
for every commit, flushed at once so the lines survive SIGKILL.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from minibroker.consumer import Consumer


async def main(bootstrap: str, group: str, topic: str, path: str) -> None:
    log = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    async def handle(record: Any) -> None:
        await asyncio.sleep(0.004)
        log.write(f"r {record.partition} {record.offset}\n")

    def committed(offsets: dict[tuple[str, int], int]) -> None:
        for (_, partition), offset in offsets.items():
            log.write(f"c {partition} {offset}\n")

    consumer = Consumer(
        handle,
        bootstrap_servers=bootstrap,
        group_id=group,
        topics=[topic],
        assignor="sticky",
        concurrency=4,
        batch_size=4,
        commit="per_batch",
        on_commit=committed,
        heartbeat_interval_ms=100,
        session_timeout_ms=1500,
        retry_backoff_ms=50,
    )
    await consumer.run()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
