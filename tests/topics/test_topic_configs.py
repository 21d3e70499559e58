"""Kafka 3.9's topic configs over a real socket: CreateTopics and IncrementalAlterConfigs
take every one of them with Kafka's validation (a bad value of each type is
INVALID_CONFIG), DescribeConfigs reports each with its value, source, config type and,
when asked, Kafka's synonyms, and Produce enforces message.timestamp.before.max.ms and
message.timestamp.after.max.ms against the broker's clock, record by record.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from harness.raw_client import RawClient, create_topics_request, make, produce_request
from minibroker import Broker
from minibroker.protocol import records
from minibroker.state.topic_configs import TOPIC_CONFIG_DEFAULTS
from minibroker.testing.plugin import TopicFactory
from tests.record_bytes import zigzag_varint

PRODUCE, CREATE_TOPICS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 0, 19, 32, 44
NONE, INVALID_TIMESTAMP, INVALID_CONFIG = 0, 32, 40
TOPIC, BROKER = 2, 4
SET = 0
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
LONG_MAX = str(2**63 - 1)
HOUR_MS = 3_600_000

# Kafka 3.9's topic configs (LogConfig's ConfigDef): name -> (default, ConfigType).
KAFKA_3_9_TOPIC_CONFIGS = {
    "cleanup.policy": ("delete", LIST),
    "compression.gzip.level": ("-1", INT),
    "compression.lz4.level": ("9", INT),
    "compression.type": ("producer", STRING),
    "compression.zstd.level": ("3", INT),
    "delete.retention.ms": ("86400000", LONG),
    "file.delete.delay.ms": ("60000", LONG),
    "flush.messages": (LONG_MAX, LONG),
    "flush.ms": (LONG_MAX, LONG),
    "follower.replication.throttled.replicas": ("", LIST),
    "index.interval.bytes": ("4096", INT),
    "leader.replication.throttled.replicas": ("", LIST),
    "local.retention.bytes": ("-2", LONG),
    "local.retention.ms": ("-2", LONG),
    "max.compaction.lag.ms": (LONG_MAX, LONG),
    "max.message.bytes": ("1048588", INT),
    "message.downconversion.enable": ("true", BOOLEAN),
    "message.format.version": ("3.0-IV1", STRING),
    "message.timestamp.after.max.ms": (LONG_MAX, LONG),
    "message.timestamp.before.max.ms": (LONG_MAX, LONG),
    "message.timestamp.difference.max.ms": (LONG_MAX, LONG),
    "message.timestamp.type": ("CreateTime", STRING),
    "min.cleanable.dirty.ratio": ("0.5", DOUBLE),
    "min.compaction.lag.ms": ("0", LONG),
    "min.insync.replicas": ("1", INT),
    "preallocate": ("false", BOOLEAN),
    "remote.log.copy.disable": ("false", BOOLEAN),
    "remote.log.delete.on.disable": ("false", BOOLEAN),
    "remote.storage.enable": ("false", BOOLEAN),
    "retention.bytes": ("-1", LONG),
    "retention.ms": ("604800000", LONG),
    "segment.bytes": ("1073741824", INT),
    "segment.index.bytes": ("10485760", INT),
    "segment.jitter.ms": ("0", LONG),
    "segment.ms": ("604800000", LONG),
    "unclean.leader.election.enable": ("false", BOOLEAN),
}

# Configs the old list lacked, each with a value Kafka takes (as Kafka reports it back).
NEW_VALUES = {
    "segment.jitter.ms": "1000",
    "min.cleanable.dirty.ratio": "0.25",
    "file.delete.delay.ms": "5000",
    "flush.messages": "100",
    "flush.ms": "2000",
    "segment.index.bytes": "4096",
    "index.interval.bytes": "1024",
    "preallocate": "true",
    "message.downconversion.enable": "false",
    "message.format.version": "2.8",
    "message.timestamp.difference.max.ms": "5000",
    "compression.gzip.level": "9",
    "compression.lz4.level": "17",
    "compression.zstd.level": "-5",
    "leader.replication.throttled.replicas": "0:1,1:2",
    "follower.replication.throttled.replicas": "*",
    "local.retention.ms": "-1",
    "local.retention.bytes": "1000",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
}

# Bad values of each type: (config, value).
BAD_VALUES = {
    "int-not-a-number": ("segment.index.bytes", "ten"),
    "int-over-int-range": ("index.interval.bytes", "2147483648"),
    "int-below-least": ("segment.index.bytes", "3"),
    "int-gzip-level-zero": ("compression.gzip.level", "0"),
    "int-lz4-level-over": ("compression.lz4.level", "18"),
    "int-zstd-level-over": ("compression.zstd.level", "23"),
    "long-not-a-number": ("flush.messages", "many"),
    "long-below-least": ("flush.messages", "0"),
    "long-negative-jitter": ("segment.jitter.ms", "-1"),
    "long-negative-delay": ("file.delete.delay.ms", "-1"),
    "long-over-long-range": ("flush.ms", "9223372036854775808"),
    "long-local-retention-below": ("local.retention.ms", "-3"),
    "double-over-one": ("min.cleanable.dirty.ratio", "1.5"),
    "double-negative": ("min.cleanable.dirty.ratio", "-0.1"),
    "double-not-a-number": ("min.cleanable.dirty.ratio", "half"),
    "boolean-yes": ("preallocate", "yes"),
    "boolean-empty": ("message.downconversion.enable", ""),
    "list-not-a-pair": ("leader.replication.throttled.replicas", "0-1"),
    "list-star-and-pairs": ("follower.replication.throttled.replicas", "*,0:1"),
    "list-not-a-policy": ("cleanup.policy", "delete,archive"),
    "string-unknown-version": ("message.format.version", "9.9"),
    "string-unknown-codec": ("compression.type", "brotli"),
    # Kafka's checks across configs (LogConfig.validateValues, and a broker without
    # tiered storage refusing it)
    "compaction-lags-crossed": ("min.compaction.lag.ms", "10000;max.compaction.lag.ms=5000"),
    "remote-storage": ("remote.storage.enable", "true"),
}


def _configs(spec: tuple[str, str]) -> dict[str, str]:
    """A BAD_VALUES entry as configs ("a", "1;b=2" -> {"a": "1", "b": "2"})."""
    name, value = spec
    first, *rest = value.split(";")
    configs = {name: first}
    for item in rest:
        key, _, other = item.partition("=")
        configs[key] = other
    return configs


def create_topic(client: RawClient, name: str, configs: dict[str, str]) -> Any:
    """CreateTopics v7 of one topic; its result."""
    response = client.request(CREATE_TOPICS, 7, create_topics_request([(name, 1, configs)]))
    (result,) = response.topics
    return result


def set_configs(client: RawClient, topic: str, configs: dict[str, str]) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 SETs of the topic's configs: (error code, message)."""
    resource = make(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        "AlterConfigsResource",
        resource_type=TOPIC,
        resource_name=topic,
        configs=tuple(
            make(
                INCREMENTAL_ALTER_CONFIGS,
                1,
                "AlterableConfig",
                name=name,
                config_operation=SET,
                value=value,
            )
            for name, value in configs.items()
        ),
    )
    response = client.call(INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False)
    (result,) = response.responses
    return result.error_code.value, result.error_message


def describe(
    client: RawClient,
    resource_type: int,
    name: str,
    *,
    version: int = 4,
    synonyms: bool = False,
    keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """DescribeConfigs of one resource: config name -> its entry."""
    resource = make(
        DESCRIBE_CONFIGS,
        version,
        "DescribeConfigsResource",
        resource_type=resource_type,
        resource_name=name,
        configuration_keys=None if keys is None else tuple(keys),
    )
    response = client.call(
        DESCRIBE_CONFIGS,
        version,
        resources=(resource,),
        include_synonyms=synonyms,
        include_documentation=False,
    )
    (result,) = response.results
    assert result.error_code.value == NONE
    return {c.name: c for c in result.configs}


def synonyms_of(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, int(s.source)) for s in entry.synonyms]


# --- the configs and their validation --------------------------------------------------


def test_a_topic_is_described_with_every_kafka_3_9_config_default_and_type(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    assert dict(TOPIC_CONFIG_DEFAULTS) == {
        name: default for name, (default, _) in KAFKA_3_9_TOPIC_CONFIGS.items()
    }
    with RawClient(kafka_broker.bootstrap_servers) as client:
        entries = describe(client, TOPIC, topic)
    assert {
        name: (e.value, int(e.config_source), int(e.config_type), e.read_only)
        for name, e in entries.items()
    } == {
        name: (default, DEFAULT_CONFIG, kind, False)
        for name, (default, kind) in KAFKA_3_9_TOPIC_CONFIGS.items()
    }
    assert all(e.documentation is None and not e.synonyms for e in entries.values())


def test_create_topics_takes_the_new_configs_and_describe_reports_them(
    kafka_broker: Broker,
) -> None:
    topic = f"configs-{uuid.uuid4().hex[:12]}"
    with RawClient(kafka_broker.bootstrap_servers) as client:
        result = create_topic(client, topic, NEW_VALUES)
        assert result.error_code.value == NONE, result.error_message
        # CreateTopics v5+ reports them in its result as well
        created = {c.name: (c.value, int(c.config_source)) for c in result.configs}
        for name, value in NEW_VALUES.items():
            assert created[name] == (value, DYNAMIC_TOPIC_CONFIG)
        entries = describe(client, TOPIC, topic)
    for name, value in NEW_VALUES.items():
        assert (entries[name].value, int(entries[name].config_source)) == (
            value,
            DYNAMIC_TOPIC_CONFIG,
        )
    assert entries["retention.ms"].value == "604800000"


@pytest.mark.parametrize("name", sorted(NEW_VALUES))
def test_incremental_alter_configs_sets_each_new_config(
    kafka_broker: Broker, kafka_topic: TopicFactory, name: str
) -> None:
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        assert set_configs(client, topic, {name: NEW_VALUES[name]}) == (NONE, None)
        (entry,) = describe(client, TOPIC, topic, keys=[name]).values()
    assert (entry.value, int(entry.config_source)) == (NEW_VALUES[name], DYNAMIC_TOPIC_CONFIG)


def test_values_are_described_as_kafka_reads_them(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """Kafka trims every value and reports what it parsed: "TRUE" as "true", " 0100 "
    as "100", a list without the blanks around its commas."""
    topic = kafka_topic()
    given = {
        "preallocate": "TRUE",
        "flush.messages": " 0100 ",
        "leader.replication.throttled.replicas": "0:1 , 2:3",
        "compression.type": " zstd",
    }
    with RawClient(kafka_broker.bootstrap_servers) as client:
        assert set_configs(client, topic, given) == (NONE, None)
        entries = describe(client, TOPIC, topic, keys=list(given))
    assert {name: e.value for name, e in entries.items()} == {
        "preallocate": "true",
        "flush.messages": "100",
        "leader.replication.throttled.replicas": "0:1,2:3",
        "compression.type": "zstd",
    }


# Values at the edges of Kafka's ranges, which Kafka takes.
EDGE_VALUES = {
    "retention.ms above 2^31": {"retention.ms": "3000000000"},
    "retention.bytes at the long minimum": {"retention.bytes": str(-(2**63))},
    "max.message.bytes at the int maximum": {"max.message.bytes": str(2**31 - 1)},
    "gzip level -1": {"compression.gzip.level": "-1"},
    "gzip level 1": {"compression.gzip.level": "1"},
    "gzip level 9": {"compression.gzip.level": "9"},
    "dirty ratio 0": {"min.cleanable.dirty.ratio": "0"},
    "dirty ratio 1": {"min.cleanable.dirty.ratio": "1"},
    "compaction lags equal": {"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "1000"},
}


@pytest.mark.parametrize("case", sorted(EDGE_VALUES))
def test_a_value_at_the_edge_of_its_range_is_taken(
    kafka_broker: Broker, kafka_topic: TopicFactory, case: str
) -> None:
    configs = EDGE_VALUES[case]
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        assert set_configs(client, topic, configs) == (NONE, None)
        entries = describe(client, TOPIC, topic, keys=list(configs))
        assert {name: e.value for name, e in entries.items()} == configs
        created = create_topic(client, f"edge-{uuid.uuid4().hex[:12]}", configs)
        assert created.error_code.value == NONE


def test_a_gzip_level_of_ten_is_invalid_config(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        code, message = set_configs(client, topic, {"compression.gzip.level": "10"})
    assert code == INVALID_CONFIG
    assert message is not None and "compression.gzip.level" in message


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_a_bad_value_is_invalid_config(
    kafka_broker: Broker, kafka_topic: TopicFactory, case: str
) -> None:
    configs = _configs(BAD_VALUES[case])
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        before = describe(client, TOPIC, topic)
        code, message = set_configs(client, topic, configs)
        assert code == INVALID_CONFIG
        named = "Tiered Storage" if case == "remote-storage" else next(iter(configs))
        assert message is not None and named in message
        after = describe(client, TOPIC, topic)
        assert {n: e.value for n, e in after.items()} == {n: e.value for n, e in before.items()}
        created = create_topic(client, f"bad-{uuid.uuid4().hex[:12]}", configs)
        assert created.error_code.value == INVALID_CONFIG


# --- DescribeConfigs synonyms ----------------------------------------------------------


@pytest.mark.kafka(message_max_bytes=2_000_000)
def test_a_broker_setting_away_from_kafkas_default_comes_before_the_default(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        entries = describe(client, TOPIC, topic, version=4, synonyms=True)
    assert synonyms_of(entries["max.message.bytes"]) == [
        ("message.max.bytes", "2000000", STATIC_BROKER_CONFIG),
        ("message.max.bytes", "1048588", DEFAULT_CONFIG),
    ]
    assert entries["max.message.bytes"].value == "2000000"


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_synonyms_are_the_topic_value_then_the_broker_config_it_falls_back_to(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic(
        configs={"retention.ms": "60000", "segment.bytes": "2000000", "cleanup.policy": "compact"}
    )
    with RawClient(kafka_broker.bootstrap_servers) as client:
        entries = describe(client, TOPIC, topic, version=version, synonyms=True)
        plain = describe(client, TOPIC, topic, version=version, synonyms=False)
    assert all(not e.synonyms for e in plain.values())
    expected = {
        # set on the topic; log.retention.ms has no default (log.retention.hours stands
        # in for it), so Kafka lists no broker synonym
        "retention.ms": [("retention.ms", "60000", DYNAMIC_TOPIC_CONFIG)],
        "segment.ms": [],
        "segment.bytes": [
            ("segment.bytes", "2000000", DYNAMIC_TOPIC_CONFIG),
            ("log.segment.bytes", "1073741824", DEFAULT_CONFIG),
        ],
        "cleanup.policy": [
            ("cleanup.policy", "compact", DYNAMIC_TOPIC_CONFIG),
            ("log.cleanup.policy", "delete", DEFAULT_CONFIG),
        ],
        # broker settings left at Kafka's defaults are reported as defaults alone
        "max.message.bytes": [("message.max.bytes", "1048588", DEFAULT_CONFIG)],
        "message.timestamp.type": [("log.message.timestamp.type", "CreateTime", DEFAULT_CONFIG)],
        "min.insync.replicas": [("min.insync.replicas", "1", DEFAULT_CONFIG)],
        "compression.type": [("compression.type", "producer", DEFAULT_CONFIG)],
        "min.cleanable.dirty.ratio": [("log.cleaner.min.cleanable.ratio", "0.5", DEFAULT_CONFIG)],
        "file.delete.delay.ms": [("log.segment.delete.delay.ms", "60000", DEFAULT_CONFIG)],
        "flush.messages": [("log.flush.interval.messages", LONG_MAX, DEFAULT_CONFIG)],
        "segment.index.bytes": [("log.index.size.max.bytes", "10485760", DEFAULT_CONFIG)],
        "message.timestamp.before.max.ms": [
            ("log.message.timestamp.before.max.ms", LONG_MAX, DEFAULT_CONFIG)
        ],
        # no broker config behind these
        "remote.storage.enable": [],
        "leader.replication.throttled.replicas": [],
    }
    assert {name: synonyms_of(entries[name]) for name in expected} == expected
    # the entry's own source stays that of the value in force
    assert int(entries["retention.ms"].config_source) == DYNAMIC_TOPIC_CONFIG
    assert int(entries["max.message.bytes"].config_source) == DEFAULT_CONFIG


def test_broker_resources_report_its_settings_with_kafka_types_and_sources(
    kafka_broker: Broker,
) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        entries = describe(client, BROKER, str(kafka_broker.node_id), synonyms=True)
    settings = kafka_broker.config.broker_configs()
    assert {name: entries[name].value for name in settings} == settings
    # settings away from Kafka's defaults are static ones; the others are the defaults
    sources = {name: int(entries[name].config_source) for name in settings}
    assert sources["group.initial.rebalance.delay.ms"] == STATIC_BROKER_CONFIG  # 0, not 3000
    assert sources["max.connections"] == STATIC_BROKER_CONFIG  # 1024
    assert sources["message.max.bytes"] == DEFAULT_CONFIG
    assert sources["default.replication.factor"] == DEFAULT_CONFIG
    # the broker configs behind topic configs are reported too, with Kafka's defaults
    assert entries["log.cleanup.policy"].value == "delete"
    assert entries["log.retention.hours"].value == "168"
    assert entries["log.retention.ms"].value is None  # Kafka's default is null
    # read-only unless it can change while the broker runs
    assert entries["num.partitions"].read_only
    assert not entries["message.max.bytes"].read_only
    assert not entries["max.connections"].read_only
    types = {name: int(e.config_type) for name, e in entries.items()}
    assert types["auto.create.topics.enable"] == BOOLEAN
    assert types["message.max.bytes"] == INT
    assert types["connections.max.idle.ms"] == LONG
    assert types["log.message.timestamp.type"] == STRING
    assert types["log.retention.hours"] == INT
    assert types["log.cleanup.policy"] == LIST


# --- Produce: message.timestamp.before.max.ms / after.max.ms -----------------------------


def batch_at(timestamps: Sequence[int]) -> bytes:
    """An uncompressed batch of one record per timestamp (the header's base timestamp is
    the first record's and its max timestamp the largest, as producers write them)."""
    base = timestamps[0]
    body = b""
    for delta, timestamp in enumerate(timestamps):
        record = (
            b"\x00"
            + zigzag_varint(timestamp - base)
            + zigzag_varint(delta)
            + zigzag_varint(-1)
            + zigzag_varint(5)
            + b"value"
            + zigzag_varint(0)
        )
        body += zigzag_varint(len(record)) + record
    count = len(timestamps)
    after_crc = (
        struct.pack(">hiqqqhii", 0, count - 1, base, max(timestamps), -1, -1, -1, count) + body
    )
    return (
        struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, records.crc32c(after_crc))
        + after_crc
    )


def produce(client: RawClient, topic: str, batch: bytes, version: int = 9) -> Any:
    """Produce one batch to partition 0; the partition's response."""
    response = client.request(PRODUCE, version, produce_request(topic, batch, version=version))
    return response.responses[0].partition_responses[0]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_a_record_older_than_before_max_ms_is_refused(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    limited = kafka_topic(configs={"message.timestamp.before.max.ms": str(HOUR_MS)})
    unlimited = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        old = now_ms() - 2 * HOUR_MS
        refused = produce(client, limited, batch_at([old]))
        assert refused.error_code.value == INVALID_TIMESTAMP
        assert [
            (e.batch_index, str(old) in (e.batch_index_error_message or ""))
            for e in refused.record_errors
        ] == [(0, True)]
        assert refused.base_offset == -1
        # a recent record is taken, and nothing of the refused batch was stored
        fresh = produce(client, limited, batch_at([now_ms() - 60_000]))
        assert (fresh.error_code.value, fresh.base_offset) == (NONE, 0)
        # the default (Long.MAX) takes the old record
        assert produce(client, unlimited, batch_at([old])).error_code.value == NONE


def test_a_record_further_ahead_than_after_max_ms_is_refused(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    limited = kafka_topic(configs={"message.timestamp.after.max.ms": str(HOUR_MS)})
    unlimited = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        ahead = now_ms() + 2 * HOUR_MS
        assert produce(client, limited, batch_at([ahead])).error_code.value == INVALID_TIMESTAMP
        # the old record is fine: only the future is limited
        assert produce(client, limited, batch_at([now_ms() - 100 * HOUR_MS])).error_code.value == (
            NONE
        )
        assert produce(client, unlimited, batch_at([ahead])).error_code.value == NONE


def test_every_record_is_checked_not_only_the_header_timestamps(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """The header has the first and the largest timestamp: an old record in the middle
    of a batch is found only by reading the records, as Kafka does."""
    topic = kafka_topic(configs={"message.timestamp.before.max.ms": str(HOUR_MS)})
    with RawClient(kafka_broker.bootstrap_servers) as client:
        now = now_ms()
        mixed = batch_at([now, now - 2 * HOUR_MS, now, now - 3 * HOUR_MS])
        response = produce(client, topic, mixed)
        assert response.error_code.value == INVALID_TIMESTAMP
        assert [e.batch_index for e in response.record_errors] == [1, 3]
        # a record without a timestamp (-1) is not checked
        assert produce(client, topic, batch_at([now, -1])).error_code.value == NONE


def test_the_deprecated_difference_max_ms_stands_in_for_both_limits(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(configs={"message.timestamp.difference.max.ms": str(HOUR_MS)})
    with RawClient(kafka_broker.bootstrap_servers) as client:
        now = now_ms()
        for timestamp in (now - 2 * HOUR_MS, now + 2 * HOUR_MS):
            assert produce(client, topic, batch_at([timestamp])).error_code.value == (
                INVALID_TIMESTAMP
            )
        assert produce(client, topic, batch_at([now])).error_code.value == NONE


def test_log_append_time_topics_are_not_checked(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(
        configs={
            "message.timestamp.type": "LogAppendTime",
            "message.timestamp.before.max.ms": str(HOUR_MS),
        }
    )
    with RawClient(kafka_broker.bootstrap_servers) as client:
        old = batch_at([now_ms() - 2 * HOUR_MS])
        assert produce(client, topic, old).error_code.value == NONE


@pytest.mark.parametrize("version", [3, 7, 8, 11])
def test_every_produce_version_gets_invalid_timestamp(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic(configs={"message.timestamp.before.max.ms": "0"})
    with RawClient(kafka_broker.bootstrap_servers) as client:
        response = produce(client, topic, batch_at([now_ms() - 60_000]), version)
    assert response.error_code.value == INVALID_TIMESTAMP
    if version >= 8:
        assert [e.batch_index for e in response.record_errors] == [0]
        assert response.error_message == (
            "One or more records have been rejected due to invalid timestamp"
        )


def test_a_limit_set_later_applies_to_the_next_batch(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic()
    with RawClient(kafka_broker.bootstrap_servers) as client:
        old = batch_at([now_ms() - 2 * HOUR_MS])
        assert produce(client, topic, old).error_code.value == NONE
        assert set_configs(client, topic, {"message.timestamp.before.max.ms": str(HOUR_MS)}) == (
            NONE,
            None,
        )
        assert produce(client, topic, old).error_code.value == INVALID_TIMESTAMP
