"""`minibroker configs`: a topic's configs changed and shown, a broker's shown."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from minibroker.testing.clients import ClientConfigs
from minibroker.testing.waiting import wait_for
from tests.cli.conftest import Cli

pytestmark = pytest.mark.parity


def test_alter_sets_and_deletes_topic_configs_and_describe_shows_them(
    cli: Cli, kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    topic = kafka_topic(configs={"cleanup.policy": "compact"})
    cli(
        "configs",
        "alter",
        "--topic",
        topic,
        "--set",
        "retention.ms=7200000",
        "--delete",
        "cleanup.policy",
    )
    admin = AdminClient(kafka_config.confluent_admin())
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)

    def seen() -> dict[str, str]:
        entries = admin.describe_configs([resource])[resource].result(10)
        return {k: e.value for k, e in entries.items() if not e.is_default}

    # Kafka also reports what its server.properties sets (min.insync.replicas, say).
    wait_for(
        lambda: seen().get("retention.ms") == "7200000" and "cleanup.policy" not in seen(),
        describe=seen,
    )
    shown = cli("configs", "describe", "--topic", topic, "--output", "json").json()
    assert (shown["resource_type"], shown["name"]) == ("topic", topic)
    shown_values = {c["name"]: (c["value"], c["source"]) for c in shown["configs"]}
    assert shown_values["retention.ms"] == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    assert "cleanup.policy" not in shown_values
    table = [line.split() for line in cli("configs", "describe", "--topic", topic).lines()]
    assert table[0] == ["NAME", "VALUE", "SOURCE"]
    assert ["retention.ms", "7200000", "DYNAMIC_TOPIC_CONFIG"] in table[1:]

    refused = cli("configs", "alter", "--topic", topic, "--set", "retention.ms=soon", expect=1)
    assert topic in refused.stderr
    assert "INVALID_CONFIG" in refused.stderr


def test_describe_shows_a_brokers_configs(cli: Cli, kafka_config: ClientConfigs) -> None:
    admin = AdminClient(kafka_config.confluent_admin())
    broker_id = next(iter(admin.list_topics(timeout=10).brokers))
    shown = cli("configs", "describe", "--broker", str(broker_id), "--all", "--output", "json")
    configs = {c["name"]: c for c in shown.json()["configs"]}
    assert configs["num.partitions"]["value"].isdigit()
    assert configs["auto.create.topics.enable"]["value"] in ("true", "false")
    unknown = cli("configs", "describe", "--broker", "nine", expect=2)
    assert "node id" in unknown.stderr
    absent = cli("configs", "describe", "--broker", str(broker_id + 1000), expect=1)
    assert f"no broker {broker_id + 1000}" in absent.stderr
