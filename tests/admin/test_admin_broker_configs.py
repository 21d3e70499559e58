"""Per-broker configs through each admin client's driver (tests/admin/drivers.py) on a
three-node cluster: Kafka's Java Admin (4.x, incrementalAlterConfigs and describeConfigs
with synonyms, sent to the node named) and franz-go's kadm (AlterBrokerConfigs,
DescribeBrokerConfigs) set one node's value and the cluster-wide default, and read each
back with its source and synonyms as Kafka reports them."""

from __future__ import annotations

import pytest

from minibroker.testing.plugin import ClusterFactory
from tests.admin.drivers import FRANZ_GO, JAVA, AdminDrivers

NAME = "log.retention.ms"
# The node each client sets and the node it reads the default on, by position.
NODES = {JAVA: (1, 0), FRANZ_GO: (2, 1)}


@pytest.mark.parametrize("client", [JAVA, FRANZ_GO])
def test_admin_client_keeps_each_nodes_configs(
    kafka_cluster: ClusterFactory, admin_drivers: AdminDrivers, client: str
) -> None:
    cluster = kafka_cluster(brokers=3)
    node_ids = [str(node.node_id) for node in cluster.nodes]
    changed, other = (node_ids[position] for position in NODES[client])
    answers = admin_drivers.json_steps(
        client,
        cluster.bootstrap_servers,
        f"set:{changed}:{NAME}:7200000",
        f"set::{NAME}:3600000",
        f"describe:{changed}:{NAME}",
        f"describe:{other}:{NAME}",
        f"describe::{NAME}",
    )
    assert (answers[2]["value"], answers[2]["source"]) == ("7200000", "DYNAMIC_BROKER_CONFIG")
    assert answers[2]["synonyms"] == [
        [NAME, "7200000", "DYNAMIC_BROKER_CONFIG"],
        [NAME, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
        ["log.retention.hours", "168", "DEFAULT_CONFIG"],
    ]
    assert (answers[3]["value"], answers[3]["source"]) == (
        "3600000",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    )
    assert answers[3]["synonyms"] == [
        [NAME, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
        ["log.retention.hours", "168", "DEFAULT_CONFIG"],
    ]
    assert answers[4]["synonyms"] == [[NAME, "3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"]]
