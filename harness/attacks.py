"""The harness for attacks on a Kafka-protocol broker, and an honest client to see what
they cost others.

The catalogue of attacks is harness/attack_catalogue.py; tests/hardening/test_attacks.py
(one regression test per attack) and bench/hostile.py (the same attacks, measured and
tabulated) run it through `measure` here. Every attack runs against a
bootstrap address over raw sockets: well-formed requests are built with kio through
harness/raw_client.py, malformed ones are written byte by byte.

The broker runs in a child process (harness/child_broker.py), watched here:
- its stderr and stdout are drained all the time (a full pipe would block the broker's
  event loop on a log write, and the attack would measure that instead);
- a watchdog kills it when its RSS passes a ceiling, so an attack that would take many
  GiB on a broken broker fails fast instead of taking the machine down.

The honest client is a separate process (`python -m harness.attacks probe ...`)
producing one 100-byte message per request with acks=1 over a raw socket, the request
encoded once and only its correlation id patched: the broker's round trip, not client
code, sets its rate, and the attacking threads of the test process cannot take the
probe's GIL. Rates are read as message counts between two marks.

    python -m harness.attacks probe BOOTSTRAP TOPIC
        prints READY, then answers `mark` with `<count> <monotonic seconds> <connections
        opened>`; `quit` ends.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import select
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.child_broker import ChildBroker, status_kib
from harness.raw_client import (
    RawClient,
    encode,
    fetch_request,
    parse_host_port,
    produce_codes,
    produce_request,
)
from minibroker.protocol import messages, records

ROOT = Path(__file__).resolve().parents[1]
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
# A scenario's data_dir setting that stands for a fresh directory, removed afterwards.
FRESH_DATA_DIR = "<fresh>"


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
            codes = produce_codes(
                client.request(PRODUCE, 9, produce_request(topic, batch, acks=1, timeout_ms=30_000))
            )
            if codes != [0]:
                raise RuntimeError(f"producing to {topic} failed: {codes}")
            stored += len(batch)
    return stored


# --- the honest client ------------------------------------------------------------------


def _probe_frame(topic: str) -> tuple[bytes, int]:
    batch = records.build_batch([(None, b"h" * 100)], timestamp_ms=1000)
    return encode(
        PRODUCE, 9, produce_request(topic, batch, acks=1, timeout_ms=30_000), 1, "honest"
    ), len(batch)


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
            [sys.executable, "-m", "harness.attacks", "probe", bootstrap, topic],
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
        self.data_dir: str | None = None
        if settings.get("data_dir") == FRESH_DATA_DIR:
            self.data_dir = settings["data_dir"] = tempfile.mkdtemp(prefix="minibroker-attack-")
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
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Target:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _JvmProcess:
    """Apache Kafka from its jars (minibroker.testing's `kafka-jvm` backend), with the
    process interface of ChildBroker that Target uses."""

    def __init__(self, settings: dict[str, str]) -> None:
        from minibroker.testing.real_kafka import RealKafka

        self.kafka = RealKafka("4", settings=settings)
        self.bootstrap = ""

    def start(self) -> None:
        self.bootstrap = self.kafka.start().bootstrap_servers

    @property
    def pid(self) -> int:
        return self.kafka.pid

    @property
    def process(self) -> Any:
        return self.kafka._process

    def alive(self) -> bool:
        process = self.process
        return process is not None and process.poll() is None

    def returncode(self) -> int | None:
        process = self.process
        return None if process is None else process.poll()

    def rss_bytes(self) -> int:
        return status_kib(self.pid, "VmRSS") * 1024

    def peak_rss_bytes(self) -> int:
        return status_kib(self.pid, "VmHWM") * 1024

    def stop(self) -> None:
        self.kafka.stop()


class KafkaTarget(Target):
    """Apache Kafka 4.x as the attacked broker, for reference figures beside minibroker's
    (`python -m bench.hostile --against kafka-jvm`). Its settings are Kafka's properties;
    the attack's topics are created once it serves."""

    def __init__(self, kill_above: int, kafka_settings: dict[str, str], topics: list[str]) -> None:
        self.broker = _JvmProcess(kafka_settings)  # type: ignore[assignment]
        self.topics = topics
        self.data_dir = None
        self.kill_above = kill_above
        self.killed = None
        self.max_rss_seen = 0
        self.output = []
        self._stop = threading.Event()
        self._threads = []

    def start(self) -> Target:
        self.broker.start()
        service = self.broker.kafka.service  # type: ignore[attr-defined]
        for spec in self.topics:
            name, partitions = spec.split(":")
            service.create_topic(name, int(partitions))
        self._spawn(self._watch)
        return self

    def log_text(self) -> str:
        return str(self.broker.kafka.output())  # type: ignore[attr-defined]


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
    # Apache Kafka's properties for the same attack (`against="kafka-jvm"`); None where
    # the attack has no counterpart there.
    kafka_settings: dict[str, str] | None = field(default_factory=dict)


def measure(
    scenario: Scenario, kill_margin: int = 512 * MiB, against: str = "minibroker"
) -> Measurement:
    """Run one attack against a fresh child broker (or Apache Kafka 4.x from its jars,
    `against="kafka-jvm"`); the watchdog kills the broker once its RSS passes baseline +
    stored data + allowance + `kill_margin`."""
    raise_fd_limit()
    m = Measurement(scenario.name, allowance=scenario.allowance)
    target: Target
    if against == "kafka-jvm":
        if scenario.kafka_settings is None:
            raise ValueError(f"{scenario.name}: no counterpart on Apache Kafka")
        topics = scenario.settings.get("topics", TOPICS)
        target = KafkaTarget(8 * 1024 * MiB, scenario.kafka_settings, topics)
    else:
        target = Target(kill_above=8 * 1024 * MiB, **scenario.settings)
    with target:
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


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "probe":
        _probe_main(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
