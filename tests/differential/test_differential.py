"""Differential conformance: each client scenario runs through a recording proxy in front
of Apache Kafka (4.4.0 and 3.9.2, started from their jars) and in front of minibroker, and
every request both runs sent is compared by its answer, field by field (harness.py says
what is normalised away). The raw-request scenarios (raw_scenarios.py: Kafka 4's consumer
group protocol, against 4.x only) are compared step by step. A difference is a minibroker
bug unless KNOWN explains it; docs/compatibility.md lists the same entries for users.

Skips, saying why, without Java 17 or the jars (`python -m minibroker jars kafka`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from minibroker import Broker
from minibroker.protocol.recording import Exchange
from minibroker.proxy import RecordingProxy
from minibroker.testing.backends import KafkaService
from minibroker.testing.real_kafka import RealKafka, unavailable_reason
from tests.differential.harness import (
    Comparison,
    compare,
    compare_scripted,
    scripted,
    unexplained,
)
from tests.differential.raw_scenarios import RAW_SCENARIOS, SCRIPTED_CLIENT
from tests.differential.scenarios import SCENARIOS
from tests.differential.share_scenarios import SHARE_RAW_SCENARIOS, relative
from tests.interop.test_client_matrix import (
    DRIVERS,
    MESSAGES,
    PARTITIONS,
    RETENTION_MS,
    RUN_TIMEOUT,
    Built,
    Driver,
    built_drivers,  # noqa: F401 (a fixture)
    lowest_version,
)

ROOT = Path(__file__).resolve().parents[2]
LINES = ("4", "3.9")

# (api, path) patterns ("*" matches anything) -> why minibroker answers differently.
KNOWN: dict[tuple[str, str], str] = {
    ("*", "*.configs[errors.deadletterqueue.group.enable]"): (
        "topic configs Kafka 4.x added; minibroker reports Kafka 3.9's 36"
    ),
    ("*", "*.configs[max.decompressed.message.bytes]"): (
        "topic configs Kafka 4.x added; minibroker reports Kafka 3.9's 36"
    ),
    ("*", "*.configs[remote.copy.lag.*]"): (
        "topic configs Kafka 4.x added; minibroker reports Kafka 3.9's 36"
    ),
    ("*", "*.configs[message.downconversion.enable]"): (
        "topic configs Kafka 4.0 removed; minibroker reports Kafka 3.9's 36"
    ),
    ("*", "*.configs[message.format.version]"): (
        "topic configs Kafka 4.0 removed; minibroker reports Kafka 3.9's 36"
    ),
    ("*", "*.configs[message.timestamp.difference.max.ms]"): (
        "topic configs Kafka 4.0 removed; minibroker reports Kafka 3.9's 36"
    ),
    ("*", "*.configs[message.timestamp.after.max.ms]*"): (
        "Kafka 4.0 lowered its default to 3600000 (one hour ahead); minibroker keeps "
        "Kafka 3.9's (no limit)"
    ),
    ("*", "*.configs[min.insync.replicas].*"): (
        "Kafka 4.x formats its storage with a cluster-wide min.insync.replicas=1 "
        "(DYNAMIC_DEFAULT_BROKER_CONFIG); minibroker reports Kafka's default"
    ),
}


# Kafka 4's group coordinator removes an Empty group whose topic was deleted at its next
# periodic cleanup; Kafka 3.9's coordinator and minibroker at once. The client programs
# delete their topic at the end, so later programs' ListGroups see earlier groups on 4.x.
LATER_GROUP_CLEANUP = (
    "Kafka 4.x removes an Empty group whose committed offsets' topic was deleted at its "
    "next periodic cleanup; Kafka 3.9 and minibroker remove it at once"
)


# Kafka 3.9 runs its classic group coordinator unless told otherwise: it answers the
# ConsumerGroupDescribe that admin clients try first with UNSUPPORTED_VERSION per group
# (they then fall back to DescribeGroups). minibroker answers as Kafka 4 does.
CLASSIC_COORDINATOR_39 = (
    "Kafka 3.9's default group coordinator answers ConsumerGroupDescribe with "
    "UNSUPPORTED_VERSION; minibroker answers as Kafka 4 does (GROUP_ID_NOT_FOUND for a "
    "classic group)"
)
# franz-go joins its consumer-protocol step's group only where the broker serves the
# protocol: beside Kafka 3.9, only minibroker lists that group.
CONSUMER_PROTOCOL_STEP_39 = (
    "franz-go runs its consumer-protocol group only where ConsumerGroupHeartbeat v1 is "
    "served: minibroker, not Kafka 3.9"
)
BY_LINE: dict[str, dict[tuple[str, str], str]] = {
    "3.9": {
        ("ConsumerGroupDescribe", "*"): CLASSIC_COORDINATOR_39,
        ("ListGroups", ".groups[diff-group-*-next]"): CONSUMER_PROTOCOL_STEP_39,
    },
}


# Kafka 4.x computes a consumer group's target assignment at most once a second and on a
# background thread by default, so a member may hear of a change one heartbeat or more
# later; minibroker computes it in the heartbeat that changes the group. The raw
# scenarios compare what each heartbeat is answered, so the Kafka they run against
# computes it at once too (Kafka's other scenarios use classic groups only).
CONSUMER_PROTOCOL_SETTINGS = {
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
    # The same for share groups (share_scenarios.py).
    "group.share.assignment.interval.ms": "0",
}
SETTINGS = {"4": CONSUMER_PROTOCOL_SETTINGS}
# Kafka's group.consumer.heartbeat.interval.ms and group.share.heartbeat.interval.ms
# (their defaults, both 5 s): what its heartbeats tell.
KAFKA_HEARTBEAT_INTERVAL_MS = 5000


@pytest.fixture(scope="module", params=LINES, ids=lambda line: f"kafka-{line}")
def real_kafka(request: pytest.FixtureRequest) -> Iterator[RealKafka]:
    line: str = request.param
    missing = unavailable_reason(line)
    if missing is not None:
        pytest.skip(missing)
    with RealKafka(line, settings=SETTINGS.get(line)) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def minibroker(real_kafka: RealKafka) -> Iterator[Broker]:
    """One minibroker beside each Kafka, so both see the same scenarios in the same order
    (what one scenario lists, such as groups, includes what earlier ones left)."""
    with Broker() as broker:
        yield broker


def run_through_proxy(scenario: str, bootstrap: str) -> list:  # type: ignore[type-arg]
    with RecordingProxy(bootstrap) as proxy:
        SCENARIOS[scenario](proxy.bootstrap_servers)
        return proxy.exchanges()


# What each scenario is there to compare: an empty comparison would pass and prove nothing.
MUST_COMPARE = {
    "produce_every_codec": {"Produce", "Fetch", "InitProducerId", "CreateTopics"},
    "fetch_and_list_offsets": {"ListOffsets", "Fetch", "Produce"},
    "group_of_two": {"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "OffsetFetch"},
    "admin_calls": {"CreateTopics", "DescribeConfigs", "CreatePartitions", "DeleteRecords"}
    | {"DeleteTopics", "ListGroups"},
    "transactions": {"InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"}
    | {"TxnOffsetCommit", "Fetch", "OffsetFetch"},
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_minibroker_answers_like_kafka(
    real_kafka: RealKafka, minibroker: Broker, scenario: str
) -> None:
    on_kafka = run_through_proxy(scenario, real_kafka.bootstrap_servers)
    on_minibroker = run_through_proxy(scenario, minibroker.bootstrap_servers)
    result = compare(on_kafka, on_minibroker)
    _record(real_kafka.version, scenario, result)
    assert MUST_COMPARE[scenario] <= {api for api, _ in result.compared}, result.compared
    left = unexplained(result.divergences, KNOWN)
    assert not left, "\n".join(str(d) for d in left)


@pytest.mark.parametrize("driver", DRIVERS, ids=lambda driver: driver.name)
def test_client_programs_get_kafkas_answers(
    real_kafka: RealKafka,
    minibroker: Broker,
    built_drivers: Built,  # noqa: F811 (the fixture imported above)
    driver: Driver,
) -> None:
    """The client matrix's drivers through the proxy: the versions and requests of every
    client compared too."""
    if (
        driver.needs is not None
        and lowest_version(real_kafka.service, driver.needs[0]) > (driver.needs[1])
    ):
        pytest.skip(f"Kafka {real_kafka.version} no longer serves {driver.name}'s versions")

    topic = f"diff-{driver.name}"

    def run(bootstrap: str, service: KafkaService) -> list:  # type: ignore[type-arg]
        if "create_topic" in driver.skips:  # a client without topic admin (kcat)
            service.create_topic(topic, PARTITIONS, {"retention.ms": RETENTION_MS})
        with RecordingProxy(bootstrap) as proxy:
            where = ["-bootstrap", proxy.bootstrap_servers, "-messages", str(MESSAGES)]
            names = ["-topic", topic, "-group", f"diff-group-{driver.name}"]
            done = subprocess.run(
                [*built_drivers.command(driver), *where, *names, *driver.args],
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
            )
            assert done.returncode == 0, done.stderr[-4000:]
            exchanges = [e for e in proxy.exchanges() if not _races(e)]
        if "delete_topic" in driver.skips:
            service.delete_topic(topic)
        return exchanges

    on_kafka = run(real_kafka.bootstrap_servers, real_kafka.service)
    on_minibroker = run(minibroker.bootstrap_servers, minibroker)
    result = compare(on_kafka, on_minibroker)
    _record(real_kafka.version, driver.name, result)
    # Most requests depend on timing (batching, positions, the wall clock of the offset
    # lookups) or on a client's own deadlines (Java's CreateTopics timeout), so not every
    # run has one both brokers saw; the group's first join is always asked alike.
    assert "JoinGroup" in {a for a, _ in result.compared}
    earlier_groups = {
        # the driver's group and the ones it derives (-latest, -trio)
        ("ListGroups", f".groups[diff-group-{other.name}*]"): LATER_GROUP_CLEANUP
        for other in DRIVERS
        if other is not driver and real_kafka.line == "4"
    }
    line_known = BY_LINE.get(real_kafka.line, {})
    left = unexplained(
        result.divergences, {**KNOWN, **earlier_groups, **DRIVER_TIMING, **line_known}
    )
    assert not left, "\n".join(str(d) for d in left)


# Groups whose requests race by design: the catalogue's rebalance steps start a third
# member while two are settled, so which members a JoinGroup answer lists, and which
# heartbeat first hears of the rebalance, depend on when each request arrived (and a
# consumer-protocol member hears of changes at its broker's heartbeat interval: Kafka's
# 5 s, minibroker's 0.5 s; tests/differential/raw_scenarios.py compares those answers).
RACING_GROUP_SUFFIXES = ("-trio", "-next")


# What the catalogue's timing decides, not the broker: several producers (one per codec)
# interleave, so a batch's offset depends on arrival order; from_latest produces late
# messages until the consumer sees one, so end offsets and fetched watermarks depend on
# how many it took; a commit's leader epoch depends on whether the consumer had fetched.
# Each run's offsets are held to SCENARIOS.md's checks on each broker by the parity runs.
ARRIVAL_ORDER = "decided by the order of concurrent requests, checked per run by the matrix"
DRIVER_TIMING = {
    ("Produce", "*.base_offset"): ARRIVAL_ORDER,
    ("Fetch", "*.high_watermark"): ARRIVAL_ORDER,
    ("Fetch", "*.last_stable_offset"): ARRIVAL_ORDER,
    ("ListOffsets", "*.offset"): ARRIVAL_ORDER,
    ("OffsetFetch", "*.committed_offset"): ARRIVAL_ORDER,
    ("OffsetFetch", "*.committed_leader_epoch"): ARRIVAL_ORDER,
}


def _races(exchange: Exchange) -> bool:
    request = exchange.request
    if not isinstance(request, dict):
        return False
    groups = [request.get("group_id")] + [
        g.get("group_id") for g in request.get("groups") or [] if isinstance(g, dict)
    ]
    return any(isinstance(g, str) and g.endswith(RACING_GROUP_SUFFIXES) for g in groups)


# What each raw scenario is there to compare.
MUST_COMPARE_RAW = {
    "consumer_group_v1": {("ConsumerGroupHeartbeat", 1)}
    | {("ConsumerGroupDescribe", 0), ("ConsumerGroupDescribe", 1)},
    "consumer_group_v0": {("ConsumerGroupHeartbeat", 0), ("ConsumerGroupDescribe", 0)},
    "consumer_group_refusals": {("ConsumerGroupHeartbeat", 0), ("ConsumerGroupHeartbeat", 1)}
    | {("ConsumerGroupDescribe", 0), ("ConsumerGroupDescribe", 1)},
    "share_group": {("ShareGroupHeartbeat", 1), ("ShareGroupDescribe", 1)}
    | {("ShareFetch", 1), ("ShareFetch", 2), ("ShareAcknowledge", 1)}
    | {("DescribeShareGroupOffsets", 0), ("DescribeShareGroupOffsets", 1)},
}
ALL_RAW_SCENARIOS = {**RAW_SCENARIOS, **SHARE_RAW_SCENARIOS}


@pytest.mark.parametrize("scenario", sorted(ALL_RAW_SCENARIOS))
def test_raw_requests_answered_like_kafka(
    real_kafka: RealKafka, minibroker: Broker, scenario: str
) -> None:
    """The consumer group protocol's requests (raw_scenarios.py) and the share group
    APIs' (share_scenarios.py), one by one; each step's answer compared
    (harness.compare_scripted)."""
    if real_kafka.line != "4":
        pytest.skip(
            f"Kafka {real_kafka.version} serves the consumer group protocol only as a "
            "preview, off by default, and no share groups"
        )

    def run(bootstrap: str) -> tuple[list[Exchange], list[str]]:
        with RecordingProxy(bootstrap) as proxy:
            labels = ALL_RAW_SCENARIOS[scenario](proxy.bootstrap_servers)
            return proxy.exchanges(), labels

    on_kafka, labels = run(real_kafka.bootstrap_servers)
    on_minibroker, minibroker_labels = run(minibroker.bootstrap_servers)
    assert labels == minibroker_labels
    minibroker_interval = (
        minibroker.config.group_share_heartbeat_interval_ms
        if scenario in SHARE_RAW_SCENARIOS
        else minibroker.config.group_consumer_heartbeat_interval_ms
    )
    kafka_steps = scripted(on_kafka, SCRIPTED_CLIENT, KAFKA_HEARTBEAT_INTERVAL_MS)
    minibroker_steps = scripted(on_minibroker, SCRIPTED_CLIENT, minibroker_interval)
    if scenario in SHARE_RAW_SCENARIOS:
        kafka_steps, minibroker_steps = relative(kafka_steps), relative(minibroker_steps)
    result = compare_scripted(kafka_steps, minibroker_steps, labels)
    _record(real_kafka.version, scenario, result)
    assert MUST_COMPARE_RAW[scenario] <= set(result.compared), result.compared
    left = unexplained(result.divergences, KNOWN)
    assert not left, "\n".join(str(d) for d in left)


def test_every_known_difference_is_documented() -> None:
    documented = (ROOT / "docs" / "compatibility.md").read_text()
    for reason in {*KNOWN.values(), LATER_GROUP_CLEANUP, *BY_LINE["3.9"].values()}:
        assert reason in " ".join(documented.split()), reason


def _record(version: str, scenario: str, result: Comparison) -> None:
    """With MINIBROKER_DIFFERENTIAL_REPORT set, add this run's counts to that JSON file
    (tools/differential.py turns it into the table of docs/test-suite.md)."""
    target = os.environ.get("MINIBROKER_DIFFERENTIAL_REPORT")
    if not target:
        return
    path = Path(target)
    report = json.loads(path.read_text()) if path.exists() else {}
    runs = report.setdefault(version, {})
    runs[scenario] = {
        "compared": [[api, v, n] for (api, v), n in sorted(result.compared.items())],
        "known": len(result.divergences),
        "settling": result.settling,
    }
    path.write_text(json.dumps(report, indent=1, sort_keys=True))
