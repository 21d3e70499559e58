"""DescribeConfigs (key 32), versions 0-4 (0 through protocol/legacy.py: is_default
instead of a config source).

Topics: every topic config this broker knows, with the value in force and whether it was
set on the topic (DYNAMIC_TOPIC_CONFIG) or is the default (DEFAULT_CONFIG). The broker:
the settings it runs with (STATIC_BROKER_CONFIG). Resource name "" or this broker's id.
Not done: synonyms (empty), documentation (null), broker loggers (INVALID_REQUEST).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import (
    NO_THROTTLE,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_TOPIC,
    SOURCE_STATIC_BROKER,
)
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.topics import quoted

TOPIC = 2
BROKER = 4
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_LIST = 1, 2, 3, 5, 7

_TYPES = {
    "cleanup.policy": TYPE_LIST,
    "compression.type": TYPE_STRING,
    "max.message.bytes": TYPE_INT,
    "message.timestamp.type": TYPE_STRING,
    "min.insync.replicas": TYPE_INT,
    "unclean.leader.election.enable": TYPE_BOOLEAN,
    "auto.create.topics.enable": TYPE_BOOLEAN,
    "log.message.timestamp.type": TYPE_STRING,
}


def _type_of(name: str, value: str) -> int:
    if name in _TYPES:
        return _TYPES[name]
    return TYPE_LONG if value.lstrip("-").isdigit() else TYPE_STRING


def _entries(ctx: RequestContext, values: dict[str, tuple[str, int]], keys: Any) -> tuple[Any, ...]:
    wanted = set(keys) if keys is not None else None
    return tuple(
        ctx.make(
            "DescribeConfigsResourceResult",
            name=name,
            value=value,
            read_only=source != SOURCE_DYNAMIC_TOPIC and source != SOURCE_DEFAULT,
            config_source=source,
            is_default=source == SOURCE_DEFAULT,
            is_sensitive=False,
            synonyms=(),
            config_type=_type_of(name, value),
            documentation=None,
        )
        for name, (value, source) in sorted(values.items())
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
            values = {
                name: (value, SOURCE_DYNAMIC_TOPIC if set_on_topic else SOURCE_DEFAULT)
                for name, (value, set_on_topic) in topic.effective_configs().items()
            }
            results.append(
                _result(
                    ctx,
                    resource,
                    ErrorCode.none,
                    None,
                    _entries(ctx, values, resource.configuration_keys),
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
            values = {
                name: (value, SOURCE_STATIC_BROKER)
                for name, value in ctx.cluster.config.broker_configs().items()
            }
            results.append(
                _result(
                    ctx,
                    resource,
                    ErrorCode.none,
                    None,
                    _entries(ctx, values, resource.configuration_keys),
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
