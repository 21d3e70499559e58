"""Topics, partitions and their leaders: the metadata every API consults."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from minibroker.state.log import MemoryLog, PartitionLog
from minibroker.state.producers import PartitionProducers
from minibroker.state.topic_configs import (
    LONG_RANGE,
    TOPIC_CONFIG_DEFAULTS,
    apply_config_operations,
    effective_configs,
    validate_topic_configs,
)
from minibroker.state.topic_errors import (
    INVALID_PARTITIONS,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    INVALID_REQUEST,
    INVALID_TOPIC_EXCEPTION,
    POLICY_VIOLATION,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_OR_PARTITION,
    TopicError,
    quoted,
)

LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass(slots=True)
class Partition:
    index: int
    leader: int
    log: PartitionLog = field(default_factory=MemoryLog)
    producers: PartitionProducers = field(default_factory=PartitionProducers)
    leader_epoch: int = 0
    # Compaction (state/compaction.py): the offset the last cleaning reached, Kafka's
    # cleaner checkpoint; what lies after it is dirty.
    cleaned_offset: int = 0
    # The nodes holding a copy, the preferred leader first (one log in this process
    # serves them all), and those of them in sync: the replicas on running nodes.
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    # A reassignment under way (state/replicas.py): the replicas it adds and removes.
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.replicas:
            self.replicas = [self.leader]
        if not self.isr:
            self.isr = list(self.replicas)

    @property
    def offline_replicas(self) -> list[int]:
        """Replicas on stopped nodes (out of the ISR: every running one is in sync)."""
        return [r for r in self.replicas if r not in self.isr]


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition]
    configs: dict[str, str]
    internal: bool = False
    # Encodings of this topic's Metadata entry, kept by the Metadata handler and keyed
    # by what they depend on, so a cluster with many topics is described quickly.
    encoded: dict[Any, bytes] = field(default_factory=dict, repr=False, compare=False)
    # What a config the topic does not set falls back to: the broker's defaults.
    defaults: Mapping[str, str] = field(
        default_factory=lambda: TOPIC_CONFIG_DEFAULTS, repr=False, compare=False
    )

    def config(self, name: str) -> str:
        return self.configs.get(name, self.defaults[name])

    def effective_configs(self) -> dict[str, tuple[str, bool]]:
        return effective_configs(self.configs, self.defaults)

    @property
    def max_message_bytes(self) -> int:
        return int(self.config("max.message.bytes"))

    @property
    def compacted(self) -> bool:
        """Whether cleanup.policy includes compact (state/compaction.py)."""
        return "compact" in (p.strip() for p in self.config("cleanup.policy").split(","))

    @property
    def log_append_time(self) -> bool:
        return self.config("message.timestamp.type") == "LogAppendTime"

    def timestamp_bounds(self) -> tuple[int, int] | None:
        """(before, after): how far a record's CreateTime may be behind or ahead of the
        broker's clock, from message.timestamp.before.max.ms and .after.max.ms (each,
        while at its default, falling back to the deprecated
        message.timestamp.difference.max.ms, as Kafka 3.9 does). None when there is no
        limit (all at Long.MAX, the default) or the topic stamps LogAppendTime."""
        configs = self.configs
        if (
            "message.timestamp.before.max.ms" not in configs
            and "message.timestamp.after.max.ms" not in configs
            and "message.timestamp.difference.max.ms" not in configs
        ):
            return None
        unlimited = LONG_RANGE[1]
        difference = int(self.config("message.timestamp.difference.max.ms"))
        before = int(self.config("message.timestamp.before.max.ms"))
        after = int(self.config("message.timestamp.after.max.ms"))
        before = difference if before == unlimited else before
        after = difference if after == unlimited else after
        if (before == unlimited and after == unlimited) or self.log_append_time:
            return None
        return before, after


def validate_topic_name(name: str) -> None:
    # fullmatch: with match(), "$" would also accept a trailing newline.
    if name in (".", "..") or not LEGAL_TOPIC_NAME.fullmatch(name):
        raise TopicError(
            INVALID_TOPIC_EXCEPTION,
            f"topic name {quoted(name)} is illegal: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'",
        )


class TopicRegistry:
    """All topics of the cluster; leaders are spread over the brokers round robin, each
    partition's other replicas on the nodes after its leader's."""

    def __init__(
        self,
        broker_ids: Callable[[], list[int]],
        max_partitions_per_broker: int = 100_000,
        defaults: Mapping[str, str] | None = None,
        known_ids: Callable[[], Collection[int]] | None = None,
    ) -> None:
        # Topic configs' defaults on this broker: Kafka's, but for those the broker's
        # configs give (max.message.bytes from message.max.bytes). One dict shared by
        # every topic, changed in place (set_defaults) when the broker configs change.
        self.defaults: dict[str, str] = dict(TOPIC_CONFIG_DEFAULTS)
        # The ConfigSource of each default (Kafka's DEFAULT_CONFIG unless a broker config
        # gives it) and Kafka's synonyms behind it.
        self.default_sources: dict[str, int] = {}
        self.default_synonyms: dict[str, tuple[tuple[str, str | None, int], ...]] = {}
        self.defaults_key: tuple[object, ...] = ()
        # The running nodes, and every node of the cluster (stopped ones too): replica
        # lists may name any of them.
        self._broker_ids = broker_ids
        self._known_ids = known_ids or broker_ids
        self.max_partitions_per_broker = max_partitions_per_broker
        self.partition_count = 0
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._leader_cursor = 0
        self.on_change: list[Callable[[], None]] = []
        # Called when a partition's replicas, ISR or leader changed (a data directory
        # keeps the replica lists).
        self.on_replicas_change: list[Callable[[], None]] = []
        # Makes each new partition's log (a data directory puts a segment store behind it).
        self.new_log: Callable[[Topic, int], PartitionLog] = lambda topic, index: MemoryLog()
        self.set_defaults(defaults or {})

    def set_defaults(
        self,
        values: Mapping[str, str],
        sources: Mapping[str, int] | None = None,
        synonyms: Mapping[str, tuple[tuple[str, str | None, int], ...]] | None = None,
    ) -> None:
        """Topic configs' defaults from now on (each topic not setting one uses it)."""
        self.defaults.update(values)
        self.default_sources = dict(sources or {})
        self.default_synonyms = dict(synonyms or {})
        self.defaults_key = (
            tuple(sorted(self.defaults.items())),
            tuple(sorted(self.default_sources.items())),
        )

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self._topics.values()))

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def names(self) -> list[str]:
        return sorted(self._topics)

    def next_leader(self) -> int:
        ids = sorted(self._broker_ids())
        leader = ids[self._leader_cursor % len(ids)]
        self._leader_cursor += 1
        return leader

    def place(self, replication_factor: int) -> list[int]:
        """Replicas for a new partition: leaders round robin over the running nodes, the
        other replicas on the nodes after the leader's."""
        ids = sorted(self._broker_ids())
        start = ids.index(self.next_leader())
        return [ids[(start + k) % len(ids)] for k in range(replication_factor)]

    def new_partition(self, topic: Topic, index: int, replicas: Sequence[int]) -> Partition:
        """Partition `index` of `topic` on `replicas`, led by the first running one."""
        running = set(self._broker_ids())
        isr = [r for r in replicas if r in running]
        leader = isr[0] if isr else replicas[0]
        return Partition(
            index=index,
            leader=leader,
            log=self.new_log(topic, index),
            replicas=list(replicas),
            isr=isr,
        )

    def _check_replication_factor(self, replication_factor: int) -> None:
        broker_count = len(self._broker_ids())
        if replication_factor <= 0 or replication_factor > broker_count:
            raise TopicError(
                INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is not within 1..{broker_count} "
                "(the number of brokers)",
            )

    def check_replicas(
        self,
        replicas: Sequence[int],
        replication_factor: int | None,
        index: int,
        *,
        require_running: bool = True,
    ) -> None:
        """Kafka's checks of a replica list given by a client (INVALID_REPLICA_ASSIGNMENT):
        not empty, known brokers, each once, as many as the other partitions' (when
        `replication_factor` is given), at least one of them running (for a new
        partition)."""
        if not replicas:
            raise TopicError(
                INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.",
            )
        known = self._known_ids()
        previous = None
        for broker in sorted(replicas):
            if broker not in known:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker}, but no such "
                    "broker is registered.",
                )
            if broker == previous:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker} more than once.",
                )
            previous = broker
        if replication_factor is not None and len(replicas) != replication_factor:
            raise TopicError(
                INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes a partition with {len(replicas)} "
                "replica(s), but this is not consistent with previous partitions, which have "
                f"{replication_factor} replica(s).",
            )
        running = set(self._broker_ids())
        if require_running and not any(r in running for r in replicas):
            raise TopicError(
                INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition "
                f"{index} are fenced or in controlled shutdown.",
            )

    def _manual_assignments(
        self,
        partitions: int,
        replication_factor: int,
        assignments: Sequence[tuple[int, Sequence[int]]],
    ) -> list[Sequence[int]]:
        """The replica list of each partition of a topic created with manual assignments
        (CreateTopics), checked as Kafka checks them."""
        if replication_factor != -1:
            raise TopicError(
                INVALID_REQUEST,
                "A manual partition assignment was specified, but replication factor was "
                "not set to -1.",
            )
        if partitions != -1:
            raise TopicError(
                INVALID_REQUEST,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        placed: dict[int, Sequence[int]] = {}
        factor: int | None = None
        for index, replicas in assignments:
            if index in placed:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"Found multiple manual partition assignments for partition {index}",
                )
            self.check_replicas(replicas, factor, index)
            factor = len(replicas)
            placed[index] = replicas
        if any(i not in placed for i in range(len(placed))):
            raise TopicError(
                INVALID_REPLICA_ASSIGNMENT,
                "partitions should be a consecutive 0-based integer sequence",
            )
        return [placed[i] for i in range(len(placed))]

    def create(
        self,
        name: str,
        partitions: int,
        *,
        replication_factor: int = 1,
        assignments: Sequence[tuple[int, Sequence[int]]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        internal: bool = False,
        validate_only: bool = False,
    ) -> Topic | None:
        """A new topic; with `assignments` ((partition, replicas) pairs, as CreateTopics
        gives them) `partitions` and `replication_factor` must be -1."""
        validate_topic_name(name)
        if name in self._topics:
            raise TopicError(TOPIC_ALREADY_EXISTS, f"topic {quoted(name)} already exists")
        manual = None
        if assignments:
            manual = self._manual_assignments(partitions, replication_factor, assignments)
            partitions = len(manual)
        if partitions <= 0:
            raise TopicError(INVALID_PARTITIONS, f"partition count must be positive: {partitions}")
        if partitions > 100_000:
            raise TopicError(
                INVALID_PARTITIONS, f"{partitions} partitions is over the 100000 limit"
            )
        if manual is None:
            self._check_replication_factor(replication_factor)
        checked = validate_topic_configs(configs or {}, self.defaults)
        self._check_room(partitions)
        if validate_only:
            return None
        topic = Topic(
            name=name,
            topic_id=uuid.uuid4(),
            partitions=[],
            configs=checked,
            internal=internal,
            defaults=self.defaults,
        )
        topic.partitions.extend(
            self.new_partition(
                topic, i, manual[i] if manual is not None else self.place(replication_factor)
            )
            for i in range(partitions)
        )
        self.restore(topic)
        self._changed()
        return topic

    def restore(self, topic: Topic) -> None:
        """Add a topic as it is (one read back from a data directory)."""
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self.partition_count += len(topic.partitions)

    def delete(self, name: str) -> Topic:
        topic = self._topics.pop(name, None)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {quoted(name)} does not exist")
        del self._by_id[topic.topic_id]
        self.partition_count -= len(topic.partitions)
        self._changed()
        return topic

    def add_partitions(
        self,
        name: str,
        count: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> None:
        """Grow topic `name` to `count` partitions; the new ones on `assignments` (one
        replica list each, as CreatePartitions gives them) or placed as new topics' are,
        with as many replicas as partition 0."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {quoted(name)} does not exist")
        current = len(topic.partitions)
        if count <= current:
            raise TopicError(
                INVALID_PARTITIONS,
                f"topic {quoted(name)} has {current} partitions; "
                f"the new count {count} must be larger",
            )
        if count > 100_000:
            raise TopicError(INVALID_PARTITIONS, f"{count} partitions is over the 100000 limit")
        factor = len(topic.partitions[0].replicas) - len(topic.partitions[0].adding)
        if assignments is not None:
            if len(assignments) != count - current:
                raise TopicError(
                    INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {count - current} additional partition(s), but only "
                    f"{len(assignments)} assignment(s) were specified.",
                )
            for offset, replicas in enumerate(assignments):
                self.check_replicas(replicas, factor, current + offset)
        else:
            self._check_replication_factor(factor)
        self._check_room(count - current)
        if validate_only:
            return
        self.partition_count += count - current
        topic.partitions.extend(
            self.new_partition(
                topic,
                i,
                assignments[i - current] if assignments is not None else self.place(factor),
            )
            for i in range(current, count)
        )
        self._changed()

    def alter_configs(
        self, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> dict[str, str]:
        """Replace the configs topic `name` sets with `configs` (the ones not named go
        back to their defaults): all of them or, on any error, none. Returns them."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {quoted(name)} does not exist")
        checked = validate_topic_configs(configs, self.defaults)
        if not validate_only and checked != topic.configs:
            topic.configs = checked
            self._changed()
        return checked

    def incremental_alter_configs(
        self,
        name: str,
        operations: Iterable[tuple[str, int, str | None]],
        *,
        validate_only: bool = False,
    ) -> dict[str, str]:
        """Apply (config name, operation, value) changes to topic `name` (see
        apply_config_operations): all of them or, on any error, none."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {quoted(name)} does not exist")
        changed = apply_config_operations(topic.configs, operations)
        return self.alter_configs(name, changed, validate_only=validate_only)

    def _check_room(self, new_partitions: int) -> None:
        limit = self.max_partitions_per_broker * max(1, len(self._broker_ids()))
        if self.partition_count + new_partitions > limit:
            raise TopicError(
                POLICY_VIOLATION,
                f"{new_partitions} more partitions would exceed the cluster's limit of {limit} "
                f"(max_partitions_per_broker={self.max_partitions_per_broker}; "
                f"{self.partition_count} exist)",
            )

    def replicas_changed(self) -> None:
        for callback in self.on_replicas_change:
            callback()

    def _changed(self) -> None:
        for callback in self.on_change:
            callback()
