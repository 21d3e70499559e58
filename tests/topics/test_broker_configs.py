"""Broker configs changed while the broker runs (IncrementalAlterConfigs and AlterConfigs
on BROKER resources), over a real socket: the value is in force at once for every topic
that does not set its own, DescribeConfigs reports it with Kafka's sources and synonyms,
per-broker values come before cluster-wide ones, and refusals change nothing.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from harness.raw_client import RawClient, make
from minibroker import Broker
from minibroker.protocol import records
from minibroker.testing.backends import KafkaService
from minibroker.testing.plugin import TopicFactory
from minibroker.testing.waiting import wait_for
from tests.topics.test_alter_configs import (
    APPEND,
    BROKER,
    DELETE,
    DESCRIBE_CONFIGS,
    INVALID_REQUEST,
    MESSAGE_TOO_LARGE,
    NONE,
    SET,
    SUBTRACT,
    TOPIC,
    alter,
    incremental,
    produce,
)
from tests.topics.test_topic_configs import describe as describe_configs

CREATE_TOPICS = 19
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 1, 2, 3, 4, 5
KAFKA_MESSAGE_MAX_BYTES = "1048588"

Synonyms = list[tuple[str, str | None, int]]


def describe(client: RawClient, resource_type: int, name: str) -> dict[str, Any]:
    """DescribeConfigs v4 with synonyms: config name -> entry."""
    return describe_configs(client, resource_type, name, synonyms=True)


def shown(entry: Any) -> tuple[str | None, int, Synonyms]:
    return (
        entry.value,
        int(entry.config_source),
        [(s.name, s.value, int(s.source)) for s in entry.synonyms],
    )


@pytest.fixture
def client(kafka_broker: Broker) -> Iterator[RawClient]:
    with RawClient(kafka_broker.bootstrap_servers, timeout=30) as raw:
        yield raw


def test_message_max_bytes_raised_for_this_broker_lets_larger_batches_in(
    kafka_broker: Broker, kafka_topic: TopicFactory, client: RawClient
) -> None:
    follows, own = kafka_topic(), kafka_topic(configs={"max.message.bytes": "1048588"})
    large = records.build_batch([(None, b"x" * 2_000_000)])
    node = str(kafka_broker.node_id)
    assert produce(client, follows, large) == MESSAGE_TOO_LARGE

    changes = [("message.max.bytes", SET, "3000000")]
    assert incremental(client, 1, [(BROKER, node, changes)]) == [(NONE, None, BROKER, node)]

    # in force at once for the topic without its own value; not for the one with it
    assert produce(client, follows, large) == NONE
    assert produce(client, own, large) == MESSAGE_TOO_LARGE
    assert shown(describe(client, TOPIC, follows)["max.message.bytes"]) == (
        "3000000",
        DYNAMIC_BROKER,
        [
            ("message.max.bytes", "3000000", DYNAMIC_BROKER),
            ("message.max.bytes", KAFKA_MESSAGE_MAX_BYTES, DEFAULT),
        ],
    )
    assert shown(describe(client, TOPIC, own)["max.message.bytes"]) == (
        "1048588",
        DYNAMIC_TOPIC,
        [
            ("max.message.bytes", "1048588", DYNAMIC_TOPIC),
            ("message.max.bytes", "3000000", DYNAMIC_BROKER),
            ("message.max.bytes", KAFKA_MESSAGE_MAX_BYTES, DEFAULT),
        ],
    )
    broker_entry = describe(client, BROKER, node)["message.max.bytes"]
    assert shown(broker_entry)[:2] == ("3000000", DYNAMIC_BROKER)
    assert not broker_entry.read_only

    # DELETE goes back to the default, and the limit with it
    changes = [("message.max.bytes", DELETE, None)]
    assert incremental(client, 1, [(BROKER, node, changes)]) == [(NONE, None, BROKER, node)]
    assert produce(client, follows, large) == MESSAGE_TOO_LARGE
    assert shown(describe(client, TOPIC, follows)["max.message.bytes"]) == (
        KAFKA_MESSAGE_MAX_BYTES,
        DEFAULT,
        [("message.max.bytes", KAFKA_MESSAGE_MAX_BYTES, DEFAULT)],
    )


def test_a_value_for_this_broker_comes_before_the_cluster_wide_one(
    kafka_broker: Broker, kafka_topic: TopicFactory, client: RawClient
) -> None:
    topic = kafka_topic()
    node = str(kafka_broker.node_id)
    cluster_wide = [("log.retention.ms", SET, "7000")]
    assert incremental(client, 0, [(BROKER, "", cluster_wide)]) == [(NONE, None, BROKER, "")]
    assert shown(describe(client, TOPIC, topic)["retention.ms"]) == (
        "7000",
        DYNAMIC_DEFAULT_BROKER,
        [
            ("log.retention.ms", "7000", DYNAMIC_DEFAULT_BROKER),
            ("log.retention.hours", "168", DEFAULT),
        ],
    )
    # the resource "" lists only the cluster-wide values set, with their own synonyms
    assert {name: shown(e) for name, e in describe(client, BROKER, "").items()} == {
        "log.retention.ms": (
            "7000",
            DYNAMIC_DEFAULT_BROKER,
            [("log.retention.ms", "7000", DYNAMIC_DEFAULT_BROKER)],
        )
    }

    assert incremental(client, 0, [(BROKER, node, [("log.retention.ms", SET, "5000")])]) == [
        (NONE, None, BROKER, node)
    ]
    assert shown(describe(client, TOPIC, topic)["retention.ms"]) == (
        "5000",
        DYNAMIC_BROKER,
        [
            ("log.retention.ms", "5000", DYNAMIC_BROKER),
            ("log.retention.ms", "7000", DYNAMIC_DEFAULT_BROKER),
            ("log.retention.hours", "168", DEFAULT),
        ],
    )
    # a topic created now reports the broker's value as its default (CreateTopics v5+)
    created = client.call(
        CREATE_TOPICS,
        7,
        topics=(
            make(
                CREATE_TOPICS,
                7,
                "CreatableTopic",
                name=f"{topic}-new",
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=datetime.timedelta(seconds=30),
        validate_only=False,
    )
    configs = {c.name: (c.value, int(c.config_source)) for c in created.topics[0].configs}
    assert configs["retention.ms"] == ("5000", DYNAMIC_BROKER)
    assert configs["segment.bytes"] == ("1073741824", DEFAULT)


def test_a_lesser_synonym_gives_the_value_but_kafka_lists_no_synonym_for_it(
    kafka_broker: Broker, kafka_topic: TopicFactory, client: RawClient
) -> None:
    """retention.ms falls back to log.retention.ms, then log.retention.minutes, then
    log.retention.hours; Kafka lists synonyms only from the primary name on."""
    topic = kafka_topic()
    node = str(kafka_broker.node_id)
    assert incremental(client, 1, [(BROKER, node, [("log.retention.hours", SET, "2")])]) == [
        (NONE, None, BROKER, node)
    ]
    assert shown(describe(client, TOPIC, topic)["retention.ms"]) == (
        str(2 * 3_600_000),
        DEFAULT,
        [],
    )
    broker = describe(client, BROKER, node)
    assert shown(broker["log.retention.hours"]) == (
        "2",
        DYNAMIC_BROKER,
        [("log.retention.hours", "2", DYNAMIC_BROKER), ("log.retention.hours", "168", DEFAULT)],
    )
    # log.retention.minutes comes before the hours
    assert incremental(client, 1, [(BROKER, "", [("log.retention.minutes", SET, "3")])]) == [
        (NONE, None, BROKER, "")
    ]
    assert describe(client, TOPIC, topic)["retention.ms"].value == str(3 * 60_000)


def test_append_and_subtract_change_the_brokers_cleanup_policy(
    kafka_broker: Broker, kafka_topic: TopicFactory, client: RawClient
) -> None:
    topic = kafka_topic()
    node = str(kafka_broker.node_id)
    appended = [("log.cleanup.policy", APPEND, "compact")]
    assert incremental(client, 1, [(BROKER, node, appended)]) == [(NONE, None, BROKER, node)]
    assert shown(describe(client, TOPIC, topic)["cleanup.policy"])[:2] == (
        "delete,compact",
        DYNAMIC_BROKER,
    )
    subtracted = [("log.cleanup.policy", SUBTRACT, "delete")]
    assert incremental(client, 1, [(BROKER, node, subtracted)]) == [(NONE, None, BROKER, node)]
    assert describe(client, TOPIC, topic)["cleanup.policy"].value == "compact"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_the_brokers_dynamic_configs(
    kafka_broker: Broker, kafka_topic: TopicFactory, client: RawClient, version: int
) -> None:
    topic = kafka_topic()
    node = str(kafka_broker.node_id)
    first = [("log.retention.ms", "9000"), ("compression.type", "zstd")]
    assert alter(client, version, [(BROKER, node, first)]) == [(NONE, None, BROKER, node)]
    described = describe(client, TOPIC, topic)
    assert (described["retention.ms"].value, described["compression.type"].value) == (
        "9000",
        "zstd",
    )
    # the configs not named again go back to their defaults
    assert alter(client, version, [(BROKER, node, [("compression.type", "lz4")])]) == [
        (NONE, None, BROKER, node)
    ]
    described = describe(client, TOPIC, topic)
    assert shown(described["retention.ms"])[:2] == ("604800000", DEFAULT)
    assert described["compression.type"].value == "lz4"


def test_refused_and_validate_only_changes_leave_the_broker_as_it_was(
    kafka_broker: Broker, kafka_topic: TopicFactory, client: RawClient
) -> None:
    topic = kafka_topic()
    node = str(kafka_broker.node_id)
    before = {name: shown(e) for name, e in describe(client, BROKER, node).items()}
    topic_before = {name: shown(e) for name, e in describe(client, TOPIC, topic).items()}

    [(code, message, _, _)] = incremental(
        client, 1, [(BROKER, node, [("log.retention.ms", SET, "abc")])]
    )
    assert code == INVALID_REQUEST
    assert (
        message == "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"
    )
    [(code, message, _, _)] = incremental(
        client, 1, [(BROKER, "999", [("log.retention.ms", SET, "1")])]
    )
    assert (code, message) == (
        INVALID_REQUEST,
        f"Unexpected broker id, expected {node}, but received 999",
    )
    [(code, message, _, _)] = incremental(
        client,
        1,
        [
            (
                BROKER,
                node,
                [("message.max.bytes", SET, "5"), ("log.message.format.version", SET, "3.0")],
            )
        ],
    )
    assert (code, message) == (
        INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(log.message.format.version)",
    )
    assert incremental(
        client, 1, [(BROKER, node, [("message.max.bytes", SET, "5")])], validate_only=True
    ) == [(NONE, None, BROKER, node)]
    assert alter(client, 2, [(BROKER, "", [("message.max.bytes", "5")])], validate_only=True) == [
        (NONE, None, BROKER, "")
    ]

    assert {name: shown(e) for name, e in describe(client, BROKER, node).items()} == before
    assert {name: shown(e) for name, e in describe(client, TOPIC, topic).items()} == topic_before
    assert describe(client, BROKER, "") == {}


def test_describing_another_brokers_id_is_refused(kafka_broker: Broker, client: RawClient) -> None:
    resource = make(
        DESCRIBE_CONFIGS,
        4,
        "DescribeConfigsResource",
        resource_type=BROKER,
        resource_name="42",
        configuration_keys=None,
    )
    response = client.call(
        DESCRIBE_CONFIGS,
        4,
        resources=(resource,),
        include_synonyms=False,
        include_documentation=False,
    )
    (result,) = response.results
    assert (result.error_code.value, result.error_message) == (
        INVALID_REQUEST,
        f"Unexpected broker id, expected {kafka_broker.node_id} or empty string, but received 42",
    )


def test_an_unknown_broker_config_is_kept_and_changes_nothing(
    kafka_broker: Broker, kafka_topic: TopicFactory, client: RawClient
) -> None:
    topic = kafka_topic()
    node = str(kafka_broker.node_id)
    topic_before = {name: shown(e) for name, e in describe(client, TOPIC, topic).items()}
    assert incremental(client, 1, [(BROKER, node, [("my.custom.setting", SET, "x")])]) == [
        (NONE, None, BROKER, node)
    ]
    entry = describe(client, BROKER, node)["my.custom.setting"]
    assert shown(entry) == ("x", DYNAMIC_BROKER, [("my.custom.setting", "x", DYNAMIC_BROKER)])
    assert entry.read_only
    assert {name: shown(e) for name, e in describe(client, TOPIC, topic).items()} == topic_before


def test_max_connections_lowered_while_running_refuses_further_connections(
    kafka_broker: Broker, client: RawClient
) -> None:
    node = str(kafka_broker.node_id)
    assert incremental(client, 1, [(BROKER, node, [("max.connections", SET, "1")])]) == [
        (NONE, None, BROKER, node)
    ]
    with (
        pytest.raises((ConnectionError, EOFError, OSError)),
        RawClient(kafka_broker.bootstrap_servers, timeout=10) as second,
    ):
        describe(second, BROKER, node)
    # the connection already open is served, and can raise the limit again
    assert incremental(client, 1, [(BROKER, node, [("max.connections", DELETE, None)])]) == [
        (NONE, None, BROKER, node)
    ]
    with RawClient(kafka_broker.bootstrap_servers, timeout=10) as third:
        assert describe(third, BROKER, node)["max.connections"].value == "1024"


# --- held against Apache Kafka in CI's parity run ----------------------------------------

METADATA = 3
INVALID_CONFIG = 40


def broker_id(client: RawClient) -> str:
    """The id of the broker the client is connected to (a single-broker Kafka)."""
    response = client.call(
        METADATA,
        12,
        topics=(),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (broker,) = response.brokers
    return str(int(broker.node_id))


@pytest.mark.parity
def test_broker_configs_change_as_on_kafka(
    kafka_broker: KafkaService, kafka_topic: TopicFactory
) -> None:
    """A per-broker log.retention.ms is the retention of a topic without its own, with
    Kafka's sources and synonyms; DELETE takes it back; Kafka's refusals. (On Kafka the
    change reaches DescribeConfigs through its metadata log, so the reads wait for it.)"""
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers, timeout=30) as client:
        node = broker_id(client)
        retention = [("log.retention.ms", SET, "7200000")]
        assert incremental(client, 1, [(BROKER, node, retention)]) == [(NONE, None, BROKER, node)]
        try:
            expected = (
                "7200000",
                DYNAMIC_BROKER,
                [
                    ("log.retention.ms", "7200000", DYNAMIC_BROKER),
                    ("log.retention.hours", "168", DEFAULT),
                ],
            )
            wait_for(
                lambda: shown(describe(client, TOPIC, topic)["retention.ms"]) == expected,
                describe=lambda: shown(describe(client, TOPIC, topic)["retention.ms"]),
            )
            entry = describe(client, BROKER, node)["log.retention.ms"]
            assert shown(entry) == ("7200000", DYNAMIC_BROKER, expected[2])
            assert not entry.read_only

            # a cluster-wide value comes after the per-broker one
            cluster_wide = [("log.retention.ms", SET, "3600000")]
            assert incremental(client, 1, [(BROKER, "", cluster_wide)]) == [
                (NONE, None, BROKER, "")
            ]
            layered = (
                "7200000",
                DYNAMIC_BROKER,
                [
                    ("log.retention.ms", "7200000", DYNAMIC_BROKER),
                    ("log.retention.ms", "3600000", DYNAMIC_DEFAULT_BROKER),
                    ("log.retention.hours", "168", DEFAULT),
                ],
            )
            wait_for(
                lambda: shown(describe(client, TOPIC, topic)["retention.ms"]) == layered,
                describe=lambda: shown(describe(client, TOPIC, topic)["retention.ms"]),
            )
            # "" lists the cluster-wide values only (Kafka 4 formats its storage with
            # min.insync.replicas=1 among them)
            cluster = describe(client, BROKER, "")
            assert shown(cluster["log.retention.ms"]) == (
                "3600000",
                DYNAMIC_DEFAULT_BROKER,
                [("log.retention.ms", "3600000", DYNAMIC_DEFAULT_BROKER)],
            )
            assert {int(e.config_source) for e in cluster.values()} == {DYNAMIC_DEFAULT_BROKER}

            refusals = [
                (BROKER, "999", [("log.retention.ms", SET, "1")]),
                (BROKER, node, [("num.partitions", SET, "3")]),
                (BROKER, node, [("log.retention.ms", SET, "abc")]),
            ]
            answers = [incremental(client, 1, [refused])[0] for refused in refusals]
            assert [code for code, *_ in answers] == [INVALID_REQUEST] * 3
            messages = [message or "" for _, message, _, _ in answers]
            assert messages[0].startswith("Unexpected broker id, expected ")
            assert "999" in messages[0]
            assert messages[1].startswith("Cannot update these configs dynamically: ")
            assert "num.partitions" in messages[1]
            assert messages[2].startswith("Invalid value abc for configuration log.retention.ms")
            appended = [("log.retention.ms", APPEND, "1")]
            [(code, *_)] = incremental(client, 1, [(BROKER, node, appended)])
            assert code == INVALID_CONFIG
        finally:
            deleted = [("log.retention.ms", DELETE, None)]
            assert incremental(client, 1, [(BROKER, node, deleted), (BROKER, "", deleted)]) == [
                (NONE, None, BROKER, node),
                (NONE, None, BROKER, ""),
            ]
        wait_for(
            lambda: (
                shown(describe(client, TOPIC, topic)["retention.ms"]) == ("604800000", DEFAULT, [])
            ),
            describe=lambda: shown(describe(client, TOPIC, topic)["retention.ms"]),
        )


# --- through real clients' admin APIs ------------------------------------------------------


def test_confluent_kafka_changes_a_broker_config_incrementally(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    topic = kafka_topic()
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    resource = ConfigResource(
        ResourceType.BROKER,
        str(kafka_broker.node_id),
        incremental_configs=[
            ConfigEntry(
                "log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    topic_resource = ConfigResource(ResourceType.TOPIC, topic)
    [described] = admin.describe_configs([topic_resource]).values()
    entry = described.result(timeout=30)["cleanup.policy"]
    assert (entry.value, entry.source) == (
        "delete,compact",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    # a refused change raises with Kafka's message
    fixed = ConfigResource(
        ResourceType.BROKER,
        str(kafka_broker.node_id),
        incremental_configs=[
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [refused] = admin.incremental_alter_configs([fixed]).values()
    with pytest.raises(Exception, match="Cannot update these configs dynamically"):
        refused.result(timeout=30)


def test_kafka_python_alter_configs_sets_a_broker_config(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    topic = kafka_topic()
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        resource = ConfigResource(
            ConfigResourceType.BROKER, str(kafka_broker.node_id), {"log.retention.ms": "123456"}
        )
        # kafka-python sends the broker's other modified configs along (an AlterConfigs
        # replaces them all) after checking the name against DescribeConfigs
        assert admin.alter_configs([resource]) == {"broker": {str(kafka_broker.node_id): "OK"}}
    finally:
        admin.close()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        assert shown(describe(client, TOPIC, topic)["retention.ms"])[:2] == (
            "123456",
            DYNAMIC_BROKER,
        )
