"""DescribeConfigs (key 32), versions 0-4 (0 through protocol/legacy.py: is_default
instead of a config source).

Topics: every topic config Kafka 3.9 has (state/topics.py), with the value in force,
whether it was set on the topic (DYNAMIC_TOPIC_CONFIG) or is the default
(DEFAULT_CONFIG), Kafka's config type and, when asked (v1+ include_synonyms), the
synonyms Kafka reports: the topic's own value if it sets one, then the broker config it
falls back to (this broker's setting as STATIC_BROKER_CONFIG where it differs from Kafka's
default, then Kafka's default as DEFAULT_CONFIG). The broker: the settings it runs with
(STATIC_BROKER_CONFIG). Resource name "" or this broker's id.
Not done: broker synonyms (empty), documentation (null), broker loggers (INVALID_REQUEST).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import (
    NO_THROTTLE,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_TOPIC,
    SOURCE_STATIC_BROKER,
)
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.topics import LONG_MAX, TOPIC_CONFIG_TYPES, Topic, quoted

TOPIC = 2
BROKER = 4
# Kafka's ConfigType (DescribeConfigsResponse.ConfigType).
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG = 1, 2, 3, 4, 5
TYPE_DOUBLE, TYPE_LIST, TYPE_CLASS, TYPE_PASSWORD = 6, 7, 8, 9
_TYPE_NUMBERS = {
    "boolean": TYPE_BOOLEAN,
    "string": TYPE_STRING,
    "int": TYPE_INT,
    "long": TYPE_LONG,
    "double": TYPE_DOUBLE,
    "list": TYPE_LIST,
}

# The types (KafkaConfig) of the broker settings BrokerConfig.broker_configs() reports.
_BROKER_TYPES = {
    "auto.create.topics.enable": TYPE_BOOLEAN,
    "num.partitions": TYPE_INT,
    "message.max.bytes": TYPE_INT,
    "socket.request.max.bytes": TYPE_INT,
    "max.connections": TYPE_INT,
    "offsets.topic.num.partitions": TYPE_INT,
    "offsets.retention.minutes": TYPE_INT,
    "queued.max.request.bytes": TYPE_LONG,
    "connections.max.idle.ms": TYPE_LONG,
    "fetch.max.bytes": TYPE_INT,
    "group.initial.rebalance.delay.ms": TYPE_INT,
    "group.min.session.timeout.ms": TYPE_INT,
    "group.max.session.timeout.ms": TYPE_INT,
    "default.replication.factor": TYPE_INT,
    "log.message.timestamp.type": TYPE_STRING,
}

# Kafka 3.9's broker config each topic config falls back to (ServerTopicConfigSynonyms:
# the first, highest-priority one) and that broker config's Kafka default: None where it
# has none (log.retention.ms and the like default to null and defer to e.g.
# log.retention.hours, so Kafka lists no synonym for them). Topic configs not named here
# have no broker config (remote.storage.enable, remote.log.*.disable, the throttled
# replica lists).
TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[str, str | None]] = {
    "cleanup.policy": ("log.cleanup.policy", "delete"),
    "compression.type": ("compression.type", "producer"),
    "compression.gzip.level": ("compression.gzip.level", "-1"),
    "compression.lz4.level": ("compression.lz4.level", "9"),
    "compression.zstd.level": ("compression.zstd.level", "3"),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", "86400000"),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms", "60000"),
    "flush.messages": ("log.flush.interval.messages", LONG_MAX),
    "flush.ms": ("log.flush.interval.ms", None),
    "index.interval.bytes": ("log.index.interval.bytes", "4096"),
    "local.retention.bytes": ("log.local.retention.bytes", "-2"),
    "local.retention.ms": ("log.local.retention.ms", "-2"),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", LONG_MAX),
    "max.message.bytes": ("message.max.bytes", "1048588"),
    "message.downconversion.enable": ("log.message.downconversion.enable", "true"),
    "message.format.version": ("log.message.format.version", "3.0-IV1"),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms", LONG_MAX),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms", LONG_MAX),
    "message.timestamp.difference.max.ms": (
        "log.message.timestamp.difference.max.ms",
        LONG_MAX,
    ),
    "message.timestamp.type": ("log.message.timestamp.type", "CreateTime"),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", "0.5"),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", "0"),
    "min.insync.replicas": ("min.insync.replicas", "1"),
    "preallocate": ("log.preallocate", "false"),
    "retention.bytes": ("log.retention.bytes", "-1"),
    "retention.ms": ("log.retention.ms", None),
    "segment.bytes": ("log.segment.bytes", "1073741824"),
    "segment.index.bytes": ("log.index.size.max.bytes", "10485760"),
    "segment.jitter.ms": ("log.roll.jitter.ms", None),
    "segment.ms": ("log.roll.ms", None),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", "false"),
}

# (name, value, source) of one synonym.
Synonym = tuple[str, str | None, int]


def topic_synonyms(
    name: str, topic_value: str | None, broker_configs: Mapping[str, str]
) -> list[Synonym]:
    """Kafka's synonyms of topic config `name`, highest priority first: the topic's own
    value (None: it sets none), this broker's setting of the broker config behind it,
    and that broker config's default."""
    synonyms: list[Synonym] = []
    if topic_value is not None:
        synonyms.append((name, topic_value, SOURCE_DYNAMIC_TOPIC))
    if name in TOPIC_CONFIG_SYNONYMS:
        broker_name, default = TOPIC_CONFIG_SYNONYMS[name]
        # Kafka lists the broker synonyms from the primary one on (ConfigHelper.
        # configSynonyms): its static setting, then its default. A primary with neither
        # (log.retention.ms) leaves the list empty, even where a lesser synonym
        # (log.retention.hours) has a default.
        # A setting equal to Kafka's default is reported as the default alone, as Kafka
        # reports a broker config its server.properties leaves out.
        if broker_name in broker_configs and broker_configs[broker_name] != default:
            synonyms.append((broker_name, broker_configs[broker_name], SOURCE_STATIC_BROKER))
        if default is not None:
            synonyms.append((broker_name, default, SOURCE_DEFAULT))
    return synonyms


def _entry(
    ctx: RequestContext,
    name: str,
    value: str,
    source: int,
    config_type: int,
    synonyms: list[Synonym],
) -> Any:
    return ctx.make(
        "DescribeConfigsResourceResult",
        name=name,
        value=value,
        read_only=source != SOURCE_DYNAMIC_TOPIC and source != SOURCE_DEFAULT,
        config_source=source,
        is_default=source == SOURCE_DEFAULT,
        is_sensitive=False,
        synonyms=tuple(
            ctx.make("DescribeConfigsSynonym", name=s_name, value=s_value, source=s_source)
            for s_name, s_value, s_source in synonyms
        ),
        config_type=config_type,
        documentation=None,
    )


def _topic_entries(
    ctx: RequestContext, topic: Topic, keys: Any, include_synonyms: bool
) -> tuple[Any, ...]:
    wanted = set(keys) if keys is not None else None
    broker_configs = ctx.cluster.config.broker_configs() if include_synonyms else {}
    return tuple(
        _entry(
            ctx,
            name,
            value,
            SOURCE_DYNAMIC_TOPIC if set_on_topic else SOURCE_DEFAULT,
            _TYPE_NUMBERS[TOPIC_CONFIG_TYPES[name]],
            topic_synonyms(name, value if set_on_topic else None, broker_configs)
            if include_synonyms
            else [],
        )
        for name, (value, set_on_topic) in sorted(topic.effective_configs().items())
        if wanted is None or name in wanted
    )


def _broker_entries(ctx: RequestContext, keys: Any) -> tuple[Any, ...]:
    wanted = set(keys) if keys is not None else None
    return tuple(
        _entry(
            ctx,
            name,
            value,
            SOURCE_STATIC_BROKER,
            _BROKER_TYPES.get(name, TYPE_STRING),
            [],
        )
        for name, value in sorted(ctx.cluster.config.broker_configs().items())
        if wanted is None or name in wanted
    )


def _result(
    ctx: RequestContext,
    resource: Any,
    code: ErrorCode,
    message: str | None,
    configs: tuple[Any, ...] = (),
) -> Any:
    return ctx.make(
        "DescribeConfigsResult",
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


@api(32, "DescribeConfigs", 0, 4)
def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    for resource in request.resources:
        if resource.resource_type == TOPIC:
            topic = ctx.cluster.topics.get(resource.resource_name)
            if topic is None:
                results.append(
                    _result(
                        ctx,
                        resource,
                        ErrorCode.unknown_topic_or_partition,
                        f"topic {quoted(resource.resource_name)} does not exist",
                    )
                )
                continue
            # v0 has no include_synonyms (and always got none here).
            include_synonyms = bool(getattr(request, "include_synonyms", False))
            results.append(
                _result(
                    ctx,
                    resource,
                    ErrorCode.none,
                    None,
                    _topic_entries(ctx, topic, resource.configuration_keys, include_synonyms),
                )
            )
        elif resource.resource_type == BROKER:
            if resource.resource_name not in ("", str(ctx.node_id)):
                results.append(
                    _result(
                        ctx,
                        resource,
                        ErrorCode.invalid_request,
                        f"this is broker {ctx.node_id}, not {quoted(resource.resource_name)}",
                    )
                )
                continue
            results.append(
                _result(
                    ctx,
                    resource,
                    ErrorCode.none,
                    None,
                    _broker_entries(ctx, resource.configuration_keys),
                )
            )
        else:
            results.append(
                _result(
                    ctx,
                    resource,
                    ErrorCode.invalid_request,
                    f"resource type {resource.resource_type} is not served",
                )
            )
    return ctx.response(throttle_time=NO_THROTTLE, results=tuple(results))
