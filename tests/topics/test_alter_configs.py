"""IncrementalAlterConfigs and AlterConfigs over a real socket, at every served version.

Each test changes a topic's configs with one of the two APIs and checks the change with
DescribeConfigs (the value and its source: DYNAMIC_TOPIC_CONFIG once set on the topic,
DEFAULT_CONFIG once deleted) and, for max.message.bytes, with Produce: the limit the
broker enforces is the one just set. Refused resources get Kafka's error codes and leave
the topic exactly as it was; validate_only changes nothing; AlterConfigs replaces a
topic's whole set of configs.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import pytest

from harness.raw_client import RawClient, make, produce_request
from minibroker import Broker
from minibroker.protocol import records
from minibroker.state.topic_configs import TOPIC_CONFIG_DEFAULTS
from minibroker.testing.plugin import TopicFactory

PRODUCE, DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 0, 32, 33, 44
INCREMENTAL_VERSIONS = [0, 1]
ALTER_VERSIONS = [0, 1, 2]

NONE, UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE = 0, 3, 10
INVALID_CONFIG, INVALID_REQUEST = 40, 42
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5

Described = dict[str, tuple[str | None, int]]
Result = tuple[int, str | None, int, str]
Change = tuple[str, int, str | None]  # config, operation, value
Config = tuple[str, str | None]


def incremental(
    client: RawClient,
    version: int,
    resources: Sequence[tuple[int, str, Sequence[Change]]],
    *,
    validate_only: bool = False,
) -> list[Result]:
    """IncrementalAlterConfigs of (resource type, name, [(config, operation, value)]);
    each resource's (error code, message, type, name)."""
    key = INCREMENTAL_ALTER_CONFIGS
    response = client.call(
        key,
        version,
        resources=tuple(
            make(
                key,
                version,
                "AlterConfigsResource",
                resource_type=resource_type,
                resource_name=name,
                configs=tuple(
                    make(
                        key,
                        version,
                        "AlterableConfig",
                        name=config,
                        config_operation=operation,
                        value=value,
                    )
                    for config, operation, value in changes
                ),
            )
            for resource_type, name, changes in resources
        ),
        validate_only=validate_only,
    )
    return _results(response)


def alter(
    client: RawClient,
    version: int,
    resources: Sequence[tuple[int, str, Sequence[Config]]],
    *,
    validate_only: bool = False,
) -> list[Result]:
    """AlterConfigs of (resource type, name, [(config, value)]); each resource's
    (error code, message, type, name)."""
    response = client.call(
        ALTER_CONFIGS,
        version,
        resources=tuple(
            make(
                ALTER_CONFIGS,
                version,
                "AlterConfigsResource",
                resource_type=resource_type,
                resource_name=name,
                configs=tuple(
                    make(ALTER_CONFIGS, version, "AlterableConfig", name=config, value=value)
                    for config, value in configs
                ),
            )
            for resource_type, name, configs in resources
        ),
        validate_only=validate_only,
    )
    return _results(response)


def _results(response: Any) -> list[Result]:
    assert response.throttle_time == datetime.timedelta(0)
    return [
        (r.error_code.value, r.error_message, int(r.resource_type), r.resource_name)
        for r in response.responses
    ]


def described(client: RawClient, topic: str) -> Described:
    """Every config of the topic as DescribeConfigs v4 gives it: name -> (value, source)."""
    resource = make(
        DESCRIBE_CONFIGS,
        4,
        "DescribeConfigsResource",
        resource_type=TOPIC,
        resource_name=topic,
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
    assert result.error_code.value == NONE
    return {c.name: (c.value, int(c.config_source)) for c in result.configs}


def defaults() -> Described:
    return {name: (value, DEFAULT_CONFIG) for name, value in TOPIC_CONFIG_DEFAULTS.items()}


def produce(client: RawClient, topic: str, batch: bytes) -> int:
    """Produce one batch to partition 0; the partition's error code."""
    response = client.request(PRODUCE, 9, produce_request(topic, batch))
    return int(response.responses[0].partition_responses[0].error_code.value)


# --- IncrementalAlterConfigs ----------------------------------------------------------


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_set_is_described_as_a_dynamic_topic_config(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        changes = [("retention.ms", SET, "1234"), ("compression.type", SET, "zstd")]
        assert incremental(client, version, [(TOPIC, topic, changes)]) == [
            (NONE, None, TOPIC, topic)
        ]
        expected = defaults()
        expected["retention.ms"] = ("1234", DYNAMIC_TOPIC_CONFIG)
        expected["compression.type"] = ("zstd", DYNAMIC_TOPIC_CONFIG)
        assert described(client, topic) == expected
        # a second SET replaces the value and leaves the other config as it was
        assert incremental(client, version, [(TOPIC, topic, [("retention.ms", SET, "99")])]) == [
            (NONE, None, TOPIC, topic)
        ]
        expected["retention.ms"] = ("99", DYNAMIC_TOPIC_CONFIG)
        assert described(client, topic) == expected


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_delete_returns_a_config_to_its_default(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic(configs={"retention.ms": "60000", "segment.ms": "5000"})
    with RawClient(kafka_broker.bootstrap_servers) as client:
        # the value is ignored for DELETE, and a config the topic does not set (known or
        # not) is left alone, as in Kafka
        changes = [
            ("retention.ms", DELETE, None),
            ("delete.retention.ms", DELETE, "7"),
            ("no.such.config", DELETE, None),
        ]
        assert incremental(client, version, [(TOPIC, topic, changes)]) == [
            (NONE, None, TOPIC, topic)
        ]
        expected = defaults()
        expected["segment.ms"] = ("5000", DYNAMIC_TOPIC_CONFIG)
        assert described(client, topic) == expected


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_append_and_subtract_change_the_cleanup_policy_list(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:

        def change(operation: int, value: str) -> tuple[str | None, int]:
            changes = [("cleanup.policy", operation, value)]
            assert incremental(client, version, [(TOPIC, topic, changes)]) == [
                (NONE, None, TOPIC, topic)
            ]
            return described(client, topic)["cleanup.policy"]

        # APPEND starts from the default ("delete") and adds only what is not there
        assert change(APPEND, "compact") == ("delete,compact", DYNAMIC_TOPIC_CONFIG)
        assert change(APPEND, "compact") == ("delete,compact", DYNAMIC_TOPIC_CONFIG)
        assert change(SUBTRACT, "delete") == ("compact", DYNAMIC_TOPIC_CONFIG)
        assert change(SUBTRACT, "delete") == ("compact", DYNAMIC_TOPIC_CONFIG)
        assert change(APPEND, "delete") == ("compact,delete", DYNAMIC_TOPIC_CONFIG)


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
@pytest.mark.parametrize("operation", [APPEND, SUBTRACT])
def test_append_or_subtract_on_a_config_that_is_not_a_list_is_refused(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int, operation: int
) -> None:
    topic = kafka_topic(configs={"retention.ms": "60000"})
    with RawClient(kafka_broker.bootstrap_servers) as client:
        before = described(client, topic)
        changes = [("segment.ms", SET, "1000"), ("retention.ms", operation, "5")]
        [(code, message, resource_type, name)] = incremental(
            client, version, [(TOPIC, topic, changes)]
        )
        assert (code, resource_type, name) == (INVALID_CONFIG, TOPIC, topic)
        assert message is not None and "retention.ms" in message and "list" in message
        # all or nothing: the valid SET in the same resource was not applied either
        assert described(client, topic) == before


# (resource type, use the test's topic (else this name), changes, code, in the message)
REFUSED_INCREMENTAL: dict[str, tuple[int, str | None, list[Change], int, str]] = {
    "unknown-config": (TOPIC, None, [("no.such.config", SET, "1")], INVALID_CONFIG, "no.such"),
    "negative-max-message-bytes": (
        TOPIC,
        None,
        [("max.message.bytes", SET, "-5")],
        INVALID_CONFIG,
        "max.message.bytes",
    ),
    "not-a-number": (TOPIC, None, [("retention.ms", SET, "soon")], INVALID_CONFIG, "soon"),
    "below-the-least": (
        TOPIC,
        None,
        [("delete.retention.ms", SET, "-1")],
        INVALID_CONFIG,
        "delete.retention.ms",
    ),
    "bad-policy": (TOPIC, None, [("cleanup.policy", SET, "shred")], INVALID_CONFIG, "shred"),
    "bad-append": (TOPIC, None, [("cleanup.policy", APPEND, "shred")], INVALID_CONFIG, "shred"),
    "bad-codec": (TOPIC, None, [("compression.type", SET, "zip")], INVALID_CONFIG, "zip"),
    "duplicate-name": (
        TOPIC,
        None,
        [("retention.ms", SET, "1"), ("retention.ms", SET, "2")],
        INVALID_REQUEST,
        "retention.ms",
    ),
    "null-value": (TOPIC, None, [("retention.ms", SET, None)], INVALID_REQUEST, "null"),
    "unknown-operation": (TOPIC, None, [("retention.ms", 7, "1")], INVALID_REQUEST, "7"),
    "unknown-topic": (TOPIC, "no-such-topic", [], UNKNOWN_TOPIC_OR_PARTITION, "no-such-topic"),
    "no-topic-name": (TOPIC, "", [], INVALID_REQUEST, "topic name"),
    "other-broker": (BROKER, "7", [("log.retention.ms", SET, "1")], INVALID_REQUEST, "id"),
    "fixed-broker-config": (
        BROKER,
        "0",
        [("log.retention.ms", SET, "1"), ("num.partitions", SET, "3")],
        INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(num.partitions)",
    ),
    "bad-broker-value": (
        BROKER,
        "",
        [("message.max.bytes", SET, "big")],
        INVALID_REQUEST,
        "Invalid value big for configuration message.max.bytes: Not a number of type INT",
    ),
    "broker-append-not-list": (
        BROKER,
        "",
        [("log.retention.ms", APPEND, "1")],
        INVALID_CONFIG,
        "append is not allowed for config key: log.retention.ms",
    ),
    "broker-logger": (BROKER_LOGGER, "0", [("kafka", SET, "DEBUG")], INVALID_REQUEST, "logger"),
    "unknown-type": (99, "x", [("retention.ms", SET, "1")], INVALID_REQUEST, "99"),
}


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
@pytest.mark.parametrize("case", list(REFUSED_INCREMENTAL))
def test_incremental_refusals_get_their_code_and_change_nothing(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int, case: str
) -> None:
    resource_type, name, changes, expected_code, mentioned = REFUSED_INCREMENTAL[case]
    topic = kafka_topic(configs={"retention.ms": "60000"})
    name = topic if name is None else name
    with RawClient(kafka_broker.bootstrap_servers) as client:
        before = described(client, topic)
        # a valid change rides along in the refused resource: it must not be applied
        extra: list[Change] = [("segment.ms", SET, "1000")] if resource_type == TOPIC else []
        [(code, message, got_type, got_name)] = incremental(
            client, version, [(resource_type, name, extra + changes)]
        )
        assert (code, got_type, got_name) == (expected_code, resource_type, name)
        assert message is not None and mentioned in message
        assert described(client, topic) == before
        # and the broker still answers on this connection
        ok = [(TOPIC, topic, [("segment.ms", SET, "1000")])]
        assert incremental(client, version, ok) == [(NONE, None, TOPIC, topic)]
        assert described(client, topic)["segment.ms"] == ("1000", DYNAMIC_TOPIC_CONFIG)


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_each_resource_is_answered_on_its_own(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    good, other = kafka_topic(), kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        results = incremental(
            client,
            version,
            [
                (BROKER, "0", [("auto.create.topics.enable", SET, "false")]),
                (TOPIC, good, [("retention.ms", SET, "1")]),
                (TOPIC, other, [("retention.ms", APPEND, "1")]),
                (TOPIC, "no-such-topic", [("retention.ms", SET, "1")]),
            ],
        )
        assert [(code, t, n) for code, _, t, n in results] == [
            (INVALID_REQUEST, BROKER, "0"),
            (NONE, TOPIC, good),
            (INVALID_CONFIG, TOPIC, other),
            (UNKNOWN_TOPIC_OR_PARTITION, TOPIC, "no-such-topic"),
        ]
        assert described(client, good)["retention.ms"] == ("1", DYNAMIC_TOPIC_CONFIG)
        assert described(client, other) == defaults()


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_a_resource_named_twice_is_refused_both_times(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        results = incremental(
            client,
            version,
            [
                (TOPIC, topic, [("retention.ms", SET, "1")]),
                (TOPIC, topic, [("segment.ms", SET, "1")]),
            ],
        )
        assert [code for code, *_ in results] == [INVALID_REQUEST, INVALID_REQUEST]
        assert described(client, topic) == defaults()


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_incremental_validate_only_changes_nothing(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic(configs={"retention.ms": "60000"})
    with RawClient(kafka_broker.bootstrap_servers) as client:
        before = described(client, topic)
        changes = [
            ("retention.ms", DELETE, None),
            ("cleanup.policy", APPEND, "compact"),
            ("max.message.bytes", SET, "3000000"),
        ]
        assert incremental(client, version, [(TOPIC, topic, changes)], validate_only=True) == [
            (NONE, None, TOPIC, topic)
        ]
        assert described(client, topic) == before
        # validate_only still validates
        [(code, *_)] = incremental(
            client, version, [(TOPIC, topic, [("no.such", SET, "1")])], validate_only=True
        )
        assert code == INVALID_CONFIG
        assert described(client, topic) == before


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_raising_max_message_bytes_lets_a_larger_batch_in(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic()
    large = records.build_batch([(None, b"x" * 2_000_000)])
    small = records.build_batch([(None, b"small")])
    with RawClient(kafka_broker.bootstrap_servers, timeout=30) as client:
        assert produce(client, topic, large) == MESSAGE_TOO_LARGE

        def change(operation: int, value: str | None) -> None:
            changes = [("max.message.bytes", operation, value)]
            assert incremental(client, version, [(TOPIC, topic, changes)]) == [
                (NONE, None, TOPIC, topic)
            ]

        change(SET, "3000000")
        assert described(client, topic)["max.message.bytes"] == ("3000000", DYNAMIC_TOPIC_CONFIG)
        assert produce(client, topic, large) == NONE
        change(DELETE, None)
        assert described(client, topic)["max.message.bytes"] == ("1048588", DEFAULT_CONFIG)
        assert produce(client, topic, large) == MESSAGE_TOO_LARGE
        # and lowering it refuses what the default lets in
        change(SET, str(len(small) - 1))
        assert produce(client, topic, small) == MESSAGE_TOO_LARGE


# --- AlterConfigs ---------------------------------------------------------------------


@pytest.mark.parametrize("version", ALTER_VERSIONS)
def test_alter_configs_replaces_the_whole_set(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic(configs={"retention.ms": "60000", "cleanup.policy": "compact"})
    with RawClient(kafka_broker.bootstrap_servers) as client:
        configs = [("segment.ms", "1000"), ("cleanup.policy", "compact,delete")]
        assert alter(client, version, [(TOPIC, topic, configs)]) == [(NONE, None, TOPIC, topic)]
        expected = defaults()  # retention.ms, not named, is back to its default
        expected["segment.ms"] = ("1000", DYNAMIC_TOPIC_CONFIG)
        expected["cleanup.policy"] = ("compact,delete", DYNAMIC_TOPIC_CONFIG)
        assert described(client, topic) == expected
        # no configs at all: every one back to its default
        assert alter(client, version, [(TOPIC, topic, [])]) == [(NONE, None, TOPIC, topic)]
        assert described(client, topic) == defaults()


@pytest.mark.parametrize("version", ALTER_VERSIONS)
def test_alter_configs_raises_max_message_bytes(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic()
    large = records.build_batch([(None, b"x" * 2_000_000)])
    with RawClient(kafka_broker.bootstrap_servers, timeout=30) as client:
        assert produce(client, topic, large) == MESSAGE_TOO_LARGE
        configs = [("max.message.bytes", "3000000")]
        assert alter(client, version, [(TOPIC, topic, configs)]) == [(NONE, None, TOPIC, topic)]
        assert produce(client, topic, large) == NONE


# (resource type, use the test's topic (else this name), configs, code, in the message)
REFUSED_ALTER: dict[str, tuple[int, str | None, list[Config], int, str]] = {
    "unknown-config": (TOPIC, None, [("no.such.config", "1")], INVALID_CONFIG, "no.such"),
    "bad-value": (TOPIC, None, [("max.message.bytes", "big")], INVALID_CONFIG, "big"),
    "bad-boolean": (
        TOPIC,
        None,
        [("unclean.leader.election.enable", "yes")],
        INVALID_CONFIG,
        "yes",
    ),
    "duplicate-name": (
        TOPIC,
        None,
        [("segment.ms", "1"), ("segment.ms", "2")],
        INVALID_REQUEST,
        "segment.ms",
    ),
    "null-value": (TOPIC, None, [("segment.ms", None)], INVALID_REQUEST, "null"),
    "unknown-topic": (TOPIC, "no-such-topic", [], UNKNOWN_TOPIC_OR_PARTITION, "no-such-topic"),
    "other-broker": (BROKER, "7", [("log.retention.ms", "1")], INVALID_REQUEST, "id"),
    "fixed-broker-config": (
        BROKER,
        "",
        [("log.retention.ms", "1"), ("offsets.topic.num.partitions", "3")],
        INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(offsets.topic.num.partitions)",
    ),
    "broker-logger": (BROKER_LOGGER, "0", [("kafka", "DEBUG")], INVALID_REQUEST, "logger"),
    "unknown-type": (99, "x", [], INVALID_REQUEST, "99"),
}


@pytest.mark.parametrize("version", ALTER_VERSIONS)
@pytest.mark.parametrize("case", list(REFUSED_ALTER))
def test_alter_configs_refusals_get_their_code_and_change_nothing(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int, case: str
) -> None:
    resource_type, name, configs, expected_code, mentioned = REFUSED_ALTER[case]
    topic = kafka_topic(configs={"retention.ms": "60000"})
    name = topic if name is None else name
    with RawClient(kafka_broker.bootstrap_servers) as client:
        before = described(client, topic)
        # a valid config rides along in the refused resource: it must not be applied
        extra: list[Config] = [("retention.ms", "1")] if resource_type == TOPIC else []
        [(code, message, got_type, got_name)] = alter(
            client, version, [(resource_type, name, extra + configs)]
        )
        assert (code, got_type, got_name) == (expected_code, resource_type, name)
        assert message is not None and mentioned in message
        assert described(client, topic) == before


@pytest.mark.parametrize("version", ALTER_VERSIONS)
def test_alter_configs_validate_only_changes_nothing(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic(configs={"retention.ms": "60000"})
    with RawClient(kafka_broker.bootstrap_servers) as client:
        before = described(client, topic)
        configs = [("segment.ms", "1000")]
        assert alter(client, version, [(TOPIC, topic, configs)], validate_only=True) == [
            (NONE, None, TOPIC, topic)
        ]
        assert described(client, topic) == before
        [(code, *_)] = alter(
            client, version, [(TOPIC, topic, [("segment.ms", "x")])], validate_only=True
        )
        assert code == INVALID_CONFIG
        assert described(client, topic) == before


@pytest.mark.kafka(message_max_bytes=3_000_000)
def test_the_brokers_message_max_bytes_is_the_default_of_its_topics(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """message_max_bytes (Kafka's message.max.bytes) is what a topic that does not set
    max.message.bytes allows, and what DescribeConfigs reports as its default."""
    topic = kafka_topic()
    large = records.build_batch([(None, b"x" * 2_000_000)])
    with RawClient(kafka_broker.bootstrap_servers, timeout=30) as client:
        assert described(client, topic)["max.message.bytes"] == ("3000000", STATIC_BROKER_CONFIG)
        assert produce(client, topic, large) == NONE
        changes = [("max.message.bytes", SET, "1048588")]
        assert incremental(client, 1, [(TOPIC, topic, changes)]) == [(NONE, None, TOPIC, topic)]
        assert produce(client, topic, large) == MESSAGE_TOO_LARGE
