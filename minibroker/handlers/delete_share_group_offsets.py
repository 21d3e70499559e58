"""DeleteShareGroupOffsets (key 92), version 0: forget where a share group's topics start.

The group must exist (GROUP_ID_NOT_FOUND) and have no members (NON_EMPTY_GROUP). Each
topic named loses the share state of all its partitions
(`SharePartitionStore.delete_partitions`): the next fetch starts them by
share.auto.offset.reset again. A topic with no share state in the group is
UNKNOWN_TOPIC_OR_PARTITION ("There is no offset information to delete."), one that does
not exist UNKNOWN_TOPIC_OR_PARTITION too. DELETE on the group is needed
(GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED). A
group-level error is answered with the error alone, as Kafka does.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.handlers._common import NO_THROTTLE, error
from minibroker.handlers._groups import is_coordinator
from minibroker.handlers.registry import RequestContext, api
from minibroker.state import share_groups as rules
from minibroker.state.acl import Operation, ResourceType

NO_TOPIC_ID = uuid.UUID(int=0)
NOTHING_TO_DELETE = "There is no offset information to delete."
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


@api(92, "DeleteShareGroupOffsets", 0, 0)
def handle(ctx: RequestContext, request: Any) -> Any:
    def refuse(code: int, message: str) -> Any:
        return ctx.response(
            throttle_time=NO_THROTTLE, error_code=error(code), error_message=message, responses=()
        )

    group_id = request.group_id
    if not ctx.allows(Operation.DELETE, ResourceType.GROUP, group_id):
        return refuse(int(ErrorCode.group_authorization_failed), "Group authorization failed.")
    if not is_coordinator(ctx, group_id):
        return refuse(int(ErrorCode.not_coordinator), "This is not the correct coordinator.")
    code, message = ctx.cluster.share_groups.offsets_changeable(group_id, create=False)
    if code != rules.NONE:
        return refuse(code, message or "")
    store = ctx.cluster.share_partitions
    started: dict[str, list[int]] = {}
    for topic_name, index in store.initialized(group_id):
        started.setdefault(topic_name, []).append(index)
    responses = []
    for wanted in request.topics:
        name = wanted.topic_name
        topic = ctx.cluster.topics.get(name)
        topic_id = topic.topic_id if topic is not None else NO_TOPIC_ID
        if not ctx.allows(Operation.READ, ResourceType.TOPIC, name):
            code, message, topic_id = int(ErrorCode.topic_authorization_failed), None, NO_TOPIC_ID
        elif topic is None:
            code, message = rules.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_PARTITION_MESSAGE
        elif name not in started:
            code, message = rules.UNKNOWN_TOPIC_OR_PARTITION, NOTHING_TO_DELETE
        else:
            store.delete_partitions(group_id, [(name, index) for index in started.pop(name)])
            code, message = rules.NONE, None
        responses.append(
            ctx.make(
                "DeleteShareGroupOffsetsResponseTopic",
                topic_name=name,
                topic_id=topic_id,
                error_code=error(code),
                error_message=message,
            )
        )
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(responses),
    )
