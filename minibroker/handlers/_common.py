"""Small helpers shared by handlers."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.state.topics import Partition, Topic

NO_THROTTLE = datetime.timedelta(0)
# Kafka's ConfigSource values (DescribeConfigs, CreateTopics v5+ results).
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


def error(code: int) -> ErrorCode:
    return ErrorCode(code)


class CreationAllowance:
    """What one request may still create: `max_partitions_per_request` partitions, so no
    single request holds up every other client while it builds them."""

    def __init__(self, partitions: int) -> None:
        self.limit = partitions
        self.remaining = partitions

    def take(self, partitions: int) -> bool:
        if partitions > self.remaining:
            return False
        self.remaining -= max(partitions, 0)
        return True

    def refusal(self) -> str:
        return (
            f"this request would create more than {self.limit} partitions "
            "(max_partitions_per_request); send it in smaller parts"
        )


def millis(delta: datetime.timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def led_partition(ctx: Any, topic: Topic | None, index: int) -> tuple[Partition | None, ErrorCode]:
    """Partition `index` of `topic` if this node leads it, else why not: the lookup of
    every per-partition API (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER)."""
    if topic is None or not 0 <= index < len(topic.partitions):
        return None, ErrorCode.unknown_topic_or_partition
    if ctx.screened:
        injected = ctx.injected_error(topic.name, index)
        if injected is not None:
            return None, injected
    partition = topic.partitions[index]
    if partition.leader != ctx.node_id:
        return None, ErrorCode.not_leader_or_follower
    return partition, ErrorCode.none
