"""The cluster's work in time: coordinators' deadlines, log retention and compaction.

One per cluster, however many nodes serve it. It runs the group coordinators' timers
(sessions, rebalance and revocation timeouts, offset retention), the transaction
coordinator's (transaction timeouts), the completion of partition reassignments, log
retention (state/retention.py) every log_retention_check_interval_ms and log compaction
(state/compaction.py) every log_cleaner_backoff_ms. It sleeps until the earliest of
them, and wakes early when a coordinator announces that its deadlines moved or the clock
is advanced -- never on appends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Hashable

from minibroker.state import compaction, retention
from minibroker.state.cluster import CLOCK_ADVANCED, DEADLINES_MOVED, ClusterState
from minibroker.waiters import WaiterIndex

log = logging.getLogger("minibroker.housekeeping")

# Longest sleep without a deadline: a safety net, deadlines wake it on time.
IDLE_SECONDS = 1.0
WAKE_KEYS = (DEADLINES_MOVED, CLOCK_ADVANCED)


class Housekeeping:
    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.waiters = WaiterIndex()
        self._task: asyncio.Task[None] | None = None
        self._retention_interval = cluster.config.log_retention_check_interval_ms / 1000
        self._next_retention = cluster.clock.monotonic() + self._retention_interval
        self._cleaner_interval = cluster.config.log_cleaner_backoff_ms / 1000
        self._next_cleaning = cluster.clock.monotonic() + self._cleaner_interval
        # A clock advance applies retention and compaction at once.
        self._advanced = cluster.clock.advanced

    def start(self) -> None:
        self.cluster.on_change.append(self._changed)
        self._task = asyncio.create_task(self._run(), name="housekeeping")

    def _changed(self, key: Hashable) -> None:
        if key in WAKE_KEYS:
            self.waiters.fire(key)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        with contextlib.suppress(ValueError):
            self.cluster.on_change.remove(self._changed)

    async def _run(self) -> None:
        clock = self.cluster.clock
        while True:
            advanced, self._advanced = clock.advanced != self._advanced, clock.advanced
            if clock.monotonic() >= self._next_retention or advanced:
                self._next_retention = clock.monotonic() + self._retention_interval
                try:
                    retention.enforce(self.cluster.topics, clock.wall_ms())
                except Exception:
                    log.exception("log retention failed")
            if clock.monotonic() >= self._next_cleaning or advanced:
                self._next_cleaning = clock.monotonic() + self._cleaner_interval
                try:
                    compaction.enforce(
                        self.cluster.topics,
                        clock.wall_ms(),
                        max_decompressed_bytes=self.cluster.config.max_decompressed_batch_bytes,
                    )
                except Exception:
                    log.exception("log compaction failed")
            deadlines = (
                self.cluster.groups.next_deadline(),
                self.cluster.consumer_groups.next_deadline(),
                self.cluster.share_groups.next_deadline(),
                self.cluster.share_partitions.next_deadline(),
                self.cluster.transactions.next_deadline(),
                self.cluster.replicas.next_deadline(),
                self._next_retention,
                self._next_cleaning,
            )
            deadline = min((d for d in deadlines if d is not None), default=None)
            wait = IDLE_SECONDS if deadline is None else deadline - clock.monotonic()
            if wait > 0:
                await self.waiters.wait(WAKE_KEYS, min(wait, IDLE_SECONDS))
                continue
            # Each coordinator announces the groups its tick changed.
            try:
                self.cluster.groups.tick(clock.monotonic())
            except Exception:
                log.exception("group coordinator tick failed")
            try:
                self.cluster.consumer_groups.tick(clock.monotonic())
            except Exception:
                log.exception("consumer group coordinator tick failed")
            try:
                self.cluster.share_groups.tick(clock.monotonic())
            except Exception:
                log.exception("share group coordinator tick failed")
            try:
                self.cluster.share_partitions.tick(clock.monotonic())
            except Exception:
                log.exception("share partition tick failed")
            try:
                self.cluster.transactions.tick(clock.monotonic())
            except Exception:
                log.exception("transaction coordinator tick failed")
            try:
                self.cluster.replicas.tick(clock.monotonic())
            except Exception:
                log.exception("partition reassignment tick failed")
            await asyncio.sleep(0)
