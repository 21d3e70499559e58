"""DeleteTopics (key 20), versions 0-6 (0 through protocol/legacy.py).

v6 names topics by name or id. Deleting drops the partition logs at once.
Internal topics cannot be deleted (INVALID_REQUEST).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers.registry import RequestContext, api
from minibroker.state.acl import Operation, ResourceType
from minibroker.state.topic_errors import TopicError, quoted


@api(20, "DeleteTopics", 0, 6)
def handle(ctx: RequestContext, request: Any) -> Any:
    topics = ctx.cluster.topics
    wanted: list[tuple[str | None, Any]] = (
        [(t.name, t.topic_id) for t in request.topics]
        if hasattr(request, "topics")
        else [(name, None) for name in request.topic_names]
    )
    results = []
    for name, topic_id in wanted:
        code, message = ErrorCode.none, None
        if name is None and topic_id is not None:
            found = topics.by_id(topic_id)
            name = found.name if found else None
            if found is None:
                code, message = ErrorCode.unknown_topic_id, f"no topic with id {topic_id}"
        if (
            code == ErrorCode.none
            and name is not None
            and not ctx.allows(Operation.DELETE, ResourceType.TOPIC, name)
        ):
            code, message = ErrorCode.topic_authorization_failed, "Authorization failed."
        if code == ErrorCode.none and name is not None:
            existing = topics.get(name)
            if existing is not None and existing.internal:
                code, message = ErrorCode.invalid_request, f"{quoted(name)} is an internal topic"
            else:
                try:
                    deleted = topics.delete(name)
                    topic_id = deleted.topic_id
                    ctx.cluster.groups.remove_topic(name)
                except TopicError as exc:
                    code, message = error(exc.error_code), exc.message
        results.append(
            ctx.make(
                "DeletableTopicResult",
                name=name,
                topic_id=topic_id,
                error_code=code,
                error_message=message,
            )
        )
    return ctx.response(throttle_time=NO_THROTTLE, responses=tuple(results))
