"""`minibroker produce` and `minibroker consume`: records round-trip through stdin and
stdout, start where asked, and commit only as a group member."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

from minibroker.testing.clients import ClientConfigs
from tests.cli.conftest import Cli, unique

pytestmark = pytest.mark.parity

HOUR_MS = 3_600_000
QUICK = ("--idle-timeout", "1")


def test_produced_lines_come_back_with_their_keys_values_and_headers(
    cli: Cli, kafka_topic: Callable[..., str], kafka_consume: Callable[..., Any]
) -> None:
    topic = kafka_topic(partitions=3)
    lines = 'k1|hello\nk2|{"n": 2}\nk3|with|bars\nk1|\n'
    produced = cli(
        "produce",
        topic,
        "--key-separator",
        "|",
        "--header",
        "source=cli",
        "--header",
        "run=7",
        "--output",
        "json",
        stdin=lines,
    )
    assert produced.json() == {"topic": topic, "delivered": 4, "failed": 0}
    sent = [("k1", "hello"), ("k2", '{"n": 2}'), ("k3", "with|bars"), ("k1", "")]
    # What another client reads.
    seen = kafka_consume(topic, 4)
    assert sorted((r.key, r.value) for r in seen) == sorted(sent)
    assert {tuple(r.headers) for r in seen} == {(("source", b"cli"), ("run", b"7"))}

    consumed = cli("consume", topic, "--from-beginning", "--max-messages", "4", "--output", "json")
    records = consumed.json_lines()
    assert sorted((r["key"], r["value"]) for r in records) == sorted(sent)
    for record in records:
        assert record["headers"] == [["source", "cli"], ["run", "7"]]
        assert record["topic"] == topic
        assert set(record) == {
            "topic",
            "partition",
            "offset",
            "timestamp",
            "key",
            "value",
            "headers",
        }
    # Keys keep their order within a partition.
    ones = [r for r in records if r["key"] == "k1"]
    assert [r["value"] for r in sorted(ones, key=lambda r: r["offset"])] == ["hello", ""]

    text = cli(
        "consume",
        topic,
        "--from-beginning",
        "--max-messages",
        "4",
        "--print-key",
        "--print-headers",
        "--json",
        "--partition",
        str(ones[0]["partition"]),
        *QUICK,
    )
    assert "source:cli,run:7\tk1\thello" in text.lines()


def test_a_line_without_the_key_separator_is_not_sent_and_the_exit_code_says_so(
    cli: Cli, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic()
    ran = cli("produce", topic, "--key-separator", ":", stdin="a:1\nno separator\nb:2\n", expect=1)
    assert ran.lines()[1].split() == [topic, "2", "1"]
    assert "line 2" in ran.stderr
    got = cli("consume", topic, "--from-beginning", "--print-key", "--max-messages", "2")
    assert got.lines() == ["a\t1", "b\t2"]


def test_consume_from_a_timestamp_starts_at_the_first_record_at_or_after_it(
    cli: Cli, kafka_topic: Callable[..., str], kafka_config: ClientConfigs
) -> None:
    topic = kafka_topic()
    now = int(time.time() * 1000)
    producer = Producer(kafka_config.confluent_producer())
    stamps = {hours: now - hours * HOUR_MS for hours in (3, 2, 1)}
    for hours, stamp in stamps.items():
        producer.produce(topic, f"{hours}h ago".encode(), partition=0, timestamp=stamp)
    assert producer.flush(10) == 0

    from_ms = cli("consume", topic, "--from-timestamp", str(stamps[2]), *QUICK)
    assert from_ms.lines() == ["2h ago", "1h ago"]
    just_after = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stamps[2] / 1000 + 1))
    from_iso = cli(
        "consume", topic, "--from-timestamp", just_after + "+00:00", "--output", "json", *QUICK
    )
    (record,) = from_iso.json_lines()
    assert (record["offset"], record["value"], record["timestamp"]) == (2, "1h ago", stamps[1])


def test_consume_starts_at_an_offset_of_a_partition(
    cli: Cli, kafka_topic: Callable[..., str], kafka_produce: Callable[..., Any]
) -> None:
    topic = kafka_topic(partitions=2)
    kafka_produce(topic, ["a0", "a1", "a2", "a3"], partition=1)
    kafka_produce(topic, ["b0"], partition=0)
    got = cli("consume", topic, "--partition", "1", "--offset", "2", "--max-messages", "2")
    assert got.lines() == ["a2", "a3"]
    refused = cli("consume", topic, "--offset", "2", expect=2)
    assert "--partition" in refused.stderr


def test_consume_commits_only_as_a_group_member(
    cli: Cli,
    kafka_topic: Callable[..., str],
    kafka_produce: Callable[..., Any],
    kafka_config: ClientConfigs,
) -> None:
    topic, group = kafka_topic(), unique("consume")
    kafka_produce(topic, ["r0", "r1", "r2"])
    got = cli("consume", topic, "--group", group, "--from-beginning", "--max-messages", "2")
    assert got.lines() == ["r0", "r1"]
    admin = AdminClient(kafka_config.confluent_admin())
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    assert [(tp.partition, tp.offset) for tp in future.result(10).topic_partitions] == [(0, 2)]
    rest = cli("consume", topic, "--group", group, *QUICK)
    assert rest.lines() == ["r2"]  # where the group left off
