"""franz-go's kadm moving replicas and electing a preferred leader on a three-node
cluster, after a raw CreateTopics with the manual assignment {0: [0, 1]}
(tests/admin/replicas/go).

The broker's clock stands still (a FakeClock), so the move stays under way while the
driver lists it and cancels it. One-node Kafka cannot place a partition on two brokers,
so this is not a `parity` test (test_replicas_errors.py checks refusals against Kafka).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from minibroker import Cluster
from minibroker.state.clock import FakeClock
from tests.interop.test_client_matrix import Built, Driver

DRIVER = Driver("kadm-replicas", "go", "../admin/replicas/go", "replicas")
RUN_TIMEOUT = 120


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    yield Built(tmp_path_factory)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, clock=FakeClock()) as running:
        yield running


def test_kadm_moves_cancels_and_elects(cluster: Cluster, built: Built) -> None:
    command = built.command(DRIVER)
    topic = "kadm-placed"
    ran = subprocess.run(
        [*command, "-bootstrap", cluster.bootstrap_servers, "-topic", topic],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    # kerr's texts: the error's name, then its description.
    refused = report.pop("reassign_forbidden_rf_change"), report.pop("elected-0")
    assert [text.split(":")[0] for text in refused] == [
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
