"""CreateTopics (key 19), versions 2-7.

num_partitions -1 takes the broker's num.partitions; replication factor -1 means 1 and
anything above the number of brokers is INVALID_REPLICATION_FACTOR. Unknown topic
configs are INVALID_CONFIG. validate_only checks without creating. Topics beyond what
one request may create (max_partitions_per_request, max_partitions_per_broker) get
POLICY_VIOLATION with a message saying which limit.
Not done: manual replica assignments (rejected with INVALID_REQUEST).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, CreationAllowance, error
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.topics import TopicError


@api(19, "CreateTopics", 2, 7)
def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.cluster
    results = []
    allowance = CreationAllowance(cluster.config.max_partitions_per_request)
    for wanted in request.topics:
        code, message = ErrorCode.none, None
        partitions = (
            wanted.num_partitions if wanted.num_partitions != -1 else cluster.config.num_partitions
        )
        replication = wanted.replication_factor if wanted.replication_factor != -1 else 1
        topic_id = None
        if wanted.assignments:
            code, message = (
                ErrorCode.invalid_request,
                "manual replica assignments are not supported",
            )
        elif not allowance.take(partitions):
            code, message = ErrorCode.policy_violation, allowance.refusal()
        else:
            try:
                topic = cluster.topics.create(
                    wanted.name,
                    partitions,
                    replication_factor=replication,
                    configs={c.name: c.value for c in wanted.configs},
                    validate_only=request.validate_only,
                )
                topic_id = topic.topic_id if topic else None
            except TopicError as exc:
                code, message = error(exc.error_code), exc.message
        results.append(
            ctx.make(
                "CreatableTopicResult",
                name=wanted.name,
                topic_id=topic_id,
                error_code=code,
                error_message=message,
                topic_config_error_code=0,
                num_partitions=partitions if code == ErrorCode.none else -1,
                replication_factor=replication if code == ErrorCode.none else -1,
                configs=None,
            )
        )
    return ctx.response(throttle_time=NO_THROTTLE, topics=tuple(results))
