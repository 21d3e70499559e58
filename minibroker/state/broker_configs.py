"""Broker configs: the settings a broker starts with and the dynamic values set while it
runs (AlterConfigs / IncrementalAlterConfigs on BROKER resources), as Kafka layers them.

Rules:
- A broker config's value in force is, first found: its dynamic value for this broker
  (resource name = the node id; source DYNAMIC_BROKER_CONFIG), its dynamic cluster-wide
  default (resource name ""; DYNAMIC_DEFAULT_BROKER_CONFIG), the setting the broker was
  started with where it differs from Kafka's default (`Broker(...)` keywords, command-line
  flags; STATIC_BROKER_CONFIG), Kafka's default (DEFAULT_CONFIG).
- The broker configs behind topic configs (log.cleanup.policy, message.max.bytes,
  log.retention.ms, ...: Kafka's dynamic log configs, which leave out
  log.message.format.version) and max.connections can be changed while the broker
  runs. A topic config the topic does not set takes its value from them at once: raising
  message.max.bytes raises the limit of every topic without its own max.message.bytes.
  A topic config with several broker configs behind it takes the first that has a value
  (retention.ms: log.retention.ms, else log.retention.minutes, else log.retention.hours).
- The other broker configs this broker knows are fixed at start-up: changing one is
  INVALID_REQUEST ("Cannot update these configs dynamically"), as Kafka answers for its
  read-only configs. Names it does not know are kept and change nothing (Kafka accepts
  them too). A value is checked as the topic config behind it is checked; a bad one is
  INVALID_REQUEST ("Invalid value ... for configuration ...").
- A change names the id of the node it is sent to or "" (cluster-wide); another id is
  INVALID_REQUEST, as Kafka answers (clients send a node's changes to that node). Each
  node keeps its own dynamic values, which DescribeConfigs of that node reports.
- Topic configs' defaults are one for the whole cluster here (Kafka's follow each
  broker's own configs for the partitions it holds): in a cluster of one node its own
  values are behind them, in a cluster of several only the cluster-wide ones and the
  static settings are. Likewise a node's own max.connections is in force in a cluster of
  one node; in one of several, the cluster-wide value is.
- Synonyms are listed as Kafka's ConfigHelper lists them: for every name behind a config,
  the per-broker values, then the cluster-wide ones, then the static settings, then the
  defaults, dropping those before the config's own (primary) name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from minibroker.config import BrokerConfig
from minibroker.state.topic_configs import (
    APPEND,
    DELETE,
    LIST_TOPIC_CONFIGS,
    LONG_MAX,
    SET,
    SUBTRACT,
    TOPIC_CONFIG_DEFAULTS,
    TOPIC_CONFIG_TYPES,
    check_config_value,
    list_changed,
)
from minibroker.state.topic_errors import (
    INVALID_CONFIG,
    INVALID_REQUEST,
    SHOWN_NAME_CHARS,
    TopicError,
    quoted,
)

# Kafka's ConfigSource values (DescribeConfigs, CreateTopics v5+ results).
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

CLUSTER_DEFAULT = ""  # the resource name of the cluster-wide dynamic defaults

# Kafka 3.9's broker configs behind each topic config (ServerTopicConfigSynonyms), the
# primary one first, each with the factor that turns its value into the topic config's
# unit (log.retention.hours: hours into milliseconds). Topic configs not named here
# have none (remote.storage.enable, remote.log.*.disable, the throttled replica lists).
TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = {
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.downconversion.enable": (("log.message.downconversion.enable", 1),),
    "message.format.version": (("log.message.format.version", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.difference.max.ms": (("log.message.timestamp.difference.max.ms", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "preallocate": (("log.preallocate", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
}
# The topic config each broker config stands behind, and its factor.
_BEHIND: Mapping[str, tuple[str, int]] = {
    broker_name: (topic_name, factor)
    for topic_name, synonyms in TOPIC_CONFIG_SYNONYMS.items()
    for broker_name, factor in synonyms
}
# The broker configs whose unit differs from their topic config's (all ints): their
# least value (None: any).
_SCALED: Mapping[str, int | None] = {
    "log.retention.minutes": None,
    "log.retention.hours": None,
    "log.roll.hours": 1,
    "log.roll.jitter.hours": 0,
}

# Kafka 3.9's defaults of the broker configs this broker reports; None: no default
# (log.retention.ms and the like defer to a lesser synonym).
KAFKA_BROKER_DEFAULTS: Mapping[str, str | None] = {
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "socket.request.max.bytes": "104857600",
    "max.connections": str(2**31 - 1),
    "offsets.topic.num.partitions": "50",
    "offsets.retention.minutes": "10080",
    "queued.max.request.bytes": "-1",
    "connections.max.idle.ms": "600000",
    "fetch.max.bytes": "57671680",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    # Kafka 4.4's share group settings (GroupCoordinatorConfig, ShareGroupConfig).
    **{f"group.share.{name}": str(value) for name, value in BrokerConfig().share_settings()},
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "default.replication.factor": "1",
    **{
        broker_name: TOPIC_CONFIG_DEFAULTS[topic_name] if factor == 1 else None
        for broker_name, (topic_name, factor) in _BEHIND.items()
    },
    "log.retention.ms": None,
    "log.retention.hours": "168",
    "log.roll.ms": None,
    "log.roll.hours": "168",
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": "0",
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.cleaner.backoff.ms": "15000",
}
BROKER_CONFIG_TOPICS: Mapping[str, str] = {name: topic for name, (topic, _) in _BEHIND.items()}
SCALED_BROKER_CONFIGS = frozenset(_SCALED)
# What this broker changes while it runs: Kafka's dynamic log configs and max.connections.
DYNAMIC_BROKER_CONFIGS = frozenset(
    [*(name for name in _BEHIND if name != "log.message.format.version"), "max.connections"]
)
LIST_BROKER_CONFIGS = frozenset(
    name for name, (topic_name, _) in _BEHIND.items() if topic_name in LIST_TOPIC_CONFIGS
)

# (name, value, source) of one synonym.
Synonym = tuple[str, str | None, int]


@dataclass(frozen=True, slots=True)
class ConfigValue:
    """A config as DescribeConfigs reports it."""

    value: str | None
    source: int
    synonyms: tuple[Synonym, ...]


class BrokerConfigError(TopicError):
    """A change of broker configs refused, with Kafka's error code and message."""


def _check_broker_value(name: str, value: str) -> str:
    """`value` as the broker reads config `name`; INVALID_REQUEST, with Kafka's reason,
    if it would not."""
    topic_name = _BEHIND[name][0] if name in _BEHIND else None
    kind = "int" if topic_name is None else TOPIC_CONFIG_TYPES[topic_name]
    reason = None
    if kind in ("int", "long"):
        text = value.strip()
        low, high = (-(2**31), 2**31 - 1) if kind == "int" else (-(2**63), 2**63 - 1)
        digits = text[1:] if text.startswith("-") else text
        if not (digits.isascii() and digits.isdigit() and low <= int(text) <= high):
            reason = f"Not a number of type {kind.upper()}"
        elif name in _SCALED or name == "max.connections":
            least = _SCALED.get(name, 0)
            if least is not None and int(text) < least:
                reason = f"Value must be at least {least}"
            else:
                return str(int(text))
    if reason is None and topic_name is not None:
        try:
            return check_config_value(topic_name, value)
        except TopicError as exc:
            reason = exc.message
    raise BrokerConfigError(
        INVALID_REQUEST,
        f"Invalid value {value[:SHOWN_NAME_CHARS]} for configuration {name}: {reason}",
    )


class BrokerConfigs:
    """The broker configs of one cluster: the static settings and the dynamic layers."""

    def __init__(self, static: Mapping[str, str]) -> None:
        # Settings the broker started with; those equal to Kafka's default are reported
        # as the default alone, as Kafka reports a config server.properties leaves out.
        self.static = {
            name: value
            for name, value in static.items()
            if value != KAFKA_BROKER_DEFAULTS.get(name, object())
        }
        self.known = frozenset(static) | frozenset(KAFKA_BROKER_DEFAULTS)
        # Each node's own dynamic values, by node id.
        self.per_broker: dict[int, dict[str, str]] = {}
        self.cluster_default: dict[str, str] = {}

    # --- reading ---

    def _layers(
        self, node_id: int | None, per_broker: bool = True
    ) -> list[tuple[Mapping[str, str | None], int]]:
        """Where a config is looked up, first found first: node `node_id`'s own values
        (None: no node's), the cluster-wide ones and, unless only the cluster-wide
        resource is described (not per_broker), the static settings and the defaults."""
        layers: list[tuple[Mapping[str, str | None], int]] = []
        if node_id is not None:
            layers.append((self.per_broker.get(node_id, {}), SOURCE_DYNAMIC_BROKER))
        layers.append((self.cluster_default, SOURCE_DYNAMIC_DEFAULT_BROKER))
        if per_broker:
            layers.append((self.static, SOURCE_STATIC_BROKER))
            layers.append((KAFKA_BROKER_DEFAULTS, SOURCE_DEFAULT))
        return layers

    def value(self, name: str, node_id: int | None = None) -> str | None:
        """Broker config `name`'s value in force on node `node_id` (None: leaving every
        node's own values out); None when it has none."""
        for layer, _ in self._layers(node_id):
            if layer.get(name) is not None:
                return layer[name]
        return None

    def synonyms(
        self,
        primary: str,
        names: Iterable[str],
        node_id: int | None = None,
        per_broker: bool = True,
    ) -> tuple[Synonym, ...]:
        """Kafka's synonyms of broker config `primary`, whose lesser synonyms are `names`
        after it (see the rules at the top)."""
        found: list[Synonym] = []
        names = list(names)
        for layer, source in self._layers(node_id, per_broker):
            found.extend(
                (name, layer[name], source) for name in names if layer.get(name) is not None
            )
        while found and found[0][0] != primary:
            found.pop(0)
        return tuple(found)

    def describe(self, name: str, node_id: int | None) -> ConfigValue:
        """Broker config `name` as DescribeConfigs reports it for node `node_id`, or for
        the cluster-wide resource "" (None: only its dynamic defaults)."""
        per_broker = node_id is not None
        topic_name = _BEHIND.get(name, (None, 0))[0]
        names = (
            [n for n, _ in TOPIC_CONFIG_SYNONYMS[topic_name]] if topic_name is not None else [name]
        )
        names = names[names.index(name) :]
        synonyms = self.synonyms(name, names, node_id, per_broker)
        value = self.value(name, node_id) if per_broker else self.cluster_default.get(name)
        return ConfigValue(value, synonyms[0][2] if synonyms else SOURCE_DEFAULT, synonyms)

    def described_names(self, node_id: int | None) -> list[str]:
        """The configs DescribeConfigs lists: for a node every config it knows (those
        without a value as null, as Kafka lists them) and every name set; for "" (None)
        the cluster-wide values set."""
        if node_id is None:
            return sorted(self.cluster_default)
        return sorted({*self.known, *self.per_broker.get(node_id, {}), *self.cluster_default})

    def topic_default(self, topic_name: str, node_id: int | None = None) -> ConfigValue:
        """What topic config `topic_name` is when a topic does not set it, with node
        `node_id`'s own values behind it (None: no node's)."""
        behind = TOPIC_CONFIG_SYNONYMS.get(topic_name, ())
        value = TOPIC_CONFIG_DEFAULTS[topic_name]
        for broker_name, factor in behind:
            found = self.value(broker_name, node_id)
            if found is not None:
                value = found if factor == 1 else str(int(found) * factor)
                break
        if not behind:
            return ConfigValue(value, SOURCE_DEFAULT, ())
        synonyms = self.synonyms(behind[0][0], [n for n, _ in behind], node_id)
        return ConfigValue(value, synonyms[0][2] if synonyms else SOURCE_DEFAULT, synonyms)

    def topic_defaults(self, node_id: int | None = None) -> dict[str, ConfigValue]:
        return {name: self.topic_default(name, node_id) for name in TOPIC_CONFIG_DEFAULTS}

    # --- changing ---

    def _layer_of(self, resource_name: str, node_id: int) -> dict[str, str]:
        if resource_name == CLUSTER_DEFAULT:
            return self.cluster_default
        if resource_name != str(node_id):
            raise BrokerConfigError(
                INVALID_REQUEST,
                f"Unexpected broker id, expected {node_id}, but received "
                f"{resource_name[:SHOWN_NAME_CHARS]}",
            )
        return self.per_broker.setdefault(node_id, {})

    def _checked(self, configs: Mapping[str, str]) -> dict[str, str]:
        fixed = sorted(
            name for name in configs if name in self.known and name not in DYNAMIC_BROKER_CONFIGS
        )
        if fixed:
            raise BrokerConfigError(
                INVALID_REQUEST,
                f"Cannot update these configs dynamically: Set({', '.join(fixed)})",
            )
        return {
            name: _check_broker_value(name, value) if name in self.known else value
            for name, value in configs.items()
        }

    def replace(
        self,
        resource_name: str,
        configs: Mapping[str, str],
        *,
        node_id: int,
        validate_only: bool = False,
    ) -> bool:
        """Set resource `resource_name`'s dynamic configs to `configs` (AlterConfigs: the
        ones not named are removed), all or none. True if anything changed."""
        layer = self._layer_of(resource_name, node_id)
        checked = self._checked(configs)
        if validate_only or checked == layer:
            return False
        layer.clear()
        layer.update(checked)
        return True

    def alter(
        self,
        resource_name: str,
        operations: Iterable[tuple[str, int, str | None]],
        *,
        node_id: int,
        validate_only: bool = False,
    ) -> bool:
        """Apply IncrementalAlterConfigs' (name, operation, value) changes to resource
        `resource_name`, all or none. True if anything changed."""
        layer = self._layer_of(resource_name, node_id)
        result = dict(layer)
        for name, operation, value in operations:
            if operation == DELETE:
                result.pop(name, None)
                continue
            if operation not in (SET, APPEND, SUBTRACT):
                raise BrokerConfigError(INVALID_REQUEST, f"unknown config operation {operation}")
            if value is None:
                raise BrokerConfigError(INVALID_REQUEST, f"null value for config {quoted(name)}")
            if operation == SET:
                result[name] = value
                continue
            if name not in LIST_BROKER_CONFIGS:
                raise BrokerConfigError(
                    INVALID_CONFIG,
                    f"Config value append is not allowed for config key: {name}"
                    if operation == APPEND
                    else f"Config value subtract is not allowed for config key: {name}",
                )
            current = result.get(name) or KAFKA_BROKER_DEFAULTS.get(name) or ""
            result[name] = list_changed(current, operation, value)
        return self.replace(resource_name, result, node_id=node_id, validate_only=validate_only)
