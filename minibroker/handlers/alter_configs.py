"""AlterConfigs (key 33), versions 0-2.

Kafka's older, non-incremental way to change a topic's or the broker's configs (BROKER
resources: the id of the node the request is sent to, whose own values are kept apart
from the other nodes', or "" for the cluster-wide defaults; see state/broker_configs.py):
the configs given replace all the resource had, so the ones not named go back to their
defaults. Each resource is changed all or nothing;
validate_only checks without changing. The new values are in force at once and
DescribeConfigs reports them. As Kafka answers: for topics, an unknown config name or a
value Kafka would refuse is INVALID_CONFIG and an unknown topic
UNKNOWN_TOPIC_OR_PARTITION; for the broker, another broker's id, a config fixed at
start-up or a bad value is INVALID_REQUEST; a config named twice in a resource, a null
value or a resource named twice in the request is INVALID_REQUEST.
Not done: broker-logger configs (INVALID_REQUEST), alter-config policies.
"""

from __future__ import annotations

from typing import Any

from minibroker.handlers.incremental_alter_configs import BROKER, answer
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.topic_errors import INVALID_REQUEST, TopicError, quoted


@api(33, "AlterConfigs", 0, 2)
def handle(ctx: RequestContext, request: Any) -> Any:
    def alter(resource: Any) -> bool:
        configs = {c.name: c.value for c in resource.configs}
        nulls = sorted(name for name, value in configs.items() if value is None)
        if nulls:
            raise TopicError(INVALID_REQUEST, f"null value for config {quoted(nulls[0])}")
        if resource.resource_type == BROKER:
            return ctx.cluster.broker_configs.replace(
                resource.resource_name,
                configs,
                node_id=ctx.node_id,
                validate_only=request.validate_only,
            )
        ctx.cluster.topics.alter_configs(
            resource.resource_name, configs, validate_only=request.validate_only
        )
        return False

    return answer(ctx, request, alter)
