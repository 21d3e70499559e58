"""DescribeConfigs (key 32), versions 0-4 (0 through protocol/legacy.py: is_default
instead of a config source).

Topics: every topic config Kafka 3.9 has (state/topics.py), with the value in force and
where it comes from: set on the topic (DYNAMIC_TOPIC_CONFIG), else the broker config
behind it (state/broker_configs.py: set for this broker, DYNAMIC_BROKER_CONFIG, or
cluster-wide, DYNAMIC_DEFAULT_BROKER_CONFIG, while it runs; a start-up setting away from
Kafka's default, STATIC_BROKER_CONFIG; else DEFAULT_CONFIG), Kafka's config type and,
when asked (v1+ include_synonyms), the synonyms Kafka reports in Kafka's order.
The broker, by the id of the node asked (clients send it there): every broker config it
knows with a value, read_only unless it can change while the broker runs, that node's own
values first; by "": the cluster-wide values set.
Groups (type 32, Kafka 4), by group id: every group config (state/group_configs.py),
GROUP_CONFIG when set for the group, else DEFAULT_CONFIG with the broker's value.
Not done: documentation (null), broker loggers (INVALID_REQUEST).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import config_refusal
from minibroker.handlers._common import NO_THROTTLE
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import Operation
from minibroker.state.broker_configs import (
    BROKER_CONFIG_TOPICS,
    CLUSTER_DEFAULT,
    DYNAMIC_BROKER_CONFIGS,
    SCALED_BROKER_CONFIGS,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_TOPIC,
    ConfigValue,
)
from minibroker.state.group_configs import (
    GROUP_CONFIG_TYPES,
    GROUP_RESOURCE,
    SOURCE_GROUP_CONFIG,
)
from minibroker.state.topic_configs import TOPIC_CONFIG_TYPES
from minibroker.state.topic_errors import SHOWN_NAME_CHARS, quoted
from minibroker.state.topics import Topic, TopicRegistry

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

# The types (KafkaConfig) of the broker configs not behind a topic config.
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
    "transaction.max.timeout.ms": TYPE_INT,
    "transactional.id.expiration.ms": TYPE_INT,
    "default.replication.factor": TYPE_INT,
    "log.message.timestamp.type": TYPE_STRING,
}


def _broker_type(name: str) -> int:
    """Kafka's ConfigType of broker config `name`."""
    if name in _BROKER_TYPES:
        return _BROKER_TYPES[name]
    if name in SCALED_BROKER_CONFIGS:
        return TYPE_INT
    topic_name = BROKER_CONFIG_TOPICS.get(name)
    if topic_name is not None:
        return _TYPE_NUMBERS[TOPIC_CONFIG_TYPES[topic_name]]
    return TYPE_STRING


def _entry(
    ctx: RequestContext,
    name: str,
    described: ConfigValue,
    config_type: int,
    read_only: bool,
    include_synonyms: bool,
) -> Any:
    return ctx.make(
        "DescribeConfigsResourceResult",
        name=name,
        value=described.value,
        read_only=read_only,
        config_source=described.source,
        is_default=described.source == SOURCE_DEFAULT,
        is_sensitive=False,
        synonyms=tuple(
            ctx.make("DescribeConfigsSynonym", name=s_name, value=s_value, source=s_source)
            for s_name, s_value, s_source in described.synonyms
        )
        if include_synonyms
        else (),
        config_type=config_type,
        documentation=None,
    )


def topic_config(topic: Topic, name: str, defaults: TopicRegistry) -> ConfigValue:
    """Topic config `name` as DescribeConfigs reports it: the topic's own value first."""
    behind = defaults.default_synonyms.get(name, ())
    if name in topic.configs:
        own = topic.configs[name]
        return ConfigValue(own, SOURCE_DYNAMIC_TOPIC, ((name, own, SOURCE_DYNAMIC_TOPIC), *behind))
    return ConfigValue(
        defaults.defaults[name], defaults.default_sources.get(name, SOURCE_DEFAULT), behind
    )


def _topic_entries(
    ctx: RequestContext, topic: Topic, keys: Any, include_synonyms: bool
) -> tuple[Any, ...]:
    wanted = set(keys) if keys is not None else None
    registry = ctx.cluster.topics
    return tuple(
        _entry(
            ctx,
            name,
            topic_config(topic, name, registry),
            _TYPE_NUMBERS[TOPIC_CONFIG_TYPES[name]],
            False,
            include_synonyms,
        )
        for name in sorted(TOPIC_CONFIG_TYPES)
        if wanted is None or name in wanted
    )


def _broker_entries(
    ctx: RequestContext, keys: Any, node_id: int | None, include_synonyms: bool
) -> tuple[Any, ...]:
    wanted = set(keys) if keys is not None else None
    configs = ctx.cluster.broker_configs
    return tuple(
        _entry(
            ctx,
            name,
            configs.describe(name, node_id),
            _broker_type(name),
            name not in DYNAMIC_BROKER_CONFIGS,
            include_synonyms,
        )
        for name in configs.described_names(node_id)
        if wanted is None or name in wanted
    )


def _group_entries(ctx: RequestContext, resource: Any, include_synonyms: bool) -> tuple[Any, ...]:
    wanted = set(resource.configuration_keys) if resource.configuration_keys is not None else None
    entries = []
    for name, value, own in ctx.cluster.group_configs.describe(resource.resource_name):
        if wanted is not None and name not in wanted:
            continue
        source = SOURCE_GROUP_CONFIG if own else SOURCE_DEFAULT
        described = ConfigValue(value, source, ((name, value, source),) if own else ())
        config_type = _TYPE_NUMBERS[GROUP_CONFIG_TYPES[name]]
        entries.append(_entry(ctx, name, described, config_type, False, include_synonyms))
    return tuple(entries)


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
    # v0 has no include_synonyms (and always got none here).
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    for resource in request.resources:
        denied = config_refusal(ctx, resource, Operation.DESCRIBE_CONFIGS)
        if denied is not None:
            results.append(_result(ctx, resource, denied, "Authorization failed."))
            continue
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
            results.append(
                _result(
                    ctx,
                    resource,
                    ErrorCode.none,
                    None,
                    _topic_entries(ctx, topic, resource.configuration_keys, include_synonyms),
                )
            )
        elif resource.resource_type == GROUP_RESOURCE and resource.resource_name:
            results.append(
                _result(
                    ctx,
                    resource,
                    ErrorCode.none,
                    None,
                    _group_entries(ctx, resource, include_synonyms),
                )
            )
        elif resource.resource_type == BROKER:
            if resource.resource_name not in (CLUSTER_DEFAULT, str(ctx.node_id)):
                results.append(
                    _result(
                        ctx,
                        resource,
                        ErrorCode.invalid_request,
                        f"Unexpected broker id, expected {ctx.node_id} or empty string, "
                        f"but received {resource.resource_name[:SHOWN_NAME_CHARS]}",
                    )
                )
                continue
            results.append(
                _result(
                    ctx,
                    resource,
                    ErrorCode.none,
                    None,
                    _broker_entries(
                        ctx,
                        resource.configuration_keys,
                        None if resource.resource_name == CLUSTER_DEFAULT else ctx.node_id,
                        include_synonyms,
                    ),
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
