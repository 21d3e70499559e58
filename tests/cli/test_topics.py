"""`minibroker topics`: what a user sees of topics they create, alter and delete, checked
against the broker through confluent-kafka's AdminClient."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource

from minibroker.testing.clients import ClientConfigs
from minibroker.testing.waiting import wait_for
from tests.cli.conftest import Cli, unique

pytestmark = pytest.mark.parity


def _admin(kafka_config: ClientConfigs) -> AdminClient:
    return AdminClient(kafka_config.confluent_admin())


def _partition_count(admin: AdminClient, topic: str) -> int:
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
    return len(described.partitions)


def _configs(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return dict(admin.describe_configs([resource])[resource].result(10))


def test_a_created_topic_is_listed_and_described_with_its_partitions_and_configs(
    cli: Cli, kafka_config: ClientConfigs
) -> None:
    topic = unique("create")
    created = cli("topics", "create", topic, "--partitions", "3", "--config", "retention.ms=123456")
    assert topic in created.stdout
    assert _partition_count(_admin(kafka_config), topic) == 3

    listed = cli("topics", "list", "--output", "json").json()["topics"]
    assert {"name": topic, "partitions": 3, "internal": False} in listed
    table = cli("topics", "list").lines()
    assert table[0].split() == ["TOPIC", "PARTITIONS"]
    assert [topic, "3"] in [line.split() for line in table[1:]]

    (described,) = cli("topics", "describe", topic, "--output", "json").json()["topics"]
    assert described["name"] == topic
    assert described["partition_count"] == 3
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    for partition in described["partitions"]:
        assert partition["leader"] is not None
        assert partition["leader"] in partition["replicas"]
        assert partition["isr"] == partition["replicas"]
    assert described["configs"]["retention.ms"] == "123456"
    assert "cleanup.policy" not in described["configs"]  # a default is not shown
    table = cli("topics", "describe", topic).stdout
    assert "retention.ms=123456" in table
    assert table.splitlines()[0].split() == ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS"]


def test_creating_a_topic_that_exists_fails_unless_asked_not_to(cli: Cli) -> None:
    topic = unique("exists")
    cli("topics", "create", topic)
    again = cli("topics", "create", topic, expect=1)
    assert topic in again.stderr
    assert "TOPIC_ALREADY_EXISTS" in again.stderr
    assert cli("topics", "create", topic, "--if-not-exists", "--output", "json").json() == {
        "topic": topic,
        "created": False,
    }


def test_alter_adds_partitions_and_changes_configs(cli: Cli, kafka_config: ClientConfigs) -> None:
    topic = unique("alter")
    cli("topics", "create", topic, "--partitions", "2", "--config", "retention.ms=600000")
    admin = _admin(kafka_config)
    cli("topics", "alter", topic, "--partitions", "5", "--config", "cleanup.policy=compact")
    assert wait_for(lambda: _partition_count(admin, topic) == 5)
    assert _configs(admin, topic)["cleanup.policy"].value == "compact"

    cli("topics", "alter", topic, "--delete-config", "retention.ms")
    restored = wait_for(lambda: _configs(admin, topic)["retention.ms"])
    assert restored.is_default

    fewer = cli("topics", "alter", topic, "--partitions", "3", expect=1)
    assert topic in fewer.stderr
    assert _partition_count(admin, topic) == 5
    nothing = cli("topics", "alter", topic, expect=2)
    assert "--partitions" in nothing.stderr


def test_delete_removes_topics_and_says_which_were_not_there(cli: Cli) -> None:
    kept, gone = unique("kept"), unique("gone")
    cli("topics", "create", kept)
    cli("topics", "create", gone)
    deleted = cli("topics", "delete", gone)
    assert deleted.stdout.strip() == f"Deleted topic {gone!r}."

    def names() -> set[str]:
        return {t["name"] for t in cli("topics", "list", "--output", "json").json()["topics"]}

    wait_for(lambda: gone not in names(), describe=names)
    assert kept in names()
    missing = unique("missing")
    refused = cli("topics", "delete", missing, "--output", "json", expect=1)
    assert refused.json()["deleted"] == []
    assert missing in refused.json()["failed"]
    assert missing in refused.stderr


def test_describing_an_unknown_topic_fails_naming_it(cli: Cli) -> None:
    missing = unique("unknown")
    refused = cli("topics", "describe", missing, expect=1)
    assert missing in refused.stderr
