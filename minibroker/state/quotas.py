"""Client quotas: what AlterClientQuotas sets, what DescribeClientQuotas lists, and how
fast each client may go. Sans-IO: times are passed in (milliseconds of the broker's
clock, so a test that moves the clock moves the quota windows with it).

Rules (Kafka's, as its controller validates and its brokers enforce them):
- An entity is a set of (type, name) pairs: `user`, `client-id` (each alone or both
  together), or `ip` alone; a name of None is the type's default. Any other type, an
  empty entity, an empty name or `ip` combined with another type is INVALID_REQUEST.
- Keys of user/client-id entities: producer_byte_rate, consumer_byte_rate (whole
  numbers), request_percentage, controller_mutation_rate; of ip entities:
  connection_creation_rate (whole). Another key is INVALID_REQUEST ("Invalid
  configuration key"), a fraction where a whole number is due and a value <= 0 too. An
  entry whose check fails changes nothing; the others in the request apply. An entity
  named again in the same request is INVALID_REQUEST ("Ignoring duplicate entity"),
  that later entry ignored, its first one applied or refused as it was: the answer
  has one result per entity.
  validate_only checks and changes nothing. Removing a key the entity lacks is no error;
  an entity left without keys is gone.
- DescribeClientQuotas filters by components: per type one of exact name (match must be
  a name), default (match null) or any (match null: every entity with that type,
  defaults included). A type twice, an empty type or a match that does not fit its
  match type is INVALID_REQUEST; an unknown type or match type UNSUPPORTED_VERSION; ip
  with user or client-id INVALID_REQUEST. `strict` keeps only entities with no other
  types than the filter's.
- The quota for a connection, per key, is the first entity that sets it in this order
  (user U, client id C): {U, C}, {U, default C}, {U}, {default U, C},
  {default U, default C}, {default U}, {C}, {default C}. Connections whose chosen entity
  resolves to the same names share one rate: a {default U} quota gives each user its own.
- A rate is measured as Kafka's: quota.window.num (11) samples of
  quota.window.size.seconds (1 s); the rate is the samples' sum over the time they
  cover, counted as at least 10 full windows. A request is recorded, then checked: over
  the quota, the throttle time is (rate - quota) / quota * window ms, rounded. Byte
  rates are not capped; request_percentage's throttle is capped at one window.
- request_percentage is recorded as the request's handling time, 100 per second of it.
- A Fetch answer holds at most what the consumer_byte_rate allows in WINDOW_SAMPLES - 1
  windows; a throttled one is sent without records, and its bytes are not counted.
- ip quotas (connection_creation_rate) are kept and described but not enforced; nor is
  controller_mutation_rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Key -> whether its value must be a whole number.
CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
IP_KEYS = {CONNECTION_CREATION_RATE: True}
WHOLE_MAX = 2**63 - 1

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

WINDOW_MS = 1000  # quota.window.size.seconds
WINDOW_SAMPLES = 11  # quota.window.num

# Error codes (Kafka's Errors.java).
NONE = 0
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42

# A quota entity: its (type, name) pairs, sorted by type.
Entity = tuple[tuple[str, str | None], ...]
Outcome = tuple[int, str | None]  # error code and message


class FilterError(Exception):
    """A DescribeClientQuotas filter Kafka refuses: the whole request fails."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class QuotaOp:
    key: str
    value: float
    remove: bool


def quota_user(principal: str) -> str:
    """The user a quota names: the principal's name (User:alice -> alice)."""
    return principal.partition(":")[2] or principal


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity from request pairs; a type named twice keeps its last name, as Kafka's
    request parsing does."""
    return tuple(sorted(dict(pairs).items()))


def _entity_refusal(entity: Entity) -> str | None:
    if not entity:
        return "Invalid empty client quota entity"
    for entity_type, name in entity:
        if entity_type not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {entity_type}"
        if name is not None and not name:
            return f"Empty {entity_type} not supported"
    if len(entity) > 1 and any(t == IP for t, _ in entity):
        return (  # Kafka's words (sic)
            "Invalid quota entity combination, IP entity shouldnot be combined with User "
            "or ClientId"
        )
    return None


def _java(entity: Entity) -> str:
    """How Kafka's messages print an entity."""
    entries = ", ".join(f"{t}={'null' if n is None else n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{entries}}})"


def _value_refusal(keys: Mapping[str, bool], op: QuotaOp) -> str | None:
    whole = keys.get(op.key)
    if whole is None:
        return f"Invalid configuration key {op.key}"
    if op.remove:
        return None
    value = op.value
    if not math.isfinite(value) or value <= 0:
        return f"Quota {op.key} must be greater than 0"
    if whole:
        if value > WHOLE_MAX:
            return f"Proposed value for {op.key} is too large for a LONG."
        if value != math.floor(value):
            return f"{op.key} cannot be a fractional value."
    return None


@dataclass(slots=True)
class RateSensor:
    """Kafka's windowed rate: samples of WINDOW_MS, WINDOW_SAMPLES of them kept."""

    samples: list[list[float]] = field(default_factory=list)  # [start ms, sum]
    current: int = 0

    def record(self, value: float, now_ms: float) -> None:
        if not self.samples:
            self.samples.append([now_ms, 0.0])
            self.current = 0
        sample = self.samples[self.current]
        if now_ms - sample[0] >= WINDOW_MS:
            self.current = (self.current + 1) % WINDOW_SAMPLES
            if self.current >= len(self.samples):
                sample = [now_ms, 0.0]
                self.samples.append(sample)
            else:
                sample = self.samples[self.current]
                sample[0], sample[1] = now_ms, 0.0
        sample[1] += value

    def unrecord(self, value: float) -> None:
        if self.samples:
            self.samples[self.current][1] -= value

    def _purge(self, now_ms: float) -> None:
        for sample in self.samples:
            if now_ms - sample[0] >= WINDOW_SAMPLES * WINDOW_MS:
                sample[0], sample[1] = now_ms, 0.0

    def window_ms(self, now_ms: float) -> float:
        """The time the rate is taken over: at least WINDOW_SAMPLES - 1 full windows."""
        self._purge(now_ms)
        oldest = min((s[0] for s in self.samples), default=now_ms)
        elapsed = now_ms - oldest
        full = int(elapsed // WINDOW_MS)
        if full < WINDOW_SAMPLES - 1:
            elapsed += (WINDOW_SAMPLES - 1 - full) * WINDOW_MS
        return max(elapsed, 1.0)

    def rate(self, now_ms: float) -> float:
        """Per second."""
        window = self.window_ms(now_ms)
        return sum(s[1] for s in self.samples) / (window / 1000)


SensorKey = tuple[str, str, str]  # key, user tag, client-id tag


class ClientQuotas:
    def __init__(self) -> None:
        self.entries: dict[Entity, dict[str, float]] = {}
        self._sensors: dict[SensorKey, RateSensor] = {}
        # Called with every entity's quotas after a change (a data directory keeps them).
        self.on_change: Callable[[dict[Entity, dict[str, float]]], None] | None = None

    @property
    def any(self) -> bool:
        return bool(self.entries)

    # --- AlterClientQuotas ---

    def alter(
        self, changes: list[tuple[Entity, list[QuotaOp]]], validate_only: bool
    ) -> dict[Entity, Outcome]:
        """Each entity's outcome, in the order first named."""
        outcomes: dict[Entity, Outcome] = {}
        changed = False
        for entity, ops in changes:
            if entity in outcomes:
                outcomes[entity] = (INVALID_REQUEST, f"Ignoring duplicate entity {_java(entity)}")
                continue
            refusal = _entity_refusal(entity)
            keys = IP_KEYS if entity and entity[0][0] == IP else CLIENT_KEYS
            if refusal is None:
                refusal = next(filter(None, (_value_refusal(keys, op) for op in ops)), None)
            if refusal is not None:
                outcomes[entity] = (INVALID_REQUEST, refusal)
                continue
            outcomes[entity] = (NONE, None)
            if validate_only:
                continue
            values = dict(self.entries.get(entity, {}))
            for op in ops:
                if op.remove:
                    values.pop(op.key, None)
                else:
                    values[op.key] = op.value
            if values:
                self.entries[entity] = values
            else:
                self.entries.pop(entity, None)
            changed = True
        # Rates measured so far go on under the new quotas, as on Kafka.
        if changed and self.on_change is not None:
            self.on_change(dict(self.entries))
        return outcomes

    def restore(self, saved: dict[Entity, dict[str, float]]) -> None:
        self.entries = {entity: dict(values) for entity, values in saved.items() if values}

    # --- DescribeClientQuotas ---

    def describe(
        self, components: Iterable[tuple[str, int, str | None]], strict: bool
    ) -> list[tuple[Entity, dict[str, float]]]:
        exact: dict[str, str | None] = {}
        any_name: set[str] = set()
        for entity_type, match_type, match in components:
            if not entity_type:
                raise FilterError(INVALID_REQUEST, "Invalid empty entity type.")
            if entity_type in exact or entity_type in any_name:
                raise FilterError(
                    INVALID_REQUEST,
                    f"Entity type {entity_type} cannot appear more than once in the filter.",
                )
            if entity_type not in (USER, CLIENT_ID, IP):
                raise FilterError(UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise FilterError(
                        INVALID_REQUEST,
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    )
                exact[entity_type] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise FilterError(
                        INVALID_REQUEST,
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                    )
                exact[entity_type] = None
            elif match_type == MATCH_ANY:
                if match is not None:
                    raise FilterError(
                        INVALID_REQUEST,
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                        "string.",
                    )
                any_name.add(entity_type)
            else:
                raise FilterError(UNSUPPORTED_VERSION, f"Unknown match type {match_type}")
        named = exact.keys() | any_name
        if IP in named and named & {USER, CLIENT_ID}:
            raise FilterError(
                INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter component should "
                "not be used with user or clientId filter component.",
            )
        found = []
        for entity, values in self.entries.items():
            names = dict(entity)
            if strict and len(names) != len(named):
                continue
            if any(t not in names or names[t] != name for t, name in exact.items()):
                continue
            if any(t not in names for t in any_name):
                continue
            found.append((entity, dict(values)))
        return found

    # --- enforcement ---

    def quota_for(self, key: str, user: str, client_id: str) -> tuple[float, SensorKey] | None:
        """The quota `key` of a connection of `user` with `client_id`, and the rate it
        shares with the connections its entity covers; None without one."""
        entries = self.entries
        if not entries:
            return None
        for entity, user_tag, client_tag in (
            (((CLIENT_ID, client_id), (USER, user)), user, client_id),
            (((CLIENT_ID, None), (USER, user)), user, client_id),
            (((USER, user),), user, ""),
            (((CLIENT_ID, client_id), (USER, None)), user, client_id),
            (((CLIENT_ID, None), (USER, None)), user, client_id),
            (((USER, None),), user, ""),
            (((CLIENT_ID, client_id),), "", client_id),
            (((CLIENT_ID, None),), "", client_id),
        ):
            value = entries.get(entity, {}).get(key)
            if value is not None:
                return value, (key, user_tag, client_tag)
        return None

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record `value` against the connection's quota `key`: the throttle time in
        milliseconds (0 within the quota or without one)."""
        found = self.quota_for(key, user, client_id)
        if found is None:
            return 0
        bound, sensor_key = found
        sensor = self._sensors.get(sensor_key)
        if sensor is None:
            sensor = self._sensors[sensor_key] = RateSensor()
        sensor.record(value, now_ms)
        rate = sensor.rate(now_ms)
        if rate <= bound:
            return 0
        throttle = round((rate - bound) / bound * sensor.window_ms(now_ms))
        if key == REQUEST_PERCENTAGE:
            throttle = min(throttle, WINDOW_MS)
        return int(throttle)

    def unrecord(self, key: str, user: str, client_id: str, value: float) -> None:
        """Take back a recorded `value` (a throttled fetch's answer is sent empty)."""
        found = self.quota_for(key, user, client_id)
        if found is not None and (sensor := self._sensors.get(found[1])) is not None:
            sensor.unrecord(value)

    def max_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """The most the quota `key` allows in one full window (Kafka caps a Fetch's
        answer to it); None without a quota."""
        found = self.quota_for(key, user, client_id)
        if found is None:
            return None
        return found[0] * (WINDOW_SAMPLES - 1) * WINDOW_MS / 1000

    def rate(self, key: str, user: str, client_id: str, now_ms: float) -> float | None:
        found = self.quota_for(key, user, client_id)
        if found is None:
            return None
        sensor = self._sensors.get(found[1])
        return 0.0 if sensor is None else sensor.rate(now_ms)
