"""sarama (Go) against the broker: a program built from the Go module proxy by the test run.

tests/interop/go/sarama/main.go creates a topic with a config, reads its configs back,
produces 30 keyed gzip messages, consumes them in a consumer group and commits, reads
the committed offsets and the partitions' offsets, lists and describes the group, and
deletes the topic; it prints what it saw as JSON. It runs twice: with sarama's default
configuration, and speaking Kafka 0.11.0 (DescribeConfigs v0, CreateTopics v2,
OffsetCommit v3, ...), the oldest release whose record format (magic 2) the broker stores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from minibroker import Broker

GO = shutil.which("go")
SOURCE = Path(__file__).parent / "go" / "sarama"
MESSAGES = 30
PARTITIONS = 3
RUN_TIMEOUT = 90  # seconds for one run of the program
BUILD_TIMEOUT = 600  # the first build fetches sarama and its dependencies

pytestmark = pytest.mark.skipif(GO is None, reason="Go is not installed (go on PATH)")


@pytest.fixture(scope="session")
def sarama_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The program, built in a temporary copy (go.sum is written there, not here)."""
    assert GO is not None
    work = tmp_path_factory.mktemp("sarama")
    for name in ("go.mod", "main.go"):
        shutil.copy(SOURCE / name, work / name)
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    fetched = subprocess.run(
        [GO, "mod", "tidy"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    if fetched.returncode != 0:
        pytest.skip(
            f"sarama could not be fetched from the Go module proxy: {fetched.stderr[-600:]}"
        )
    built = subprocess.run(
        [GO, "build", "-o", "sarama-scenarios", "."],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    assert built.returncode == 0, built.stderr
    return work / "sarama-scenarios"


def run(program: Path, broker: Broker, name: str, version: str | None) -> dict[str, Any]:
    command = [
        str(program),
        "-bootstrap",
        broker.bootstrap_servers,
        "-topic",
        f"sarama-{name}",
        "-group",
        f"sarama-group-{name}",
        "-messages",
        str(MESSAGES),
    ]
    if version is not None:
        command += ["-version", version]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize(("name", "version"), [("default", None), ("kafka-0-11", "0.11.0.0")])
def test_sarama_admin_produce_group_consume_and_commit(
    sarama_program: Path, kafka_broker: Broker, name: str, version: str | None
) -> None:
    report = run(sarama_program, kafka_broker, name, version)
    keys = [f"key-{i:03d}" for i in range(MESSAGES)]

    assert report["consumed"] == {key: f"value-{key}" for key in keys}
    assert sorted(report["produced"]) == keys
    # Every partition's committed offset is its end: the group read it all and committed.
    newest = {int(p): offset for p, offset in report["newest"].items()}
    assert sum(newest.values()) == MESSAGES
    assert {int(p): offset for p, offset in report["committed"].items()} == newest
    assert {int(p): offset for p, offset in report["oldest"].items()} == dict.fromkeys(
        range(PARTITIONS), 0
    )
    # The config set at creation is reported as set, the others as defaults.
    assert report["topic_configs"]["retention.ms"] == "3600000"
    assert report["default_config"]["retention.ms"] is False
    assert report["default_config"]["cleanup.policy"] is True
    assert f"sarama-group-{name}" in report["groups"]
    assert report["group_state"] == "Empty"
    assert kafka_broker.state.topics.get(f"sarama-{name}") is None

    served = kafka_broker.recent_requests()
    assert [r for r in served if r.outcome != "ok"] == []
    versions = {(r.api, r.version) for r in served}
    if version is not None:
        # What an old client sends, below the versions kio has classes for.
        assert ("DescribeConfigs", 0) in versions
