"""The client matrix: one scenario, written once, run by a small program per client.

Each driver is a program in another language, built by the test run from its registry
(Go module proxy, npm) in a temporary folder, under tests/interop/<language>/<client>/.
Every driver takes `-bootstrap HOST:PORT -topic T -group G -messages N` and, with its
client's own APIs:
1. creates topic T (3 partitions, retention.ms=3600000) and reads its configs back;
2. produces N messages, key "key-NNN", value "value-" + key, header origin="header-" +
   key, gzip-compressed, acks=all;
3. consumes them all in consumer group G from the earliest offset, commits, leaves;
4. reads G's committed offsets and the partitions' oldest and newest offsets, lists the
   groups and describes G;
5. deletes T;
and prints one JSON report of what it saw. `check_report` holds the report against what
the broker holds: the same checks for every client. The scenario is marked `parity`: CI
runs it against Apache Kafka too, where the checks of what the broker itself recorded
(the versions each client sent) are left out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from minibroker import Broker
from minibroker.testing.backends import KafkaService
from minibroker.testing.waiting import wait_for
from tests.rawclient import RawClient

HERE = Path(__file__).parent
MESSAGES = 30
PARTITIONS = 3
RUN_TIMEOUT = 90  # seconds for one run of a driver
BUILD_TIMEOUT = 600  # the first build fetches the client and its dependencies
# What the Node drivers share (flags, report, errors), copied next to each one's script.
DRIVER_COMMON_NODE = HERE / "node" / "driver.cjs"


DESCRIBE_CONFIGS, API_VERSIONS = 32, 18


@dataclass(frozen=True)
class Driver:
    name: str
    language: str  # "go" or "node"
    folder: str  # under tests/interop/
    entry: str  # the Go binary's name, or the Node script
    args: tuple[str, ...] = ()
    # (api, version) pairs the run must have sent: what this driver is here to exercise.
    sends: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    # (api key, version) the client cannot do without: a broker whose ApiVersions starts
    # above it (Kafka 4.0 removed many old versions) must refuse the run.
    needs: tuple[int, int] | None = None
    # False for a client on DescribeConfigs v0, where Kafka 3.9 marks no config as default.
    sees_defaults: bool = True


DRIVERS = [
    Driver("sarama-default", "go", "go/sarama", "sarama-scenarios"),
    Driver("franz-go-default", "go", "go/franz", "franz-scenarios"),
    Driver("kafkajs", "node", "node/kafkajs", "scenarios.js"),
    Driver("platformatic-kafka", "node", "node/platformatic", "scenarios.mjs"),
    # Kafka 0.11's versions: the oldest whose record format (magic 2) the broker stores.
    Driver(
        "sarama-kafka-0.11",
        "go",
        "go/sarama",
        "sarama-scenarios",
        args=("-version", "0.11.0.0"),
        sends=frozenset({("DescribeConfigs", 0), ("CreateTopics", 2), ("OffsetCommit", 3)}),
        needs=(DESCRIBE_CONFIGS, 0),
        sees_defaults=False,
    ),
]


def check_report(
    report: dict[str, Any], broker: KafkaService, topic: str, group: str, sees_defaults: bool
) -> None:
    """What every client must have seen, and left behind, on the broker."""
    keys = [f"key-{i:03d}" for i in range(MESSAGES)]
    assert report["consumed"] == {key: f"value-{key}" for key in keys}
    assert report["headers"] == {key: f"header-{key}" for key in keys}
    assert sorted(report["produced"]) == keys
    assert {int(p) for p in report["produced"].values()} <= set(range(PARTITIONS))
    # Every partition's committed offset is its end: the group read it all and committed.
    newest = {int(p): int(offset) for p, offset in report["newest"].items()}
    assert sorted(newest) == list(range(PARTITIONS))
    assert sum(newest.values()) == MESSAGES
    for partition in range(PARTITIONS):
        produced_here = sum(1 for p in report["produced"].values() if int(p) == partition)
        assert newest[partition] == produced_here, partition
    assert {int(p): int(offset) for p, offset in report["committed"].items()} == newest
    assert {int(p): int(offset) for p, offset in report["oldest"].items()} == dict.fromkeys(
        range(PARTITIONS), 0
    )
    # The config set at creation is reported as set, the others as defaults.
    assert report["topic_configs"]["retention.ms"] == "3600000"
    assert report["default_config"]["retention.ms"] is False
    assert report["topic_configs"]["cleanup.policy"] == "delete"
    if sees_defaults:
        assert report["default_config"]["cleanup.policy"] is True
    else:
        assert not any(report["default_config"].values())
    assert group in report["groups"]
    assert report["group_state"] == "Empty"
    # Kafka completes a deletion after answering it.
    wait_for(lambda: topic not in broker.topics(), 10, describe=f"{topic} to be deleted")


# --- building the drivers ---------------------------------------------------------------


def _build_go(folder: Path, work: Path, entry: str) -> list[str]:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed (go on PATH)")
    for source in folder.iterdir():
        if source.suffix in (".go", ".mod"):
            shutil.copy(source, work / source.name)
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    fetched = subprocess.run(
        [go, "mod", "tidy"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    if fetched.returncode != 0:
        pytest.skip(
            f"{folder.name} could not be fetched from the Go module proxy: {fetched.stderr[-600:]}"
        )
    built = subprocess.run(
        [go, "build", "-o", entry, "."],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    assert built.returncode == 0, built.stderr
    return [str(work / entry)]


def _build_node(folder: Path, work: Path, entry: str) -> list[str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js is not installed (node and npm on PATH)")
    for source in [*folder.iterdir(), DRIVER_COMMON_NODE]:
        if source.is_file():
            shutil.copy(source, work / source.name)
    installed = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--silent"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    if installed.returncode != 0:
        pytest.skip(f"{folder.name} could not be installed from npm: {installed.stderr[-600:]}")
    return [node, str(work / entry)]


class Built:
    """Each driver folder built once per session."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._commands: dict[str, list[str]] = {}

    def command(self, driver: Driver) -> list[str]:
        if driver.folder not in self._commands:
            work = self._factory.mktemp(driver.folder.replace("/", "-"))
            build = _build_go if driver.language == "go" else _build_node
            self._commands[driver.folder] = build(HERE / driver.folder, work, driver.entry)
        return self._commands[driver.folder]


@pytest.fixture(scope="session")
def built_drivers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    yield Built(tmp_path_factory)


@pytest.mark.parity
@pytest.mark.parametrize("driver", DRIVERS, ids=lambda driver: driver.name)
def test_client_scenario(built_drivers: Built, kafka_broker: KafkaService, driver: Driver) -> None:
    topic, group = f"matrix-{driver.name}", f"matrix-group-{driver.name}"
    command = [
        *built_drivers.command(driver),
        "-bootstrap",
        kafka_broker.bootstrap_servers,
        "-topic",
        topic,
        "-group",
        group,
        "-messages",
        str(MESSAGES),
        *driver.args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if driver.needs is not None and lowest_version(kafka_broker, driver.needs[0]) > driver.needs[1]:
        # Kafka 4 no longer serves this client's versions; minibroker serves Kafka 3.9's.
        assert done.returncode != 0, "a client needing removed versions cannot succeed"
        return
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    check_report(report, kafka_broker, topic, group, driver.sees_defaults)
    if not isinstance(kafka_broker, Broker):
        return  # what follows reads minibroker's own request log

    served = kafka_broker.recent_requests()
    _record(driver, report, {(r.api, r.version) for r in served})
    # A client newer than the broker first asks for an ApiVersions version it does not
    # serve and is answered UNSUPPORTED_VERSION with the versions it does: negotiation.
    negotiated = ("ApiVersions", "UNSUPPORTED_VERSION")
    assert [r for r in served if r.outcome != "ok" and (r.api, r.outcome) != negotiated] == []
    assert driver.sends <= {(r.api, r.version) for r in served}


def lowest_version(broker: KafkaService, api_key: int) -> int:
    """The lowest version of `api_key` the broker advertises in ApiVersions."""
    with RawClient(broker.bootstrap_servers) as client:
        answer = client.call(
            API_VERSIONS, 3, client_software_name="matrix", client_software_version="1"
        )
    return next(k.min_version for k in answer.api_keys if k.api_key == api_key)


def _record(driver: Driver, report: dict[str, Any], sent: set[tuple[str, int]]) -> None:
    """With MINIBROKER_MATRIX_REPORT set, add this client's line to that JSON file
    (tools/client_matrix.py turns it into the README's table)."""
    target = os.environ.get("MINIBROKER_MATRIX_REPORT")
    if not target:
        return
    path = Path(target)
    lines = json.loads(path.read_text()) if path.exists() else {}
    versions: dict[str, list[int]] = {}
    for api, version in sorted(sent):
        versions.setdefault(api, []).append(version)
    lines[driver.name] = {
        "client": report.get("client"),
        "speaks": report.get("version"),
        "versions": versions,
    }
    path.write_text(json.dumps(lines, indent=1, sort_keys=True))
