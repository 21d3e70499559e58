"""A broker in a child process that runs out of descriptors or of disk: it keeps serving
the clients it has, says so in its log once (not once per failure), and recovers when
the resource comes back."""

from __future__ import annotations

import contextlib
import re
import resource
import time
from pathlib import Path

from harness.attacks import close_all, first_served, open_connections, raise_fd_limit
from harness.child_broker import ChildBroker
from harness.raw_client import RawClient, fetch_request, produce_codes, produce_request
from minibroker.protocol import records

PRODUCE, FETCH = 0, 1
KAFKA_STORAGE_ERROR = 56

raise_fd_limit()


def _produce(client: RawClient, topic: str, value: bytes) -> int:
    batch = records.build_batch([(None, value)], timestamp_ms=1000)
    return produce_codes(client.request(PRODUCE, 9, produce_request(topic, batch, acks=1)))[0]


def _wait_for_line(broker: ChildBroker, text: str, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [line for line in broker.log_lines() if text in line]
        if lines:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"no log line with {text!r}:\n{broker.log_tail()}")


def test_storage_errors_are_logged_with_the_file_and_cause_once_then_counted(
    tmp_path: Path,
) -> None:
    # Files may not grow past 256 KiB (RLIMIT_FSIZE holds root too): the segment file
    # fills up as on a full disk, while the broker's small files can still be written.
    broker = ChildBroker(
        data_dir=str(tmp_path / "data"),
        topics=["steady:1"],
        stderr=tmp_path / "broker.log",
        rlimits={resource.RLIMIT_FSIZE: 256 * 1024},
    ).start()
    acknowledged = refused = 0
    try:
        with RawClient(broker.bootstrap, timeout=10) as client:
            value = b"v" * 8192
            while acknowledged < 100 and _produce(client, "steady", value) == 0:
                acknowledged += 1
            refused = 1
            for _ in range(199):
                refused += _produce(client, "steady", value) == KAFKA_STORAGE_ERROR
            assert 0 < acknowledged < 100 and refused == 200
            request = fetch_request("steady", max_bytes=1 << 20, partition_max_bytes=1 << 20)
            response = client.request(FETCH, 11, request)
            stored = bytes(response.responses[0].partitions[0].records or b"")
            assert len(records.split_batches(stored)) == acknowledged
        first = _wait_for_line(broker, "failed: [Errno 27] File too large")
        assert len(first) == 1
        assert "writing to steady-0" in first[0] and "00000000000000000000.log" in first[0]
    finally:
        broker.stop()
    # The other refusals are counted (one line per 10 s and one at the stop), not logged
    # one by one: every one of them is in a count.
    counted = [
        int(found)
        for line in broker.log_lines()
        for found in re.findall(r"(\d+) storage errors since the last report", line)
    ]
    assert 1 <= len(counted) <= 3 and sum(counted) == refused - 1, counted


def test_a_listener_out_of_descriptors_logs_once_and_accepts_again(tmp_path: Path) -> None:
    broker = ChildBroker(
        topics=["steady:1"],
        stderr=tmp_path / "broker.log",
        rlimits={resource.RLIMIT_NOFILE: 64},
    ).start()
    hogs: list = []
    try:
        with RawClient(broker.bootstrap, timeout=10) as connected:
            assert _produce(connected, "steady", b"before") == 0
            # More connections than descriptors: the rest wait in the listen backlog.
            hogs = open_connections(broker.bootstrap, 90)
            _wait_for_line(broker, "cannot accept connections")
            time.sleep(2.5)  # asyncio tries again each second, failing each time
            assert _produce(connected, "steady", b"during") == 0
            close_all(hogs)
            assert first_served(broker.bootstrap, 20.0, topic="steady") is not None
            _wait_for_line(broker, "accepting connections again")
            assert _produce(connected, "steady", b"after") == 0
    finally:
        with contextlib.suppress(OSError):
            close_all(hogs)
        broker.stop()
    lines = broker.log_lines()
    assert len([line for line in lines if "cannot accept connections" in line]) == 1, lines
    assert not [line for line in lines if "Traceback" in line or "system resource" in line]


def test_the_server_raises_its_open_files_limit_to_the_hard_limit() -> None:
    # A soft limit of 256 under a hard one of 2,048: the server takes all 2,048, as the JVM
    # does for Kafka (segment files and connections share them).
    broker = ChildBroker(rlimits={resource.RLIMIT_NOFILE: (256, 2048)}).start()
    try:
        limits = Path(f"/proc/{broker.pid}/limits").read_text()
    finally:
        broker.stop()
    (line,) = [line for line in limits.splitlines() if line.startswith("Max open files")]
    assert line.split()[3:5] == ["2048", "2048"], line
