"""Topics, partitions and their leaders: the metadata every API consults."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
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
    INVALID_REPLICATION_FACTOR,
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
    """All topics of the cluster; leaders are spread over the brokers round robin."""

    def __init__(
        self,
        broker_ids: Callable[[], list[int]],
        max_partitions_per_broker: int = 100_000,
        defaults: Mapping[str, str] | None = None,
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
        self._broker_ids = broker_ids
        self.max_partitions_per_broker = max_partitions_per_broker
        self.partition_count = 0
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._leader_cursor = 0
        self.on_change: list[Callable[[], None]] = []
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

    def create(
        self,
        name: str,
        partitions: int,
        *,
        replication_factor: int = 1,
        configs: Mapping[str, str | None] | None = None,
        internal: bool = False,
        validate_only: bool = False,
    ) -> Topic | None:
        validate_topic_name(name)
        if name in self._topics:
            raise TopicError(TOPIC_ALREADY_EXISTS, f"topic {quoted(name)} already exists")
        if partitions <= 0:
            raise TopicError(INVALID_PARTITIONS, f"partition count must be positive: {partitions}")
        if partitions > 100_000:
            raise TopicError(
                INVALID_PARTITIONS, f"{partitions} partitions is over the 100000 limit"
            )
        broker_count = len(self._broker_ids())
        if replication_factor <= 0 or replication_factor > broker_count:
            raise TopicError(
                INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is not within 1..{broker_count} "
                "(the number of brokers)",
            )
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
            Partition(index=i, leader=self.next_leader(), log=self.new_log(topic, i))
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

    def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
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
        self._check_room(count - current)
        if validate_only:
            return
        self.partition_count += count - current
        topic.partitions.extend(
            Partition(index=i, leader=self.next_leader(), log=self.new_log(topic, i))
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

    def _changed(self) -> None:
        for callback in self.on_change:
            callback()
