"""Child-process side of the benchmarks.

python -m bench.runner serve minibroker|mock|kafka|kafka-stock|kfake [KEY=VALUE ...]
    Hosts one broker; KEY=VALUE pairs are broker settings added to a Kafka's (the `kafka`
    kinds only). Prints `READY <bootstrap.servers> <pid of the broker's process>`, then
    answers one line per command read from stdin:
        topic NAME PARTITIONS  -> OK
        stats                  -> JSON: rss_kb, hwm_kb (of the broker's process),
                                  stored_bytes (minibroker only, else null)
        quit
    minibroker and the mock live in this process; Apache Kafka (a JVM, `kafka` with the
    test settings of minibroker.testing.real_kafka, `kafka-stock` with Kafka's own
    group.initial.rebalance.delay.ms) and franz-go's kfake (a Go program, bench/gobench)
    run in a child of it, and their topics are made with CreateTopics.
python -m bench.runner startup minibroker|mock client|socket
    In a fresh interpreter (imports done, nothing else warm): time from broker start to
    the first Metadata answer; prints the milliseconds.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from typing import Any

from bench.mock import MockCluster
from minibroker import Broker
from minibroker.protocol import messages
from minibroker.testing.backends import ExternalKafka

METADATA_KEY = 3
METADATA_VERSION = 1


KAFKA_LINE = "4"
# Kafka's start script (kafka-server-start.sh) runs the broker with a 1 GiB heap
KAFKA_HEAP = "1g"
KAFKA_STOCK_REBALANCE_DELAY_MS = "3000"  # Kafka's default group.initial.rebalance.delay.ms


def memory_kb(pid: int | None = None) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process (this one by default) in KiB."""
    values: dict[str, int] = {}
    with open(f"/proc/{pid or 'self'}/status") as status:
        for line in status:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                values[name] = int(rest.split()[0])
    return values["VmRSS"], values["VmHWM"]


class _KfakeProcess:
    """franz-go's kfake cluster in a child process (bench/gobench)."""

    def __init__(self) -> None:
        from bench.gobench import binary

        self.process = subprocess.Popen(
            [str(binary()), "kfake"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        if len(line) != 2 or line[0] != "READY":
            raise RuntimeError(f"kfake did not start: {line}")
        self.bootstrap = line[1]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # the program serves until its stdin closes
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class _Host:
    def __init__(self, kind: str, extra: dict[str, str] | None = None) -> None:
        if extra and kind not in ("kafka", "kafka-stock"):
            raise ValueError(f"broker settings are taken by a Kafka only, not {kind!r}")
        self.kind = kind
        self.broker: Broker | None = None
        self.mock: MockCluster | None = None
        self.kafka: Any = None
        self.kfake: _KfakeProcess | None = None
        self.admin: ExternalKafka | None = None  # topics of a Kafka or kfake: CreateTopics
        self.pid = os.getpid()
        if kind == "minibroker":
            self.broker = Broker().start_in_thread()
            self.bootstrap = self.broker.bootstrap_servers
        elif kind == "mock":
            self.mock = MockCluster()
            self.bootstrap = self.mock.bootstrap_servers
        elif kind in ("kafka", "kafka-stock"):
            from minibroker.testing.real_kafka import RealKafka

            stock = {"group.initial.rebalance.delay.ms": KAFKA_STOCK_REBALANCE_DELAY_MS}
            settings = {**(stock if kind == "kafka-stock" else {}), **(extra or {})}
            self.kafka = RealKafka(KAFKA_LINE, heap=KAFKA_HEAP, settings=settings)
            self.admin = self.kafka.start()
            self.bootstrap = self.kafka.bootstrap_servers
            self.pid = self.kafka.pid
        elif kind == "kfake":
            self.kfake = _KfakeProcess()
            self.bootstrap = self.kfake.bootstrap
            self.admin = ExternalKafka(self.bootstrap)
            self.pid = self.kfake.process.pid
        else:
            raise ValueError(f"unknown broker kind {kind!r}")

    def create_topic(self, name: str, partitions: int) -> None:
        if self.broker is not None:
            self.broker.create_topic(name, partitions)
        elif self.mock is not None:
            self.mock.create_topic(name, partitions)
        elif self.admin is not None:
            self.admin.create_topic(name, partitions)

    def stored_bytes(self) -> int | None:
        broker = self.broker
        if broker is None:
            return None

        def total() -> int:
            size = 0
            for name in broker.state.topics.names():
                topic = broker.state.topics.get(name)
                if topic is not None:
                    size += sum(p.log.size_bytes for p in topic.partitions)
            return size

        return broker._on_loop(total)

    def close(self) -> None:
        if self.broker is not None:
            self.broker.stop_thread()
        if self.mock is not None:
            self.mock.close()
        if self.kafka is not None:
            self.kafka.stop()
        if self.kfake is not None:
            assert self.admin is not None
            self.admin.close()
            self.kfake.close()


SERVED = ("minibroker", "mock", "kafka", "kafka-stock", "kfake")


def serve(kind: str, extra: dict[str, str] | None = None) -> None:
    host = _Host(kind, extra)
    print(f"READY {host.bootstrap} {host.pid}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "topic":
            host.create_topic(words[1], int(words[2]))
            print("OK", flush=True)
        elif words[0] == "stats":
            rss, hwm = memory_kb(host.pid)
            stats = {"rss_kb": rss, "hwm_kb": hwm, "stored_bytes": host.stored_bytes()}
            print(json.dumps(stats), flush=True)
        elif words[0] == "quit":
            break
    host.close()


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed before the Metadata answer")
        chunks += chunk
    return bytes(chunks)


def socket_metadata(bootstrap: str) -> Any:
    """One Metadata v1 (all topics) over a fresh socket, no ApiVersions first."""
    host, _, port = bootstrap.rpartition(":")
    cls = messages.request_class(METADATA_KEY, METADATA_VERSION)
    assert cls is not None
    frame = messages.encode_request(
        messages.RequestHeader(METADATA_KEY, METADATA_VERSION, 1, "bench"), cls(topics=None)
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(frame)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        _, body = messages.decode_response(_recv_exact(sock, size), METADATA_KEY, METADATA_VERSION)
    if not body.brokers:
        raise RuntimeError("Metadata answer lists no brokers")
    return body


def _start_once(kind: str, probe: str) -> float:
    """Milliseconds from broker start to the first Metadata answer."""
    from confluent_kafka.admin import AdminClient

    quiet = {"log_level": 3}
    started = time.perf_counter()
    if probe == "socket":
        if kind == "minibroker":
            broker = Broker().start_in_thread()
            socket_metadata(broker.bootstrap_servers)
            elapsed = time.perf_counter() - started
            broker.stop_thread()
        else:
            mock = MockCluster()
            socket_metadata(mock.bootstrap_servers)
            elapsed = time.perf_counter() - started
            mock.close()
        return elapsed * 1000
    if kind == "minibroker":
        broker = Broker().start_in_thread()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **quiet})
        metadata = admin.list_topics(timeout=10)
        elapsed = time.perf_counter() - started
        del admin
        broker.stop_thread()
    else:
        # the mock is created by the client that carries test.mock.num.brokers
        admin = AdminClient({"test.mock.num.brokers": 1, **quiet})
        metadata = admin.list_topics(timeout=10)
        elapsed = time.perf_counter() - started
        del admin
    if not metadata.brokers:
        raise RuntimeError("Metadata answer lists no brokers")
    return elapsed * 1000


def startup(kind: str, probe: str) -> tuple[float, float]:
    """(cold, warm): the first start in this interpreter, then a second one.

    The second is what a test suite with a fresh broker per test sees: the codec
    modules loaded by the first start are already imported.
    """
    cold = _start_once(kind, probe)
    return cold, _start_once(kind, probe)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "serve" and argv[1] in SERVED:
        pairs = [word.partition("=") for word in argv[2:]]
        if any(not key or not sep for key, sep, _ in pairs):
            print(__doc__, file=sys.stderr)
            return 2
        serve(argv[1], {key: value for key, _, value in pairs})
        return 0
    if len(argv) >= 3 and argv[0] == "startup":
        cold, warm = startup(argv[1], argv[2])
        print(f"{cold:.3f} {warm:.3f}", flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
