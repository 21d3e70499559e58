"""IncrementalAlterConfigs (key 44), versions 0-1.

Changes a topic's configs, or the broker's (BROKER resources: the id of the node the
request is sent to, whose own values are kept apart from the other nodes', or "" for the
cluster-wide defaults; see state/broker_configs.py), each by its operation: SET
a value, DELETE (back to the default), APPEND items to or SUBTRACT them from a list
config (cleanup.policy, log.cleanup.policy). Each resource is changed all or nothing;
validate_only checks without changing. The new values are in force at once (Produce
reads max.message.bytes per batch; a topic without its own value follows the broker's)
and DescribeConfigs reports them. As Kafka answers, for topics: an unknown config name,
a value Kafka would refuse, or APPEND/SUBTRACT on a config that is not a list is
INVALID_CONFIG; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION; DELETE of a config the
topic does not set, known or not, succeeds and changes nothing. For the broker: another
broker's id, a config fixed at start-up or a bad value is INVALID_REQUEST; an unknown
name is kept and changes nothing. For both: a config named twice in a resource, a null
value (except to DELETE), an unknown operation or a resource named twice in the request
is INVALID_REQUEST.
Groups (type 32, Kafka 4): the group configs of state/group_configs.py, SET and DELETE.
Not done: broker-logger configs (INVALID_REQUEST), alter-config policies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._acls import config_refusal
from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import Operation
from minibroker.state.topic_errors import TopicError, quoted

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32


def refusal(
    resource: Any, duplicated: set[tuple[int, str]], served: tuple[int, ...] = (TOPIC, BROKER)
) -> str | None:
    """Why a resource of an (Incremental)AlterConfigs request is refused with
    INVALID_REQUEST before its configs are looked at, or None; `served`: the resource
    types the API changes."""
    if (resource.resource_type, resource.resource_name) in duplicated:
        return "each resource may appear at most once in a request"
    if resource.resource_type == BROKER_LOGGER:
        return "broker logger configs cannot be changed on this broker"
    if resource.resource_type not in served:
        return (
            f"resource type {resource.resource_type} is not served "
            "(only topics, type 2, brokers, type 4, and groups, type 32)"
            if GROUP in served
            else f"resource type {resource.resource_type} is not served "
            "(only topics, type 2, and brokers, type 4)"
        )
    if resource.resource_type == GROUP and resource.resource_name == "":
        return "a group id is required"
    if resource.resource_type == TOPIC and resource.resource_name == "":
        return "a topic name is required: default topic configs cannot be changed"
    repeated = sorted(
        name for name, count in Counter(c.name for c in resource.configs).items() if count > 1
    )
    if repeated:
        return f"config {quoted(repeated[0])} is named more than once"
    return None


def duplicated_resources(resources: Any) -> set[tuple[int, str]]:
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {key for key, count in counts.items() if count > 1}


def answer(
    ctx: RequestContext,
    request: Any,
    alter: Callable[[Any], bool],
    served: tuple[int, ...] = (TOPIC, BROKER),
) -> Any:
    """The response to an (Incremental)AlterConfigs request: each resource refused (see
    `refusal`) or changed by `alter`, which raises TopicError to refuse it and returns
    whether the broker configs changed."""
    broker_configs_changed = False
    duplicated = duplicated_resources(request.resources)
    results = []
    for resource in request.resources:
        code, message = ErrorCode.none, None
        refused = refusal(resource, duplicated, served)
        denied = config_refusal(ctx, resource, Operation.ALTER_CONFIGS)
        if denied is not None:
            code, message = denied, "Authorization failed."
        elif refused is not None:
            code, message = ErrorCode.invalid_request, refused
        else:
            try:
                broker_configs_changed |= alter(resource)
            except TopicError as exc:
                code, message = error(exc.error_code), exc.message
        results.append(
            ctx.make(
                "AlterConfigsResourceResponse",
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    if broker_configs_changed:
        ctx.cluster.broker_configs_changed()
    return ctx.response(throttle_time=NO_THROTTLE, responses=tuple(results))


@api(44, "IncrementalAlterConfigs", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    def alter(resource: Any) -> bool:
        operations = [(c.name, c.config_operation, c.value) for c in resource.configs]
        if resource.resource_type == BROKER:
            return ctx.cluster.broker_configs.alter(
                resource.resource_name,
                operations,
                node_id=ctx.node_id,
                validate_only=request.validate_only,
            )
        if resource.resource_type == GROUP:
            ctx.cluster.group_configs.alter(
                resource.resource_name, operations, validate_only=request.validate_only
            )
            return False
        ctx.cluster.topics.incremental_alter_configs(
            resource.resource_name, operations, validate_only=request.validate_only
        )
        return False

    return answer(ctx, request, alter, (TOPIC, BROKER, GROUP))
