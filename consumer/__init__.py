"""A consumer library on aiokafka: assignors, assignment explanations, and a `Consumer`
that runs handlers per partition in parallel with bounded buffers (docs/consumer.md)."""

from minibroker.consumer.assign import (
    PreviousAssignment,
    assign,
    range_assign,
    roundrobin_assign,
    sticky_assign,
)
from minibroker.consumer.assignors import RangeAssignor, RoundRobinAssignor, StickyAssignor
from minibroker.consumer.engine import Consumer, HandlerError, RetryPolicy
from minibroker.consumer.explain import Explanation, Member, explain_assignment
from minibroker.consumer.metrics import ConsumerSnapshot, PartitionSnapshot

__all__ = [
    "Consumer",
    "ConsumerSnapshot",
    "Explanation",
    "HandlerError",
    "Member",
    "PartitionSnapshot",
    "PreviousAssignment",
    "RangeAssignor",
    "RetryPolicy",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assign",
    "explain_assignment",
    "range_assign",
    "roundrobin_assign",
    "sticky_assign",
]
