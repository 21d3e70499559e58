"""AlterConfigs (key 33), versions 0-2.

Kafka's older, non-incremental way to change a topic's configs: the configs given
replace all the topic had, so the ones not named go back to their defaults. Each
resource is changed all or nothing; validate_only checks without changing. The new
values are in force at once and DescribeConfigs reports them as DYNAMIC_TOPIC_CONFIG.
As Kafka answers: an unknown config name or a value Kafka would refuse is
INVALID_CONFIG; a config named twice in a resource, a null value or a resource named
twice in the request is INVALID_REQUEST; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
Not done: broker and broker-logger configs (INVALID_REQUEST: this broker's settings are
fixed at start-up), alter-config policies.
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers.incremental_alter_configs import answer
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.topics import INVALID_REQUEST, TopicError, quoted


@api(33, "AlterConfigs", 0, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    def alter(resource: Any) -> None:
        configs = {c.name: c.value for c in resource.configs}
        nulls = sorted(name for name, value in configs.items() if value is None)
        if nulls:
            raise TopicError(INVALID_REQUEST, f"null value for config {quoted(nulls[0])}")
        ctx.cluster.topics.alter_configs(
            resource.resource_name, configs, validate_only=request.validate_only
        )

    return answer(ctx, request, alter)
