"""Group configs: the config resource GROUP (type 32) of DescribeConfigs and
IncrementalAlterConfigs, as Kafka 4 keeps them. Sans-IO.

Rules (Kafka's GroupConfig):
    Names        consumer.session.timeout.ms and consumer.heartbeat.interval.ms (the
                 consumer protocol's), share.session.timeout.ms,
                 share.heartbeat.interval.ms, share.record.lock.duration.ms,
                 share.delivery.count.limit, share.partition.max.record.locks,
                 share.auto.offset.reset, share.isolation.level,
                 share.renew.acknowledge.enable and share.assignment.interval.ms (share
                 groups'; the last two are accepted and described as Kafka 4.4 does, and
                 change nothing: renewals are always served, the assignment computed at
                 once). Any other name is INVALID_CONFIG.
    Values       the timeouts, intervals and limits are whole numbers of at least 1; a
                 group's heartbeat interval must stay below its session timeout ("X
                 must be greater than Y"). The share.* numbers stay within the broker's
                 bounds, as Kafka 4.4's: share.session.timeout.ms within
                 group.share.min/max.session.timeout.ms, share.heartbeat.interval.ms
                 within group.share.min/max.heartbeat.interval.ms,
                 share.record.lock.duration.ms within
                 group.share.min/max.record.lock.duration.ms, share.delivery.count.limit
                 within group.share.min/max.delivery.count.limit,
                 share.partition.max.record.locks within
                 group.share.min/max.partition.max.record.locks,
                 share.assignment.interval.ms within 0 and 15000 ("X must be in the range
                 MIN to MAX inclusive."). share.renew.acknowledge.enable is true or false.
                 share.auto.offset.reset is latest, earliest or by_duration:<ISO-8601
                 duration>; share.isolation.level read_uncommitted or read_committed.
                 Anything else is INVALID_CONFIG, and the resource is left unchanged.
    Groups       configs may be set for a group id before the group exists, and stay when
                 it is deleted. A config not set for a group takes the broker's value
                 (the group.consumer.* and group.share.* settings), reported with source
                 DEFAULT_CONFIG; a set one is reported with source GROUP_CONFIG.
    Operations   SET, DELETE (back to the broker's value); APPEND and SUBTRACT are
                 INVALID_CONFIG (no group config is a list).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from minibroker.config import SHARE_BOUNDED, BrokerConfig
from minibroker.state.topic_errors import INVALID_CONFIG, INVALID_REQUEST, TopicError, quoted

GROUP_RESOURCE = 32
SOURCE_GROUP_CONFIG = 8  # Kafka's ConfigSource.GROUP_CONFIG
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# name -> Kafka's config type ("int", "string" or "boolean")
GROUP_CONFIG_TYPES = {
    "consumer.session.timeout.ms": "int",
    "consumer.heartbeat.interval.ms": "int",
    "share.session.timeout.ms": "int",
    "share.heartbeat.interval.ms": "int",
    "share.record.lock.duration.ms": "int",
    "share.delivery.count.limit": "int",
    "share.partition.max.record.locks": "int",
    "share.auto.offset.reset": "string",
    "share.isolation.level": "string",
    "share.renew.acknowledge.enable": "boolean",
    "share.assignment.interval.ms": "int",
}
# Group configs accepted and described as Kafka 4.4 does that change nothing here: the
# assignment is computed at once (no interval), renewals are always served.
SHARE_ASSIGNMENT_INTERVAL_BOUNDS = (0, 15_000)  # group.share.min/max.assignment.interval.ms
_ISO_DURATION = re.compile(r"P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?", re.IGNORECASE)


def broker_defaults(config: BrokerConfig) -> dict[str, str]:
    """What a group config is when not set for the group."""
    return {
        "consumer.session.timeout.ms": str(config.group_consumer_session_timeout_ms),
        "consumer.heartbeat.interval.ms": str(config.group_consumer_heartbeat_interval_ms),
        "share.session.timeout.ms": str(config.group_share_session_timeout_ms),
        "share.heartbeat.interval.ms": str(config.group_share_heartbeat_interval_ms),
        "share.record.lock.duration.ms": str(config.group_share_record_lock_duration_ms),
        "share.delivery.count.limit": str(config.group_share_delivery_count_limit),
        "share.partition.max.record.locks": str(config.group_share_partition_max_record_locks),
        "share.auto.offset.reset": "latest",
        "share.isolation.level": "read_uncommitted",
        "share.renew.acknowledge.enable": "true",
        "share.assignment.interval.ms": "1000",
    }


def share_bounds(config: BrokerConfig) -> dict[str, tuple[int, int]]:
    """The share.* group configs' least and most values (the group.share.min/max.*
    settings)."""
    bounds = {
        f"share.{name.replace('_', '.')}": (
            getattr(config, f"group_share_min_{name}"),
            getattr(config, f"group_share_max_{name}"),
        )
        for name in SHARE_BOUNDED
    }
    bounds["share.assignment.interval.ms"] = SHARE_ASSIGNMENT_INTERVAL_BOUNDS
    return bounds


def _check_value(name: str, value: str) -> None:
    if GROUP_CONFIG_TYPES[name] == "boolean":
        if value.strip().lower() not in ("true", "false"):
            raise TopicError(
                INVALID_CONFIG, f"Invalid value {quoted(value)} for configuration {name}"
            )
        return
    if GROUP_CONFIG_TYPES[name] == "int":
        least = 0 if name == "share.assignment.interval.ms" else 1
        if not re.fullmatch(r"\d{1,10}", value) or not least <= int(value) <= 2**31 - 1:
            raise TopicError(
                INVALID_CONFIG, f"Invalid value {quoted(value)} for configuration {name}"
            )
        return
    if name == "share.isolation.level":
        allowed = value in ("read_uncommitted", "read_committed")
    elif value.startswith("by_duration:"):
        allowed = bool(_ISO_DURATION.fullmatch(value.removeprefix("by_duration:"))) and value != (
            "by_duration:P"
        )
    else:
        allowed = value in ("latest", "earliest")
    if not allowed:
        raise TopicError(INVALID_CONFIG, f"Invalid value {quoted(value)} for configuration {name}")


class GroupConfigs:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._set: dict[str, dict[str, str]] = {}

    def own(self, group_id: str) -> dict[str, str]:
        return dict(self._set.get(group_id, {}))

    def value(self, group_id: str, name: str) -> str:
        own = self._set.get(group_id)
        if own is not None and name in own:
            return own[name]
        return broker_defaults(self.config)[name]

    def int_value(self, group_id: str, name: str) -> int:
        return int(self.value(group_id, name))

    def describe(self, group_id: str) -> list[tuple[str, str, bool]]:
        """(name, value, set for the group) of every group config, by name."""
        own = self._set.get(group_id, {})
        defaults = broker_defaults(self.config)
        return [
            (name, own.get(name, defaults[name]), name in own)
            for name in sorted(GROUP_CONFIG_TYPES)
        ]

    def alter(
        self,
        group_id: str,
        operations: Iterable[tuple[str, int, str | None]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Apply (name, operation, value) all or nothing (module docstring: rules)."""
        result = dict(self._set.get(group_id, {}))
        bounds = share_bounds(self.config)
        for name, operation, value in operations:
            if name not in GROUP_CONFIG_TYPES:
                raise TopicError(INVALID_CONFIG, f"Unknown group config name: {quoted(name)}")
            if operation == DELETE:
                result.pop(name, None)
                continue
            if operation in (APPEND, SUBTRACT):
                raise TopicError(
                    INVALID_CONFIG, f"{name} is not a list: APPEND and SUBTRACT do not apply"
                )
            if operation != SET:
                raise TopicError(INVALID_REQUEST, f"unknown config operation {operation}")
            if value is None:
                raise TopicError(INVALID_REQUEST, f"null value for config {quoted(name)}")
            _check_value(name, value)
            least, most = bounds.get(name, (1, 2**31 - 1))
            if name in bounds and not least <= int(value) <= most:
                raise TopicError(
                    INVALID_CONFIG, f"{name} must be in the range {least} to {most} inclusive."
                )
            result[name] = value
        defaults = broker_defaults(self.config)
        for kind in ("consumer", "share"):
            session = int(
                result.get(f"{kind}.session.timeout.ms", defaults[f"{kind}.session.timeout.ms"])
            )
            interval = int(
                result.get(
                    f"{kind}.heartbeat.interval.ms", defaults[f"{kind}.heartbeat.interval.ms"]
                )
            )
            if interval >= session and kind == "share":
                raise TopicError(
                    INVALID_CONFIG,
                    "share.session.timeout.ms must be greater than share.heartbeat.interval.ms",
                )
            if interval >= session:
                raise TopicError(
                    INVALID_CONFIG,
                    f"{kind}.heartbeat.interval.ms ({interval}) must be less than "
                    f"{kind}.session.timeout.ms ({session})",
                )
        if validate_only:
            return
        if result:
            self._set[group_id] = result
        else:
            self._set.pop(group_id, None)
