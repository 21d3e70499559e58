"""`Consumer`: handler functions over aiokafka, without head-of-line blocking.

Data path::

    aiokafka getmany ──> per-partition bounded buffer ──> ready queue ──> N workers ──> handler
         ^                       │ full, or partition paused                  │
         └── pause/resume(tp) <──┘                          finished offsets ─┴─> commit

- One fetch loop drains everything aiokafka has fetched into per-partition buffers. A
  partition whose buffer is full (records or bytes) is paused in aiokafka, so only that
  partition stops being fetched; the fetch loop itself never waits on a buffer. This is
  what makes one full queue blocking the shared fetcher (and every other topic) impossible.
- A partition is in the ready queue at most once and worked on by one worker at a time,
  so records of a partition are handled in offset order; partitions run in parallel up
  to `concurrency` (optionally capped per topic).
- The commit position of a partition is the offset after the last record whose handler
  finished; since a partition is handled in order, that is the contiguous finished prefix.

Over 600 lines because one `Consumer` runs the fetch loop, the workers, retries and the
commit loop over the same per-partition state (buffers, pauses, finished offsets), and
each of them must see the others' changes at once, within one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import IllegalStateError, KafkaError

from minibroker.consumer.assignors import assignor_for
from minibroker.consumer.metrics import ConsumerSnapshot, PartitionSnapshot, Rate

log = logging.getLogger(__name__)

Record = Any  # aiokafka.structs.ConsumerRecord
Handler = Callable[[Record], Awaitable[None] | None]
CommitMode = Literal["periodic", "per_batch", "manual"]
FailureMode = Literal["stop", "dead_letter"]


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all; waits `backoff * multiplier**n` (capped) between them."""

    attempts: int = 3
    backoff: float = 0.1
    multiplier: float = 2.0
    max_backoff: float = 5.0

    def delay(self, retry: int) -> float:
        return float(min(self.max_backoff, self.backoff * self.multiplier ** (retry - 1)))


class HandlerError(Exception):
    """A handler kept failing on a record and the failure mode is "stop"."""

    def __init__(self, record: Record, error: BaseException, attempts: int) -> None:
        super().__init__(
            f"handler failed {attempts} time(s) on {record.topic}-{record.partition} "
            f"offset {record.offset}: {error!r}"
        )
        self.record = record
        self.error = error
        self.attempts = attempts


def _size(record: Record) -> int:
    key = record.serialized_key_size
    value = record.serialized_value_size
    return (key if key > 0 else 0) + (value if value > 0 else 0)


def _is_async(handler: Handler) -> bool:
    if inspect.iscoroutinefunction(handler):
        return True
    call = getattr(handler, "__call__", None)  # noqa: B004 - callable objects
    return inspect.iscoroutinefunction(call)


class _Partition:
    __slots__ = (
        "buffer",
        "buffered_bytes",
        "committed",
        "fetch_paused",
        "first_offset",
        "handler",
        "idle",
        "in_flight",
        "is_async",
        "max_buffered",
        "position",
        "processed",
        "rate",
        "released",
        "revoking",
        "scheduled",
        "tp",
        "user_paused",
    )

    def __init__(self, tp: Any, handler: Handler) -> None:
        self.tp = tp
        self.handler = handler
        self.is_async = _is_async(handler)
        self.buffer: deque[Record] = deque()
        self.buffered_bytes = 0
        self.max_buffered = 0
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.position: int | None = None
        self.committed: int | None = None
        self.first_offset: int | None = None
        self.processed = 0
        self.fetch_paused = False
        self.user_paused = False
        self.revoking = False  # no more dispatch; completions still count
        self.released = False  # no longer ours; completions are ignored
        self.scheduled = False  # queued, parked or being worked on
        self.rate = Rate()


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._consumer._on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._consumer._on_assigned(assigned)


class Consumer:
    """Run handler functions over Kafka records with bounded, per-partition buffers.

    `handler` is one function for every topic or a mapping topic -> function. A
    coroutine function runs on the event loop; a plain function runs in a thread pool
    of `concurrency` threads. Either `topics` (group subscription; defaults to the
    handler mapping's keys) or `partitions` (manual assignment, no rebalancing) says
    what to read. A worker takes up to `batch_size` records of one partition per turn;
    `commit="per_batch"` commits after each such turn, "periodic" every
    `commit_interval` seconds, "manual" only on `commit()`. `on_commit` is called with
    each successful commit's offsets. Other keyword arguments go to `AIOKafkaConsumer`.
    """

    def __init__(
        self,
        handler: Handler | Mapping[str, Handler],
        *,
        bootstrap_servers: str | list[str],
        group_id: str | None = None,
        topics: Collection[str] | None = None,
        partitions: Iterable[tuple[str, int]] | None = None,
        assignor: str | Any = "roundrobin",
        concurrency: int = 8,
        batch_size: int = 128,
        topic_concurrency: Mapping[str, int] | None = None,
        max_buffered_records: int = 10_000,
        max_buffered_bytes: int = 4 * 1024 * 1024,
        commit: CommitMode = "periodic",
        commit_interval: float = 5.0,
        retry: RetryPolicy | None = None,
        on_failure: FailureMode | None = None,
        dead_letter_topic: str | None = None,
        revoke_timeout: float = 30.0,
        executor: Executor | None = None,
        auto_offset_reset: str = "earliest",
        poll_timeout: float = 0.5,
        on_commit: Callable[[dict[tuple[str, int], int]], None] | None = None,
        **client_options: Any,
    ) -> None:
        if concurrency < 1 or batch_size < 1:
            raise ValueError("concurrency and batch_size must be at least 1")
        if max_buffered_records < 1 or max_buffered_bytes < 1:
            raise ValueError("buffer bounds must be positive")
        if commit not in ("periodic", "per_batch", "manual"):
            raise ValueError(f"unknown commit mode {commit!r}")
        if isinstance(handler, Mapping):
            self._handlers: dict[str, Handler] = dict(handler)
            self._default_handler: Handler | None = None
        else:
            self._handlers = {}
            self._default_handler = handler
        manual = None if partitions is None else sorted(set(partitions))
        if manual is None and topics is None:
            if not self._handlers:
                raise ValueError("give topics=, partitions= or a handler per topic")
            topics = list(self._handlers)
        if manual is not None and topics is not None:
            raise ValueError("give topics= (group subscription) or partitions=, not both")
        self._topics = None if topics is None else sorted(set(topics))
        self._manual = manual
        for topic in self._topics or [t for t, _ in manual or []]:
            self._handler_for(topic)  # fail early on a topic without a handler
        self._failure: FailureMode = on_failure or ("dead_letter" if dead_letter_topic else "stop")
        if self._failure == "dead_letter" and not dead_letter_topic:
            raise ValueError('on_failure="dead_letter" needs dead_letter_topic')
        self._bootstrap = bootstrap_servers
        self.group_id = group_id
        self._assignor = assignor
        self.concurrency = concurrency
        self.batch_size = batch_size
        self._topic_limits = dict(topic_concurrency or {})
        self.max_buffered_records = max_buffered_records
        self.max_buffered_bytes = max_buffered_bytes
        self._commit_mode: CommitMode = commit
        self._commit_interval = commit_interval
        self._retry = retry or RetryPolicy()
        self._dead_letter_topic = dead_letter_topic
        self._revoke_timeout = revoke_timeout
        self._executor = executor
        self._own_executor = executor is None
        self._poll_ms = int(poll_timeout * 1000)
        self._on_commit = on_commit
        # One fetch should fit in half a buffer, or what does not fit is dropped and
        # fetched again; for the record bound, assume records of about 100 bytes.
        client_options.setdefault(
            "max_partition_fetch_bytes",
            max(1024, min(1024 * 1024, max_buffered_bytes // 2, max_buffered_records * 50)),
        )
        client_options.setdefault("auto_offset_reset", auto_offset_reset)
        self._client_options = client_options

        self._client: Any = None
        self._producer: Any = None
        self._partitions: dict[Any, _Partition] = {}
        self._ready: asyncio.Queue[_Partition] | None = None
        self._parked: defaultdict[str, deque[_Partition]] = defaultdict(deque)
        self._running: defaultdict[str, int] = defaultdict(int)
        self._paused_topics: set[str] = set()
        self._paused_partitions: set[tuple[str, int]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._fetch_task: asyncio.Task[None] | None = None
        self._commit_lock = asyncio.Lock()
        self._commit_wanted = asyncio.Event()
        self._stop_lock = asyncio.Lock()
        self._stopping = False
        self._stopped = asyncio.Event()
        self._stop_task: asyncio.Task[None] | None = None
        self.state = "new"
        self.error: BaseException | None = None
        self._rate = Rate()
        self._processed = 0
        self._retried = 0
        self._dead_lettered = 0
        self._refetched = 0
        self._commits = 0

    # --- lifecycle ---

    async def start(self) -> Consumer:
        if self.state != "new":
            raise RuntimeError(f"consumer is {self.state}")
        self.state = "starting"
        strategy = assignor_for(self._assignor)
        self._client = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=self.group_id,
            enable_auto_commit=False,
            partition_assignment_strategy=(strategy,),
            **self._client_options,
        )
        if self._dead_letter_topic is not None:
            self._producer = AIOKafkaProducer(bootstrap_servers=self._bootstrap)
        if self._own_executor:
            self._executor = ThreadPoolExecutor(self.concurrency, "consumer-handler")
        try:
            await self._client.start()
            if self._producer is not None:
                await self._producer.start()
            if self._manual is not None:
                tps = [TopicPartition(t, p) for t, p in self._manual]
                self._client.assign(tps)
                self._on_assigned(tps)
            else:
                self._client.subscribe(self._topics, listener=_Listener(self))
        except BaseException:
            await self._close_clients()
            self.state = "stopped"
            self._stopped.set()
            raise
        self._ready = asyncio.Queue()
        for _ in range(self.concurrency):
            self._tasks.append(asyncio.create_task(self._worker(), name="consumer-worker"))
        if self._commit_mode != "manual" and self.group_id is not None:
            self._tasks.append(asyncio.create_task(self._commit_loop(), name="consumer-commit"))
        self._fetch_task = asyncio.create_task(self._fetch_loop(), name="consumer-fetch")
        self.state = "running"
        return self

    async def run(self) -> None:
        """Start if needed, then run until `stop()`; raises what made the consumer stop."""
        if self.state == "new":
            await self.start()
        await self._stopped.wait()
        if self.error is not None:
            raise self.error

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop fetching, let in-flight handlers finish (up to the revoke timeout),
        commit what finished, then leave the group and close."""
        async with self._stop_lock:
            if self.state in ("new", "stopped"):
                self.state = "stopped"
                self._stopped.set()
                return
            self.state = "stopping"
            self._stopping = True
            if self._fetch_task is not None:
                self._fetch_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._fetch_task
            parts = list(self._partitions.values())
            for part in parts:
                self._drop_buffer(part)
            await self._wait_idle(parts, "shutdown")
            if self._commit_mode != "manual":
                await self._commit_quietly(parts)
            for part in parts:
                part.released = True
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self._tasks.clear()
            await self._close_clients()
            self.state = "stopped"
            self._stopped.set()

    async def _close_clients(self) -> None:
        if self._client is not None:
            try:
                await self._client.stop()  # leaves the group
            except KafkaError as exc:
                log.warning("closing the Kafka consumer failed: %r", exc)
        if self._producer is not None:
            try:
                await self._producer.stop()
            except KafkaError as exc:
                log.warning("closing the dead-letter producer failed: %r", exc)
        if self._own_executor and self._executor is not None:
            # Threads stuck in a handler cannot be interrupted; do not wait for them.
            self._executor.shutdown(wait=False, cancel_futures=True)

    def _fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
            log.error("consumer stopping: %s", error)
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(self.stop())

    # --- pause / resume ---

    def pause(self, *targets: str | tuple[str, int]) -> None:
        """Stop handing out (and fetching) records of whole topics or single partitions.

        Handlers already running finish; other partitions are not affected.
        """
        for target in targets:
            if isinstance(target, str):
                self._paused_topics.add(target)
            else:
                self._paused_partitions.add((target[0], target[1]))
        for part in self._partitions.values():
            if self._is_user_paused(part.tp) and not part.user_paused:
                part.user_paused = True
                self._pause_fetch(part)

    def resume(self, *targets: str | tuple[str, int]) -> None:
        for target in targets:
            if isinstance(target, str):
                self._paused_topics.discard(target)
                self._paused_partitions = {p for p in self._paused_partitions if p[0] != target}
            else:
                self._paused_partitions.discard((target[0], target[1]))
        for part in self._partitions.values():
            if part.user_paused and not self._is_user_paused(part.tp):
                part.user_paused = False
                self._maybe_resume_fetch(part)
                self._schedule(part)

    def paused(self) -> set[tuple[str, int]]:
        return {(p.tp.topic, p.tp.partition) for p in self._partitions.values() if p.user_paused}

    def _is_user_paused(self, tp: Any) -> bool:
        return (
            tp.topic in self._paused_topics or (tp.topic, tp.partition) in self._paused_partitions
        )

    def _pause_fetch(self, part: _Partition) -> None:
        if not part.fetch_paused:
            part.fetch_paused = True
            with contextlib.suppress(IllegalStateError):
                self._client.pause(part.tp)

    def _maybe_resume_fetch(self, part: _Partition) -> None:
        # Resume at half full so that a partition does not flap on every record.
        if (
            part.fetch_paused
            and not part.user_paused
            and not part.revoking
            and not self._stopping
            and len(part.buffer) * 2 <= self.max_buffered_records
            and part.buffered_bytes * 2 <= self.max_buffered_bytes
        ):
            part.fetch_paused = False
            with contextlib.suppress(IllegalStateError):
                self._client.resume(part.tp)

    # --- assignment ---

    def _handler_for(self, topic: str) -> Handler:
        handler = self._handlers.get(topic, self._default_handler)
        if handler is None:
            raise ValueError(f"no handler for topic {topic!r}")
        return handler

    def _on_assigned(self, tps: Iterable[Any]) -> None:
        for tp in tps:
            if tp in self._partitions:
                continue
            part = _Partition(tp, self._handler_for(tp.topic))
            self._partitions[tp] = part
            if self._is_user_paused(tp):
                part.user_paused = True
                self._pause_fetch(part)
        log.info("assigned %s", sorted(self._partitions))

    async def _on_revoked(self, tps: Iterable[Any]) -> None:
        parts = [self._partitions[tp] for tp in tps if tp in self._partitions]
        for part in parts:
            part.revoking = True
            self._drop_buffer(part)
        await self._wait_idle(parts, "revocation")
        if self._commit_mode != "manual":
            await self._commit_quietly(parts)
        for part in parts:
            part.released = True
            self._partitions.pop(part.tp, None)
        log.info("released %s", sorted(p.tp for p in parts))

    def _drop_buffer(self, part: _Partition) -> None:
        # Undelivered records go back to Kafka: whoever owns the partition next starts
        # from the committed offset, which never passes an unfinished record.
        part.buffer.clear()
        part.buffered_bytes = 0

    async def _wait_idle(self, parts: Collection[_Partition], why: str) -> None:
        busy = [p for p in parts if p.in_flight]
        if not busy:
            return
        waits = [asyncio.ensure_future(p.idle.wait()) for p in busy]
        _, pending = await asyncio.wait(waits, timeout=self._revoke_timeout)
        for waiter in pending:
            waiter.cancel()
        if pending:
            stuck = sorted(p.tp for p in busy if p.in_flight)
            log.warning(
                "%s: handlers on %s still running after %.1fs; their records will be "
                "delivered again",
                why,
                stuck,
                self._revoke_timeout,
            )

    # --- fetching ---

    async def _fetch_loop(self) -> None:
        client = self._client
        while not self._stopping:
            try:
                batches = await client.getmany(timeout_ms=self._poll_ms)
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                if getattr(exc, "retriable", False):
                    log.warning("fetch failed, retrying: %r", exc)
                    await asyncio.sleep(0.1)
                    continue
                self._fail(exc)
                return
            for tp, records in batches.items():
                if records:
                    self._accept(tp, records)

    def _accept(self, tp: Any, records: list[Record]) -> None:
        part = self._partitions.get(tp)
        if part is None or part.revoking or self._stopping:
            return
        room = self.max_buffered_records - len(part.buffer)
        free_bytes = self.max_buffered_bytes - part.buffered_bytes
        keep = 0
        added = 0
        for record in records:
            size = _size(record)
            # An empty buffer takes one record whatever its size, or it could never move.
            if keep >= room or (size > free_bytes - added and (keep or part.buffer)):
                break
            keep += 1
            added += size
        if keep < len(records):
            self._client.seek(tp, records[keep].offset)
            self._refetched += len(records) - keep
        if keep:
            if part.first_offset is None:
                part.first_offset = records[0].offset
            part.buffer.extend(records[:keep] if keep < len(records) else records)
            part.buffered_bytes += added
            part.max_buffered = max(part.max_buffered, len(part.buffer))
        if (
            keep < len(records)
            or len(part.buffer) >= self.max_buffered_records
            or part.buffered_bytes >= self.max_buffered_bytes
        ):
            self._pause_fetch(part)
        self._schedule(part)

    # --- dispatch ---

    def _dispatchable(self, part: _Partition) -> bool:
        return (
            bool(part.buffer) and not part.user_paused and not part.revoking and not self._stopping
        )

    def _schedule(self, part: _Partition) -> None:
        if not part.scheduled and self._ready is not None and self._dispatchable(part):
            part.scheduled = True
            self._ready.put_nowait(part)

    async def _worker(self) -> None:
        assert self._ready is not None
        ready = self._ready
        while True:
            part = await ready.get()
            topic = part.tp.topic
            limit = self._topic_limits.get(topic)
            if limit is not None and self._running[topic] >= limit:
                self._parked[topic].append(part)
                continue
            self._running[topic] += 1
            try:
                if part.is_async:
                    await self._work_async(part)
                else:
                    await self._work_sync(part)
            finally:
                self._running[topic] -= 1
                parked = self._parked.get(topic)
                if parked:
                    ready.put_nowait(parked.popleft())
            part.scheduled = False
            if not part.released:
                self._maybe_resume_fetch(part)
                if self._commit_mode == "per_batch":
                    self._commit_wanted.set()
                self._schedule(part)
            # Let the fetch loop and aiokafka's I/O run between quanta.
            await asyncio.sleep(0)

    def _finish(self, part: _Partition, count: int, offset: int, size: int) -> None:
        if part.released:
            return
        part.position = offset + 1
        self._count(part, count, size)

    def _count(self, part: _Partition, count: int, size: int) -> None:
        part.processed += count
        self._processed += count
        part.rate.add(count, size)
        self._rate.add(count, size)

    async def _work_async(self, part: _Partition) -> None:
        # The hot path: per record only what ordering and commits need; counters and
        # rates are updated once per batch.
        handler = part.handler
        buffer = part.buffer
        limit = self.batch_size
        done = 0
        total = 0
        part.in_flight = 1
        part.idle.clear()
        try:
            while (
                done < limit
                and buffer
                and not part.user_paused
                and not part.revoking
                and not self._stopping
            ):
                record = buffer.popleft()
                value_size = record.serialized_value_size
                key_size = record.serialized_key_size
                size = (value_size if value_size > 0 else 0) + (key_size if key_size > 0 else 0)
                part.buffered_bytes -= size
                try:
                    await handler(record)  # type: ignore[misc]
                except Exception as exc:
                    if not await self._recover(part, record, exc):
                        return
                part.position = record.offset + 1
                done += 1
                total += size
        finally:
            part.in_flight = 0
            part.idle.set()
            if done:
                self._count(part, done, total)

    async def _work_sync(self, part: _Partition) -> None:
        count = min(self.batch_size, len(part.buffer))
        if not self._dispatchable(part) or not count:
            return
        batch = [part.buffer.popleft() for _ in range(count)]
        sizes = [_size(r) for r in batch]
        part.buffered_bytes -= sum(sizes)
        part.in_flight = count
        part.idle.clear()
        loop = asyncio.get_running_loop()
        try:
            start = 0
            while start < count:
                done, error = await loop.run_in_executor(
                    self._executor, self._call_many, part, batch, start
                )
                if done:
                    last = start + done - 1
                    self._finish(part, done, batch[last].offset, sum(sizes[start : last + 1]))
                    start += done
                    part.in_flight = count - start
                if error is None:
                    break  # all done, or stopped early because the partition is going away
                if not await self._recover(part, batch[start], error):
                    break
                self._finish(part, 1, batch[start].offset, sizes[start])
                start += 1
                part.in_flight = count - start
        finally:
            part.in_flight = 0
            part.idle.set()

    def _call_many(
        self, part: _Partition, batch: list[Record], start: int
    ) -> tuple[int, Exception | None]:
        """Runs in a pool thread: handle records in order until one fails."""
        handler = part.handler
        done = 0
        for record in batch[start:]:
            if part.revoking or self._stopping:
                break
            try:
                handler(record)
            except Exception as exc:
                return done, exc
            done += 1
        return done, None

    async def _call_once(self, part: _Partition, record: Record) -> None:
        if part.is_async:
            await part.handler(record)  # type: ignore[misc]
        else:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, part.handler, record)

    async def _recover(self, part: _Partition, record: Record, error: Exception) -> bool:
        """Retry a failed record; True once it counts as finished.

        False leaves it unfinished, so its offset is never committed: the partition is
        going away (the next owner gets it again) or the consumer stops.
        """
        attempts = 1
        while attempts < self._retry.attempts:
            if part.revoking or self._stopping:
                return False
            delay = self._retry.delay(attempts)
            log.warning(
                "handler failed on %s-%d@%d (attempt %d): %r; retrying in %.2fs",
                record.topic,
                record.partition,
                record.offset,
                attempts,
                error,
                delay,
            )
            await asyncio.sleep(delay)
            if part.revoking or self._stopping:
                return False
            attempts += 1
            self._retried += 1
            try:
                await self._call_once(part, record)
                return True
            except Exception as exc:
                error = exc
        if self._failure == "dead_letter":
            try:
                await self._dead_letter(record, error, attempts)
                self._dead_lettered += 1
                return True
            except Exception as exc:
                log.error(
                    "dead-lettering %s-%d@%d failed: %r",
                    record.topic,
                    record.partition,
                    record.offset,
                    exc,
                )
        part.revoking = True  # nothing after the failed record may run or be committed
        self._fail(HandlerError(record, error, attempts))
        return False

    async def _dead_letter(self, record: Record, error: Exception, attempts: int) -> None:
        headers = list(record.headers or ())
        headers += [
            ("dlt.original.topic", record.topic.encode()),
            ("dlt.original.partition", str(record.partition).encode()),
            ("dlt.original.offset", str(record.offset).encode()),
            ("dlt.error", repr(error).encode()[:1000]),
            ("dlt.attempts", str(attempts).encode()),
        ]
        await self._producer.send_and_wait(
            self._dead_letter_topic,
            value=record.value,
            key=record.key,
            headers=headers,
            timestamp_ms=record.timestamp,
        )

    # --- commits ---

    def _pending_offsets(self, parts: Iterable[_Partition]) -> dict[Any, int]:
        return {
            p.tp: p.position
            for p in parts
            if p.position is not None and p.position != p.committed and not p.released
        }

    async def commit(self) -> dict[tuple[str, int], int]:
        """Commit the offset after the last finished record of each partition.

        Returns what was committed (topic, partition) -> offset. Without a group id
        there is nowhere to commit and nothing is sent.
        """
        return await self._commit(list(self._partitions.values()))

    async def _commit(self, parts: list[_Partition]) -> dict[tuple[str, int], int]:
        if self.group_id is None or self._client is None:
            return {}
        async with self._commit_lock:
            offsets = self._pending_offsets(parts)
            if not offsets:
                return {}
            await self._client.commit(offsets)
            self._commits += 1
            for part in parts:
                if part.tp in offsets:
                    part.committed = offsets[part.tp]
        done = {(tp.topic, tp.partition): offset for tp, offset in offsets.items()}
        if self._on_commit is not None:
            self._on_commit(done)
        return done

    async def _commit_quietly(self, parts: list[_Partition]) -> None:
        try:
            await self._commit(parts)
        except KafkaError as exc:
            log.warning("commit failed: %r; uncommitted records will be delivered again", exc)

    async def _commit_loop(self) -> None:
        while not self._stopping:
            if self._commit_mode == "per_batch":
                await self._commit_wanted.wait()
                self._commit_wanted.clear()
            else:
                await asyncio.sleep(self._commit_interval)
            if not self._stopping:
                await self._commit_quietly([p for p in self._partitions.values() if not p.revoking])

    # --- inspection ---

    def assignment(self) -> list[tuple[str, int]]:
        return sorted((tp.topic, tp.partition) for tp in self._partitions)

    def describe(self) -> ConsumerSnapshot:
        parts = []
        for tp in sorted(self._partitions):
            part = self._partitions[tp]
            highwater = None
            if self._client is not None:
                with contextlib.suppress(IllegalStateError, KeyError, AttributeError):
                    highwater = self._client.highwater(tp)
            base = part.position if part.position is not None else part.first_offset
            lag = None if highwater is None or base is None else max(0, highwater - base)
            rps, bps = part.rate.per_second()
            parts.append(
                PartitionSnapshot(
                    topic=tp.topic,
                    partition=tp.partition,
                    buffered=len(part.buffer),
                    buffered_bytes=part.buffered_bytes,
                    max_buffered=part.max_buffered,
                    in_flight=part.in_flight,
                    position=part.position,
                    committed=part.committed,
                    highwater=highwater,
                    lag=lag,
                    processed=part.processed,
                    fetch_paused=part.fetch_paused,
                    paused=part.user_paused,
                    records_per_second=rps,
                    bytes_per_second=bps,
                )
            )
        rps, bps = self._rate.per_second()
        return ConsumerSnapshot(
            state=self.state,
            group_id=self.group_id,
            concurrency=self.concurrency,
            in_flight=sum(p.in_flight for p in parts),
            buffered=sum(p.buffered for p in parts),
            processed=self._processed,
            retried=self._retried,
            dead_lettered=self._dead_lettered,
            refetched=self._refetched,
            commits=self._commits,
            records_per_second=rps,
            bytes_per_second=bps,
            paused_topics=tuple(sorted(self._paused_topics)),
            partitions=tuple(parts),
        )
