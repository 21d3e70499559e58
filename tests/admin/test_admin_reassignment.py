"""Partitions placed by hand, moved and led by their preferred replica, through each
admin client's driver (tests/admin/drivers.py) on a three-node cluster: Kafka's Java
Admin (4.x) creates with a manual assignment, grows, moves, lists and elects; franz-go's
kadm (after a raw CreateTopics with the assignment {0: [0, 1]}, as kadm has none) moves,
lists, cancels and elects.

The broker's clock stands still (a FakeClock), so a move the driver starts stays under
way while it lists it. One-node Kafka cannot place a partition on several brokers, so
this is not a `parity` test (test_replicas_errors.py checks the refusals against Kafka).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minibroker import Cluster
from minibroker.state.clock import FakeClock
from minibroker.testing.waiting import wait_for
from tests.admin.drivers import FRANZ_GO, JAVA, AdminDrivers


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, clock=FakeClock()) as running:
        yield running


def check_java(report: dict[str, object], cluster: Cluster, topic: str) -> None:
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


def check_franz_go(report: dict[str, object], cluster: Cluster, topic: str) -> None:
    # kerr's texts: the error's name, then its description.
    refused = report.pop("reassign_forbidden_rf_change"), report.pop("elected-0")
    assert [str(text).split(":")[0] for text in refused] == [
        "INVALID_REPLICATION_FACTOR",
        "ELECTION_NOT_NEEDED",  # cancelled: back on [0, 1], led by 0
    ], refused
    assert report == {
        "create": "ok",
        "reassign": "ok",
        "list": "ok",
        "listed": {f"{topic}-0": [[2, 1, 0], [2], [0]]},
        "cancel": "ok",
        "elect": "ok",
    }
    assert cluster.leaders(topic) == {0: 0}


CHECKS = {JAVA: check_java, FRANZ_GO: check_franz_go}


@pytest.mark.parametrize("client", [JAVA, FRANZ_GO])
def test_admin_client_places_moves_and_elects(
    cluster: Cluster, admin_drivers: AdminDrivers, client: str
) -> None:
    topic = f"{client}-placed"
    report = admin_drivers.report(client, cluster.bootstrap_servers, f"replicas:{topic}")
    CHECKS[client](report, cluster, topic)
