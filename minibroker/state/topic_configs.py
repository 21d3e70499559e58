"""Topic configs: Kafka's names, types and defaults, how values are checked, and how
IncrementalAlterConfigs' operations apply. Pure functions over config maps."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from minibroker.state.topic_errors import INVALID_CONFIG, INVALID_REQUEST, TopicError, quoted

LONG_MAX = str(2**63 - 1)

# Kafka 3.9's topic configs (TopicConfig, LogConfig; the two throttled-replica lists are
# QuotaConfigs'): name -> (ConfigDef type, default). The broker acts on
# max.message.bytes, message.timestamp.type and the message.timestamp.*.max.ms limits;
# the others are stored, validated as Kafka validates them, and reported as given.
TOPIC_CONFIGS: Mapping[str, tuple[str, str]] = {
    "cleanup.policy": ("list", "delete"),
    "compression.type": ("string", "producer"),
    "compression.gzip.level": ("int", "-1"),
    "compression.lz4.level": ("int", "9"),
    "compression.zstd.level": ("int", "3"),
    "delete.retention.ms": ("long", "86400000"),
    "file.delete.delay.ms": ("long", "60000"),
    "flush.messages": ("long", LONG_MAX),
    "flush.ms": ("long", LONG_MAX),
    "follower.replication.throttled.replicas": ("list", ""),
    "index.interval.bytes": ("int", "4096"),
    "leader.replication.throttled.replicas": ("list", ""),
    "local.retention.bytes": ("long", "-2"),
    "local.retention.ms": ("long", "-2"),
    "max.compaction.lag.ms": ("long", LONG_MAX),
    "max.message.bytes": ("int", "1048588"),
    "message.downconversion.enable": ("boolean", "true"),
    "message.format.version": ("string", "3.0-IV1"),
    "message.timestamp.after.max.ms": ("long", LONG_MAX),
    "message.timestamp.before.max.ms": ("long", LONG_MAX),
    "message.timestamp.difference.max.ms": ("long", LONG_MAX),
    "message.timestamp.type": ("string", "CreateTime"),
    "min.cleanable.dirty.ratio": ("double", "0.5"),
    "min.compaction.lag.ms": ("long", "0"),
    "min.insync.replicas": ("int", "1"),
    "preallocate": ("boolean", "false"),
    "remote.log.copy.disable": ("boolean", "false"),
    "remote.log.delete.on.disable": ("boolean", "false"),
    "remote.storage.enable": ("boolean", "false"),
    "retention.bytes": ("long", "-1"),
    "retention.ms": ("long", "604800000"),
    "segment.bytes": ("int", "1073741824"),
    "segment.index.bytes": ("int", "10485760"),
    "segment.jitter.ms": ("long", "0"),
    "segment.ms": ("long", "604800000"),
    "unclean.leader.election.enable": ("boolean", "false"),
}
TOPIC_CONFIG_DEFAULTS: Mapping[str, str] = {
    name: default for name, (_, default) in TOPIC_CONFIGS.items()
}
TOPIC_CONFIG_TYPES: Mapping[str, str] = {name: kind for name, (kind, _) in TOPIC_CONFIGS.items()}


def effective_configs(
    configs: Mapping[str, str], defaults: Mapping[str, str] = TOPIC_CONFIG_DEFAULTS
) -> dict[str, tuple[str, bool]]:
    """Every topic config with the value in force and whether the topic sets it (else
    the broker's default): what DescribeConfigs and CreateTopics v5+ report."""
    return {
        name: (configs[name], True) if name in configs else (default, False)
        for name, default in defaults.items()
    }


# The topic configs whose values are comma-separated lists (Kafka's type LIST): the
# ones IncrementalAlterConfigs may APPEND to and SUBTRACT from.
LIST_TOPIC_CONFIGS = frozenset(name for name, kind in TOPIC_CONFIG_TYPES.items() if kind == "list")
INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)
# Kafka's (LogConfig) bounds of its int and long topic configs: (least, greatest), None
# where Kafka sets none. max.message.bytes must be positive here (Kafka allows 0, which
# no batch fits); compression.gzip.level is checked on its own (-1, or 1 to 9).
_NUMBERS: Mapping[str, tuple[int | None, int | None]] = {
    "compression.lz4.level": (1, 17),
    "compression.zstd.level": (-131072, 22),
    "delete.retention.ms": (0, None),
    "file.delete.delay.ms": (0, None),
    "flush.messages": (1, None),
    "flush.ms": (0, None),
    "index.interval.bytes": (0, None),
    "local.retention.bytes": (-2, None),
    "local.retention.ms": (-2, None),
    "max.compaction.lag.ms": (1, None),
    "max.message.bytes": (1, None),
    "message.timestamp.after.max.ms": (0, None),
    "message.timestamp.before.max.ms": (0, None),
    "message.timestamp.difference.max.ms": (0, None),
    "min.compaction.lag.ms": (0, None),
    "min.insync.replicas": (1, None),
    "retention.bytes": (None, None),
    "retention.ms": (-1, None),
    "segment.bytes": (14, None),
    "segment.index.bytes": (4, None),
    "segment.jitter.ms": (0, None),
    "segment.ms": (1, None),
}
# The double configs' bounds (min.cleanable.dirty.ratio: between(0, 1)).
_DOUBLES: Mapping[str, tuple[float, float]] = {"min.cleanable.dirty.ratio": (0.0, 1.0)}
# Kafka's values for its enumerated topic configs.
_CHOICES: Mapping[str, tuple[str, ...]] = {
    "cleanup.policy": ("compact", "delete"),
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
}
# message.format.version: a MetadataVersion Kafka 3.9 knows (MetadataVersionValidator),
# as its release ("2.8", "0.10.2", with any further ".x") or its IBP name ("3.0-IV1").
# Kafka 3.x takes and ignores it (the record format is v2 from IBP 3.0 on).
_MESSAGE_FORMAT_VERSION = re.compile(
    r"(0\.8\.[0-2]|0\.9\.0|0\.10\.[0-2]|0\.11\.0|1\.[01]|2\.[0-8]|3\.[0-9])"
    r"(\.[0-9]+)*(-IV[0-9]+)?"
)
# A throttled-replica list: "*", or items "partition:broker" (ThrottledReplicaListValidator).
_THROTTLED_REPLICA = re.compile(r"[0-9]+:[0-9]+")
# Java's String.trim(), which Kafka applies to every config value it parses.
_JAVA_WHITESPACE = "".join(chr(code) for code in range(33))


def list_items(value: str) -> list[str]:
    """The items of a list config's value ("" is the empty list)."""
    return [item.strip() for item in value.split(",") if item.strip()]


def _is_integer(value: str) -> bool:
    # isascii: str.isdigit() also accepts characters such as "²" that int() refuses.
    digits = value[1:] if value.startswith("-") else value
    return digits.isascii() and digits.isdigit()


_DOUBLE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def check_config_value(name: str, value: str) -> str:
    """The value as Kafka reads it for topic config `name` (trimmed; ints, longs and
    booleans in their canonical form; lists joined by ","); INVALID_CONFIG unless it is
    one Kafka accepts."""
    kind = TOPIC_CONFIG_TYPES[name]
    text = value.strip(_JAVA_WHITESPACE)
    if kind in ("int", "long"):
        low, high = INT_RANGE if kind == "int" else LONG_RANGE
        if not _is_integer(text) or not low <= int(text) <= high:
            raise TopicError(
                INVALID_CONFIG,
                f"Invalid value {value} for configuration {name}: Not a number of type "
                f"{kind.upper()}",
            )
        number = int(text)
        if name == "compression.gzip.level":
            if number != -1 and not 1 <= number <= 9:
                raise TopicError(
                    INVALID_CONFIG, f"{name} must be -1 or between 1 and 9: {quoted(value)}"
                )
        elif name in _NUMBERS:
            least, greatest = _NUMBERS[name]
            if least is not None and number < least:
                raise TopicError(
                    INVALID_CONFIG, f"{name} must be at least {least}: {quoted(value)}"
                )
            if greatest is not None and number > greatest:
                raise TopicError(
                    INVALID_CONFIG, f"{name} must be at most {greatest}: {quoted(value)}"
                )
        return str(number)
    if kind == "double":
        least_ratio, greatest_ratio = _DOUBLES[name]
        if not (text.isascii() and _DOUBLE.fullmatch(text)):
            raise TopicError(INVALID_CONFIG, f"{name} must be a double: {quoted(value)}")
        if not least_ratio <= float(text) <= greatest_ratio:
            raise TopicError(
                INVALID_CONFIG,
                f"{name} must be between {least_ratio:g} and {greatest_ratio:g}: {quoted(value)}",
            )
        return text
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise TopicError(INVALID_CONFIG, f"{name} must be true or false: {quoted(value)}")
        return text.lower()
    if kind == "list":
        items = list_items(text)
        if name.endswith(".replication.throttled.replicas"):
            if items != ["*"] and not all(_THROTTLED_REPLICA.fullmatch(i) for i in items):
                raise TopicError(
                    INVALID_CONFIG,
                    f"{name} {quoted(value)} is not valid: it must be the literal '*' or a "
                    "list of replicas as [partitionId]:[brokerId],[partitionId]:[brokerId],...",
                )
            return ",".join(items)
        choices = _CHOICES[name]
        wrong = [item for item in items if item not in choices]
        if wrong:
            raise TopicError(
                INVALID_CONFIG,
                f"{name} {quoted(value)} is not valid: each item must be one of "
                f"{', '.join(choices)}",
            )
        return ",".join(items)
    if name == "message.format.version":
        if not (text.isascii() and _MESSAGE_FORMAT_VERSION.fullmatch(text)):
            raise TopicError(
                INVALID_CONFIG, f"{name} {quoted(value)} is not a valid version (e.g. 3.0-IV1)"
            )
        return text
    choices = _CHOICES[name]
    if text not in choices:
        raise TopicError(
            INVALID_CONFIG,
            f"{name} {quoted(value)} is not valid: it must be one of {', '.join(choices)}",
        )
    return text


def validate_topic_configs(
    configs: Mapping[str, str | None], defaults: Mapping[str, str] = TOPIC_CONFIG_DEFAULTS
) -> dict[str, str]:
    """The configs a topic sets, each value as Kafka reads it; INVALID_CONFIG for an
    unknown name, a bad value, or values that do not fit together (Kafka's
    LogConfig.validateValues and, for a broker without tiered storage, remote storage)."""
    checked: dict[str, str] = {}
    for name, value in configs.items():
        if name not in TOPIC_CONFIG_DEFAULTS:
            raise TopicError(INVALID_CONFIG, f"unknown topic config {quoted(name)}")
        if value is None:
            continue
        checked[name] = check_config_value(name, value)

    def effective(name: str) -> str:
        return checked.get(name, defaults[name])

    least_lag = int(effective("min.compaction.lag.ms"))
    most_lag = int(effective("max.compaction.lag.ms"))
    if least_lag > most_lag:
        raise TopicError(
            INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({least_lag}) > "
            f"max.compaction.lag.ms ({most_lag})",
        )
    if effective("remote.storage.enable") == "true":
        raise TopicError(
            INVALID_CONFIG,
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.",
        )
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
        result[name] = list_changed(result.get(name, TOPIC_CONFIG_DEFAULTS[name]), operation, value)
    return result


def list_changed(current: str, operation: int, value: str) -> str:
    """A list config's value after APPEND (the items not there yet, in order) or SUBTRACT
    (every item given) of `value`'s items."""
    items = list_items(current)
    given = list_items(value)
    if operation == APPEND:
        items += [item for item in dict.fromkeys(given) if item not in items]
    else:
        items = [item for item in items if item not in given]
    return ",".join(items)
