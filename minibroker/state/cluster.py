"""Everything the brokers of one cluster share: nodes, topics, producer ids, clock."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from minibroker.config import BrokerConfig
from minibroker.faults import Faults
from minibroker.state.acl import Acls
from minibroker.state.broker_configs import BrokerConfigs
from minibroker.state.clock import BrokerClock, Clock
from minibroker.state.consumer_groups import ConsumerGroupCoordinator
from minibroker.state.credentials import Credentials
from minibroker.state.group_configs import GroupConfigs
from minibroker.state.groups import GroupCoordinator, partition_for
from minibroker.state.log import PartitionLog
from minibroker.state.producers import ProducerIdAllocator
from minibroker.state.quotas import ClientQuotas
from minibroker.state.replicas import ReplicaControl
from minibroker.state.share_groups import ShareGroupCoordinator
from minibroker.state.share_partitions import SharePartitionStore, group_settings
from minibroker.state.topics import Partition, Topic, TopicRegistry
from minibroker.state.transactions import TransactionCoordinator

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
GROUP_KEY = 0
TRANSACTION_KEY = 1
# What changes are announced as (`ClusterState.announce`), for whoever waits on them: a
# waiting fetch waits on the partition logs it reads (the PartitionLog itself), a
# waiting JoinGroup or SyncGroup on its group's key, the housekeeping on moved deadlines.
DEADLINES_MOVED = "deadlines-moved"  # a coordinator's deadlines may have moved earlier
CLOCK_ADVANCED = "clock-advanced"  # the clock jumped (BrokerClock.advance)


def group_key(group_id: str) -> tuple[str, str]:
    """What a request waiting on a group waits on."""
    return ("group", group_id)


class Storage(Protocol):
    """What request handling asks of a data directory."""

    @property
    def dirty(self) -> bool:
        """Something was written and not yet synced."""
        ...

    def request_done(self) -> None:
        """A request that wrote is about to be answered."""

    @property
    def log_dir(self) -> str:
        """Where the partition logs are (DescribeLogDirs reports it)."""
        ...

    def disk_usage(self) -> tuple[int, int]:
        """(total, usable) bytes of the volume holding the logs."""
        ...

    def storage_error(self, what: str, exc: OSError) -> None:
        """A write or sync the disk refused, answered with an error: logged, rate-limited."""


@dataclass(slots=True)
class Node:
    """A broker node as clients are told to reach it: `host`/`port` on its first
    listener, and each listener's advertised address by listener name."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)

    def endpoint(self, listener_name: str) -> tuple[str, int]:
        return self.endpoints.get(listener_name, (self.host, self.port))


class ClusterState:
    def __init__(self, config: BrokerConfig | None = None, clock: Clock | None = None) -> None:
        self.config = config or BrokerConfig()
        self.clock = clock if isinstance(clock, BrokerClock) else BrokerClock(clock)
        self.nodes: dict[int, Node] = {}
        self.credentials = Credentials()  # who may sign in over SASL
        self.client_quotas = ClientQuotas()  # AlterClientQuotas's, enforced per request
        self.acls = Acls(
            enabled=self.config.acls_enabled,
            super_users=self.config.super_user_list(),
            allow_if_no_acl=self.config.allow_everyone_if_no_acl_found,
            max_acls=self.config.max_acls,
        )
        self.broker_configs = BrokerConfigs(self.config.broker_configs())
        # Every node of the cluster, stopped ones too (replica lists may name them).
        self.known_nodes: set[int] = set()
        self.topics = TopicRegistry(
            lambda: list(self.nodes) or [0],
            self.config.max_partitions_per_broker,
            known_ids=lambda: (self.known_nodes | set(self.nodes)) or {0},
        )
        self.replicas = ReplicaControl(
            self.topics,
            lambda: list(self.nodes) or [0],
            self._lead,
            self._replicas_changed,
        )
        self.broker_configs_changed()
        self.producer_ids = ProducerIdAllocator()
        # Fault rules every node's dispatcher checks (minibroker/faults.py).
        self.faults = Faults()
        # Groups moved to another coordinator than their offsets partition's leader.
        self.coordinator_overrides: dict[str, int] = {}
        self.groups = GroupCoordinator(self.config, self._partition_exists)
        self.groups.on_change = self._group_changed
        # Groups of Kafka 4's consumer protocol; their offsets are kept by `groups`.
        self.group_configs = GroupConfigs(self.config)
        self.consumer_groups = ConsumerGroupCoordinator(
            self.config,
            self.groups,
            self._topic_info,
            self.topics.names,
            self._topic_name,
            self.group_configs,
        )
        self.topics.on_change.append(self.consumer_groups.topics_changed)
        self.consumer_groups.on_change = self._group_changed
        # Share groups (KIP-932): members in `share_groups`, records in `share_partitions`.
        self.share_partitions = SharePartitionStore()
        self.share_partitions.on_change = self.announce
        self.share_partitions.log_of = self._partition_log
        self.share_partitions.settings_of = functools.partial(
            group_settings, self.group_configs.value
        )
        self.share_partitions.wall_ms = self.clock.wall_ms
        self._share_topic_names = set(self.topics.names())
        self.topics.on_change.append(self._share_topics_changed)
        self.share_groups = ShareGroupCoordinator(
            self._topic_info,
            self.group_configs,
            max_size=lambda: self.config.group_share_max_size,
            other_type=self._other_group_type,
            # Looked up at each call: the store may be replaced (a data directory loaded).
            member_gone=lambda group, member, now: self.share_partitions.member_gone(
                group, member, now
            ),
            subscribed=self._share_partitions_subscribed,
        )
        self.topics.on_change.append(self.share_groups.topics_changed)
        self.share_groups.on_change = self._group_changed
        self.transactions = TransactionCoordinator(
            self.config, self.producer_ids, self._write_markers, self.clock.wall_ms
        )
        self.transactions.on_change = self._deadlines_moved
        # Called with what changed (see DEADLINES_MOVED) so that whatever waits on it can
        # look again; the asyncio layer subscribes here.
        self.on_change: list[Callable[[Hashable], None]] = []
        # The data directory, when the cluster keeps one (minibroker/storage).
        self.storage: Storage | None = None

    @property
    def cluster_id(self) -> str:
        return self.config.cluster_id

    @property
    def controller_id(self) -> int:
        return min(self.nodes) if self.nodes else 0

    def add_node(self, node: Node) -> None:
        """A node runs (again): its replicas are back in sync."""
        self.nodes[node.node_id] = node
        self.known_nodes.add(node.node_id)
        self.replicas.nodes_changed()

    def broker_configs_changed(self) -> None:
        """Topic configs' defaults follow the broker configs (after a dynamic change)."""
        defaults = self.broker_configs.topic_defaults(self.single_node)
        self.topics.set_defaults(
            {name: d.value for name, d in defaults.items() if d.value is not None},
            {name: d.source for name, d in defaults.items()},
            {name: d.synonyms for name, d in defaults.items()},
        )

    @property
    def max_connections(self) -> int:
        """Connections each node accepts (max.connections, changeable while running)."""
        value = self.broker_configs.value("max.connections", self.single_node)
        return int(value or self.config.max_connections)

    @property
    def single_node(self) -> int | None:
        """The id of the cluster's only node; None when it has several (or none yet):
        whose own broker configs are in force cluster-wide (state/broker_configs.py)."""
        return next(iter(self.nodes)) if len(self.nodes) == 1 else None

    def announce(self, key: Hashable) -> None:
        """`key` changed: new data in a partition log, a group, the deadlines, the clock."""
        for callback in self.on_change:
            callback(key)

    def _group_changed(self, group_id: str) -> None:
        self.announce(group_key(group_id))
        self.announce(DEADLINES_MOVED)

    def _deadlines_moved(self) -> None:
        self.announce(DEADLINES_MOVED)

    def _write_markers(
        self,
        partitions: Iterable[tuple[str, int]],
        groups: Iterable[str],
        producer_id: int,
        epoch: int,
        commit: bool,
    ) -> None:
        """End a producer's transaction: a marker in each of its partitions (a deleted
        topic's are skipped), its groups' pending offsets committed or dropped."""
        now_ms = self.clock.wall_ms()
        for topic_name, index in partitions:
            topic = self.topics.get(topic_name)
            if topic is None or index >= len(topic.partitions):
                continue
            partition = topic.partitions[index]
            partition.log.append_marker(
                producer_id, epoch, commit=commit, coordinator_epoch=0, now_ms=now_ms
            )
            partition.producers.marker_written(producer_id, epoch, now_ms)
            self.announce(partition.log)
        now = self.clock.monotonic()
        for group_id in groups:
            self.groups.transaction_ended(now, group_id, producer_id, commit)
        self.announce(DEADLINES_MOVED)

    def _partition_log(self, topic_name: str, index: int) -> PartitionLog | None:
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        self._share_topic_names.add(topic_name)  # (topics read from a data directory)
        return topic.partitions[index].log

    def _share_topics_changed(self) -> None:
        """A deleted topic's share partitions go with it (the topics known here: those
        of every change, and those share partitions read)."""
        existing = set(self.topics.names())
        gone, self._share_topic_names = self._share_topic_names - existing, existing
        for topic_name in gone:
            self.share_partitions.topic_deleted(topic_name)

    def _topic_info(self, name: str) -> tuple[uuid.UUID, int] | None:
        topic = self.topics.get(name)
        return None if topic is None else (topic.topic_id, len(topic.partitions))

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.topics.by_id(topic_id)
        return None if topic is None else topic.name

    def group_type(self, group_id: str) -> str | None:
        """ "consumer" (Kafka 4's protocol), "share", "classic", or None when there is no
        such group."""
        if group_id in self.consumer_groups.groups:
            return "consumer"
        if group_id in self.share_groups.groups:
            return "share"
        return "classic" if group_id in self.groups.groups else None

    def _share_partitions_subscribed(self, group_id: str, parts: list[tuple[str, int]]) -> None:
        """A share group subscribes to these partitions: those without share state start
        at the log end now when the group reads from the latest offset (Kafka
        initializes them on subscription, not at the first fetch)."""
        if self.group_configs.value(group_id, "share.auto.offset.reset") != "latest":
            return  # earliest and by_duration start the same way at the first fetch
        started = self.share_partitions.initialized(group_id)
        for topic, index in parts:
            log = self._partition_log(topic, index)
            if (topic, index) not in started and log is not None:
                self.share_partitions.alter_start_offset(group_id, topic, index, log.high_watermark)

    def _other_group_type(self, group_id: str) -> str | None:
        """A group id held by a classic or consumer group (share groups refuse it)."""
        if group_id in self.consumer_groups.groups:
            return "consumer"
        return "classic" if group_id in self.groups.groups else None

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
        if key_type == GROUP_KEY and key in self.coordinator_overrides:
            return self.coordinator_overrides[key]
        return topic.partitions[partition_for(key, len(topic.partitions))].leader

    # --- cluster operations (tests move leaders and coordinators, stop nodes) ---

    def move_leader(self, topic_name: str, index: int, node_id: int) -> None:
        """Partition `index` of `topic_name` is led by `node_id` from now on, at the next
        leader epoch; its old leader answers NOT_LEADER_OR_FOLLOWER. A node that holds no
        replica of it joins its replicas (at the end: the preferred leader stays)."""
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= index < len(topic.partitions):
            raise ValueError(f"no partition {topic_name}-{index}")
        if node_id not in self.nodes:
            raise ValueError(f"no running broker {node_id} (running: {sorted(self.nodes)})")
        partition = topic.partitions[index]
        if node_id not in partition.replicas:
            partition.replicas.append(node_id)
            partition.isr.append(node_id)
            self._replicas_changed(topic)
        self._lead(topic, partition, node_id)

    def _lead(self, topic: Topic, partition: Partition, node_id: int, *, keep: bool = True) -> None:
        """`node_id` leads the partition from now on, at the next leader epoch (kept in
        the data directory at once unless `keep` is false: the caller keeps them all)."""
        if partition.leader != node_id:
            partition.leader = node_id
            partition.leader_epoch += 1
            # Batches appended from now on carry the new epoch, as Kafka's leader stamps them.
            partition.log.leader_epoch = partition.leader_epoch
            topic.encoded.clear()
            if keep:
                self.topics.replicas_changed()
            self.announce(partition.log)  # waiting fetches learn it at once

    def _replicas_changed(self, topic: Topic) -> None:
        topic.encoded.clear()
        self.topics.replicas_changed()
        self.announce(DEADLINES_MOVED)  # a reassignment's completion may be due

    def move_coordinator(self, group_id: str, node_id: int) -> None:
        """Group `group_id` is coordinated by `node_id` from now on (its state moves with
        it); the old coordinator answers NOT_COORDINATOR until clients look it up again."""
        if node_id not in self.nodes:
            raise ValueError(f"no running broker {node_id} (running: {sorted(self.nodes)})")
        self.coordinator_overrides[group_id] = node_id
        self.announce(group_key(group_id))

    def node_stopped(self, node_id: int) -> None:
        """A node went down: it leaves the metadata and the ISRs, and the partitions it
        led fail over to the next replica in sync, else (no other replica) to a running
        node, which joins the replicas (the data is kept); its groups move too."""
        self.nodes.pop(node_id, None)
        self.replicas.nodes_changed()
        running = sorted(self.nodes)
        if not running:
            return  # nothing to fail over to: the partitions wait for it
        for group, owner in list(self.coordinator_overrides.items()):
            if owner == node_id:
                del self.coordinator_overrides[group]
        turn = 0
        for topic in self.topics:
            for partition in topic.partitions:
                if partition.leader != node_id:
                    continue
                if partition.isr:
                    self._lead(topic, partition, partition.isr[0], keep=False)
                else:  # no other replica: a running node joins its replicas
                    fallback = running[turn % len(running)]
                    partition.replicas.append(fallback)
                    partition.isr.append(fallback)
                    self._lead(topic, partition, fallback, keep=False)
                    turn += 1
        self.topics.replicas_changed()  # the new leaders and epochs, kept once
        self.announce(DEADLINES_MOVED)
