"""Per-broker dynamic configs on a cluster of several nodes, through confluent-kafka's
AdminClient (which sends a node's BROKER resource to that node) and raw requests: each
node keeps its own values, "" is the cluster-wide default, and DescribeConfigs reports
every entry's source and synonyms as Kafka does.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from harness.raw_client import RawClient
from minibroker.testing.backends import KafkaService
from minibroker.testing.plugin import ClusterFactory
from minibroker.testing.waiting import wait_for
from tests.topics.test_alter_configs import BROKER, DELETE, INVALID_REQUEST, NONE, SET, incremental
from tests.topics.test_broker_configs import (
    DEFAULT,
    DYNAMIC_BROKER,
    DYNAMIC_DEFAULT_BROKER,
    STATIC_BROKER,
    describe,
    shown,
)

TIMEOUT = 20.0
RETENTION = "log.retention.ms"


def change(admin: AdminClient, node: str, name: str, value: str | None) -> None:
    """IncrementalAlterConfigs on BROKER `node`: SET, or DELETE for None."""
    operation = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    entry = ConfigEntry(name, value, incremental_operation=operation)
    resource = ConfigResource(ResourceType.BROKER, node, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT)


def change_cluster_wide(bootstrap: str, name: str, value: str | None) -> None:
    """IncrementalAlterConfigs on BROKER "" (confluent-kafka refuses an empty name)."""
    operation = (name, SET, value) if value is not None else (name, DELETE, None)
    with RawClient(bootstrap.split(",")[0], timeout=TIMEOUT) as client:
        assert incremental(client, 1, [(BROKER, "", [operation])]) == [(NONE, None, BROKER, "")]


def described(admin: AdminClient, node: str, name: str) -> tuple[Any, ConfigSource, list[str]]:
    """(value, source, synonym names in order) of broker config `name` on `node`."""
    resource = ConfigResource(ResourceType.BROKER, node)
    [future] = admin.describe_configs([resource], request_timeout=TIMEOUT).values()
    entry = future.result(TIMEOUT)[name]
    return entry.value, ConfigSource(entry.source), list(entry.synonyms)


def test_each_node_keeps_its_own_dynamic_configs(kafka_cluster: ClusterFactory) -> None:
    cluster = kafka_cluster(brokers=3, message_max_bytes=2_000_000)
    first, second, third = (str(node.node_id) for node in cluster.nodes)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    change(admin, second, RETENTION, "7200000")
    assert described(admin, second, RETENTION) == (
        "7200000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        [RETENTION, "log.retention.hours"],
    )
    # the other nodes do not see it (Kafka lists no synonym before the config's own name)
    assert described(admin, first, RETENTION) == (None, ConfigSource.DEFAULT_CONFIG, [])
    # a cluster-wide value: the nodes without their own take it, the one with keeps its own
    change_cluster_wide(cluster.bootstrap_servers, RETENTION, "3600000")
    assert described(admin, third, RETENTION)[:2] == (
        "3600000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert described(admin, second, RETENTION)[:2] == (
        "7200000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    # a setting the cluster started with is static; untouched ones are Kafka's defaults
    assert described(admin, third, "message.max.bytes")[:2] == (
        "2000000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert described(admin, third, "num.partitions")[:2] == ("1", ConfigSource.DEFAULT_CONFIG)

    # synonyms in Kafka's order: the node's own, the cluster-wide, the static, the default
    with RawClient(cluster.bootstrap_servers.split(",")[1], timeout=TIMEOUT) as client:
        assert shown(describe(client, BROKER, second)[RETENTION]) == (
            "7200000",
            DYNAMIC_BROKER,
            [
                (RETENTION, "7200000", DYNAMIC_BROKER),
                (RETENTION, "3600000", DYNAMIC_DEFAULT_BROKER),
                ("log.retention.hours", "168", DEFAULT),
            ],
        )
        assert shown(describe(client, BROKER, "")[RETENTION]) == (
            "3600000",
            DYNAMIC_DEFAULT_BROKER,
            [(RETENTION, "3600000", DYNAMIC_DEFAULT_BROKER)],
        )
        change(admin, second, "message.max.bytes", "3000000")
        assert shown(describe(client, BROKER, second)["message.max.bytes"]) == (
            "3000000",
            DYNAMIC_BROKER,
            [
                ("message.max.bytes", "3000000", DYNAMIC_BROKER),
                ("message.max.bytes", "2000000", STATIC_BROKER),
                ("message.max.bytes", "1048588", DEFAULT),
            ],
        )
        # a node's id other than the one asked, or one no node has, is Kafka's refusal
        for other in (first, "7"):
            [(code, message, _, _)] = incremental(
                client, 1, [(BROKER, other, [(RETENTION, SET, "1")])]
            )
            assert (code, message) == (
                INVALID_REQUEST,
                f"Unexpected broker id, expected {second}, but received {other}",
            )

    # DELETE takes the node's own value back to the cluster-wide one
    change(admin, second, RETENTION, None)
    assert described(admin, second, RETENTION)[:2] == (
        "3600000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )


@pytest.mark.parity
def test_a_brokers_config_sources_as_kafka_reports_them(kafka_broker: KafkaService) -> None:
    """One node: its own value, the cluster-wide one behind it, a start-up setting
    (group.initial.rebalance.delay.ms is 0 on both, Kafka's default 3000) and a default.
    (On Kafka a change reaches DescribeConfigs through its metadata log: reads wait.)"""
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    node = str(admin.describe_cluster().result(TIMEOUT).nodes[0].id)
    name = "log.cleaner.delete.retention.ms"
    try:
        change(admin, node, name, "1000")
        change_cluster_wide(kafka_broker.bootstrap_servers, name, "2000")
        wait_for(
            lambda: (
                described(admin, node, name)[:2] == ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG)
            ),
            describe=lambda: described(admin, node, name),
        )
        with RawClient(kafka_broker.bootstrap_servers, timeout=TIMEOUT) as client:
            assert shown(describe(client, BROKER, node)[name]) == (
                "1000",
                DYNAMIC_BROKER,
                [
                    (name, "1000", DYNAMIC_BROKER),
                    (name, "2000", DYNAMIC_DEFAULT_BROKER),
                    (name, "86400000", DEFAULT),
                ],
            )
            assert shown(describe(client, BROKER, "")[name]) == (
                "2000",
                DYNAMIC_DEFAULT_BROKER,
                [(name, "2000", DYNAMIC_DEFAULT_BROKER)],
            )
        assert described(admin, node, "group.initial.rebalance.delay.ms") == (
            "0",
            ConfigSource.STATIC_BROKER_CONFIG,
            ["group.initial.rebalance.delay.ms"],
        )
        assert described(admin, node, "num.partitions")[:2] == ("1", ConfigSource.DEFAULT_CONFIG)
    finally:
        change(admin, node, name, None)
        change_cluster_wide(kafka_broker.bootstrap_servers, name, None)
