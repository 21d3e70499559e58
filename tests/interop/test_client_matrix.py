"""The client matrix: one scenario catalogue, written once, run by a driver per client.

tests/interop/SCENARIOS.md is the catalogue: the steps every driver takes with its own
client's APIs (create a topic and read its configs, produce with every codec the client
has, keys, headers and timestamps, consume in a group and commit, offsets, offsets for a
time, read from a timestamp and from the latest offset, a group of two rebalancing when a
third joins, the same in a consumer-protocol group (KIP-848), list and describe groups,
delete the topic), the JSON report it prints, and the checks. `check_scenario_report`
holds every report to those checks, the same for every client; a step a client has no API
for is declared here (`Driver.skips`) with the reason the driver gives, and a step that
needs versions the broker does not serve (`BROKER_NEEDS`) is skipped where it lacks them.

Drivers live under tests/interop/<language>/<client>/ and are built by the test run:
Go programs from the Go module proxy, Node programs from npm, the Java program against
each kafka-clients line's jars; the Python clients' drivers and kcat's run as they are.
The scenario is marked `parity`: CI runs it against Apache Kafka too, where the checks
of what the broker itself recorded (the versions each client sent) are left out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.raw_client import RawClient
from minibroker import Broker
from minibroker.handlers.registry import HANDLERS
from minibroker.protocol.kafka_releases import RELEASES
from minibroker.testing import jvm
from minibroker.testing.backends import KafkaService
from minibroker.testing.waiting import wait_for
from tests.interop.conftest import java_partition, murmur2

HERE = Path(__file__).parent
MESSAGES = 30
PARTITIONS = 3
RETENTION_MS = "3600000"
RUN_TIMEOUT = 90  # seconds for one run of a driver
BUILD_TIMEOUT = 600  # the first build fetches the client and its dependencies
# What the Node drivers share (flags, report, errors), copied next to each one's script.
DRIVER_COMMON_NODE = HERE / "node" / "driver.cjs"

DESCRIBE_CONFIGS, API_VERSIONS, CONSUMER_GROUP_HEARTBEAT = 32, 18, 68
API_KEYS = {handler.name: key for key, handler in HANDLERS.items()}

STEPS = (
    "create_topic",
    "describe_configs",
    "produce",
    "headers",
    "timestamps",
    "keyed",
    "consume_group",
    "committed",
    "list_offsets",
    "offsets_for_time",
    "from_timestamp",
    "from_latest",
    "rebalance",
    "rebalance_consumer_protocol",
    "list_groups",
    "describe_group",
    "transactions",
    "transaction_offsets",
    "fencing",
    "delete_topic",
)
TXN_KEYS = 5  # records each transaction of the transactions step sends
CHECKER = "matrix-check"  # the client id of the test's own reads, not the driver's
# Every client can do these, and the other checks stand on them.
REQUIRED = frozenset({"produce", "keyed", "consume_group", "list_offsets"})
CODECS = frozenset({"none", "gzip", "snappy", "lz4", "zstd"})
# Steps that need a version of an API from the broker: a driver that does the step skips
# it, saying so, where the broker does not advertise that version (franz-go takes the
# consumer protocol only with ConsumerGroupHeartbeat v1, Kafka 4's).
BROKER_NEEDS: dict[str, tuple[int, int]] = {
    "rebalance_consumer_protocol": (CONSUMER_GROUP_HEARTBEAT, 1),
}
# The broker-side assignors of KIP-848 (group.consumer.assignors).
SERVER_ASSIGNORS = frozenset({"uniform", "range"})

Report = dict[str, Any]


def fnv1a_partition(key: bytes, partitions: int) -> int:
    """sarama's default hash partitioner: FNV-1a 32, as a signed int, its absolute remainder."""
    hashed = 0x811C9DC5
    for byte in key:
        hashed = ((hashed ^ byte) * 0x01000193) & 0xFFFFFFFF
    signed = hashed - (1 << 32) if hashed & 0x80000000 else hashed
    return abs(signed) % partitions


def crc32_partition(key: bytes, partitions: int) -> int:
    """librdkafka's default consistent_random partitioner for keyed messages."""
    return zlib.crc32(key) % partitions


def unsigned_murmur2_partition(key: bytes, partitions: int) -> int:
    """@platformatic/kafka's default: murmur2 read as unsigned (Java masks the sign bit)."""
    return (murmur2(key) & 0xFFFFFFFF) % partitions


PARTITIONERS: dict[str, Callable[[bytes, int], int]] = {
    "murmur2": java_partition,
    "murmur2-unsigned": unsigned_murmur2_partition,
    "fnv1a": fnv1a_partition,
    "crc32": crc32_partition,
}


@dataclass(frozen=True)
class Driver:
    name: str
    language: str  # "go", "node", "python" or "java"
    folder: str  # under tests/interop/
    entry: str  # the Go binary's name, the Node or Python script, the Java class
    args: tuple[str, ...] = ()
    # The catalogue's steps this client has no API for (the driver says why in its report).
    skips: frozenset[str] = frozenset()
    # Steps the driver's report does not name at all, with the reason (held as skipped).
    unnamed: tuple[tuple[str, str], ...] = ()
    # (api, version) pairs the run must have sent: what this driver is here to exercise.
    sends: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    # (api key, version) the client cannot do without: a broker whose ApiVersions starts
    # above it (Kafka 4.0 removed many old versions) must refuse the run.
    needs: tuple[int, int] | None = None
    # False for a client on DescribeConfigs v0, where Kafka 3.9 marks no config as default.
    sees_defaults: bool = True
    java_line: str | None = None  # the kafka-clients line a Java driver is built against


# The consumer-protocol step: franz-go's driver does it; the other drivers skip it.
CLASSIC_ONLY = frozenset({"rebalance_consumer_protocol"})
# The Java driver (jvm/matrix) runs the classic protocol only and does not name the step.
JAVA_UNNAMED = (
    (
        "rebalance_consumer_protocol",
        "the Java driver runs only the classic group protocol (kafka-clients 4's "
        "group.protocol=consumer is not exercised by it)",
    ),
)

KCAT_LACKS = CLASSIC_ONLY | frozenset(
    {
        "create_topic",
        "describe_configs",
        "timestamps",
        "committed",
        "list_groups",
        "describe_group",
        "transactions",
        "transaction_offsets",
        "fencing",
        "delete_topic",
    }
)

# Kafka 4's transaction protocol (transaction version 2, KIP-890 part 2), which a client of
# it uses when ApiVersions finalizes transaction.version 2: the partitions and the group
# join the transaction through Produce v12 and TxnOffsetCommit v5, and EndTxn v5 moves the
# epoch on.
TRANSACTION_VERSION_2 = frozenset({("Produce", 12), ("TxnOffsetCommit", 5), ("EndTxn", 5)})
# KIP-848's requests, as franz-go sends them for the consumer-protocol step.
CONSUMER_PROTOCOL = frozenset({("ConsumerGroupHeartbeat", 1), ("ConsumerGroupDescribe", 1)})

DRIVERS = [
    Driver("sarama-default", "go", "go/sarama", "sarama-scenarios", skips=CLASSIC_ONLY),
    Driver(
        "franz-go-default",
        "go",
        "go/franz",
        "franz-scenarios",
        sends=TRANSACTION_VERSION_2 | CONSUMER_PROTOCOL,
    ),
    Driver("kafkajs", "node", "node/kafkajs", "scenarios.js", skips=CLASSIC_ONLY),
    Driver("platformatic-kafka", "node", "node/platformatic", "scenarios.mjs", skips=CLASSIC_ONLY),
    Driver("aiokafka", "python", "python", "aiokafka_driver.py", skips=CLASSIC_ONLY),
    Driver("kafka-python", "python", "python", "kafka_python_driver.py", skips=CLASSIC_ONLY),
    Driver("confluent-kafka", "python", "python", "confluent_kafka_driver.py", skips=CLASSIC_ONLY),
    Driver("kcat", "python", "python", "kcat_driver.py", skips=KCAT_LACKS),
    Driver("java-3.9", "java", "jvm/matrix", "MatrixDriver", unnamed=JAVA_UNNAMED, java_line="3.9"),
    Driver(
        "java-4",
        "java",
        "jvm/matrix",
        "MatrixDriver",
        unnamed=JAVA_UNNAMED,
        java_line="4",
        sends=TRANSACTION_VERSION_2,
    ),
    # Kafka 0.11's versions: the oldest whose record format (magic 2) the broker stores.
    Driver(
        "sarama-kafka-0.11",
        "go",
        "go/sarama",
        "sarama-scenarios",
        args=("-version", "0.11.0.0"),
        skips=CLASSIC_ONLY,
        sends=frozenset({("DescribeConfigs", 0), ("CreateTopics", 2), ("OffsetCommit", 3)}),
        needs=(DESCRIBE_CONFIGS, 0),
        sees_defaults=False,
    ),
]


def _partitioned(mapping: dict[Any, Any]) -> dict[int, Any]:
    return {int(partition): value for partition, value in mapping.items()}


def check_scenario_report(
    report: Report,
    *,
    skips: frozenset[str] = frozenset(),
    unnamed: frozenset[str] = frozenset(),
    messages: int = MESSAGES,
    group: str,
    sees_defaults: bool = True,
) -> None:
    """SCENARIOS.md's checks: what every client must have seen on the broker."""
    steps, skipped = report["steps"], report["skipped"]
    assert steps == [step for step in STEPS if step in steps], f"steps out of order: {steps}"
    assert set(skipped) == set(skips), f"skipped {sorted(skipped)}, declared {sorted(skips)}"
    assert not (set(steps) | set(skipped)) & unnamed, "a step declared unnamed is named"
    assert set(steps) | set(skipped) | unnamed == set(STEPS), "every step is done or skipped"
    assert not set(steps) & set(skipped)
    assert all(reason for reason in skipped.values()), "a skipped step says why"
    assert set(steps) >= REQUIRED
    done = set(steps)
    keys = [f"key-{i:03d}" for i in range(messages)]

    if "describe_configs" in done:
        configs, defaults = report["topic_configs"], report["default_config"]
        assert configs["retention.ms"] == RETENTION_MS
        assert defaults["retention.ms"] is False
        assert configs["cleanup.policy"] == "delete"
        if sees_defaults:
            assert defaults["cleanup.policy"] is True
        else:
            assert not any(defaults.values())

    produced = {key: int(partition) for key, partition in report["produced"].items()}
    assert sorted(produced) == keys
    assert report["codecs"] and set(report["codecs"]) <= CODECS, report["codecs"]
    place = PARTITIONERS[report["partitioner"]]
    assert produced == {key: place(key.encode(), PARTITIONS) for key in keys}, (
        f"keys not where {report['partitioner']} puts them"
    )

    consumed: dict[str, dict[str, Any]] = report["consumed"]
    assert sorted(consumed) == keys
    for key, record in consumed.items():
        assert record["value"] == f"value-{key}", key
        assert int(record["partition"]) == produced[key], key
        if "headers" in done:
            assert record["headers"] == {"origin": f"header-{key}"}, key
        if "timestamps" in done:
            index = int(key.removeprefix("key-"))
            assert record["timestamp"] == report["base_timestamp"] + 1000 * index, key

    oldest, newest = _partitioned(report["oldest"]), _partitioned(report["newest"])
    assert oldest == dict.fromkeys(range(PARTITIONS), 0)
    offsets: dict[int, list[int]] = {partition: [] for partition in range(PARTITIONS)}
    for record in consumed.values():
        offsets[int(record["partition"])].append(int(record["offset"]))
    # Each partition holds exactly what was produced to it, offsets 0 up without a gap.
    assert newest == {partition: len(found) for partition, found in offsets.items()}
    assert all(sorted(found) == list(range(len(found))) for found in offsets.values())
    if "committed" in done:
        assert _partitioned(report["committed"]) == newest

    if "offsets_for_time" in done:
        target = report["time_target"]
        if "timestamps" in done:
            assert target == report["base_timestamp"] + 1000 * (messages // 2)
        late_enough = {k for k, record in consumed.items() if record["timestamp"] >= target}
        assert late_enough, "the target time is one of the messages' own"
    if "offsets_for_time" in done:
        expected = {}
        for partition in range(PARTITIONS):
            found = [
                int(record["offset"])
                for key, record in consumed.items()
                if int(record["partition"]) == partition and key in late_enough
            ]
            expected[partition] = min(found, default=-1)
        assert _partitioned(report["offsets_for_time"]) == expected
    if "from_timestamp" in done:
        assert "offsets_for_time" in done, "from_timestamp reads from offsets_for_time's"
        # From each partition's offset for the time on: messages of several producers
        # interleave, so earlier create times may follow it.
        start = _partitioned(report["offsets_for_time"])
        after = [
            key
            for key, record in consumed.items()
            if start[int(record["partition"])] >= 0
            and int(record["offset"]) >= start[int(record["partition"])]
        ]
        assert sorted(report["from_timestamp"]) == sorted(after)

    if "from_latest" in done:
        latest = report["from_latest"]
        assert latest and all(key.startswith("late-") for key in latest), latest

    if "rebalance" in done:
        check_rebalance(report["group_of_two"], report["group_of_three"])
    if "rebalance_consumer_protocol" in done:
        three = check_rebalance(
            report["consumer_protocol_of_two"], report["consumer_protocol_of_three"]
        )
        check_consumer_protocol_group(report["consumer_protocol_group"], three)

    if "list_groups" in done:
        assert group in report["groups"]
    if "describe_group" in done:
        assert report["group_state"] == "Empty"

    if "transactions" in done:
        committed_keys = [f"txn-commit-{i:03d}" for i in range(TXN_KEYS)]
        if "fencing" in done:
            committed_keys += [f"txn-after-{i:03d}" for i in range(TXN_KEYS)]
        assert sorted(report["read_committed"]) == sorted(committed_keys), "read_committed"
    else:
        assert not {"transaction_offsets", "fencing"} & done, "they are part of transactions"
    if "transaction_offsets" in done:
        assert _partitioned(report["transaction_offsets"]) == {0: 1}
    if "fencing" in done:
        assert report["fenced"], "the fenced producer's error"


def check_rebalance(group_of_two: list[Any], group_of_three: list[Any]) -> list[list[int]]:
    """Two members with disjoint, non-empty assignments covering the partitions, then
    three with one partition each; the three's assignments (sorted partitions)."""
    two = [sorted(int(p) for p in member) for member in group_of_two]
    three = [sorted(int(p) for p in member) for member in group_of_three]
    assert len(two) == 2 and all(two), two
    assert sorted(p for member in two for p in member) == list(range(PARTITIONS)), two
    assert sorted(three) == [[0], [1], [2]], three
    return three


def check_consumer_protocol_group(described: dict[str, Any], three: list[list[int]]) -> None:
    """What the broker said of the consumer-protocol group once its three members settled:
    a consumer group (ListGroups' type), Stable, assigned by a broker-side assignor, its
    three members at the assignment epoch, each described holding what it held itself."""
    assert "error" not in described, f"ConsumerGroupDescribe: {described['error']}"
    assert described["type"] == "consumer", described
    assert described["state"] == "Stable", described
    assert described["assignor"] in SERVER_ASSIGNORS, described
    assert described["assignment_epoch"] == described["epoch"], described
    members = described["members"]
    assert sorted(m["member"] for m in members) == list(range(len(three))), members
    for m in members:
        assert m["type"] == 1, f"member {m['member']} is not a consumer-protocol member"
        assert m["epoch"] == described["epoch"], members
        assert m["assignment"] == m["target"] == three[m["member"]], (three, members)


# --- building the drivers ---------------------------------------------------------------


def _build_go(driver: Driver, work: Path) -> list[str]:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed (go on PATH)")
    # What the Go drivers share (tests/interop/go/common) builds as part of each one.
    for source in [*(HERE / driver.folder).iterdir(), *(HERE / "go" / "common").glob("*.go")]:
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
            f"{driver.folder} could not be fetched from the Go module proxy: "
            f"{fetched.stderr[-600:]}"
        )
    built = subprocess.run(
        [go, "build", "-o", driver.entry, "."],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    assert built.returncode == 0, built.stderr
    return [str(work / driver.entry)]


def _build_node(driver: Driver, work: Path) -> list[str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js is not installed (node and npm on PATH)")
    for source in [*(HERE / driver.folder).iterdir(), DRIVER_COMMON_NODE]:
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
        pytest.skip(f"{driver.folder} could not be installed from npm: {installed.stderr[-600:]}")
    return [node, str(work / driver.entry)]


def _build_python(driver: Driver, work: Path) -> list[str]:
    if driver.name == "kcat" and shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (tools/system_deps.py installs it where it can)")
    return [sys.executable, str(HERE / driver.folder / driver.entry)]


def _build_java(driver: Driver, work: Path) -> list[str]:
    assert driver.java_line is not None
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"`{tool}` is not on PATH (Java 17+ runs the Java driver)")
    jars = jvm.kafka_clients(driver.java_line).jars()
    if jars is None:
        pytest.skip(
            f"kafka-clients {jvm.KAFKA_CLIENTS[driver.java_line]} jars are not fetched: "
            "run `python -m minibroker jars clients`"
        )
    classpath = os.pathsep.join(str(jar) for jar in jars)
    # With the JSON writer it shares with tests/interop/jvm/ClientScenarios.java.
    shared = [HERE / "jvm" / "Json.java"]
    sources = sorted(str(path) for path in [*(HERE / driver.folder).glob("*.java"), *shared])
    compiled = subprocess.run(
        [
            "javac",
            "--release",
            "17",
            "-encoding",
            "UTF-8",
            "-nowarn",
            "-cp",
            classpath,
            "-d",
            str(work),
            *sources,
        ],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    assert compiled.returncode == 0, compiled.stderr[-4000:]
    # Start-up matters more than peak speed here: the C1 compiler alone and a small heap.
    return [
        "java",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Xmx256m",
        "-cp",
        f"{work}{os.pathsep}{classpath}",
        driver.entry,
    ]


BUILDERS: dict[str, Callable[[Driver, Path], list[str]]] = {
    "go": _build_go,
    "node": _build_node,
    "python": _build_python,
    "java": _build_java,
}


class Built:
    """Each driver built once per session (variants of one driver share its build)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._commands: dict[tuple[str, str, str | None], list[str]] = {}

    def command(self, driver: Driver) -> list[str]:
        build = (driver.folder, driver.entry, driver.java_line)
        if build not in self._commands:
            work = self._factory.mktemp(driver.folder.replace("/", "-"))
            self._commands[build] = BUILDERS[driver.language](driver, work)
        return self._commands[build]


@pytest.fixture(scope="session")
def built_drivers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    yield Built(tmp_path_factory)


def run_scenario(built: Built, broker: KafkaService, driver: Driver) -> Report | None:
    """Run `driver`'s scenario against `broker` and check its report; None when the
    broker, as it should, refused a client that needs versions it does not serve."""
    topic, group = f"matrix-{driver.name}", f"matrix-group-{driver.name}"
    if "create_topic" in driver.skips:
        broker.create_topic(topic, PARTITIONS, {"retention.ms": RETENTION_MS})
    command = [
        *built.command(driver),
        "-bootstrap",
        broker.bootstrap_servers,
        "-topic",
        topic,
        "-group",
        group,
        "-messages",
        str(MESSAGES),
        *driver.args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if driver.needs is not None and lowest_version(broker, driver.needs[0]) > driver.needs[1]:
        # Kafka 4 no longer serves this client's versions; minibroker serves Kafka 3.9's.
        assert done.returncode != 0, "a client needing removed versions cannot succeed"
        return None
    assert done.returncode == 0, done.stderr[-4000:]
    report: Report = json.loads(done.stdout.strip().splitlines()[-1])
    check_scenario_report(
        report,
        skips=driver.skips | broker_lacks(broker, driver),
        unnamed=frozenset(step for step, _ in driver.unnamed),
        group=group,
        sees_defaults=driver.sees_defaults,
    )
    if "transactions" in report["steps"]:
        check_aborted_records_were_written(broker, f"{topic}-txn")
    if "delete_topic" in driver.skips:
        broker.delete_topic(topic)
    # Kafka completes a deletion after answering it.
    wait_for(lambda: topic not in broker.topics(), 10, describe=f"{topic} to be deleted")
    return report


def check_aborted_records_were_written(broker: KafkaService, topic: str) -> None:
    """The transactions step's aborted records are in the log (read_uncommitted reads
    them, librdkafka here), so read_committed left them out; then the topic goes."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": CHECKER,
            "group.id": f"{topic}-check",
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",
        }
    )
    keys: list[str] = []
    ended: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        while len(ended) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition() or 0)
                continue
            keys.append((message.key() or b"").decode())
    finally:
        consumer.close()
    aborted = [f"txn-abort-{i:03d}" for i in range(TXN_KEYS)]
    assert sorted(k for k in keys if k.startswith("txn-abort-")) == aborted, keys
    broker.delete_topic(topic)
    wait_for(lambda: topic not in broker.topics(), 10, describe=f"{topic} to be deleted")


def answered_without_error(broker: Broker) -> set[tuple[str, int]]:
    """The (api, version) pairs of the requests `broker` served; asserts each was
    answered without error."""
    served = [r for r in broker.recent_requests() if r.client_id != CHECKER]
    # A client newer than the broker first asks for an ApiVersions version it does not
    # serve and is answered UNSUPPORTED_VERSION with the versions it does: negotiation.
    negotiated = ("ApiVersions", "UNSUPPORTED_VERSION")
    assert [r for r in served if r.outcome != "ok" and (r.api, r.outcome) != negotiated] == []
    return {(r.api, r.version) for r in served}


@pytest.mark.parity
@pytest.mark.parametrize("driver", DRIVERS, ids=lambda driver: driver.name)
def test_client_scenario(built_drivers: Built, kafka_broker: KafkaService, driver: Driver) -> None:
    report = run_scenario(built_drivers, kafka_broker, driver)
    if report is None or not isinstance(kafka_broker, Broker):
        return  # what follows reads minibroker's own request log
    sent = answered_without_error(kafka_broker)
    _record(driver, report, sent)
    assert driver.sends <= sent


# Every Kafka release minibroker emulates up to 4.0, for the Python clients (the later
# ones add share groups' APIs, which only confluent-kafka of them speaks: it runs under
# the newest too); the first and 4.0 for a client of each other language; the client that
# needs versions Kafka 4.0 removed.
EMULATED = [
    *(
        (name, release)
        for name in ("aiokafka", "kafka-python", "confluent-kafka")
        for release in RELEASES
        if tuple(map(int, release.split("."))) <= (4, 0)
    ),
    ("confluent-kafka", list(RELEASES)[-1]),
    *(
        (name, release)
        for name in ("kafkajs", "java-3.9", "franz-go-default")
        for release in ("2.8", "4.0")
    ),
    ("sarama-kafka-0.11", "4.0"),
]


@pytest.mark.parametrize(
    ("driver", "release"),
    [
        pytest.param(next(d for d in DRIVERS if d.name == name), release, id=f"{name}-{release}")
        for name, release in EMULATED
    ],
)
def test_client_scenario_against_an_emulated_kafka_release(
    built_drivers: Built, driver: Driver, release: str
) -> None:
    """`Broker(kafka_version=...)` advertises what that release served: each client
    negotiates down to it and still runs the whole scenario, sending only versions the
    release served (or, needing versions it did not serve, fails as it would there)."""
    with Broker(kafka_version=release) as broker:
        report = run_scenario(built_drivers, broker, driver)
        if report is None:
            # refused as that release refuses it: the connection closed at the request
            assert driver.needs is not None
            refused = {(API_KEYS[r.api], r.version, r.outcome) for r in broker.recent_requests()}
            assert (*driver.needs, "closed: unsupported") in refused
            return
        answered_without_error(broker)
        # (ApiVersions at a newer version than the release's is answered
        # UNSUPPORTED_VERSION: the negotiation itself)
        sent = {
            (r.api, r.version)
            for r in broker.recent_requests()
            if r.outcome == "ok" and r.client_id != CHECKER
        }
    ranges = RELEASES[release]
    outside = sorted(
        (api, version)
        for api, version in sent
        if not ranges[API_KEYS[api]][0] <= version <= ranges[API_KEYS[api]][1]
    )
    assert outside == []


def advertised(broker: KafkaService, api_key: int) -> tuple[int, int] | None:
    """The versions of `api_key` the broker advertises in ApiVersions (oldest, newest)."""
    with RawClient(broker.bootstrap_servers) as client:
        answer = client.call(
            API_VERSIONS, 3, client_software_name="matrix", client_software_version="1"
        )
    return next(
        ((k.min_version, k.max_version) for k in answer.api_keys if k.api_key == api_key), None
    )


def lowest_version(broker: KafkaService, api_key: int) -> int:
    """The lowest version of `api_key` the broker advertises in ApiVersions."""
    versions = advertised(broker, api_key)
    assert versions is not None, f"the broker does not advertise api key {api_key}"
    return versions[0]


def broker_lacks(broker: KafkaService, driver: Driver) -> frozenset[str]:
    """The steps of BROKER_NEEDS that `driver` does and `broker` lacks the versions for:
    the driver skips them there."""
    lacking = set()
    for step, (api_key, version) in BROKER_NEEDS.items():
        if step in driver.skips or step in dict(driver.unnamed):
            continue
        versions = advertised(broker, api_key)
        if versions is None or not versions[0] <= version <= versions[1]:
            lacking.add(step)
    return frozenset(lacking)


def _record(driver: Driver, report: Report, sent: set[tuple[str, int]]) -> None:
    """With MINIBROKER_MATRIX_REPORT set, add this client's line to that JSON file
    (tools/client_matrix.py turns it into the tables of docs/clients.md)."""
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
        "steps": report["steps"],
        "skipped": {**report["skipped"], **dict(driver.unnamed)},
        "codecs": report["codecs"],
        "partitioner": report["partitioner"],
    }
    path.write_text(json.dumps(lines, indent=1, sort_keys=True))
