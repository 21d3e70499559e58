"""The campaign: a broker in a child process (an abort must fail the test, not kill
it), its log drained and parsed; many asyncio connections send mutations concurrently;
each mutation ends in a response, a closed connection, silence (acks=0 Produce, detected
with a probe request behind it), an abandoned long poll (Fetch / JoinGroup / SyncGroup
waiting legitimately) or a hang. Before and after it, the checks that the broker kept
its data and still serves a real client.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import secrets
import struct
import subprocess
import threading
import time
from array import array
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.child_broker import ChildBroker
from harness.fuzz.mutation import (
    INT32,
    LONG_POLL_KEYS,
    MAX_RESPONSE_BYTES,
    PROBE_CORRELATION_ID,
    PROBE_FRAME,
    PRODUCE,
    Mutation,
    Mutator,
    fetch_max_wait_ms,
    head_of,
    short_hex,
)

# --- the child broker's log --------------------------------------------------------

_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) ([\w.]+): (.*)$")
_FAILED_API = re.compile(r"(\w+) v(-?\d+) failed")
_PEER = re.compile(r"\bfrom (\d+\.\d+\.\d+\.\d+)\b")
_TRACE_LOCATION = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


@dataclass
class LogRecord:
    at: float  # wall clock, seconds
    level: str
    logger: str
    message: str
    lines: list[str] = field(default_factory=list)  # the traceback, if any
    seq: int = 0  # how many records were read before this one

    @property
    def exception(self) -> str:
        for line in reversed(self.lines):
            if line and not line.startswith(" "):
                return line.strip()
        return ""

    @property
    def location(self) -> str:
        """The innermost frame of the traceback: where the error was raised."""
        for line in reversed(self.lines):
            found = _TRACE_LOCATION.search(line)
            if found:
                path = "/".join(Path(found.group(1)).parts[-2:])
                return f"{path}:{found.group(2)} in {found.group(3)}"
        return ""

    @property
    def peer(self) -> str | None:
        found = _PEER.search(self.message)
        return found.group(1) if found else None

    @property
    def api(self) -> str | None:
        found = _FAILED_API.search(self.message)
        return f"{found.group(1)} v{found.group(2)}" if found else None

    @property
    def signature(self) -> str:
        """What tells one bug from another: logger, API, exception type, raise site."""
        kind = self.exception.split(":", 1)[0]
        where = self.api or re.sub(r"\d+(\.\d+)*", "N", self.message)[:80]
        return f"{self.logger}: {where}: {kind or self.message[:80]} at {self.location or '?'}"

    def text(self, max_lines: int = 30) -> str:
        lines = [f"{self.level} {self.logger}: {self.message}", *self.lines]
        if len(lines) > max_lines:
            lines = [*lines[: max_lines - 1], f"... {len(lines) - max_lines + 1} more lines"]
        return "\n".join(lines)


_ERROR_LEVELS = ("ERROR", "CRITICAL", "OUTPUT")


class BrokerLog:
    """Drains the child's stdout and stderr (a full pipe would block the broker) and keeps
    the records at WARNING and above."""

    def __init__(self, process: subprocess.Popen[str], keep: int = 2000) -> None:
        self.records: deque[LogRecord] = deque(maxlen=keep)
        self.counts: Counter[str] = Counter()
        self.first_seen: dict[str, LogRecord] = {}
        self.read = 0  # records read so far
        self._lock = threading.Lock()
        self._threads = []
        for stream, parse in ((process.stderr, True), (process.stdout, False)):
            if stream is None:
                continue
            thread = threading.Thread(target=self._drain, args=(stream, parse), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _drain(self, stream: Any, parse: bool) -> None:
        current: LogRecord | None = None
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                if not parse:
                    continue
                line = line.rstrip("\n")
                found = _LOG_LINE.match(line)
                if found:
                    current = self._add(found)
                elif current is not None:
                    if len(current.lines) < 200:
                        current.lines.append(line)
                elif line.strip():
                    # Not from logging: a native crash report (a Rust panic, say);
                    # the lines that follow belong to it.
                    current = LogRecord(time.time(), "OUTPUT", "stderr", line)
                    with self._lock:
                        self._append(current)

    def _add(self, found: re.Match[str]) -> LogRecord:
        stamp, level, logger, message = found.groups()
        try:
            at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            at = time.time()
        record = LogRecord(at, level, logger, message)
        with self._lock:
            self._append(record)
        return record

    def _append(self, record: LogRecord) -> None:
        record.seq = self.read
        self.read += 1
        self.records.append(record)

    def count(self) -> int:
        with self._lock:
            return self.read

    def logged(self, text: str, since: int) -> bool:
        """Whether a record read as number `since` or later has `text` in its message."""
        with self._lock:
            return any(text in r.message for r in self.records if r.seq >= since)

    def errors_from(self, since: int) -> list[LogRecord]:
        """The errors read as number `since` or later."""
        with self._lock:
            return [r for r in self.records if r.seq >= since and r.level in _ERROR_LEVELS]

    def errors(self, since: float = 0.0) -> list[LogRecord]:
        with self._lock:
            return [r for r in self.records if r.at >= since and r.level in _ERROR_LEVELS]

    def join(self, timeout: float = 2.0) -> None:
        for thread in self._threads:
            thread.join(timeout)


# Where the child broker's code comes from: None for this checkout; a directory holding
# another `minibroker` package (say `git archive HEAD minibroker | tar -x -C DIR`) runs
# that one instead, to show the campaign failing on code without a fix.
BROKER_SOURCE_ENV = "MINIBROKER_FUZZ_BROKER_SOURCE"


def start_child(log_level: str = "ERROR", **settings: Any) -> tuple[ChildBroker, BrokerLog]:
    """A child broker logging at `log_level`, its output drained from the start."""
    # `python -m` puts the working directory first on sys.path.
    broker = ChildBroker(
        log_level=log_level, cwd=os.environ.get(BROKER_SOURCE_ENV) or None, **settings
    )
    broker.start()
    assert broker.process is not None
    return broker, BrokerLog(broker.process)


# --- the campaign ------------------------------------------------------------------

RESPONSE, CLOSED, SILENT, LONG_POLL, HANG = 1, 2, 3, 4, 5


def connection_address(number: int) -> str:
    """The loopback address campaign connection `number` connects from: 127.1.0.0 on."""
    n = number % (254 << 16)
    return f"127.{1 + (n >> 16)}.{(n >> 8) & 0xFF}.{n & 0xFF}"


def connection_number(address: str) -> int | None:
    parts = address.split(".")
    if len(parts) != 4 or parts[0] != "127" or not all(p.isdigit() for p in parts):
        return None
    second, third, fourth = (int(p) for p in parts[1:])
    if second == 0:
        return None
    return ((second - 1) << 16) | (third << 8) | fourth


OUTCOMES = {RESPONSE: "responses", CLOSED: "closes", SILENT: "silent", LONG_POLL: "long_polls"}
OUTCOMES[HANG] = "hangs"


@dataclass
class Hang:
    index: int
    api: str
    waited: float
    data: bytes
    note: str = ""

    def text(self) -> str:
        waited = f"no answer in {self.waited:.1f} s{self.note}"
        return f"#{self.index} {self.api}: {waited}: {short_hex(self.data)}"


@dataclass
class CampaignResult:
    seed: int
    requested: int
    done: int = 0
    elapsed: float = 0.0
    counts: Counter[str] = field(default_factory=Counter)
    hangs: list[Hang] = field(default_factory=list)
    anomalies: Counter[str] = field(default_factory=Counter)
    anomaly_examples: dict[str, str] = field(default_factory=dict)
    died: bool = False
    returncode: int | None = None
    in_flight: list[int] = field(default_factory=list)  # mutations unanswered at death
    suspects: list[int] = field(default_factory=list)  # in flight, then recent, newest first
    peak_rss: int = 0
    connects: int = 0

    @property
    def rate(self) -> float:
        return self.done / self.elapsed if self.elapsed else 0.0

    def line(self) -> str:
        counts = " ".join(f"{name}={self.counts[name]}" for name in OUTCOMES.values())
        state = f"DIED rc={self.returncode}" if self.died else "alive"
        return (
            f"seed={self.seed} mutations={self.done}/{self.requested} in {self.elapsed:.1f} s "
            f"({self.rate:.0f}/s) aborts={int(self.died)} {counts} connects={self.connects} "
            f"peak_rss={self.peak_rss / 2**20:.0f}MiB broker={state}"
        )


class _Connection:
    """One connection to the broker. Reading a response frame survives cancellation
    midway (a long poll handed over after its grace period): the size prefix already
    read is kept, so the next read resumes the same frame."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int = -1
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.number = number
        self.previous: int | None = None  # the mutation sent before the current one
        self._size: int | None = None

    async def frame(self) -> bytes:
        if self._size is None:
            (size,) = INT32.unpack(await self.reader.readexactly(4))
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                raise BadResponse(f"response frame size {size}")
            self._size = size
        body = await self.reader.readexactly(self._size)
        self._size = None
        return body

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.transport.abort()


class BadResponse(ConnectionError):
    pass


@dataclass
class _Worker:
    number: int
    connection: _Connection | None = None
    current: int | None = None
    recent: deque[int] = field(default_factory=lambda: deque(maxlen=16))

    def drop(self) -> None:
        if self.connection is not None:
            self.connection.abort()
        self.connection = None


class Campaign:
    """Sends `count` mutations over `concurrency` connections and classifies the outcomes."""

    def __init__(
        self,
        mutator: Mutator,
        bootstrap: str,
        count: int,
        *,
        alive: Callable[[], bool],
        returncode: Callable[[], int | None] = lambda: None,
        rss: Callable[[], int] = lambda: 0,
        concurrency: int = 24,
        timeout: float = 10.0,
        long_poll_grace: float = 0.5,
        long_poll_cap: float = 20.0,
        max_long_polls: int = 256,
        start: int = 0,
        progress: Callable[[CampaignResult], None] | None = None,
        progress_every: float = 5.0,
    ) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.address = (host, int(port))
        self.mutator = mutator
        self.count = count
        self.alive = alive
        self.returncode = returncode
        self.rss = rss
        self.concurrency = concurrency
        self.timeout = timeout
        self.long_poll_grace = long_poll_grace
        self.long_poll_cap = long_poll_cap
        self.max_long_polls = max_long_polls
        self.start_index = start
        self.progress = progress
        self.progress_every = progress_every
        self.result = CampaignResult(mutator.seed, count)
        self.outcomes = bytearray(count)
        self.finished_at = [0.0] * count  # wall clock per mutation, to match broker logs
        self._last_sent = array("q")  # per connection number: the last mutation sent on it
        self._bind_sources = self.address[0] == "127.0.0.1"
        self._next = 0
        self._stopped = False
        self._workers: list[_Worker] = []
        self._watchers: dict[int, tuple[asyncio.Task[None], bool]] = {}
        self._watcher_done = asyncio.Event()

    # -- bookkeeping

    def sent_by(self, record: LogRecord) -> int | None:
        """The mutation behind a log line that names a peer address: every connection has
        an address of its own, and the broker closes a connection right after such a
        line, so it is the last mutation sent on that connection."""
        if record.peer is None or not self._bind_sources:
            return None
        number = connection_number(record.peer)
        if number is None or number >= len(self._last_sent):
            return None
        index = self._last_sent[number]
        return None if index < 0 else index

    def _take(self) -> int | None:
        if self._stopped or self._next >= self.count:
            return None
        index = self._next
        self._next += 1
        return index

    def _record(self, offset: int, outcome: int) -> None:
        self.outcomes[offset] = outcome
        self.finished_at[offset] = time.time()
        self.result.counts[OUTCOMES[outcome]] += 1
        self.result.done += 1

    def _anomaly(self, kind: str, mutation: Mutation, detail: str, connection: _Connection) -> None:
        self.result.anomalies[kind] += 1
        if kind not in self.result.anomaly_examples:
            before = connection.previous
            context = "" if before is None else f", after #{before} on the same connection"
            self.result.anomaly_examples[kind] = (
                f"{mutation.describe()}: {detail}{context}: {short_hex(mutation.data)}"
            )

    def _check_alive(self) -> bool:
        if self.alive():
            return True
        self._died()
        return False

    def _died(self) -> None:
        if self.result.died:
            return
        self.result.died = True
        self.result.returncode = self.returncode()
        self._stopped = True
        in_flight = [w.current for w in self._workers if w.current is not None]
        in_flight += list(self._watchers)
        in_flight = [self.start_index + i for i in in_flight]
        recent: list[int] = []
        for depth in range(16):
            for worker in self._workers:
                if depth < len(worker.recent):
                    recent.append(self.start_index + worker.recent[-1 - depth])
        self.result.in_flight = sorted(set(in_flight), reverse=True)
        self.result.suspects = list(dict.fromkeys([*self.result.in_flight, *recent]))
        for worker in self._workers:
            worker.drop()
        for task, _ in self._watchers.values():
            task.cancel()

    # -- running

    async def run(self) -> CampaignResult:
        started = time.monotonic()
        monitor = asyncio.create_task(self._monitor(started))
        try:
            workers = [self._work(_Worker(n)) for n in range(self.concurrency)]
            await asyncio.gather(*workers)
            await self._finish_watchers()
        finally:
            monitor.cancel()
            with contextlib.suppress(BaseException):
                await monitor
            for worker in self._workers:
                worker.drop()
        self.result.elapsed = time.monotonic() - started
        if not self.result.died and not self.alive():
            self._died()
        with contextlib.suppress(Exception):
            self.result.peak_rss = max(self.result.peak_rss, self.rss())
        return self.result

    async def _monitor(self, started: float) -> None:
        last_progress = last_rss = time.monotonic()
        while not self._stopped:
            await asyncio.sleep(0.05)
            if not self._check_alive():
                return
            now = time.monotonic()
            if now - last_rss >= 1.0:
                last_rss = now
                with contextlib.suppress(Exception):
                    self.result.peak_rss = max(self.result.peak_rss, self.rss())
            if self.progress is not None and now - last_progress >= self.progress_every:
                last_progress = now
                self.result.elapsed = now - started
                self.progress(self.result)

    async def _connect(self) -> _Connection | None:
        """A new connection, from a loopback address of its own when the broker is on
        loopback (so the broker's log lines name it; see `sent_by`)."""
        for attempt in range(20):
            if self._stopped:
                return None
            number = len(self._last_sent)
            self._last_sent.append(-1)  # reserved before the await: numbers stay unique
            source = (connection_address(number), 0) if self._bind_sources else None
            try:
                reader, writer = await asyncio.open_connection(*self.address, local_addr=source)
            except OSError as exc:
                if self._bind_sources and exc.errno == errno.EADDRNOTAVAIL:
                    self._bind_sources = False  # no 127/8 beyond 127.0.0.1 here
                    continue
                if not self._check_alive():
                    return None
                await asyncio.sleep(0.05 * (attempt + 1))
                continue
            self.result.connects += 1
            return _Connection(reader, writer, number)
        self._check_alive()
        raise ConnectionError(f"cannot connect to the broker at {self.address}")

    async def _work(self, worker: _Worker) -> None:
        self._workers.append(worker)
        try:
            while (offset := self._take()) is not None:
                mutation = self.mutator.mutation(self.start_index + offset)
                worker.current = offset
                if mutation.consistent:
                    outcome = await self._send(worker, offset, mutation)
                else:
                    outcome = await self._send_misframed(worker, offset, mutation)
                worker.current = None
                worker.recent.append(offset)
                if outcome is not None:
                    self._record(offset, outcome)
        finally:
            worker.drop()

    async def _answer(self, connection: _Connection, mutation: Mutation, probe: bool) -> int:
        """RESPONSE, or SILENT if only the probe behind the request was answered."""
        head = mutation.head
        answered = False
        while True:
            try:
                frame = await connection.frame()
            except BadResponse as exc:
                self._anomaly("bad response frame", mutation, str(exc), connection)
                raise
            (correlation_id,) = INT32.unpack_from(frame, 0)
            if probe and correlation_id == PROBE_CORRELATION_ID:
                return RESPONSE if answered else SILENT
            answered = True
            if head is not None and correlation_id != head.correlation_id:
                detail = f"response correlation id {correlation_id}, request {head.correlation_id}"
                self._anomaly("wrong correlation id", mutation, detail, connection)
            if not probe:
                return RESPONSE

    async def _send(self, worker: _Worker, offset: int, mutation: Mutation) -> int | None:
        if worker.connection is None:
            worker.connection = await self._connect()
            if worker.connection is None:
                return None
        connection = worker.connection
        head = mutation.head
        probe = head is not None and head.api_key == PRODUCE
        long_poll = head is not None and head.api_key in LONG_POLL_KEYS
        sent_at = time.monotonic()
        self._last_sent[connection.number] = mutation.index
        try:
            connection.writer.write(mutation.data + PROBE_FRAME if probe else mutation.data)
            limit = self.long_poll_grace if long_poll else self.timeout
            async with asyncio.timeout(limit):
                return await self._answer(connection, mutation, probe)
        except TimeoutError:
            worker.connection = None  # it now belongs to a watcher, or is dropped
            if long_poll:
                await self._detach(offset, mutation, connection, sent_at)
                return None
            connection.abort()
            if not self._check_alive():
                return None
            self._hang(offset, mutation, time.monotonic() - sent_at)
            return HANG
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            worker.drop()
            return CLOSED if self._check_alive() else None
        finally:
            connection.previous = mutation.index

    async def _send_misframed(self, worker: _Worker, offset: int, mutation: Mutation) -> int | None:
        """A size prefix that disagrees with the body: a fresh connection that we
        half-close, after the first answer when the prefix is short of the body."""
        connection = await self._connect()
        if connection is None:
            return None
        answered = False
        sent_at = time.monotonic()
        self._last_sent[connection.number] = mutation.index
        try:
            connection.writer.write(mutation.data)
            if 0 <= mutation.declared < len(mutation.data) - 4:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await connection.frame()
                        answered = True
            with contextlib.suppress(OSError, RuntimeError):
                connection.writer.write_eof()
            async with asyncio.timeout(self.timeout):
                while True:
                    await connection.frame()
                    answered = True
        except TimeoutError:
            connection.abort()
            if not self._check_alive():
                return None
            note = " after the client's end of stream (connection kept open)"
            self._hang(offset, mutation, time.monotonic() - sent_at, note)
            return HANG
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            connection.abort()
            if not self._check_alive():
                return None
            return RESPONSE if answered else CLOSED

    def _hang(self, offset: int, mutation: Mutation, waited: float, note: str = "") -> None:
        head = mutation.head
        if len(self.result.hangs) < 100:
            api = head.api if head else "?"
            self.result.hangs.append(Hang(mutation.index, api, waited, mutation.data, note))

    # -- long polls: waiting legitimately, watched off the worker's path

    async def _detach(
        self, offset: int, mutation: Mutation, connection: _Connection, sent_at: float
    ) -> None:
        while len(self._watchers) >= self.max_long_polls and not self._stopped:
            self._watcher_done.clear()
            await self._watcher_done.wait()
        wait_ms = fetch_max_wait_ms(mutation.body)
        bounded = wait_ms is not None and wait_ms <= self.long_poll_cap * 1000
        if wait_ms is not None and bounded:
            deadline = sent_at + max(wait_ms, 0) / 1000 + self.timeout
        else:
            deadline = sent_at + self.long_poll_cap
        task = asyncio.create_task(
            self._watch(offset, mutation, connection, deadline, bounded, sent_at)
        )
        self._watchers[offset] = (task, bounded)

    async def _watch(
        self,
        offset: int,
        mutation: Mutation,
        connection: _Connection,
        deadline: float,
        bounded: bool,
        sent_at: float,
    ) -> None:
        outcome: int | None = None
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                outcome = await self._answer(connection, mutation, probe=False)
        except TimeoutError:
            if not self._check_alive():
                return
            if bounded:
                self._hang(offset, mutation, time.monotonic() - sent_at, " (declared max_wait)")
                outcome = HANG
            else:
                outcome = LONG_POLL
        except asyncio.CancelledError:
            if not self._stopped:
                outcome = LONG_POLL  # abandoned at the end of the campaign
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            outcome = CLOSED if self._check_alive() else None
        finally:
            connection.abort()
            self._watchers.pop(offset, None)
            self._watcher_done.set()
            if outcome is not None:
                self._record(offset, outcome)

    async def _finish_watchers(self) -> None:
        """Wait out long polls with a declared bound; abandon open-ended ones."""
        for task, bounded in list(self._watchers.values()):
            if not bounded:
                task.cancel()
        tasks = [task for task, _ in list(self._watchers.values())]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


# --- checks before and after ---------------------------------------------------------


async def api_version_ranges(bootstrap: str, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions v0 answer: api key -> (min, max)."""
    host, _, port = bootstrap.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(PROBE_FRAME)
        async with asyncio.timeout(timeout):
            (size,) = INT32.unpack(await reader.readexactly(4))
            frame = await reader.readexactly(size)
    finally:
        writer.close()
    (count,) = INT32.unpack_from(frame, 6)
    ranges = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", frame, 10 + 6 * i)
        ranges[key] = (low, high)
    return ranges


async def warm_up(bootstrap: str, frames: Sequence[bytes], timeout: float = 1.0) -> int:
    """Replay the captured frames unchanged (Metadata first, which creates the topics), so
    that mutated frames meet the topics, records and groups they name. Returns how many
    were answered."""
    host, _, port = bootstrap.rpartition(":")
    metadata_first = sorted(frames, key=lambda frame: frame[4:6] != b"\x00\x03")
    connection: _Connection | None = None
    answered = 0
    for frame in metadata_first:
        head = head_of(frame[4:])
        probe = head is not None and head.api_key == PRODUCE
        if connection is None:
            connection = _Connection(*await asyncio.open_connection(host, int(port)))
        try:
            connection.writer.write(frame + PROBE_FRAME if probe else frame)
            async with asyncio.timeout(timeout):
                while True:
                    body = await connection.frame()
                    if not probe or INT32.unpack_from(body, 0)[0] == PROBE_CORRELATION_ID:
                        break
            answered += 1
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError):
            connection.abort()
            connection = None
    if connection is not None:
        connection.abort()
    return answered


@dataclass(frozen=True)
class Sentinel:
    topic: str
    records: tuple[tuple[bytes, bytes], ...]


async def write_sentinel(bootstrap: str, count: int = 100) -> Sentinel:
    """Records on a fresh topic whose name no captured frame contains."""
    from aiokafka import AIOKafkaProducer

    topic = f"fuzz-sentinel-{secrets.token_hex(8)}"
    records = tuple((b"k-%d" % i, b"sentinel-value-%d-" % i * (1 + i % 5)) for i in range(count))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10_000)
    await asyncio.wait_for(producer.start(), 20)
    try:
        for key, value in records:
            await producer.send(topic, value, key=key, partition=0)
        await asyncio.wait_for(producer.flush(), 20)
    finally:
        await asyncio.wait_for(producer.stop(), 20)
    return Sentinel(topic, records)


async def read_partition(bootstrap: str, topic: str, timeout: float = 20.0) -> list[Any]:
    """Every record of partition 0 up to its end offset, with a group-less consumer."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=10_000,
    )
    await asyncio.wait_for(consumer.start(), timeout)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await asyncio.wait_for(consumer.end_offsets([tp]), timeout))[tp]
        got: list[Any] = []

        async def collect() -> None:
            while await consumer.position(tp) < end:
                batches = await consumer.getmany(tp, timeout_ms=200)
                got.extend(batches.get(tp, []))

        await asyncio.wait_for(collect(), timeout)
        return got
    finally:
        await asyncio.wait_for(consumer.stop(), timeout)


async def check_sentinel(bootstrap: str, sentinel: Sentinel) -> list[str]:
    got = await read_partition(bootstrap, sentinel.topic)
    found = tuple((r.key, r.value) for r in got)
    if found == sentinel.records:
        return []
    pairs = zip(found, sentinel.records, strict=False)
    first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(found), 100))
    return [
        f"sentinel topic {sentinel.topic} changed: {len(found)} records, expected "
        f"{len(sentinel.records)}; first difference at offset {first}"
    ]


async def check_produce_fetch(bootstrap: str) -> list[str]:
    """A real client can still write and read a new topic."""
    sentinel = await write_sentinel(bootstrap, count=10)
    got = await read_partition(bootstrap, sentinel.topic)
    found = tuple((r.key, r.value) for r in got)
    if found != sentinel.records:
        return [f"produce+fetch after the campaign: read {len(found)} of 10 records back"]
    return []
