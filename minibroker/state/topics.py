"""Topics, partitions and their leaders: the metadata every API consults."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minibroker.state.log import PartitionLog
from minibroker.state.producers import PartitionProducers

LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

# Topic configs a client may set. The broker acts on max.message.bytes and
# message.timestamp.type; the others are stored and reported as given.
TOPIC_CONFIG_DEFAULTS: Mapping[str, str] = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "min.insync.replicas": "1",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "unclean.leader.election.enable": "false",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "9223372036854775807",
}

# Error codes (Kafka's Errors.java) raised from this module.
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3
POLICY_VIOLATION = 44


SHOWN_NAME_CHARS = 100


def quoted(text: str) -> str:
    """A client-given name as an error message quotes it: cut short, because a legacy
    (non-flexible) response string holds at most 32,767 bytes."""
    if len(text) > SHOWN_NAME_CHARS:
        text = text[:SHOWN_NAME_CHARS] + "..."
    return repr(text)


class TopicError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(slots=True)
class Partition:
    index: int
    leader: int
    log: PartitionLog = field(default_factory=PartitionLog)
    producers: PartitionProducers = field(default_factory=PartitionProducers)
    leader_epoch: int = 0


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

    def config(self, name: str) -> str:
        return self.configs.get(name, TOPIC_CONFIG_DEFAULTS[name])

    def effective_configs(self) -> dict[str, tuple[str, bool]]:
        return effective_configs(self.configs)

    @property
    def max_message_bytes(self) -> int:
        return int(self.config("max.message.bytes"))

    @property
    def log_append_time(self) -> bool:
        return self.config("message.timestamp.type") == "LogAppendTime"


def effective_configs(configs: Mapping[str, str]) -> dict[str, tuple[str, bool]]:
    """Every topic config with the value in force and whether the topic sets it (else
    the default): what DescribeConfigs and CreateTopics v5+ report."""
    return {
        name: (configs[name], True) if name in configs else (default, False)
        for name, default in TOPIC_CONFIG_DEFAULTS.items()
    }


def validate_topic_name(name: str) -> None:
    # fullmatch: with match(), "$" would also accept a trailing newline.
    if name in (".", "..") or not LEGAL_TOPIC_NAME.fullmatch(name):
        raise TopicError(
            INVALID_TOPIC_EXCEPTION,
            f"topic name {quoted(name)} is illegal: use 1-249 of [a-zA-Z0-9._-], not '.' or '..'",
        )


# The topic configs whose values are comma-separated lists (Kafka's type LIST): the
# ones IncrementalAlterConfigs may APPEND to and SUBTRACT from.
LIST_TOPIC_CONFIGS = frozenset({"cleanup.policy"})
INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)
# Kafka's (LogConfig) numeric topic configs: (type, range, least value allowed).
_NUMBERS: Mapping[str, tuple[str, tuple[int, int], int | None]] = {
    "min.insync.replicas": ("int", INT_RANGE, 1),
    "retention.bytes": ("long", LONG_RANGE, None),
    "retention.ms": ("long", LONG_RANGE, -1),
    "segment.bytes": ("int", INT_RANGE, 14),
    "segment.ms": ("long", LONG_RANGE, 1),
    "delete.retention.ms": ("long", LONG_RANGE, 0),
    "min.compaction.lag.ms": ("long", LONG_RANGE, 0),
    "max.compaction.lag.ms": ("long", LONG_RANGE, 1),
    "message.timestamp.before.max.ms": ("long", LONG_RANGE, 0),
    "message.timestamp.after.max.ms": ("long", LONG_RANGE, 0),
}
# Kafka's values for its enumerated topic configs.
_CHOICES: Mapping[str, tuple[str, ...]] = {
    "cleanup.policy": ("compact", "delete"),
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "unclean.leader.election.enable": ("true", "false"),
}


def list_items(value: str) -> list[str]:
    """The items of a list config's value ("" is the empty list)."""
    return [item.strip() for item in value.split(",") if item.strip()]


def _is_integer(value: str) -> bool:
    # isascii: str.isdigit() also accepts characters such as "²" that int() refuses.
    digits = value[1:] if value.startswith("-") else value
    return digits.isascii() and digits.isdigit()


def _check_value(name: str, value: str) -> None:
    """Raise INVALID_CONFIG unless `value` is one Kafka accepts for topic config `name`."""
    # max.message.bytes: a positive int (Kafka allows 0, which no batch fits).
    if name == "max.message.bytes" and (
        not (value.isascii() and value.isdigit()) or not 0 < int(value) <= INT_RANGE[1]
    ):
        raise TopicError(
            INVALID_CONFIG, f"max.message.bytes must be a positive int: {quoted(value)}"
        )
    if name in _NUMBERS:
        kind, (low, high), least = _NUMBERS[name]
        if not _is_integer(value) or not low <= int(value) <= high:
            raise TopicError(INVALID_CONFIG, f"{name} must be an {kind}: {quoted(value)}")
        if least is not None and int(value) < least:
            raise TopicError(INVALID_CONFIG, f"{name} must be at least {least}: {quoted(value)}")
    choices = _CHOICES.get(name)
    if choices is None:
        return
    if name in LIST_TOPIC_CONFIGS:
        wrong = [item for item in list_items(value) if item not in choices]
        if wrong:
            raise TopicError(
                INVALID_CONFIG,
                f"{name} {quoted(value)} is not valid: each item must be one of "
                f"{', '.join(choices)}",
            )
    elif value not in choices:
        raise TopicError(
            INVALID_CONFIG,
            f"{name} {quoted(value)} is not valid: it must be one of {', '.join(choices)}",
        )


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    checked: dict[str, str] = {}
    for name, value in configs.items():
        if name not in TOPIC_CONFIG_DEFAULTS:
            raise TopicError(INVALID_CONFIG, f"unknown topic config {quoted(name)}")
        if value is None:
            continue
        _check_value(name, value)
        checked[name] = value
    return checked


# IncrementalAlterConfigs' operations (Kafka's AlterConfigOp.OpType).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def apply_config_operations(
    configs: Mapping[str, str], operations: Iterable[tuple[str, int, str | None]]
) -> dict[str, str]:
    """The topic configs `configs` becomes with (name, operation, value) applied in
    order, as Kafka applies them: SET sets, DELETE returns to the default (a name the
    topic does not set is left alone, known or not), APPEND and SUBTRACT add items to or
    remove them from a list config's value (the default's when the topic does not set
    it). Values are not validated here; see validate_topic_configs."""
    result = dict(configs)
    for name, operation, value in operations:
        if operation == DELETE:
            result.pop(name, None)
            continue
        if operation not in _OPERATION_NAMES:
            raise TopicError(INVALID_REQUEST, f"unknown config operation {operation}")
        if value is None:
            raise TopicError(INVALID_REQUEST, f"null value for config {quoted(name)}")
        if name not in TOPIC_CONFIG_DEFAULTS:
            raise TopicError(INVALID_CONFIG, f"unknown topic config {quoted(name)}")
        if operation == SET:
            result[name] = value
            continue
        if name not in LIST_TOPIC_CONFIGS:
            raise TopicError(
                INVALID_CONFIG,
                f"cannot {_OPERATION_NAMES[operation]} to {quoted(name)}: it is not a list "
                f"config (only {', '.join(sorted(LIST_TOPIC_CONFIGS))} are)",
            )
        items = list_items(result.get(name, TOPIC_CONFIG_DEFAULTS[name]))
        given = list_items(value)
        if operation == APPEND:
            items += [item for item in dict.fromkeys(given) if item not in items]
        else:
            items = [item for item in items if item not in given]
        result[name] = ",".join(items)
    return result


class TopicRegistry:
    """All topics of the cluster; leaders are spread over the brokers round robin."""

    def __init__(
        self, broker_ids: Callable[[], list[int]], max_partitions_per_broker: int = 100_000
    ) -> None:
        self._broker_ids = broker_ids
        self.max_partitions_per_broker = max_partitions_per_broker
        self.partition_count = 0
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._leader_cursor = 0
        self.on_change: list[Callable[[], None]] = []

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

    def _next_leader(self) -> int:
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
        checked = validate_topic_configs(configs or {})
        self._check_room(partitions)
        if validate_only:
            return None
        topic = Topic(
            name=name,
            topic_id=uuid.uuid4(),
            partitions=[Partition(index=i, leader=self._next_leader()) for i in range(partitions)],
            configs=checked,
            internal=internal,
        )
        self._topics[name] = topic
        self._by_id[topic.topic_id] = topic
        self.partition_count += partitions
        self._changed()
        return topic

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
            Partition(index=i, leader=self._next_leader()) for i in range(current, count)
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
        checked = validate_topic_configs(configs)
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
