"""`minibroker --brokers N` (and `brokers = N` in the TOML file): a cluster of N nodes
served from the command line, each node's address printed (specific to minibroker: not
marked parity)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from tests.cli.conftest import run_minibroker

_READY = re.compile(r"listening, bootstrap\.servers=(\S+)")
_NODE = re.compile(r"minibroker node (\d+) listening on (\S+)")


@contextmanager
def _serving(*args: str) -> Iterator[tuple[str, dict[int, str]]]:
    """A `python -m minibroker ARGS` child: its bootstrap.servers and the node lines."""
    process = subprocess.Popen(
        [sys.executable, "-m", "minibroker", *args, "--port", "0", "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        nodes: dict[int, str] = {}
        while True:
            line = process.stdout.readline()
            assert line, f"no listening line: {process.stderr.read() if process.stderr else ''}"
            if node := _NODE.search(line):
                nodes[int(node.group(1))] = node.group(2)
            if ready := _READY.search(line):
                yield ready.group(1), nodes
                break
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr


def test_brokers_flag_serves_a_cluster_clients_route_across() -> None:
    topic = f"spread-{uuid.uuid4().hex[:8]}"
    with _serving("--brokers", "3", "--topic", f"{topic}:6") as (bootstrap, nodes):
        assert sorted(nodes) == [0, 1, 2]
        assert bootstrap.split(",") == [nodes[0], nodes[1], nodes[2]]
        metadata = AdminClient({"bootstrap.servers": nodes[0]}).list_topics(timeout=10)
        assert {f"{b.host}:{b.port}" for b in metadata.brokers.values()} == set(nodes.values())
        leaders = {p.leader for p in metadata.topics[topic].partitions.values()}
        assert leaders == {0, 1, 2}

        producer = Producer({"bootstrap.servers": nodes[2]})
        for partition in range(6):
            producer.produce(topic, f"record-{partition}".encode(), partition=partition)
        assert producer.flush(10) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": nodes[1],
                "group.id": f"g-{topic}",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe([topic])
            seen: set[bytes] = set()
            for _ in range(60):
                if len(seen) == 6:
                    break
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen.add(message.value() or b"")
            assert seen == {f"record-{p}".encode() for p in range(6)}
        finally:
            consumer.close()


def test_brokers_from_the_config_file_and_the_flag_over_it(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text("brokers = 3\n")
    with _serving("--config", str(config), "--brokers", "2") as (_, nodes):
        assert sorted(nodes) == [0, 1]
    config.write_text("brokers = 0\n")
    refused = run_minibroker("--config", str(config))
    assert refused.returncode == 2
    assert "brokers = 0" in refused.stderr and "Traceback" not in refused.stderr


def test_brokers_out_of_range_is_refused() -> None:
    for args in (["--brokers", "0"], ["--brokers", "3", "--port", "65534"]):
        refused = run_minibroker(*args)
        assert refused.returncode == 2, refused.stderr
        assert "--brokers" in refused.stderr and "Traceback" not in refused.stderr
