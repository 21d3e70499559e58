"""Broker settings. Names mirror Kafka's broker configs where one exists."""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.protocol.framing import DEFAULT_MAX_FRAME_BYTES

DEFAULT_MESSAGE_MAX_BYTES = 1_048_588  # Kafka's message.max.bytes


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 0
    advertised_host: str | None = None
    cluster_id: str = "minibroker-cluster"
    auto_create_topics: bool = True  # auto.create.topics.enable
    num_partitions: int = 1  # num.partitions, for auto-created topics and -1 requests
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES  # default max.message.bytes of topics
    # socket.request.max.bytes: a request frame declaring more closes its connection.
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    # max.connections, per node: a connection beyond it is closed as soon as it is
    # accepted, before any request is read; connections already open are unaffected.
    max_connections: int = 1024
    offsets_topic_partitions: int = 50  # offsets.topic.num.partitions
    group_initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 100  # group.min.session.timeout.ms (Kafka: 6000)
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms

    def broker_configs(self) -> dict[str, str]:
        """What DescribeConfigs reports for the broker: the values in force."""
        return {
            "auto.create.topics.enable": str(self.auto_create_topics).lower(),
            "num.partitions": str(self.num_partitions),
            "message.max.bytes": str(self.message_max_bytes),
            "socket.request.max.bytes": str(self.max_frame_bytes),
            "max.connections": str(self.max_connections),
            "offsets.topic.num.partitions": str(self.offsets_topic_partitions),
            "group.initial.rebalance.delay.ms": str(self.group_initial_rebalance_delay_ms),
            "group.min.session.timeout.ms": str(self.group_min_session_timeout_ms),
            "group.max.session.timeout.ms": str(self.group_max_session_timeout_ms),
            "default.replication.factor": "1",
            "log.message.timestamp.type": "CreateTime",
        }
