"""AlterShareGroupOffsets (key 91), version 0: move a share group's start offsets.

The group must have no members (NON_EMPTY_GROUP, "The group is not empty."); a group id
not yet used becomes an empty share group, as Kafka does; one of a classic or consumer
group is GROUP_ID_NOT_FOUND. Each partition asked for then starts at the offset given
(`SharePartitionStore.alter_start_offset`: clamped to the log, in-flight records
dropped); a topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION. READ on
the group is needed (GROUP_AUTHORIZATION_FAILED, for the whole request), READ on each
topic (TOPIC_AUTHORIZATION_FAILED for its partitions). A group-level error is answered
with the error alone, as Kafka does.
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
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


@api(91, "AlterShareGroupOffsets", 0, 0)
def handle(ctx: RequestContext, request: Any) -> Any:
    def refuse(code: int, message: str) -> Any:
        return ctx.response(
            throttle_time=NO_THROTTLE, error_code=error(code), error_message=message, responses=()
        )

    group_id = request.group_id
    if not ctx.allows(Operation.READ, ResourceType.GROUP, group_id):
        return refuse(int(ErrorCode.group_authorization_failed), "Group authorization failed.")
    if not is_coordinator(ctx, group_id):
        return refuse(int(ErrorCode.not_coordinator), "This is not the correct coordinator.")
    code, message = ctx.cluster.share_groups.offsets_changeable(group_id, create=True)
    if code != rules.NONE:
        return refuse(code, message or "")
    store = ctx.cluster.share_partitions
    responses = []
    for wanted in request.topics:
        topic = ctx.cluster.topics.get(wanted.topic_name)
        allowed = ctx.allows(Operation.READ, ResourceType.TOPIC, wanted.topic_name)
        partitions = []
        for p in wanted.partitions:
            if not allowed:
                code, message = int(ErrorCode.topic_authorization_failed), None
            elif topic is None or not 0 <= p.partition_index < len(topic.partitions):
                code, message = rules.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_PARTITION_MESSAGE
            else:
                store.alter_start_offset(
                    group_id, wanted.topic_name, p.partition_index, p.start_offset
                )
                code, message = rules.NONE, None
            partitions.append(
                ctx.make(
                    "AlterShareGroupOffsetsResponsePartition",
                    partition_index=p.partition_index,
                    error_code=error(code),
                    error_message=message,
                )
            )
        responses.append(
            ctx.make(
                "AlterShareGroupOffsetsResponseTopic",
                topic_name=wanted.topic_name,
                topic_id=topic.topic_id if topic is not None and allowed else NO_TOPIC_ID,
                partitions=tuple(partitions),
            )
        )
    return ctx.response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(responses),
    )
