"""Faults: rules that make the broker misbehave on purpose, for tests of what clients do
when Kafka errs, stalls or drops connections. Sans-IO: the dispatcher asks `Faults.match`
for each request and the server carries out what it is told.

Rules:
- A rule matches a request when every filter it has matches: API (name or key),
  version range, broker (node id), client id, group id (the request's group_id, a
  FindCoordinator group key), topic and partition (the request names them).
- A rule is ignored for its first `after` matches, acts on the next `times` (None: on
  every one) and then stays in place, counting, without acting. `hits` counts every
  match, acted on or not; `wait_hits(n)` waits for n of them.
- Its action, one of: `error` (Kafka's error code: the matching partitions of Produce,
  Fetch, ListOffsets, OffsetCommit and the matching topics of Metadata get it, the other
  partitions are served; other APIs answer it as their top-level error without being
  served), `delay` (seconds before the answer leaves, the request served meanwhile),
  `drop` (never answered: the client times out), `close` (the connection closes, the
  request not served), `lose_response` (served, then the connection closes before the
  answer: a retry is a duplicate), `respond` (a function of the request returning the
  response's fields), or none (observe only).
- Rules are checked in the order they were added; the first that acts decides. A rule
  is active until removed (`remove()`, or `clear()` for all).
- Each time a rule acts, `Faults.acted` notes when, which rule (`Fault.describe()`), the
  API, the client id and the action: the newest `ACTED_KEPT`, for the test timeline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from minibroker.protocol import messages
from minibroker.protocol.recording import kafka_api_name

PARTITION_APIS = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    8: "OffsetCommit",
    3: "Metadata",
    78: "ShareFetch",
    79: "ShareAcknowledge",
}
# APIs answered with a top-level error code and nothing served.
TOP_LEVEL_ERROR_APIS = {
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    16: "ListGroups",
    22: "InitProducerId",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    60: "DescribeCluster",
}
# Acts of fault rules kept for the timeline (`Faults.acted`), newest last.
ACTED_KEPT = 1000


def api_key_of(api: str | int) -> int:
    if isinstance(api, int):
        return api
    wanted = api.replace("_", "").lower()
    for key in range(100):
        if messages.api_name(key).replace("_", "").lower() == wanted:
            return key
    raise ValueError(f"unknown API {api!r}: give Kafka's name (e.g. 'Produce') or its key")


class RequestFacts:
    """What a rule can match a request on. The group and the partitions it names are
    read from the request only when a rule asks (most rules filter on the API first)."""

    __slots__ = (
        "_group",
        "_partitions",
        "_request",
        "_topic_name",
        "api_key",
        "client_id",
        "node_id",
        "version",
    )

    def __init__(
        self,
        api_key: int,
        version: int,
        node_id: int,
        client_id: str | None,
        request: Any = None,
        topic_name: Callable[[Any], str | None] = lambda topic_id: None,
    ) -> None:
        self.api_key = api_key
        self.version = version
        self.node_id = node_id
        self.client_id = client_id
        self._request = request
        self._topic_name = topic_name
        self._group: tuple[str | None] | None = None
        self._partitions: frozenset[tuple[str, int | None]] | None = None

    @property
    def group_id(self) -> str | None:
        """The request's group id (a FindCoordinator's group key), if any."""
        if self._group is None:
            request = self._request
            group = getattr(request, "group_id", None)
            if self.api_key == 10 and getattr(request, "key_type", 0) == 0:
                keys = getattr(request, "coordinator_keys", None) or ()
                group = keys[0] if keys else getattr(request, "key", None)
            self._group = (group if isinstance(group, str) else None,)
        return self._group[0]

    @property
    def partitions(self) -> frozenset[tuple[str, int | None]]:
        """(topic, partition) pairs the request names; partition None for a topic alone."""
        if self._partitions is None:
            self._partitions = frozenset(_named_partitions(self._request, self._topic_name))
        return self._partitions


@dataclass(eq=False)
class Fault:
    """One rule (see the rules at the top). Made by `Faults.add`."""

    api: int | None = None
    versions: tuple[int, int] | None = None
    broker: int | None = None
    client_id: str | None = None
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    error: int | None = None
    delay: float = 0.0
    drop: bool = False
    close: bool = False
    lose_response: bool = False
    respond: Callable[[Any], Mapping[str, Any]] | None = None
    times: int | None = None
    after: int = 0
    hits: int = 0
    acted: int = 0
    _owner: Faults | None = field(default=None, repr=False)

    @property
    def observes_only(self) -> bool:
        return (
            self.error is None
            and not self.delay
            and not (self.drop or self.close or self.lose_response)
            and self.respond is None
        )

    @property
    def action(self) -> str:
        """What this rule does when it acts: error=NAME, delay=S, drop, close, ..."""
        if self.error is not None:
            return f"error={ErrorCode(self.error).name.upper()}"
        if self.delay:
            return f"delay={self.delay:g}"
        for flag in ("drop", "close", "lose_response"):
            if getattr(self, flag):
                return flag
        return "respond" if self.respond is not None else "observe"

    def describe(self) -> str:
        """The rule in the command line's words (`parse_fault`): API:filters,action."""
        parts = [] if self.api is None else [f"api={kafka_api_name(self.api)}"]
        if self.versions is not None:
            parts.append(f"versions={self.versions[0]}-{self.versions[1]}")
        for name in ("broker", "client_id", "group", "topic", "partition"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value}")
        parts.append(self.action)
        if self.times is not None:
            parts.append(f"times={self.times}")
        if self.after:
            parts.append(f"after={self.after}")
        return ",".join(parts)

    def matches(self, facts: RequestFacts) -> bool:
        if self.api is not None and self.api != facts.api_key:
            return False
        if self.versions is not None and not (
            self.versions[0] <= facts.version <= self.versions[1]
        ):
            return False
        if self.broker is not None and self.broker != facts.node_id:
            return False
        if self.client_id is not None and self.client_id != facts.client_id:
            return False
        if self.group is not None and self.group != facts.group_id:
            return False
        if self.topic is not None or self.partition is not None:
            return any(self.covers(topic, part) for topic, part in facts.partitions)
        return True

    def covers(self, topic: str, partition: int | None) -> bool:
        """Whether this rule's topic and partition filters take in a named partition."""
        if self.topic is not None and topic != self.topic:
            return False
        return self.partition is None or partition is None or partition == self.partition

    def partition_error(self, topic: str, partition: int | None) -> ErrorCode | None:
        """The error this rule gives a partition (or topic) of a request it acts on."""
        if self.error is None or not self.covers(topic, partition):
            return None
        return ErrorCode(self.error)

    def wait_hits(self, count: int, timeout: float = 10.0) -> int:
        """Block until the rule has matched `count` requests; its hits. TimeoutError if
        that does not happen within `timeout` seconds."""
        assert self._owner is not None
        return self._owner._wait(self, count, timeout)

    async def hits_reached(self, count: int, timeout: float = 10.0) -> int:
        """`wait_hits` for asyncio code (the broker may run on the same loop)."""
        deadline = time.monotonic() + timeout
        while self.hits < count:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{self} matched {self.hits} requests, not {count}")
            await asyncio.sleep(0.005)
        return self.hits

    def remove(self) -> None:
        if self._owner is not None:
            self._owner.remove(self)


class Faults:
    """The fault rules of a broker or cluster (thread-safe: tests add rules from their
    own thread while the broker serves)."""

    def __init__(self) -> None:
        # In the order added; change them through add/remove/clear only.
        self.rules: list[Fault] = []
        self._changed = threading.Condition()
        # (time.time(), rule, API key, client id, action) of each act, newest last.
        self.acted: deque[tuple[float, Fault, int, str | None, str]] = deque(maxlen=ACTED_KEPT)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __iter__(self) -> Iterator[Fault]:
        return iter(list(self.rules))

    def add(
        self,
        api: str | int | None = None,
        *,
        versions: tuple[int, int] | int | None = None,
        broker: int | None = None,
        client_id: str | None = None,
        group: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        error: int | ErrorCode | None = None,
        delay: float = 0.0,
        drop: bool = False,
        close: bool = False,
        lose_response: bool = False,
        respond: Callable[[Any], Mapping[str, Any]] | None = None,
        times: int | None = None,
        after: int = 0,
    ) -> Fault:
        """Add a rule; returns it (see the module's rules)."""
        key = None if api is None else api_key_of(api)
        actions = [
            error is not None,
            delay > 0,
            drop,
            close,
            lose_response,
            respond is not None,
        ]
        if sum(actions) > 1:
            raise ValueError(
                "a fault has one action: error, delay, drop, close, lose_response or respond"
            )
        if delay < 0:
            raise ValueError(f"delay must not be negative: {delay}")
        if (times is not None and times < 0) or after < 0:
            raise ValueError("times and after must not be negative")
        if error is not None:
            ErrorCode(int(error))  # a Kafka error code, or ValueError
            if key is None or (key not in PARTITION_APIS and key not in TOP_LEVEL_ERROR_APIS):
                served = sorted({*PARTITION_APIS.values(), *TOP_LEVEL_ERROR_APIS.values()})
                raise ValueError(
                    f"error= needs an API that can carry it: one of {', '.join(served)}"
                )
        if respond is not None and key is None:
            raise ValueError("respond= needs an API: the response is that API's")
        span = (versions, versions) if isinstance(versions, int) else versions
        rule = Fault(
            api=key,
            versions=span,
            broker=broker,
            client_id=client_id,
            group=group,
            topic=topic,
            partition=partition,
            error=None if error is None else int(error),
            delay=delay,
            drop=drop,
            close=close,
            lose_response=lose_response,
            respond=respond,
            times=times,
            after=after,
            _owner=self,
        )
        with self._changed:
            self.rules.append(rule)
        return rule

    def remove(self, rule: Fault) -> None:
        with self._changed:
            if rule in self.rules:
                self.rules.remove(rule)

    def clear(self) -> None:
        with self._changed:
            self.rules.clear()

    def match(self, facts: RequestFacts) -> Fault | None:
        """Count the request against every rule; the first that acts on it."""
        chosen: Fault | None = None
        matched = False
        with self._changed:
            for rule in self.rules:
                if not rule.matches(facts):
                    continue
                matched = True
                rule.hits += 1
                acts = (
                    rule.hits > rule.after
                    and (rule.times is None or rule.acted < rule.times)
                    and not rule.observes_only
                )
                if acts and chosen is None:
                    rule.acted += 1
                    chosen = rule
                    self.acted.append(
                        (time.time(), rule, facts.api_key, facts.client_id, rule.action)
                    )
            if matched:
                self._changed.notify_all()
        return chosen

    def _wait(self, rule: Fault, count: int, timeout: float) -> int:
        with self._changed:
            if not self._changed.wait_for(lambda: rule.hits >= count, timeout):
                raise TimeoutError(f"{rule} matched {rule.hits} requests, not {count}")
            return rule.hits


_TOPIC_ARRAYS = ("topics", "topic_data")
_PARTITION_ARRAYS = ("partitions", "partition_data", "partition_indexes")
_TOPIC_NAMES = ("name", "topic")
_PARTITION_INDEXES = ("index", "partition", "partition_index")


def _named_partitions(
    request: Any, topic_name: Callable[[Any], str | None]
) -> Iterator[tuple[str, int | None]]:
    for array in _TOPIC_ARRAYS:
        for entry in getattr(request, array, None) or ():
            name = next(
                (v for n in _TOPIC_NAMES if isinstance(v := getattr(entry, n, None), str)), None
            )
            if name is None and getattr(entry, "topic_id", None) is not None:
                name = topic_name(entry.topic_id)
            if name is None:
                continue
            named = False
            for parts in _PARTITION_ARRAYS:
                for part in getattr(entry, parts, None) or ():
                    index = (
                        part
                        if isinstance(part, int)
                        else next(
                            (
                                v
                                for n in _PARTITION_INDEXES
                                if isinstance(v := getattr(part, n, None), int)
                            ),
                            None,
                        )
                    )
                    if index is not None:
                        named = True
                        yield name, int(index)
            if not named:
                yield name, None


# Int fields whose "nothing" is -1 in Kafka's error answers.
_MINUS_ONE_SUFFIXES = ("_id", "generation_id", "epoch", "offset", "watermark", "timestamp")


def blank(cls: type[Any], **fields: Any) -> Any:
    """An entity of kio class `cls` with `fields` and every other field empty: Kafka's
    default, else 0 / -1 (ids, epochs, offsets) / "" / False / no items."""
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):
        name = spec.name
        if name in fields:
            values[name] = fields[name]
        elif spec.default is not dataclasses.MISSING:
            values[name] = spec.default
        elif spec.default_factory is not dataclasses.MISSING:
            values[name] = spec.default_factory()
        else:
            values[name] = _empty(name, spec)
    return cls(**values)


def _empty(name: str, spec: dataclasses.Field[Any]) -> Any:
    kind = spec.metadata.get("kafka_type")
    if name == "error_code":
        return ErrorCode.none
    if kind in ("string", "uuid") and "None" in str(spec.type):
        return None
    if kind == "string":
        return ""
    if kind == "bool":
        return False
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kind == "bytes":
        return b""
    if kind == "uuid":
        return uuid.UUID(int=0)
    if kind is None or kind == "records":
        return None if "None" in str(spec.type) else ()
    return -1 if name.endswith(_MINUS_ONE_SUFFIXES) else 0


def error_response(api_key: int, version: int, request: Any, code: int) -> Any:
    """The answer of a top-level-error API (TOP_LEVEL_ERROR_APIS) refusing `request`."""
    cls = messages.response_class(api_key, version)
    if api_key == 10 and "coordinators" in cls.__dataclass_fields__:  # FindCoordinator v4+
        module = messages.response_module(api_key, version)
        coordinators = tuple(
            blank(module.Coordinator, key=key, error_code=ErrorCode(code))
            for key in request.coordinator_keys
        )
        return blank(cls, coordinators=coordinators)
    member_id = getattr(request, "member_id", None)
    extra = {"member_id": member_id} if isinstance(member_id, str) else {}
    return blank(cls, error_code=ErrorCode(code), **extra)


def custom_response(api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
    """The answer `respond=` gave, the fields it left out empty."""
    cls = messages.response_class(api_key, version)
    unknown = sorted(set(fields) - {spec.name for spec in dataclasses.fields(cls)})
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {unknown[0]!r}")
    return blank(cls, **fields)


_FLAGS = ("drop", "close", "lose_response")
_TEXT_KEYS = ("api", "client_id", "group", "topic")
_INT_KEYS = ("broker", "partition", "times", "after")


def parse_fault(spec: str) -> dict[str, Any]:
    """`Faults.add` keywords from a command-line rule: `Produce:error=NOT_LEADER_OR_FOLLOWER,
    times=3` (the API first, then key=value pairs; drop, close and lose_response alone;
    error by Kafka's name or code; versions as 3-9 or 5; delay in seconds)."""
    api, _, rest = spec.partition(":")
    if "=" in api:  # no API given: every item is key=value
        api, rest = "", spec
    arguments: dict[str, Any] = {"api": api} if api else {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, has_value, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if key in _FLAGS and not has_value:
            arguments[key] = True
        elif not has_value:
            raise ValueError(f"{item!r}: expected key=value (or drop, close, lose_response)")
        elif key in _TEXT_KEYS:
            arguments[key] = value
        elif key in _INT_KEYS:
            arguments[key] = int(value)
        elif key == "delay":
            arguments[key] = float(value)
        elif key == "versions":
            low, _, high = value.partition("-")
            arguments[key] = (int(low), int(high or low))
        elif key == "error":
            arguments[key] = int(value) if value.lstrip("-").isdigit() else _error_named(value)
        else:
            raise ValueError(f"{key!r} is not a fault rule's key")
    return arguments


def _error_named(name: str) -> int:
    try:
        return int(ErrorCode[name.strip().lower()])
    except KeyError:
        raise ValueError(f"{name!r} is not a Kafka error name") from None
