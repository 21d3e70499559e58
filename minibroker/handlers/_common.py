"""Small helpers shared by handlers."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

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
