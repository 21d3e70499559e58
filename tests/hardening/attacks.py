"""Attacks on a Kafka-protocol broker, and an honest client to see what they cost others.

Shared by tests/hardening/test_attacks.py (one regression test per attack) and
bench/hostile.py (the same attacks, measured and tabulated). Every attack runs against a
bootstrap address over raw sockets: well-formed requests are built with kio through
tests/rawclient.py, malformed ones are written byte by byte.

The broker runs in a child process (tests/childbroker.py), watched here:
- its stderr and stdout are drained all the time (a full pipe would block the broker's
  event loop on a log write, and the attack would measure that instead);
- a watchdog kills it when its RSS passes a ceiling, so an attack that would take many
  GiB on a broken broker fails fast instead of taking the machine down.

The honest client is a separate process (`python -m tests.hardening.attacks probe ...`)
producing one 100-byte message per request with acks=1 over a raw socket, the request
encoded once and only its correlation id patched: the broker's round trip, not client
code, sets its rate, and the attacking threads of the test process cannot take the
probe's GIL. Rates are read as message counts between two marks.

    python -m tests.hardening.attacks probe BOOTSTRAP TOPIC
        prints READY, then answers `mark` with `<count> <monotonic seconds> <connections
        opened>`; `quit` ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import os
import resource
import select
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minibroker.protocol import messages, records
from tests.childbroker import ChildBroker
from tests.rawclient import RawClient, encode, make, make_request, parse_host_port

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT = 0, 1, 2, 3, 8
LIST_GROUPS, CREATE_TOPICS = 16, 19
POLICY_VIOLATION, INVALID_PARTITIONS = 44, 37

HONEST_TOPIC = "honest"  # the probe produces here
KEEP_TOPIC = "keep"  # written before the attack, read back after it
QUIET_TOPIC = "quiet"  # nobody writes here: long polls wait on it
DATA_TOPIC = "data"  # a little data for the fetch attacks to amplify
TOPICS = [f"{HONEST_TOPIC}:1", f"{KEEP_TOPIC}:1", f"{QUIET_TOPIC}:1", f"{DATA_TOPIC}:1"]
KEEP_VALUES = [b"keep-%03d" % i for i in range(10)]
DATA_BATCHES = 4
DATA_BATCH_VALUE = 64 * 1024  # DATA_TOPIC holds 4 x 64 KiB

# Targets, measured by bench/hostile.py.
MEMORY_ALLOWANCE = 256 * MiB  # peak RSS <= baseline + stored data + this
DURING_RATIO = 0.5  # honest rate while an attack is under way, against the baseline
AFTER_RATIO = 0.9  # honest rate within AFTER_SECONDS of the attack's end
AFTER_SECONDS = 2.0
# What the tests hold the honest rate to: floors that tell a working broker from a
# starved one (the broken broker measured 0.00x-0.3x) without failing on the noise of a
# shared machine; the targets above are for the benchmark to report.
TEST_DURING_RATIO = 0.35
TEST_AFTER_RATIO = 0.6
# Honest answers before the baseline: enough for the first requests' one-off costs.
WARM_UP_ANSWERS = 200


def raise_fd_limit(wanted: int = 8192) -> None:
    """Raise this process's soft descriptor limit (children inherit it) if it is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


# --- wire helpers -----------------------------------------------------------------------


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def with_correlation_id(encoded: bytes | bytearray, correlation_id: int) -> bytes:
    """An encoded request frame with another correlation id (bytes 8..12 of every header)."""
    out = bytearray(encoded)
    struct.pack_into(">i", out, 8, correlation_id)
    return bytes(out)


def recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def read_frame_size(sock: socket.socket) -> int:
    """Read one response frame, keeping none of it; return its size."""
    size: int = struct.unpack(">i", recv_exact(sock, 4))[0]
    scratch = bytearray(1 << 20)
    left = size
    while left:
        got = sock.recv_into(scratch, min(left, len(scratch)))
        if not got:
            raise ConnectionError("the broker closed the connection mid-response")
        left -= got
    return size


def connect(bootstrap: str, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(parse_host_port(bootstrap), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the broker has closed this socket (EOF or reset is waiting), without blocking."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(65536, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def close_all(socks: Sequence[socket.socket]) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.close()


_TCP_ESTABLISHED, _TCP_SYN_RECV = 0x01, 0x03


def _broker_sockets(pid: int, port: int) -> dict[int, list[tuple[int, int, bool]]]:
    """From the kernel's TCP table, the connections to `port`: {remote port: [(state,
    bytes unread, accepted)]}. A connection still in the accept queue has no socket
    inode yet. The table is read in pages, so a connection that changes meanwhile may be
    missing: callers treat a missing one as not there yet."""
    found: dict[int, list[tuple[int, int, bool]]] = {}
    for name in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{name}") as table:
            next(table)  # the header
            for line in table:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) != port or fields[2].endswith(":0000"):
                    continue  # another port, or the listening socket
                remote = int(fields[2].rsplit(":", 1)[1], 16)
                unread = int(fields[4].split(":")[1], 16)
                found.setdefault(remote, []).append((int(fields[3], 16), unread, fields[9] != "0"))
    return found


def open_connections(bootstrap: str, count: int, first_bytes: bytes = b"") -> list[socket.socket]:
    """`count` connections, each sending `first_bytes` (if any) and then nothing more.

    A connection the broker refuses (max_connections) is kept too: its socket is simply
    closed by the peer. Connects that fail outright are skipped.
    """
    socks: list[socket.socket] = []
    for _ in range(count):
        try:
            sock = connect(bootstrap, timeout=5.0)
        except OSError:
            continue
        if first_bytes:
            with contextlib.suppress(OSError):
                sock.sendall(first_bytes)
        socks.append(sock)
    return socks


# --- well-formed requests ---------------------------------------------------------------


def produce_request(topic: str, batch: bytes, acks: int = 1, partition: int = 0) -> Any:
    version = 9
    data = make(PRODUCE, version, "PartitionProduceData", index=partition, records=batch)
    topic_data = make(PRODUCE, version, "TopicProduceData", name=topic, partition_data=(data,))
    return make_request(
        PRODUCE,
        version,
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(topic_data,),
    )


def produce_codes(response: Any) -> list[int]:
    return [p.error_code.value for t in response.responses for p in t.partition_responses]


def fetch_request(
    topic: str,
    *,
    repeats: int = 1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 2**31 - 1,
    partition_max_bytes: int = 1 << 20,
    fetch_offset: int = 0,
) -> Any:
    """Fetch v11 naming partition 0 of `topic` `repeats` times."""
    version = 11
    partition = make(
        FETCH,
        version,
        "FetchPartition",
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=fetch_offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=partition_max_bytes,
    )
    fetch_topic = make(FETCH, version, "FetchTopic", topic=topic, partitions=(partition,) * repeats)
    return make_request(
        FETCH,
        version,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(fetch_topic,),
        forgotten_topics_data=(),
        rack_id="",
    )


def create_topics_request(specs: Sequence[tuple[str, int, dict[str, str]]]) -> Any:
    version = 7
    topics = tuple(
        make(
            CREATE_TOPICS,
            version,
            "CreatableTopic",
            name=name,
            num_partitions=partitions,
            replication_factor=1,
            assignments=(),
            configs=tuple(
                make(CREATE_TOPICS, version, "CreatableTopicConfig", name=key, value=value)
                for key, value in configs.items()
            ),
        )
        for name, partitions, configs in specs
    )
    return make_request(
        CREATE_TOPICS,
        version,
        topics=topics,
        timeout=datetime.timedelta(seconds=60),
        validate_only=False,
    )


def read_values(bootstrap: str, topic: str) -> list[bytes | None]:
    """Every value stored in partition 0 of `topic`, from offset 0."""
    with RawClient(bootstrap, timeout=10) as client:
        response = client.request(FETCH, 11, fetch_request(topic, max_bytes=8 << 20))
    values: list[bytes | None] = []
    for topic_response in response.responses:
        for partition in topic_response.partitions:
            data = bytes(partition.records or b"")
            for _, batch in records.split_batches(data):
                values.extend(record.value for record in records.iter_records(batch))
    return values


def produce_values(bootstrap: str, topic: str, values: Sequence[bytes]) -> int:
    """Produce one batch per value (acks=1); return the bytes stored."""
    stored = 0
    with RawClient(bootstrap, timeout=30) as client:
        for value in values:
            batch = records.build_batch([(None, value)], timestamp_ms=1000)
            codes = produce_codes(client.request(PRODUCE, 9, produce_request(topic, batch)))
            if codes != [0]:
                raise RuntimeError(f"producing to {topic} failed: {codes}")
            stored += len(batch)
    return stored


# --- the honest client ------------------------------------------------------------------


def _probe_frame(topic: str) -> tuple[bytes, int]:
    batch = records.build_batch([(None, b"h" * 100)], timestamp_ms=1000)
    return encode(PRODUCE, 9, produce_request(topic, batch), 1, "honest"), len(batch)


def first_served(bootstrap: str, timeout: float, topic: str = HONEST_TOPIC) -> float | None:
    """Seconds until a client that connects now gets a Produce answered, retrying as a real
    client does when its connection is refused or dropped; None if not within `timeout`."""
    request, _ = _probe_frame(topic)
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline:
        try:
            with connect(bootstrap, timeout=2.0) as sock:
                sock.settimeout(max(0.05, min(2.0, deadline - time.monotonic())))
                sock.sendall(request)
                _, response = messages.decode_response(read_frame(sock), PRODUCE, 9)
                if produce_codes(response) == [0]:
                    return time.monotonic() - started
        except (OSError, ConnectionError, struct.error):
            pass
        time.sleep(0.05)
    return None


def _probe_main(bootstrap: str, topic: str) -> None:
    """The probe process: produce forever on one connection, reconnecting when it breaks."""
    request, _ = _probe_frame(topic)
    count = connections = 0
    stop = threading.Event()

    def work() -> None:
        nonlocal count, connections
        correlation_id = 0
        while not stop.is_set():
            try:
                sock = connect(bootstrap, timeout=2.0)
            except OSError:
                time.sleep(0.01)
                continue
            connections += 1
            sock.settimeout(2.0)
            try:
                while not stop.is_set():
                    correlation_id = (correlation_id + 1) & 0x7FFFFFFF
                    sock.sendall(with_correlation_id(request, correlation_id))
                    got, response = messages.decode_response(read_frame(sock), PRODUCE, 9)
                    if got == correlation_id and produce_codes(response) == [0]:
                        count += 1
            except Exception:  # an honest client reconnects, whatever went wrong
                pass
            finally:
                sock.close()
            time.sleep(0.01)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    print("READY", flush=True)
    for line in sys.stdin:
        if line.strip() == "mark":
            print(f"{count} {time.monotonic()} {connections}", flush=True)
        elif line.strip() == "quit":
            break
    stop.set()


@dataclass(frozen=True)
class Mark:
    count: int  # honest messages acknowledged so far
    at: float  # monotonic seconds
    cpu: float  # CPU seconds the broker has used so far


class HonestProbe:
    """An honest producer in its own process; `count()` reads its running message count."""

    def __init__(self, bootstrap: str, topic: str = HONEST_TOPIC) -> None:
        self.batch_bytes = _probe_frame(topic)[1]
        self.connections = 0  # connections the probe has opened so far
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.hardening.attacks", "probe", bootstrap, topic],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self._readline() != "READY":
            raise RuntimeError("the honest probe did not start")
        self._first = self.count()[0]

    def _readline(self) -> str:
        assert self._process.stdout is not None
        return self._process.stdout.readline().strip()

    def count(self) -> tuple[int, float]:
        """(messages acknowledged so far, monotonic seconds now)."""
        assert self._process.stdin is not None
        self._process.stdin.write("mark\n")
        self._process.stdin.flush()
        count, at, connections = self._readline().split()
        self.connections = int(connections)
        return int(count), float(at)

    def stored_bytes(self) -> int:
        return (self.count()[0] - self._first) * self.batch_bytes

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            assert self._process.stdin is not None
            self._process.stdin.write("quit\n")
            self._process.stdin.close()
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> HonestProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- the broker under attack ------------------------------------------------------------


class Target:
    """A child broker with its output drained and an RSS watchdog."""

    def __init__(self, kill_above: int, **settings: Any) -> None:
        settings.setdefault("topics", TOPICS)
        self.broker = ChildBroker(**settings)
        self.kill_above = kill_above
        self.killed: str | None = None
        self.max_rss_seen = 0
        self.output: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def start(self) -> Target:
        self.broker.start()
        process = self.broker.process
        assert process is not None and process.stdout is not None and process.stderr is not None
        for stream in (process.stdout, process.stderr):
            self._spawn(functools.partial(self._drain, stream))
        self._spawn(self._watch)
        return self

    def _spawn(self, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _drain(self, stream: Any) -> None:
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                self.output.append(line)

    def _watch(self) -> None:
        while not self._stop.is_set() and self.broker.alive():
            try:
                rss = self.broker.rss_bytes()
            except (OSError, LookupError):
                return
            self.max_rss_seen = max(self.max_rss_seen, rss)
            if rss > self.kill_above:
                self.killed = (
                    f"killed by the watchdog: RSS {rss / MiB:,.0f} MiB passed "
                    f"{self.kill_above / MiB:,.0f} MiB"
                )
                with contextlib.suppress(OSError):
                    os.kill(self.broker.pid, 9)
                return
            time.sleep(0.02)

    def alive(self) -> bool:
        return self.broker.alive()

    def cpu_seconds(self) -> float:
        """CPU time every thread of the broker has used so far (0 once it is gone)."""
        total = 0
        for stat in Path(f"/proc/{self.broker.pid}/task").glob("*/schedstat"):
            with contextlib.suppress(OSError, ValueError, IndexError):  # a thread ended
                total += int(stat.read_text().split()[0])
        return total / 1e9

    def rss(self) -> int:
        return self.broker.rss_bytes()

    def peak(self) -> int:
        """Highest RSS seen: VmHWM while the process lives, else what the watchdog saw."""
        peak = self.max_rss_seen
        if self.alive():
            with contextlib.suppress(OSError, LookupError):
                peak = max(peak, self.broker.peak_rss_bytes())
        return peak

    def log_text(self) -> str:
        return "".join(self.output)

    def caught_up(self, socks: Sequence[socket.socket]) -> bool:
        """Whether the broker has accepted every connection of `socks` and read every byte
        sent on them so far (a connection it closed counts as done)."""
        port = int(self.bootstrap.rsplit(":", 1)[1])
        table = _broker_sockets(self.broker.pid, port)
        for sock in socks:
            try:
                entries = table.get(sock.getsockname()[1], [])
            except OSError:
                continue  # closed here
            if not entries:
                if closed_by_peer(sock):
                    continue
                return False
            for state, unread, accepted in entries:
                if state == _TCP_SYN_RECV or (state == _TCP_ESTABLISHED and not accepted):
                    return False  # not accepted yet
                if state == _TCP_ESTABLISHED and unread:
                    return False  # not read yet
        return True

    def stop(self) -> None:
        self._stop.set()
        self.broker.stop()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> Target:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- measuring one attack ---------------------------------------------------------------


@dataclass(frozen=True)
class Rate:
    """The honest client's rate over a span: messages per second of wall time, and per
    second of CPU time the broker used. The second is the rate the broker would sustain if
    it had the CPU to itself: with other test runs on the same 2 cores, half-second
    windows of the wall rate varied by 21% (coefficient of variation), of the per-CPU
    rate by 7%."""

    wall: float
    cpu: float

    @staticmethod
    def between(start: Mark, end: Mark) -> Rate:
        count = end.count - start.count
        cpu = end.cpu - start.cpu  # 0 or less once the broker is gone
        return Rate(count / max(end.at - start.at, 1e-9), count / cpu if cpu > 1e-4 else 0.0)

    def ratio(self, baseline: Rate) -> tuple[float, float]:
        return self.wall / max(baseline.wall, 1e-9), self.cpu / max(baseline.cpu, 1e-9)


@dataclass
class Measurement:
    name: str
    baseline: Rate = Rate(0.0, 0.0)
    during: Rate | None = None
    after: Rate | None = None
    baseline_rss: int = 0
    peak_rss: int = 0
    stored_bytes: int = 0
    allowance: int = MEMORY_ALLOWANCE
    alive: bool = True
    killed: str | None = None
    data_intact: bool = True
    problems: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)

    @property
    def baseline_rate(self) -> float:
        return self.baseline.wall

    @property
    def growth(self) -> int:
        return self.peak_rss - self.baseline_rss

    def ratios(self, rate: Rate | None) -> tuple[float, float] | None:
        return None if rate is None else rate.ratio(self.baseline)

    def rate_failures(self, during: float = DURING_RATIO, after: float = AFTER_RATIO) -> list[str]:
        """The honest-rate targets missed. A target counts as met when either the wall
        rate or the per-broker-CPU rate meets it (see Rate)."""
        found: list[str] = []
        for label, rate, target in (
            ("during the attack", self.during, during),
            (f"within {AFTER_SECONDS:.0f} s after the attack", self.after, after),
        ):
            ratios = self.ratios(rate)
            if ratios is not None and max(ratios) < target:
                found.append(
                    f"honest rate {label} {ratios[0]:.2f}x ({ratios[1]:.2f}x per broker "
                    f"CPU-second) < {target}x"
                )
        return found

    def other_failures(self) -> list[str]:
        found: list[str] = []
        if self.killed:
            found.append(self.killed)
        elif not self.alive:
            found.append("the broker process died")
        bound = self.stored_bytes + self.allowance
        if self.growth > bound:
            found.append(
                f"peak RSS grew {self.growth / MiB:,.0f} MiB over the baseline, more than "
                f"stored data + {self.allowance / MiB:,.0f} MiB = {bound / MiB:,.0f} MiB"
            )
        if not self.data_intact:
            found.append("data produced before the attack is gone")
        return found + self.problems

    def failures(self, during: float = DURING_RATIO, after: float = AFTER_RATIO) -> list[str]:
        return self.other_failures() + self.rate_failures(during, after)

    def describe(self) -> str:
        def ratio_text(rate: Rate | None) -> str:
            ratios = self.ratios(rate)
            return "-" if ratios is None else f"{ratios[0]:.2f}x ({ratios[1]:.2f}x per CPU)"

        lines = [
            f"{self.name}: baseline {self.baseline.wall:,.0f} msg/s "
            f"({self.baseline.cpu:,.0f} per broker CPU-second), "
            f"during {ratio_text(self.during)}, after {ratio_text(self.after)}, "
            f"peak RSS +{self.growth / MiB:,.0f} MiB (stored {self.stored_bytes / MiB:,.1f} MiB)"
        ]
        lines += [f"  fact: {fact}" for fact in self.facts]
        lines += [f"  FAIL: {failure}" for failure in self.failures()]
        return "\n".join(lines)


class Run:
    """One attack against one fresh broker: baseline, attack, recovery, checks."""

    def __init__(self, target: Target, probe: HonestProbe, measurement: Measurement) -> None:
        self.target = target
        self.probe = probe
        self.m = measurement
        self.attack_stored = 0

    @property
    def bootstrap(self) -> str:
        return self.target.bootstrap

    def add_stored(self, size: int) -> None:
        self.attack_stored += size
        self.target.kill_above += size

    def problem(self, text: str) -> None:
        self.m.problems.append(text)

    def fact(self, text: str) -> None:
        self.m.facts.append(text)

    def mark(self) -> Mark:
        count, at = self.probe.count()
        return Mark(count, at, self.target.cpu_seconds())

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 30.0) -> bool:
        """Poll `condition` until it holds; a problem (and False) if not within `timeout`."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                self.problem(f"{what} did not happen within {timeout:.0f} s")
                return False
            time.sleep(0.02)
        return True

    def warm_up(self, answers: int = WARM_UP_ANSWERS) -> None:
        """Until the honest probe has had `answers` more answers: its first requests load
        code on both sides, which the baseline must not measure."""
        target = self.probe.count()[0] + answers
        self.wait_for(lambda: self.probe.count()[0] >= target, "the honest probe's warm-up")

    def caught_up(self, socks: Sequence[socket.socket], what: str) -> bool:
        """Until the broker has accepted `socks` and read what was sent on them."""
        return self.wait_for(lambda: self.target.caught_up(socks), f"the broker taking {what}")

    def sync_log(self, timeout: float = 10.0) -> None:
        """Until every line the broker has logged so far is in `target.output`: it logs one
        of ours after them on the same stream (a negative frame size closes a connection
        with a WARNING naming the size)."""
        size = -1 - int.from_bytes(os.urandom(3), "big")
        marker = f"negative frame size {size}"
        start = len(self.target.output)
        with contextlib.suppress(OSError), connect(self.bootstrap, timeout=5.0) as sock:
            sock.sendall(struct.pack(">i", size))
        self.wait_for(
            lambda: any(marker in line for line in self.target.output[start:]),
            "the broker logging a marker line",
            timeout,
        )

    def window(self, seconds: float) -> Rate:
        start = self.mark()
        time.sleep(seconds)
        return Rate.between(start, self.mark())

    def during(self, seconds: float = 1.0) -> Rate:
        """The honest rate over the next `seconds` (the attack under way)."""
        rate = self.window(seconds)
        self._record_during(rate)
        return rate

    @contextlib.contextmanager
    def during_action(self, min_seconds: float = 2.0) -> Iterator[None]:
        """The honest rate over a blocking attack action, and at least `min_seconds`."""
        start = self.mark()
        began = time.monotonic()
        try:
            yield
        finally:
            time.sleep(max(0.0, min_seconds - (time.monotonic() - began)))
            self._record_during(Rate.between(start, self.mark()))

    def _record_during(self, rate: Rate) -> None:
        old = self.m.during
        self.m.during = (
            rate if old is None else Rate(min(old.wall, rate.wall), min(old.cpu, rate.cpu))
        )

    def after(self, window: float = 0.5) -> Rate:
        """The best honest rates in the windows starting within AFTER_SECONDS of now."""
        wall = cpu = 0.0
        started = time.monotonic()
        while time.monotonic() - started < AFTER_SECONDS - 1e-3:
            rate = self.window(window)
            wall, cpu = max(wall, rate.wall), max(cpu, rate.cpu)
            if max(Rate(wall, cpu).ratio(self.m.baseline)) >= AFTER_RATIO:
                break
        self.m.after = Rate(wall, cpu)
        return self.m.after


@dataclass(frozen=True)
class Scenario:
    name: str
    item: int
    attack: Callable[[Run], None]
    settings: dict[str, Any] = field(default_factory=dict)
    allowance: int = MEMORY_ALLOWANCE
    slow: bool = False
    summary: str = ""


def measure(scenario: Scenario, kill_margin: int = 512 * MiB) -> Measurement:
    """Run one attack against a fresh child broker; the watchdog kills the broker once its
    RSS passes baseline + stored data + allowance + `kill_margin`."""
    raise_fd_limit()
    m = Measurement(scenario.name, allowance=scenario.allowance)
    with Target(kill_above=8 * 1024 * MiB, **scenario.settings) as target:
        keep_stored = produce_values(target.bootstrap, KEEP_TOPIC, KEEP_VALUES)
        with HonestProbe(target.bootstrap) as probe:
            run = Run(target, probe, m)
            run.warm_up()
            windows = [run.window(0.4) for _ in range(3)]
            m.baseline = Rate(
                statistics.median(w.wall for w in windows),
                statistics.median(w.cpu for w in windows),
            )
            m.baseline_rss = target.rss()
            target.kill_above = m.baseline_rss + scenario.allowance + kill_margin
            probe_stored_before = probe.stored_bytes()
            try:
                scenario.attack(run)
                if m.after is None and target.alive():
                    run.after()
            except (OSError, ConnectionError, struct.error) as exc:
                run.problem(f"the attack ended with {exc!r}")
            finally:
                with contextlib.suppress(Exception):
                    probe.count()
                    if probe.connections > 1:
                        run.fact(f"the honest probe reconnected {probe.connections - 1} time(s)")
                m.alive = target.alive()
                m.killed = target.killed
                m.peak_rss = target.peak()
                with contextlib.suppress(Exception):
                    m.stored_bytes = (
                        keep_stored + run.attack_stored + probe.stored_bytes() - probe_stored_before
                    )
            if m.alive:
                try:
                    m.data_intact = read_values(target.bootstrap, KEEP_TOPIC) == KEEP_VALUES
                except (OSError, ConnectionError) as exc:
                    run.problem(f"the data produced before the attack could not be read: {exc!r}")
    if not m.alive and not m.killed:
        m.facts.append(f"exit code {target.broker.returncode()}")
    return m


# --- 1. declared lengths ----------------------------------------------------------------

_HUGE_UVARINT = b"\xff\xff\xff\xff\x0f"  # 2**32 - 1: a compact array of 2**32 - 2 items


def _header(api_key: int, version: int, flexible: bool) -> bytes:
    head = struct.pack(">hhi", api_key, version, 1) + struct.pack(">h", 1) + b"x"
    return head + (b"\x00" if flexible else b"")  # header v2 ends with its tagged fields


HUGE_LENGTH_FRAMES: dict[str, bytes] = {
    # Metadata v12: header v2 (client id "x", no tags), then topics with a compact length
    # of 2**32-1: 18 bytes after the size prefix.
    "metadata-v12-compact-array": frame(_header(METADATA, 12, True) + _HUGE_UVARINT + b"\x01"),
    # The legacy form: Metadata v1, an int32 topic count of 2**31-1.
    "metadata-v1-int32-array": frame(_header(METADATA, 1, False) + struct.pack(">i", 2**31 - 1)),
    # Produce v9: transactional id null, acks, timeout, topic_data of 2**32-2 entries.
    "produce-v9-compact-array": frame(
        _header(PRODUCE, 9, True) + b"\x00" + struct.pack(">hi", 1, 1000) + _HUGE_UVARINT
    ),
}


def huge_length(variant: str) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        with run.during_action(1.0), RawClient(run.bootstrap, timeout=10) as client:
            client.send_bytes(HUGE_LENGTH_FRAMES[variant])
            if not client.is_closed_by_peer(5):
                run.problem("the broker kept the connection of a broken frame open")
        run.fact(f"{len(HUGE_LENGTH_FRAMES[variant]) - 4}-byte frame sent")

    return attack


# --- 2. size prefixes -------------------------------------------------------------------


def huge_prefixes(connections: int = 30, declared: int = 100 * MiB) -> Callable[[Run], None]:
    """Each connection declares a `declared`-byte frame and sends 10 bytes of it."""

    def attack(run: Run) -> None:
        socks = open_connections(
            run.bootstrap, connections, struct.pack(">i", declared) + bytes(10)
        )
        try:
            run.during(1.0)
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and not all(closed_by_peer(s) for s in socks):
                time.sleep(0.1)
            still_open = sum(not closed_by_peer(s) for s in socks)
            if still_open:
                run.problem(
                    f"{still_open} of {len(socks)} stuck partial frames still open 4 s into "
                    "the attack (partial_request_timeout_ms=1000)"
                )
        finally:
            close_all(socks)

    return attack


def budget_flood(connections: int = 30, each: int = 20 * MiB) -> Callable[[Run], None]:
    """Each connection declares a 100 MiB frame and really sends `each` bytes of it, as fast
    as the broker reads: the bytes held must stay within queued_max_request_bytes."""

    def attack(run: Run) -> None:
        prefix = struct.pack(">i", 100 * MiB)
        socks = open_connections(run.bootstrap, connections, prefix)
        sent = [0] * len(socks)
        closed = [False] * len(socks)
        for sock in socks:
            sock.setblocking(False)
        chunk = bytes(256 * 1024)
        started = stalled_since = time.monotonic()
        # Push until every connection sent its share or was closed, or nothing moved for
        # 1.5 s (the broker stopped reading).
        while time.monotonic() - stalled_since < 1.5 and time.monotonic() - started < 20:
            moved = False
            for index, sock in enumerate(socks):
                if sent[index] >= each or closed[index]:
                    continue
                try:
                    sent[index] += sock.send(chunk[: each - sent[index]])
                    moved = True
                except BlockingIOError:
                    pass
                except OSError:
                    closed[index] = True
            if moved:
                stalled_since = time.monotonic()
            elif all(done >= each or gone for done, gone in zip(sent, closed, strict=True)):
                break
            else:
                time.sleep(0.01)
        run.fact(
            f"{sum(sent) / MiB:,.0f} MiB sent by {len(socks)} connections in "
            f"{time.monotonic() - started:.1f} s, {sum(closed)} of them closed by the broker"
        )
        served = first_served(run.bootstrap, 6.0)
        if served is None:
            run.problem("a new client was not served within 6 s of the flood ending")
        else:
            run.fact(f"new client served {served:.1f} s after the flood ended")
        close_all(socks)

    return attack


# --- 3. long polls ----------------------------------------------------------------------


def long_polls(connections: int = 100, repeats: int = 1000) -> Callable[[Run], None]:
    """Fetches waiting an hour for 2**31-1 bytes of a quiet partition listed 1,000 times."""

    def attack(run: Run) -> None:
        request = fetch_request(
            QUIET_TOPIC, repeats=repeats, max_wait_ms=3_600_000, min_bytes=2**31 - 1
        )
        encoded = encode(FETCH, 11, request, 1, "poller")
        socks = open_connections(run.bootstrap, connections, encoded)
        try:
            # Measure once the broker has read every poll, not after a guessed delay.
            run.caught_up(socks, "the long polls")
            run.during(1.0)
        finally:
            close_all(socks)  # the attackers go away; their polls must go with them

    return attack


# --- 4. decompression bombs -------------------------------------------------------------

BOMB_EXPANSION = 1 << 30  # every bomb expands to 1 GiB of zeros
CODECS = {"snappy": 2, "lz4": 3, "zstd": 4}


@functools.cache
def bomb_payload(codec: str) -> bytes:
    chunk = bytes(16 * MiB)
    chunks = BOMB_EXPANSION // len(chunk)
    if codec == "zstd":
        import zstandard

        compressor = zstandard.ZstdCompressor(level=1).compressobj()
        return b"".join([compressor.compress(chunk) for _ in range(chunks)] + [compressor.flush()])
    if codec == "lz4":
        import lz4.frame  # type: ignore[import-untyped]

        lz4_compressor = lz4.frame.LZ4FrameCompressor(
            block_size=lz4.frame.BLOCKSIZE_MAX4MB, compression_level=0
        )
        parts = [lz4_compressor.begin()]
        parts += [lz4_compressor.compress(chunk) for _ in range(chunks)]
        return b"".join([*parts, lz4_compressor.flush()])
    if codec == "snappy":
        import cramjam

        # xerial framing (what Java clients send): a header, then sized raw blocks.
        block = bytes(cramjam.snappy.compress_raw(chunk))
        header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        return header + (struct.pack(">i", len(block)) + block) * chunks
    raise ValueError(codec)


def compressed_batch(codec: int, payload: bytes, record_count: int = 1) -> bytes:
    """A magic-2 batch whose records are `payload`, said to be compressed with `codec`."""
    after_crc = (
        struct.pack(">hiqqqhii", codec, record_count - 1, 1000, 1000, -1, -1, -1, record_count)
        + payload
    )
    crc = records.crc32c(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


def list_offsets_by_time(topic: str, repeats: int) -> Any:
    version = 7
    partition = make(
        LIST_OFFSETS,
        version,
        "ListOffsetsPartition",
        partition_index=0,
        current_leader_epoch=-1,
        timestamp=0,
    )
    entry = make(
        LIST_OFFSETS, version, "ListOffsetsTopic", name=topic, partitions=(partition,) * repeats
    )
    return make_request(LIST_OFFSETS, version, replica_id=-1, isolation_level=0, topics=(entry,))


def bomb(codec: str, repeats: int = 10) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        topic = f"bomb-{codec}"
        batch = compressed_batch(CODECS[codec], bomb_payload(codec))
        with RawClient(run.bootstrap, timeout=60) as client:
            # Any client may raise a topic's max.message.bytes; 64 MiB lets every codec's
            # batch in (the snappy one is the largest, ~50 MB).
            created = client.request(
                CREATE_TOPICS,
                7,
                create_topics_request([(topic, 1, {"max.message.bytes": str(64 * MiB)})]),
            )
            if created.topics[0].error_code.value != 0:
                raise RuntimeError(f"cannot create {topic}: {created.topics[0]}")
            codes = produce_codes(client.request(PRODUCE, 9, produce_request(topic, batch)))
            if codes == [0]:
                run.add_stored(len(batch))
                run.fact(f"{len(batch):,}-byte {codec} batch stored")
            else:
                run.fact(f"{len(batch):,}-byte {codec} batch refused at produce: {codes}")
            began = time.monotonic()
            with run.during_action(2.0):
                try:
                    client.request(LIST_OFFSETS, 7, list_offsets_by_time(topic, repeats))
                    run.fact(f"ListOffsets x{repeats} answered in {time.monotonic() - began:.2f} s")
                except (OSError, ConnectionError) as exc:
                    run.problem(f"ListOffsets by timestamp got no answer: {exc!r}")

    return attack


# --- 5. groups --------------------------------------------------------------------------


def _commit_frame(group_id: str) -> bytes:
    version = 8
    partition = make(
        OFFSET_COMMIT,
        version,
        "OffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=1,
        committed_leader_epoch=-1,
        committed_metadata="",
    )
    topic = make(
        OFFSET_COMMIT, version, "OffsetCommitRequestTopic", name=KEEP_TOPIC, partitions=(partition,)
    )
    request = make_request(
        OFFSET_COMMIT,
        version,
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(topic,),
    )
    return encode(OFFSET_COMMIT, version, request, 1, "anon")


def anonymous_commits(bootstrap: str, groups: int, window: int = 200) -> int:
    """OffsetCommits (generation -1, member id "") for `groups` new groups `anon-NNNNNN`,
    pipelined `window` at a time; return how many were accepted."""
    template = _commit_frame("anon-000000")
    accepted = 0
    with connect(bootstrap, timeout=30) as sock:
        for start in range(0, groups, window):
            batch = [
                with_correlation_id(template.replace(b"anon-000000", b"anon-%06d" % i), i)
                for i in range(start, min(groups, start + window))
            ]
            sock.sendall(b"".join(batch))
            for _ in batch:
                _, response = messages.decode_response(read_frame(sock), OFFSET_COMMIT, 8)
                codes = [p.error_code.value for t in response.topics for p in t.partitions]
                accepted += codes == [0]
    return accepted


def anonymous_groups(bootstrap: str) -> int:
    with RawClient(bootstrap, timeout=30) as client:
        response = client.call(LIST_GROUPS, 4, states_filter=())
    return sum(group.group_id.startswith("anon-") for group in response.groups)


def group_flood(groups: int = 20_000, expect_expiry: bool = False) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        began = time.monotonic()
        accepted = anonymous_commits(run.bootstrap, groups)
        run.fact(f"{accepted:,} anonymous commits accepted in {time.monotonic() - began:.1f} s")
        # The attack is over; the groups it made stay (or expire). Produce must not pay
        # for them.
        run.after()
        if expect_expiry:
            deadline = time.monotonic() + 5.0
            left = anonymous_groups(run.bootstrap)
            while left and time.monotonic() < deadline:
                time.sleep(0.2)
                left = anonymous_groups(run.bootstrap)
            if left:
                run.problem(
                    f"{left:,} empty groups still listed 5 s after their retention "
                    "(offsets_retention_minutes=0.01) ran out"
                )

    return attack


# --- 6. connection slots and idle connections ---------------------------------------------

# The first 9 bytes of a 15-byte Metadata v1 frame (size prefix, api key, version, half
# of the correlation id).
HALF_FRAME = frame(struct.pack(">hhih", METADATA, 1, 1, -1) + struct.pack(">i", -1))[:9]


def lockout(
    connections: int, first_bytes: bytes, served_within: float, label: str
) -> Callable[[Run], None]:
    """`connections` connections that send `first_bytes` and stop; a client that connects
    while they are open must be served within `served_within` seconds."""

    def attack(run: Run) -> None:
        began = time.monotonic()
        socks = open_connections(run.bootstrap, connections, first_bytes)
        try:
            opened = time.monotonic() - began
            run.fact(f"{len(socks)} {label} connections opened in {opened:.1f} s")
            run.during(1.0)
            served = first_served(run.bootstrap, served_within)
            if served is None:
                run.problem(
                    f"a client connecting while the {label} connections are open was not "
                    f"served within {served_within:.0f} s"
                )
            else:
                run.fact(f"a new client was served after {served:.1f} s")
        finally:
            close_all(socks)

    return attack


def idle_memory(connections: int = 1000) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        before = run.target.rss()
        socks = open_connections(run.bootstrap, connections)
        try:
            run.caught_up(socks, "the idle connections")  # every one accepted
            grown = run.target.rss() - before
            run.fact(
                f"{len(socks)} idle connections: RSS +{grown / MiB:,.0f} MiB "
                f"({grown / max(len(socks), 1) / 1024:,.0f} KiB each)"
            )
            run.during(1.0)
        finally:
            close_all(socks)

    return attack


# --- 7. amplification and pipelining ----------------------------------------------------


def _store_data(run: Run) -> None:
    values = [bytes([65 + i]) * DATA_BATCH_VALUE for i in range(DATA_BATCHES)]
    run.add_stored(produce_values(run.bootstrap, DATA_TOPIC, values))


def amplified_fetch(
    repeats: int = 5000, fetch_max_bytes: int = 57_671_680
) -> Callable[[Run], None]:
    """One Fetch naming the data partition `repeats` times."""

    def attack(run: Run) -> None:
        encoded = encode(FETCH, 11, fetch_request(DATA_TOPIC, repeats=repeats), 7, "amplifier")
        _store_data(run)
        run.fact(f"{len(encoded) / 1024:,.0f} KiB Fetch request")
        with run.during_action(2.0), connect(run.bootstrap, timeout=60) as sock:
            sock.sendall(encoded)
            try:
                size = read_frame_size(sock)
                run.fact(f"response {size / MiB:,.1f} MiB")
                if size > fetch_max_bytes + MiB:
                    run.problem(
                        f"a {size / MiB:,.0f} MiB response, over fetch_max_bytes "
                        f"({fetch_max_bytes / MiB:,.0f} MiB)"
                    )
            except (OSError, ConnectionError, struct.error) as exc:
                run.problem(f"no Fetch response: {exc!r}")

    return attack


def pipelined_fetches(count: int = 10_000) -> Callable[[Run], None]:
    """`count` Fetches of the data partition sent back to back; no response is read."""

    def attack(run: Run) -> None:
        template = encode(FETCH, 11, fetch_request(DATA_TOPIC), 1, "pipeliner")
        _store_data(run)
        payload = b"".join(with_correlation_id(template, i) for i in range(1, count + 1))
        sock = connect(run.bootstrap)
        try:
            sock.setblocking(False)
            sent = 0
            stalled_since = time.monotonic()
            while sent < len(payload) and time.monotonic() - stalled_since < 1.0:
                try:
                    sent += sock.send(payload[sent : sent + 65536])
                    stalled_since = time.monotonic()
                except BlockingIOError:
                    time.sleep(0.01)
            run.fact(f"{sent // len(template):,} of {count:,} Fetches sent, none read")
            run.during(1.5)
        finally:
            sock.close()

    return attack


@functools.cache
def _create_frame(topics: int, partitions: int) -> bytes:
    no_configs: dict[str, str] = {}
    specs = [(f"bulk-{i:06d}", partitions, no_configs) for i in range(topics)]
    return encode(CREATE_TOPICS, 7, create_topics_request(specs), 3, "creator")


def bulk_partitions(bootstrap: str) -> tuple[int, int]:
    """(topics, partitions) named bulk-* in the cluster's metadata."""
    with RawClient(bootstrap, timeout=60) as client:
        response = client.call(METADATA, 1, topics=None)
    bulk = [t for t in response.topics if t.name.startswith("bulk-")]
    return len(bulk), sum(len(t.partitions) for t in bulk)


def mass_create(
    topics: int, partitions: int, per_request: int = 10_000, per_broker: int = 100_000
) -> Callable[[Run], None]:
    def attack(run: Run) -> None:
        encoded = _create_frame(topics, partitions)
        # The window is the broker's work: sending the request and receiving the answer.
        # Decoding 100,000 topic results is this client's own work, done after it, so
        # that on a loaded machine it does not take CPU from the honest producer inside
        # the window.
        with run.during_action(2.0), connect(run.bootstrap, timeout=120) as sock:
            began = time.monotonic()
            sock.sendall(encoded)
            try:
                answer = read_frame(sock)
            except (OSError, ConnectionError, struct.error) as exc:
                run.problem(f"no CreateTopics response: {exc!r}")
                return
            run.fact(f"CreateTopics answered in {time.monotonic() - began:.1f} s")
        _, response = messages.decode_response(answer, CREATE_TOPICS, 7)
        codes: dict[int, int] = {}
        for result in response.topics:
            codes[result.error_code.value] = codes.get(result.error_code.value, 0) + 1
        run.fact(f"error codes: {codes}")
        if len(response.topics) != topics:
            run.problem(f"{len(response.topics):,} topic results for {topics:,} topics")
        unexpected = set(codes) - {0, POLICY_VIOLATION, INVALID_PARTITIONS}
        if unexpected:
            run.problem(f"unexpected error codes {sorted(unexpected)}")
        made_topics, made_partitions = bulk_partitions(run.bootstrap)
        run.fact(f"{made_topics:,} topics / {made_partitions:,} partitions created")
        if made_partitions > per_request:
            run.problem(
                f"one request created {made_partitions:,} partitions "
                f"(max_partitions_per_request {per_request:,})"
            )
        if made_partitions > per_broker:
            run.problem(
                f"{made_partitions:,} partitions (max_partitions_per_broker {per_broker:,})"
            )

    return attack


# --- 8. nulls ---------------------------------------------------------------------------


def _minimal(cls: type[Any]) -> Any:
    """The smallest well-formed instance of a kio entity: every array holds one element."""
    from kio.serial._introspect import (
        EntityField,
        EntityTupleField,
        PrimitiveField,
        classify_field,
        get_field_tag,
        get_schema_field_type,
    )

    primitives: dict[str, Any] = {
        "string": "x",
        "bytes": b"",
        "records": None,
        "uuid": None,
        "bool": False,
        "float64": 0.0,
        "timedelta_i32": datetime.timedelta(0),
        "timedelta_i64": datetime.timedelta(0),
        "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
    }
    values: dict[str, Any] = {}
    for entity_field in dataclasses.fields(cls):
        if entity_field.default is not dataclasses.MISSING and get_field_tag(entity_field):
            continue  # a tagged field with a default: leave it out
        kind = classify_field(entity_field)
        if isinstance(kind, PrimitiveField):
            value = primitives.get(get_schema_field_type(entity_field), 0)
            with contextlib.suppress(Exception):
                value = kind.type_(value)
        elif isinstance(kind, EntityField):
            value = _minimal(kind.type_)
        elif isinstance(kind, EntityTupleField):
            value = (_minimal(kind.type_),)
        else:
            value = ()
        values[entity_field.name] = value
    return cls(**values)


def _array_paths(cls: type[Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    from kio.serial._introspect import (
        EntityField,
        EntityTupleField,
        PrimitiveTupleField,
        classify_field,
        get_field_tag,
    )

    for entity_field in dataclasses.fields(cls):
        if get_field_tag(entity_field) is not None:
            continue
        kind = classify_field(entity_field)
        path = (*prefix, entity_field.name)
        if isinstance(kind, PrimitiveTupleField | EntityTupleField):
            yield path
        if isinstance(kind, EntityTupleField | EntityField):
            yield from _array_paths(kind.type_, path)


def _with_null(entity: Any, path: tuple[str, ...]) -> Any:
    name, rest = path[0], path[1:]
    if not rest:
        return dataclasses.replace(entity, **{name: None})
    value = getattr(entity, name)
    if isinstance(value, tuple):
        return dataclasses.replace(entity, **{name: (_with_null(value[0], rest),)})
    return dataclasses.replace(entity, **{name: _with_null(value, rest)})


@dataclass(frozen=True)
class NullCase:
    api_key: int
    version: int
    path: str
    frame: bytes


def null_array_cases() -> list[NullCase]:
    """Every array of every request version the broker serves, sent as null (length -1)."""
    from minibroker.handlers import HANDLERS

    cases = []
    for api_key, handler in sorted(HANDLERS.items()):
        for version in range(handler.min_version, handler.max_version + 1):
            cls = messages.request_class(api_key, version)
            if cls is None:
                continue
            base = _minimal(cls)
            for path in _array_paths(cls):
                request = _with_null(base, path)
                encoded = encode(api_key, version, request, 5, "nulls")
                cases.append(NullCase(api_key, version, ".".join(path), encoded))
    return cases


def nulls(run: Run) -> None:
    cases = null_array_cases()
    outcomes = {"answered": 0, "closed": 0, "undecodable": 0}
    client: RawClient | None = None
    for case in cases:
        if client is None:
            client = RawClient(run.bootstrap, timeout=10)
        try:
            client.send_bytes(case.frame)
            reply = client.recv_frame()
        except OSError:
            reply = None
        if reply is None:
            outcomes["closed"] += 1
            client.close()
            client = None
            continue
        try:
            got, _ = messages.decode_response(reply, case.api_key, case.version)
            outcomes["answered" if got == 5 else "undecodable"] += 1
        except Exception:
            outcomes["undecodable"] += 1
    if client is not None:
        client.close()
    run.fact(f"{len(cases)} null arrays: {outcomes}")
    if outcomes["undecodable"]:
        run.problem(f"{outcomes['undecodable']} answers to null arrays could not be decoded")
    run.after()
    run.sync_log()  # every line logged for the null arrays is read by now
    log = run.target.log_text()
    tracebacks = log.count("Traceback")
    errors = sum(" ERROR " in line for line in log.splitlines())
    if tracebacks or errors:
        failed = sorted(
            {
                line.split(" failed")[0].split(": ")[-1]
                for line in log.splitlines()
                if " ERROR " in line and " failed" in line
            }
        )
        run.problem(
            f"{errors} ERROR lines and {tracebacks} tracebacks logged for null arrays "
            f"({', '.join(failed[:6])}{' ...' if len(failed) > 6 else ''})"
        )


# --- the catalogue ----------------------------------------------------------------------

SMALL_TIMEOUTS = {
    "partial_request_timeout_ms": 1000,
    "connections_max_idle_ms": 2000,
    "max_connections": 50,
}

SCENARIOS: list[Scenario] = [
    *(
        Scenario(f"1 {variant}", 1, huge_length(variant), summary="declared array length")
        for variant in HUGE_LENGTH_FRAMES
    ),
    Scenario(
        "2 30 x 100 MiB size prefixes",
        2,
        huge_prefixes(),
        {"partial_request_timeout_ms": 1000},
        summary="a size prefix reserves memory",
    ),
    Scenario(
        "2 30 x 20 MiB really sent (budget 64 MiB)",
        2,
        budget_flood(),
        {"partial_request_timeout_ms": 1000, "queued_max_request_bytes": 64 * MiB},
        allowance=2 * 64 * MiB + 64 * MiB,
        summary="bytes held within queued_max_request_bytes",
    ),
    Scenario("3 100 long polls x 1,000 partitions", 3, long_polls(), summary="long polls"),
    *(
        Scenario(f"4 {codec} bomb, ListOffsets x10", 4, bomb(codec), summary="decompression")
        for codec in ("zstd", "lz4", "snappy")
    ),
    Scenario("5 20,000 anonymous groups", 5, group_flood(), summary="groups"),
    Scenario(
        "5 20,000 anonymous groups expire",
        5,
        group_flood(expect_expiry=True),
        {"offsets_retention_minutes": 0.01},
        summary="groups expire",
    ),
    Scenario(
        "6 60 half frames, max_connections 50",
        6,
        lockout(60, HALF_FRAME, served_within=1.0 + 3.0, label="half-frame"),
        SMALL_TIMEOUTS,
        summary="slots held by half frames",
    ),
    Scenario(
        "6 60 idle connections, max_connections 50",
        6,
        lockout(60, b"", served_within=2.0 + 3.0, label="idle"),
        SMALL_TIMEOUTS,
        summary="slots held by idle connections",
    ),
    Scenario(
        "6 1,000 idle connections: memory",
        6,
        idle_memory(),
        allowance=64 * MiB,
        summary="memory of idle connections",
    ),
    Scenario(
        "6 1,100 half frames, default settings",
        6,
        lockout(1100, HALF_FRAME, served_within=45.0, label="half-frame"),
        slow=True,
        summary="default settings recover within 45 s",
    ),
    Scenario("7 Fetch naming a partition 5,000 times", 7, amplified_fetch(), summary="amplify"),
    Scenario("7 10,000 pipelined Fetches, unread", 7, pipelined_fetches(), summary="pipelining"),
    Scenario("7 CreateTopics 100,000 topics", 7, mass_create(100_000, 1), summary="creation"),
    Scenario(
        "7 CreateTopics 3 x 100,000 partitions", 7, mass_create(3, 100_000), summary="creation"
    ),
    Scenario("8 null arrays, every API and version", 8, nulls, summary="nulls"),
]


def scenario(name: str) -> Scenario:
    for candidate in SCENARIOS:
        if candidate.name == name:
            return candidate
    raise KeyError(name)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "probe":
        _probe_main(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
