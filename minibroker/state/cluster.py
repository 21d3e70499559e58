"""Everything the brokers of one cluster share: nodes, topics, producer ids, clock."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from minibroker.config import BrokerConfig
from minibroker.state.broker_configs import BrokerConfigs
from minibroker.state.clock import BrokerClock, Clock
from minibroker.state.groups import GroupCoordinator, partition_for
from minibroker.state.producers import ProducerIdAllocator
from minibroker.state.topics import TopicRegistry

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
GROUP_KEY = 0
TRANSACTION_KEY = 1
# What a waiting group request (or the group timer) waits on; a waiting fetch waits on
# the partition logs it reads.
GROUP_EVENTS = "group-events"


@dataclass(slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class ClusterState:
    def __init__(self, config: BrokerConfig | None = None, clock: Clock | None = None) -> None:
        self.config = config or BrokerConfig()
        self.clock = clock if isinstance(clock, BrokerClock) else BrokerClock(clock)
        self.nodes: dict[int, Node] = {}
        self.broker_configs = BrokerConfigs(self.config.broker_configs())
        self.topics = TopicRegistry(
            lambda: list(self.nodes) or [0], self.config.max_partitions_per_broker
        )
        self.broker_configs_changed()
        self.producer_ids = ProducerIdAllocator()
        self.groups = GroupCoordinator(self.config, self._partition_exists)
        # Called with what changed (a PartitionLog after an append, GROUP_EVENTS after a
        # group change) so that the requests waiting on it can re-check; the asyncio layer
        # subscribes here.
        self.on_append: list[Callable[[Hashable], None]] = []

    @property
    def cluster_id(self) -> str:
        return self.config.cluster_id

    @property
    def controller_id(self) -> int:
        return min(self.nodes) if self.nodes else 0

    def add_node(self, node: Node) -> None:
        self.nodes[node.node_id] = node

    def broker_configs_changed(self) -> None:
        """Topic configs' defaults follow the broker configs (after a dynamic change)."""
        defaults = self.broker_configs.topic_defaults()
        self.topics.set_defaults(
            {name: d.value for name, d in defaults.items() if d.value is not None},
            {name: d.source for name, d in defaults.items()},
            {name: d.synonyms for name, d in defaults.items()},
        )

    @property
    def max_connections(self) -> int:
        """Connections each node accepts (max.connections, changeable while running)."""
        return int(self.broker_configs.value("max.connections") or self.config.max_connections)

    def notify_append(self, key: Hashable = GROUP_EVENTS) -> None:
        """`key` changed: new data in a partition log, or a group (the default)."""
        for callback in self.on_append:
            callback(key)

    def _partition_exists(self, topic: str, partition: int) -> bool:
        found = self.topics.get(topic)
        return found is not None and 0 <= partition < len(found.partitions)

    def coordinator_for(self, key: str, key_type: int = GROUP_KEY) -> int:
        """Node that coordinates a group (or transactional id): the leader of the
        internal topic's partition abs(hashCode(key)) % partitions, created on first use."""
        name = OFFSETS_TOPIC if key_type == GROUP_KEY else TRANSACTION_TOPIC
        topic = self.topics.get(name)
        if topic is None:
            topic = self.topics.create(
                name,
                self.config.offsets_topic_partitions,
                configs={"cleanup.policy": "compact"},
                internal=True,
            )
            assert topic is not None
        return topic.partitions[partition_for(key, len(topic.partitions))].leader
