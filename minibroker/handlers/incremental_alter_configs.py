"""IncrementalAlterConfigs (key 44), versions 0-1.

Changes a topic's configs, each by its operation: SET a value, DELETE (back to the
default), APPEND items to or SUBTRACT them from a list config (cleanup.policy). Each
resource is changed all or nothing; validate_only checks without changing. The new
values are in force at once (Produce reads max.message.bytes per batch) and DescribeConfigs
reports them as DYNAMIC_TOPIC_CONFIG, deleted ones as DEFAULT_CONFIG. As Kafka answers:
an unknown config name, a value Kafka would refuse, or APPEND/SUBTRACT on a config that
is not a list is INVALID_CONFIG; a config named twice in a resource, a null value
(except to DELETE), an unknown operation or a resource named twice in the request is
INVALID_REQUEST; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION. DELETE of a config the
topic does not set, known or not, succeeds and changes nothing, as in Kafka.
Not done: broker and broker-logger configs (INVALID_REQUEST: this broker's settings are
fixed at start-up), alter-config policies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.topics import TopicError, quoted

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8


def refusal(resource: Any, duplicated: set[tuple[int, str]]) -> str | None:
    """Why a resource of an (Incremental)AlterConfigs request is refused with
    INVALID_REQUEST before its configs are looked at, or None."""
    if (resource.resource_type, resource.resource_name) in duplicated:
        return "each resource may appear at most once in a request"
    if resource.resource_type in (BROKER, BROKER_LOGGER):
        kind = "broker" if resource.resource_type == BROKER else "broker logger"
        return (
            f"{kind} configs cannot be changed on this broker: its settings are fixed "
            "when it starts"
        )
    if resource.resource_type != TOPIC:
        return f"resource type {resource.resource_type} is not served (only topics, type 2)"
    if resource.resource_name == "":
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


def answer(ctx: RequestContext, request: Any, alter: Callable[[Any], None]) -> Any:
    """The response to an (Incremental)AlterConfigs request: each resource refused (see
    `refusal`) or changed by `alter`, which raises TopicError to refuse it."""
    duplicated = duplicated_resources(request.resources)
    results = []
    for resource in request.resources:
        code, message = ErrorCode.none, None
        refused = refusal(resource, duplicated)
        if refused is not None:
            code, message = ErrorCode.invalid_request, refused
        else:
            try:
                alter(resource)
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
    return ctx.response(throttle_time=NO_THROTTLE, responses=tuple(results))


@api(44, "IncrementalAlterConfigs", 0, 1)
def handle(ctx: RequestContext, request: Any) -> Any:
    def alter(resource: Any) -> None:
        ctx.cluster.topics.incremental_alter_configs(
            resource.resource_name,
            [(c.name, c.config_operation, c.value) for c in resource.configs],
            validate_only=request.validate_only,
        )

    return answer(ctx, request, alter)
