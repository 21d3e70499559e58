"""kafkajs 2.2.4's admin API (tests/admin/node/admin.cjs, kafkajs from npm) over real
sockets: partitions placed by hand (createTopics with `replicaAssignment`, read back with
fetchTopicMetadata), a reassignment (alterPartitionReassignments, then
listPartitionReassignments until it is done), per-broker configs (alterConfigs and
describeConfigs on a BROKER resource named by node id) and an OAUTHBEARER sign-in with an
unsecured JWS token, as Kafka's default unsecured validator takes them.

One driver run serves the module: every scenario at once, one JSON report each. A scenario
runs on one node (so that it runs against Apache Kafka too, `parity`: a one-node Kafka with
a SASL_PLAINTEXT listener configured with that validator) or on three (minibroker's
Cluster only: one-node Kafka cannot place a partition on several brokers).

kafkajs has no client-quota API, and never asks for authorized operations: those are
declared skips below.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from minibroker import Broker, Cluster
from minibroker.state.clock import FakeClock
from minibroker.testing.real_kafka import RealKafka
from tests.admin.conftest import SCOPE
from tests.interop.test_client_matrix import Built, Driver

DRIVER = Driver("kafkajs-admin", "node", "../admin/node", "admin.cjs")
RUN_TIMEOUT = 60  # each scenario has a bound of its own inside (25 s)
TIMEOUT = 20.0
MOVE_SECONDS = 5.0  # longer than a move that adds a replica stays under way
MISSING = 999  # no broker has this id
CONFIG = "log.cleaner.delete.retention.ms"  # a per-broker dynamic config; Kafka's default 1 day
DAY_MS = "86400000"
# kafkajs reports DescribeConfigs sources as Kafka's numbers.
SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
}

Report = dict[str, Any]
Reports = dict[str, tuple[Report, Report]]  # scenario name -> (its settings, its report)
CREATE_ERROR, REASSIGN_ERROR = "KafkaJSCreateTopicError", "KafkaJSAlterPartitionReassignmentsError"


@dataclass(frozen=True)
class Brokers:
    """The run's brokers: one node with a PLAINTEXT and an OAUTHBEARER listener (minibroker
    or Kafka), and minibroker's three-node cluster (None on another backend)."""

    single: str  # PLAINTEXT bootstrap
    single_node: int
    oauth: str  # SASL_PLAINTEXT bootstrap of the same node, taking OAUTHBEARER
    cluster: Cluster | None


@pytest.fixture(scope="module")
def brokers(request: pytest.FixtureRequest, kafka_backend: str) -> Iterator[Brokers]:
    if kafka_backend == "kafka-jvm":
        kafka: RealKafka = request.getfixturevalue("kafka_with_oauth")
        yield Brokers(kafka.bootstrap_servers, 1, kafka.extra_bootstrap_servers, None)
        return
    if kafka_backend != "embedded":
        pytest.skip("needs brokers whose listeners the test configures")
    with (
        Broker(
            listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            sasl_enabled_mechanisms="OAUTHBEARER",
            sasl_oauthbearer_required_scope=SCOPE,
        ) as single,
        Cluster(brokers=3, clock=FakeClock()) as cluster,
    ):
        yield Brokers(
            single.bootstrap_servers_for("PLAINTEXT"),
            single.node_id,
            single.bootstrap_servers_for("SASL_PLAINTEXT"),
            cluster,
        )


def _scenarios(brokers: Brokers) -> list[dict[str, Any]]:
    def topic(kind: str) -> str:
        return f"kafkajs-{kind}-{uuid.uuid4().hex[:8]}"

    node = brokers.single_node
    one = {"bootstrap": brokers.single, "missing": MISSING}
    scenarios: list[dict[str, Any]] = [
        {"name": "assign-1", "kind": "assign", **one, "topic": topic("assign"),
         "assignment": [[0, [node]], [1, [node]]]},
        {"name": "reassign-1", "kind": "reassign", **one, "topic": topic("reassign"),
         "assignment": [[0, [node]]], "target": [[0, [node]]]},
        {"name": "configs-1", "kind": "configs", "bootstrap": brokers.single, "node": node,
         "config": CONFIG, "value": "1000"},
        {"name": "oauth", "kind": "oauth", "bootstrap": brokers.oauth, "topic": topic("oauth"),
         "subject": "alice", "scope": SCOPE},
        {"name": "oauth-no-scope", "kind": "oauth", "bootstrap": brokers.oauth,
         "topic": topic("oauth"), "subject": "alice", "scope": "reader writer"},
    ]  # fmt: skip
    if brokers.cluster is not None:
        first, second, third = (n.node_id for n in brokers.cluster.nodes)
        three = {"bootstrap": brokers.cluster.bootstrap_servers, "missing": MISSING}
        scenarios += [
            {"name": "assign-3", "kind": "assign", **three, "topic": topic("assign"),
             "assignment": [[0, [first, second]], [1, [third, first]]]},
            {"name": "reassign-3", "kind": "reassign", **three, "topic": topic("reassign"),
             "assignment": [[0, [first, second]]], "target": [[0, [third, second]]]},
            {"name": "configs-3", "kind": "configs", "bootstrap": three["bootstrap"],
             "node": second, "other": first, "config": CONFIG, "value": "1000"},
        ]  # fmt: skip
    return scenarios


@pytest.fixture(scope="module")
def reports(brokers: Brokers, tmp_path_factory: pytest.TempPathFactory) -> Reports:
    """scenario name -> (its settings, the driver's report on it)."""
    command = Built(tmp_path_factory).command(DRIVER)
    scenarios = _scenarios(brokers)
    work = tmp_path_factory.mktemp("kafkajs-admin")
    settings = work / "scenarios.json"
    settings.write_text(json.dumps({"scenarios": scenarios}))
    with (work / "stdout").open("w+") as stdout, (work / "stderr").open("w+") as stderr:
        driver = subprocess.Popen([*command, str(settings)], stdout=stdout, stderr=stderr)
        try:
            _complete_the_move_once_listed(brokers.cluster, driver)
            driver.wait(RUN_TIMEOUT)
        finally:
            driver.kill()
        stdout.seek(0)
        stderr.seek(0)
        output, errors = stdout.read(), stderr.read()
    assert driver.returncode == 0, errors[-4000:]
    found = {}
    for line in output.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
            found[report["scenario"]] = report
    by_name = {s["name"]: s for s in scenarios}
    assert set(found) == set(by_name), errors[-4000:]
    return {name: (by_name[name], found[name]) for name in by_name}


def _complete_the_move_once_listed(
    cluster: Cluster | None, driver: subprocess.Popen[bytes]
) -> None:
    """The cluster's clock stands still, so the move the driver starts stays under way
    until the driver has listed it; then a step of the clock completes it."""
    if cluster is None:
        return
    deadline = time.monotonic() + RUN_TIMEOUT
    while driver.poll() is None and time.monotonic() < deadline:
        if any(r.api == "ListPartitionReassignments" for r in cluster.recent_requests()):
            cluster.clock.advance(MOVE_SECONDS)
            return
        time.sleep(0.05)


def _served(reports: Reports, name: str) -> tuple[Report, Any]:
    scenario, report = reports[name]
    assert report["ok"], (report["error"], report["data"])
    return scenario, report["data"]


def _three_nodes(reports: Reports, name: str) -> None:
    if name not in reports:
        pytest.skip("needs three nodes: one-node Kafka cannot place a partition on several")


def _refused_as_invalid_replica_assignment(refused: dict[str, Any] | None, kind: str) -> None:
    """kafkajs gathers each topic's (or partition's) error: the one here is Kafka's."""
    assert refused is not None, "a replica on a broker that does not exist was taken"
    assert refused["name"] == "KafkaJSAggregateError", refused
    [error] = refused["errors"]
    assert (error["name"], error["type"]) == (kind, "INVALID_REPLICA_ASSIGNMENT"), refused


# --- 1. partitions placed by hand -----------------------------------------------------------


@pytest.mark.parity
def test_kafkajs_places_partitions_by_hand_on_one_node(reports: Reports) -> None:
    scenario, data = _served(reports, "assign-1")
    node = scenario["assignment"][0][1][0]
    assert data["created"] is True
    # partition -> [leader, replicas, isr]
    assert data["partitions"] == {"0": [node, [node], [node]], "1": [node, [node], [node]]}
    _refused_as_invalid_replica_assignment(data["refused"], CREATE_ERROR)


def test_kafkajs_places_partitions_by_hand_on_three_nodes(reports: Reports) -> None:
    _three_nodes(reports, "assign-3")
    scenario, data = _served(reports, "assign-3")
    [(_, zero), (_, one)] = scenario["assignment"]
    # partition -> (leader, replicas, isr): led by the first replica named, all in sync
    placed = {
        partition: (leader, replicas, sorted(isr))
        for partition, (leader, replicas, isr) in data["partitions"].items()
    }
    assert placed == {"0": (zero[0], zero, sorted(zero)), "1": (one[0], one, sorted(one))}
    _refused_as_invalid_replica_assignment(data["refused"], CREATE_ERROR)


# --- 2. reassignment ------------------------------------------------------------------------


@pytest.mark.parity
def test_kafkajs_reassigns_onto_a_partitions_own_replicas_and_is_refused_a_missing_one(
    reports: Reports,
) -> None:
    """One node: a move onto the replicas the partition has is done at once, nothing is
    listed; a move onto a broker that does not exist is Kafka's refusal."""
    scenario, data = _served(reports, "reassign-1")
    node = scenario["assignment"][0][1][0]
    assert data["listed"] == []
    assert data["partitions"] == {"0": [node, [node], [node]]}
    _refused_as_invalid_replica_assignment(data["refused"], REASSIGN_ERROR)


def test_kafkajs_moves_a_partition_on_three_nodes(reports: Reports) -> None:
    """[first, second] -> [third, second]: listed under way (the target replicas, then the
    one leaving), then on its target replicas, led by the first of them (its leader left)."""
    _three_nodes(reports, "reassign-3")
    scenario, data = _served(reports, "reassign-3")
    [(_, [first, second])] = scenario["assignment"]
    [(_, [third, _])] = scenario["target"]
    assert data["listed"] == [
        [
            scenario["topic"],
            {
                "partition": 0,
                "replicas": [third, second, first],
                "addingReplicas": [third],
                "removingReplicas": [first],
            },
        ]
    ]
    leader, replicas, isr = data["partitions"]["0"]
    assert (leader, replicas, sorted(isr)) == (third, [third, second], sorted([third, second]))
    _refused_as_invalid_replica_assignment(data["refused"], REASSIGN_ERROR)


# --- 3. per-broker configs --------------------------------------------------------------------


def _shown(described: list[Any]) -> tuple[str, str, list[tuple[str, str, str]]]:
    value, source, synonyms = described
    return value, SOURCES[source], [(n, v, SOURCES[s]) for n, v, s in synonyms]


@pytest.mark.parity
def test_kafkajs_sets_and_reads_a_brokers_config_by_node_id(reports: Reports) -> None:
    _, data = _served(reports, "configs-1")
    assert [r["errorCode"] for r in data["altered"]["resources"]] == [0]
    assert _shown(data["node"]) == (
        "1000",
        "DYNAMIC_BROKER_CONFIG",
        [(CONFIG, "1000", "DYNAMIC_BROKER_CONFIG"), (CONFIG, DAY_MS, "DEFAULT_CONFIG")],
    )
    # alterConfigs with no entries leaves the node none of its own
    assert _shown(data["cleared"]) == (
        DAY_MS,
        "DEFAULT_CONFIG",
        [(CONFIG, DAY_MS, "DEFAULT_CONFIG")],
    )


def test_kafkajs_keeps_each_nodes_config_on_three_nodes(reports: Reports) -> None:
    """kafkajs sends a BROKER resource to the node it names: the second node keeps its own
    value, the first does not see it."""
    _three_nodes(reports, "configs-3")
    scenario, data = _served(reports, "configs-3")
    assert [(r["resourceName"], r["errorCode"]) for r in data["altered"]["resources"]] == [
        (str(scenario["node"]), 0)
    ]
    assert _shown(data["node"])[:2] == ("1000", "DYNAMIC_BROKER_CONFIG")
    assert _shown(data["other"]) == (DAY_MS, "DEFAULT_CONFIG", [(CONFIG, DAY_MS, "DEFAULT_CONFIG")])
    assert _shown(data["cleared"])[:2] == (DAY_MS, "DEFAULT_CONFIG")


# --- 4. authorized operations, client quotas ------------------------------------------------


def test_kafkajs_asks_for_no_authorized_operations() -> None:
    pytest.skip(
        "kafkajs 2.2.4 never asks for authorized operations: it sends Metadata up to v6 and "
        "DescribeGroups up to v2, and the include_*_authorized_operations fields came in "
        "Metadata v8 and DescribeGroups v3; nothing in its admin API reads them"
    )


def test_kafkajs_has_no_client_quota_api() -> None:
    pytest.skip(
        "kafkajs 2.2.4's admin API has no DescribeClientQuotas / AlterClientQuotas call "
        "(the quota scenarios run with the Java Admin and franz-go's kadm)"
    )


# --- 5. OAUTHBEARER -------------------------------------------------------------------------


def _topics(brokers: Brokers) -> set[str]:
    admin = AdminClient({"bootstrap.servers": brokers.single})
    return set(admin.list_topics(timeout=TIMEOUT).topics)


@pytest.mark.parity
def test_kafkajs_signs_in_with_an_unsecured_token(reports: Reports, brokers: Brokers) -> None:
    scenario, data = _served(reports, "oauth")
    # the record sent is in the topic created, both signed in with the token
    assert data["offsets"] == [{"partition": 0, "offset": "1", "high": "1", "low": "0"}]
    assert scenario["topic"] in _topics(brokers)


@pytest.mark.parity
def test_kafkajs_with_a_token_without_the_required_scope_is_refused(
    reports: Reports, brokers: Brokers
) -> None:
    """The broker answers the token with Kafka's challenge (insufficient_scope) and waits
    for the client's acknowledgement before failing the sign-in; kafkajs reads the
    challenge as success and sends its next request, and the broker closes the connection,
    as Kafka's does: kafkajs gives up with a closed connection."""
    scenario, report = reports["oauth-no-scope"]
    assert not report["ok"]
    assert report["error"] == {
        "name": "KafkaJSConnectionClosedError",
        "type": None,
        "message": "Closed connection",
    }
    assert scenario["topic"] not in _topics(brokers)
