"""Kafka's Java Admin (kafka-clients 4.x) placing partitions by hand, moving them and
electing preferred leaders on a three-node cluster (tests/admin/replicas/ReplicaDriver.java).

The broker's clock stands still (a FakeClock), so the move the driver starts stays under
way while it lists it. One-node Kafka cannot place a partition on several brokers, so
this is not a `parity` test (test_replicas_errors.py checks the refusals against Kafka).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from minibroker import Cluster
from minibroker.state.clock import FakeClock
from minibroker.testing.waiting import wait_for
from tests.interop.test_client_matrix import Built, Driver

DRIVER = Driver("java-replicas", "java", "../admin/replicas", "ReplicaDriver", java_line="4")
RUN_TIMEOUT = 120


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    yield Built(tmp_path_factory)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, clock=FakeClock()) as running:
        yield running


def test_java_admin_places_moves_and_elects(cluster: Cluster, built: Built) -> None:
    command = built.command(DRIVER)
    topic = "java-placed"
    ran = subprocess.run(
        [*command, "-bootstrap", cluster.bootstrap_servers, "-topic", topic],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    assert report == {
        "create": "ok",
        "create_missing_broker": "InvalidReplicaAssignmentException",
        "grow": "ok",
        "grow_missing_broker": "InvalidReplicaAssignmentException",
        "reassign": "ok",
        "listed": {f"{topic}-0": [[2, 1, 0], [2], [0]]},
        "cancel_without_move": "NoReassignmentInProgressException",
        "reassign_missing_broker": "InvalidReplicaAssignmentException",
        # leader, replicas, ISR: partition 0 on its way from [0, 1] to [2, 1]
        "described": {
            "0": [0, [2, 1, 0], [1, 0]],
            "1": [1, [1, 2], [1, 2]],
            "2": [2, [2, 0], [2, 0]],
        },
        "elected": {f"{topic}-1": "ElectionNotNeededException"},
    }
    cluster.clock.advance(5)
    wait_for(lambda: cluster.leaders(topic)[0] == 2, describe="the move completes")
