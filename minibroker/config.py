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
    # queued.max.request.bytes, per node: bytes held in partially received frames and in
    # received requests not yet answered. Past it the broker stops reading from every
    # connection until answers drain (Kafka: unbounded by default).
    queued_max_request_bytes: int = 256 * 1024 * 1024
    # connections.max.idle.ms: a connection with no request in this time is closed.
    connections_max_idle_ms: int = 600_000
    # A frame whose bytes stop arriving midway is given up after this long and its
    # connection closed, so half-sent requests cannot hold connection slots forever.
    partial_request_timeout_ms: int = 30_000
    # fetch.max.bytes: the most a single Fetch response carries, whatever it asks for.
    fetch_max_bytes: int = 57_671_680
    # The most partitions that may exist per broker node (internal topics included);
    # CreateTopics / CreatePartitions / auto-creation beyond it get POLICY_VIOLATION.
    max_partitions_per_broker: int = 100_000
    # The most topics and partitions one request may create, so that no single request
    # holds up every other client while it builds them.
    max_partitions_per_request: int = 10_000
    # Upper bound on what one compressed record batch may expand to when the broker
    # decompresses it (ListOffsets by timestamp); a larger expansion is refused.
    max_decompressed_batch_bytes: int = 64 * 1024 * 1024
    offsets_topic_partitions: int = 50  # offsets.topic.num.partitions
    # offsets.retention.minutes: an empty group and its committed offsets are removed
    # after it has been empty this long (Kafka: 7 days).
    offsets_retention_minutes: float = 10_080
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
            "offsets.retention.minutes": str(self.offsets_retention_minutes),
            "queued.max.request.bytes": str(self.queued_max_request_bytes),
            "connections.max.idle.ms": str(self.connections_max_idle_ms),
            "fetch.max.bytes": str(self.fetch_max_bytes),
            "group.initial.rebalance.delay.ms": str(self.group_initial_rebalance_delay_ms),
            "group.min.session.timeout.ms": str(self.group_min_session_timeout_ms),
            "group.max.session.timeout.ms": str(self.group_max_session_timeout_ms),
            "default.replication.factor": "1",
            "log.message.timestamp.type": "CreateTime",
        }
