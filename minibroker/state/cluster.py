"""Everything the brokers of one cluster share: nodes, topics, producer ids, clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from minibroker.config import BrokerConfig
from minibroker.state.clock import Clock, SystemClock
from minibroker.state.producers import ProducerIdAllocator
from minibroker.state.topics import TopicRegistry


@dataclass(slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class ClusterState:
    def __init__(self, config: BrokerConfig | None = None, clock: Clock | None = None) -> None:
        self.config = config or BrokerConfig()
        self.clock: Clock = clock or SystemClock()
        self.nodes: dict[int, Node] = {}
        self.topics = TopicRegistry(lambda: list(self.nodes) or [0])
        self.producer_ids = ProducerIdAllocator()
        # Called after every append so that waiting fetches can re-check; the asyncio
        # layer subscribes here.
        self.on_append: list[Callable[[], None]] = []

    @property
    def cluster_id(self) -> str:
        return self.config.cluster_id

    @property
    def controller_id(self) -> int:
        return min(self.nodes) if self.nodes else 0

    def add_node(self, node: Node) -> None:
        self.nodes[node.node_id] = node

    def notify_append(self) -> None:
        for callback in self.on_append:
            callback()
