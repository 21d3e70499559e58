"""`minibroker groups`: a group consumed by a real confluent-kafka consumer, as the tools
describe it, and offsets reset through them, checked through the AdminClient."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from minibroker.testing.clients import ClientConfigs
from minibroker.testing.waiting import wait_for
from tests.cli.conftest import Cli, unique
from tests.groups.conftest import skip_before_kafka_4

pytestmark = pytest.mark.parity

HOUR_MS = 3_600_000


def _committed(kafka_config: ClientConfigs, group: str) -> dict[int, int]:
    admin = AdminClient(kafka_config.confluent_admin())
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {tp.partition: tp.offset for tp in future.result(10).topic_partitions if tp.offset >= 0}


def _commit(kafka_config: ClientConfigs, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a member of `group` that consumed, then leave it empty."""
    consumer = Consumer(kafka_config.confluent_consumer(group, **{"enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.1) is not None or consumer.assignment())
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


@pytest.fixture
def active_member(kafka_config: ClientConfigs) -> Iterator[Callable[[str, str], Consumer]]:
    """`active_member(group, topic)`: a consumer that has joined and holds its assignment
    until the test ends."""
    consumers: list[Consumer] = []

    def join(group: str, topic: str) -> Consumer:
        consumer = Consumer(
            kafka_config.confluent_consumer(group, **{"client.id": "cli-test-client"})
        )
        consumers.append(consumer)
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.1) is not None or consumer.assignment())
        return consumer

    yield join
    for consumer in consumers:
        consumer.close()


def test_describe_shows_committed_offsets_log_end_and_lag(
    cli: Cli,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_config: ClientConfigs,
) -> None:
    topic, group = kafka_topic(partitions=2), unique("lag")
    kafka_produce(topic, [f"a{i}" for i in range(5)], partition=0)
    kafka_produce(topic, [f"b{i}" for i in range(3)], partition=1)
    _commit(kafka_config, group, topic, {0: 2, 1: 3})

    (described,) = cli("groups", "describe", group, "--output", "json").json()["groups"]
    assert described["group"] == group
    assert described["state"] == "Empty"
    assert described["members"] == []
    offsets = {o["partition"]: o for o in described["offsets"] if o["topic"] == topic}
    assert {
        p: (o["committed_offset"], o["log_end_offset"], o["lag"]) for p, o in offsets.items()
    } == {
        0: (2, 5, 3),
        1: (3, 3, 0),
    }
    rows = [line.split() for line in cli("groups", "describe", group).lines()]
    assert ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"] in [
        row[:6] for row in rows
    ]
    assert [group, topic, "0", "2", "5", "3", "-"] in rows

    listed = cli("groups", "list", "--output", "json").json()["groups"]
    (mine,) = [g for g in listed if g["group"] == group]
    assert mine["state"] == "Empty"
    assert mine["protocol_type"] == "consumer"


def test_describe_shows_members_and_reset_refuses_while_they_are_there(
    cli: Cli,
    kafka_topic: Callable[..., str],
    kafka_config: ClientConfigs,
    active_member: Callable[[str, str], Consumer],
) -> None:
    topic, group = kafka_topic(partitions=2), unique("members")
    active_member(group, topic)

    def described() -> Any:
        (found,) = cli("groups", "describe", group, "--output", "json").json()["groups"]
        return found if found["state"] == "Stable" else None

    found = wait_for(described)
    (member,) = found["members"]
    assert member["client_id"] == "cli-test-client"
    assert member["host"]
    assert member["assignment"] == [
        {"topic": topic, "partition": 0},
        {"topic": topic, "partition": 1},
    ]
    refused = cli(
        "groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", expect=1
    )
    assert "active member" in refused.stderr
    assert _committed(kafka_config, group) == {}


def test_a_consumer_protocol_group_is_described_with_its_type_and_target(
    cli: Cli,
    kafka_topic: Callable[..., str],
    kafka_config: ClientConfigs,
    pytestconfig: pytest.Config,
) -> None:
    """Kafka 4's protocol (group.protocol=consumer): the broker assigns, and the tools say
    so: type "consumer", each member's assignment and the target it is moving to."""
    skip_before_kafka_4(pytestconfig)
    topic, group = kafka_topic(partitions=2), unique("kip848")
    settings = kafka_config.confluent_consumer(group, **{"client.id": "cli-848"})
    for ignored in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
        settings.pop(ignored, None)
    consumer = Consumer({**settings, "group.protocol": "consumer"})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.1) is not None or len(consumer.assignment()) == 2)

        def described() -> Any:
            (found,) = cli("groups", "describe", group, "--output", "json").json()["groups"]
            return found if found["state"] == "Stable" else None

        found = wait_for(described)
        assert found["type"] == "consumer"
        (member,) = found["members"]
        both = [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]
        assert (member["client_id"], member["assignment"]) == ("cli-848", both)
        assert member["target_assignment"] == both
        listed = cli("groups", "list", "--output", "json").json()["groups"]
        (mine,) = [g for g in listed if g["group"] == group]
        assert (mine["type"], mine["state"]) == ("consumer", "Stable")
    finally:
        consumer.close()


def test_reset_offsets_prints_the_plan_and_changes_only_with_execute(
    cli: Cli,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_config: ClientConfigs,
) -> None:
    topic, group = kafka_topic(partitions=2), unique("reset")
    kafka_produce(topic, [f"a{i}" for i in range(6)], partition=0)
    kafka_produce(topic, [f"b{i}" for i in range(4)], partition=1)
    _commit(kafka_config, group, topic, {0: 5, 1: 1})

    plan = cli("groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert plan.stderr.splitlines() == [
        f"Offsets group {group!r} would get (a dry run):",
        "Nothing changed (a dry run); add --execute to commit these offsets.",
    ]
    rows = [line.split() for line in plan.lines()]
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    assert rows[1:] == [[group, topic, "0", "5", "0"], [group, topic, "1", "1", "0"]]
    assert _committed(kafka_config, group) == {0: 5, 1: 1}

    def reset(*how: str) -> dict[int, int]:
        done = cli(
            "groups",
            "reset-offsets",
            group,
            "--topic",
            topic,
            *how,
            "--execute",
            "--output",
            "json",
        ).json()
        assert done["executed"] is True
        return {o["partition"]: o["new_offset"] for o in done["offsets"]}

    assert reset("--to-earliest") == {0: 0, 1: 0}
    assert _committed(kafka_config, group) == {0: 0, 1: 0}
    assert reset("--to-latest") == {0: 6, 1: 4}
    assert _committed(kafka_config, group) == {0: 6, 1: 4}
    assert reset("--shift-by", "-2") == {0: 4, 1: 2}
    assert reset("--to-offset", "5") == {0: 5, 1: 4}  # beyond the end: the end
    assert _committed(kafka_config, group) == {0: 5, 1: 4}
    one = cli(
        "groups", "reset-offsets", group, "--topic", f"{topic}:1", "--to-earliest", "--execute"
    )
    assert len(one.lines()) == 2
    assert one.stderr.splitlines() == [f"Offsets of group {group!r} reset and committed:"]
    assert _committed(kafka_config, group) == {0: 5, 1: 0}


def test_reset_offsets_to_a_datetime_finds_the_first_record_at_or_after_it(
    cli: Cli, kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    topic, group = kafka_topic(), unique("datetime")
    now = int(time.time() * 1000)
    producer = Producer(kafka_config.confluent_producer())
    for hours_ago in (3, 2, 1):
        producer.produce(
            topic, f"{hours_ago}h".encode(), partition=0, timestamp=now - hours_ago * HOUR_MS
        )
    assert producer.flush(10) == 0
    moment = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((now - 2 * HOUR_MS - 60_000) / 1000))
    cli(
        "groups",
        "reset-offsets",
        group,
        "--topic",
        topic,
        "--to-datetime",
        moment + "Z",
        "--execute",
    )
    assert _committed(kafka_config, group) == {0: 1}


def test_delete_removes_an_empty_group_and_says_which_were_not_there(
    cli: Cli, kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    topic, group = kafka_topic(), unique("delete")
    _commit(kafka_config, group, topic, {0: 0})
    deleted = cli("groups", "delete", group)
    assert deleted.stdout.strip() == f"Deleted group {group!r}."
    assert _committed(kafka_config, group) == {}
    gone = cli("groups", "describe", group, expect=1)
    assert group in gone.stderr
    missing = unique("missing")
    refused = cli("groups", "delete", missing, expect=1)
    assert missing in refused.stderr
    assert "GROUP_ID_NOT_FOUND" in refused.stderr


def test_internal_topics_are_listed_only_when_asked_for(
    cli: Cli, kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    topic = kafka_topic()
    _commit(kafka_config, unique("internal"), topic, {0: 0})  # __consumer_offsets exists
    every = cli("topics", "list", "--internal", "--output", "json").json()["topics"]
    internal = {t["name"] for t in every if t["internal"]}
    assert "__consumer_offsets" in internal
    plain = {t["name"] for t in cli("topics", "list", "--output", "json").json()["topics"]}
    assert topic in plain
    assert not plain & internal


def test_a_share_group_is_listed_and_described_with_who_reads_each_partition(
    cli: Cli,
    kafka_topic: Callable[..., str],
    kafka_config: ClientConfigs,
    pytestconfig: pytest.Config,
) -> None:
    """Share groups (KIP-932), which the Python admin clients do not describe: the tools
    list them as type "share" and describe their members, the partitions each reads and
    the share partitions' start offsets."""
    skip_before_kafka_4(pytestconfig)
    topic, group = kafka_topic(partitions=1), unique("share")
    consumers = [
        ShareConsumer(
            {
                "bootstrap.servers": kafka_config.bootstrap_servers,
                "group.id": group,
                "client.id": f"cli-share-{i}",
                "log_level": 0,
            }
        )
        for i in range(2)
    ]
    try:
        for consumer in consumers:
            consumer.subscribe([topic])

        def described() -> Any:
            for consumer in consumers:
                consumer.poll(0.05)
            (found,) = cli("groups", "describe", group, "--output", "json").json()["groups"]
            readers = [p["members"] for p in found["partitions"]]
            return (
                found if len(found["members"]) == 2 and [len(r) for r in readers] == [2] else None
            )

        found = wait_for(described, timeout=30)
        assert (found["type"], found["state"], found["assignor"]) == ("share", "Stable", "simple")
        assert {m["client_id"] for m in found["members"]} == {"cli-share-0", "cli-share-1"}
        for member in found["members"]:
            assert member["assignment"] == [{"topic": topic, "partition": 0}]
        listed = cli("groups", "list", "--output", "json").json()["groups"]
        (mine,) = [g for g in listed if g["group"] == group]
        assert (mine["type"], mine["state"], mine["protocol_type"]) == ("share", "Stable", "share")
        table = cli("groups", "describe", group).lines()
        assert any(line.split()[:3] == ["GROUP", "TOPIC", "PARTITION"] for line in table)
        assert any(line.split()[:3] == [group, topic, "0"] for line in table)
    finally:
        for consumer in consumers:
            consumer.close()
