"""CreatePartitions (key 37), versions 0-3.

Grows a topic; the new count must be larger than the current one (INVALID_PARTITIONS).
Growth beyond what one request may create (max_partitions_per_request) or the broker may
hold (max_partitions_per_broker) is POLICY_VIOLATION.
Manual assignments place the new partitions on the brokers they name, one replica list
per new partition, as many replicas as the topic's partitions have; Kafka's
INVALID_REPLICA_ASSIGNMENT otherwise (an unknown broker, a broker named twice, a list
too long or short, a missing list).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, CreationAllowance, error
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import Operation, ResourceType
from minibroker.state.topic_errors import TopicError


@api(37, "CreatePartitions", 0, 3)
def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    allowance = CreationAllowance(ctx.cluster.config.max_partitions_per_request)
    for wanted in request.topics:
        code, message = ErrorCode.none, None
        existing = ctx.cluster.topics.get(wanted.name)
        growth = wanted.count - len(existing.partitions) if existing is not None else 0
        if not ctx.allows(Operation.ALTER, ResourceType.TOPIC, wanted.name):
            code, message = ErrorCode.topic_authorization_failed, "Authorization failed."
        elif not allowance.take(growth):
            code, message = ErrorCode.policy_violation, allowance.refusal()
        else:
            try:
                ctx.cluster.topics.add_partitions(
                    wanted.name,
                    wanted.count,
                    assignments=None
                    if wanted.assignments is None
                    else [a.broker_ids for a in wanted.assignments],
                    validate_only=request.validate_only,
                )
            except TopicError as exc:
                code, message = error(exc.error_code), exc.message
        results.append(
            ctx.make(
                "CreatePartitionsTopicResult",
                name=wanted.name,
                error_code=code,
                error_message=message,
            )
        )
    return ctx.response(throttle_time=NO_THROTTLE, results=tuple(results))
