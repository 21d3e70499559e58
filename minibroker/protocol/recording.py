"""What the recording proxy (`minibroker proxy`) sees, without any I/O: requests and
responses decoded into JSON-able values and paired by correlation id, and the broker
addresses in responses found and replaced so that clients keep talking through the proxy.

Rules:
- A request is remembered by its correlation id until its response arrives; the exchange
  is then one record (request, response, the time between them). A request that never
  gets an answer (Produce with acks=0, a connection closed first) is reported by
  `unanswered()` with a null response.
- Anything that cannot be decoded (a version this build does not know, a broken frame) is
  recorded with the reason and forwarded unchanged: the proxy never stands between a
  client and its broker on a question of decoding.
- Bytes fields (record batches, assignments) are recorded as base64 up to BYTES_SHOWN
  bytes, and as their size beyond that; durations and times as milliseconds; ids as text.
- Addresses: every (host, port) pair in a Metadata, FindCoordinator or DescribeCluster
  response, and in the node endpoints of Produce and Fetch responses, names a broker.
  The proxy maps each to a listener of its own and the response is re-encoded with those.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minibroker.protocol import messages

BYTES_SHOWN = 1024
_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)

METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER, PRODUCE, FETCH = 3, 10, 60, 0, 1
# APIs whose responses name brokers anywhere in them, and those that may in one field.
_ADDRESS_APIS = frozenset({METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER})
_ENDPOINT_APIS = frozenset({PRODUCE, FETCH})

Address = tuple[str, int]


def kafka_api_name(api_key: int) -> str:
    """Kafka's name of an API ("api_versions" in kio is "ApiVersions")."""
    return "".join(part.title() for part in messages.api_name(api_key).split("_"))


def plain(value: Any) -> Any:
    """A kio entity (or any value in one) as JSON-able data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, int | float):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        size = value.nbytes if isinstance(value, memoryview) else len(value)
        if size > BYTES_SHOWN:
            return {"size": size}  # measured, not copied: a large value is never held twice
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, tuple | list | frozenset | set):
        return [plain(item) for item in value]
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


@dataclass
class _Asked:
    api_key: int
    version: int
    client_id: str | None
    request: Any
    at: float

    def exchange(self, connection: int, correlation_id: int) -> Exchange:
        return Exchange(
            connection,
            self.api_key,
            self.version,
            correlation_id,
            self.client_id,
            self.request,
            asked_at=self.at,
        )


@dataclass
class Exchange:
    """One request and its response, as recorded."""

    connection: int
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    request: Any  # plain data, or None when it could not be decoded
    response: Any = None
    asked_at: float = 0.0
    answered_at: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def api(self) -> str:
        return kafka_api_name(self.api_key)

    def as_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {
            "at": round(self.asked_at, 6),
            "connection": self.connection,
            "api": self.api,
            "api_key": self.api_key,
            "version": self.version,
            "correlation_id": self.correlation_id,
            "client_id": self.client_id,
            "request": self.request,
            "response": self.response,
            "ms": None
            if self.answered_at is None
            else round((self.answered_at - self.asked_at) * 1000, 3),
        }
        if self.problems:
            line["problems"] = self.problems
        return line


@dataclass
class Answer:
    """A response frame as read: its exchange, and the decoded response (None when it
    could not be decoded) for the address rewrite."""

    exchange: Exchange | None
    response: Any


class Conversation:
    """One client connection: requests waiting for their responses."""

    def __init__(self, connection: int) -> None:
        self.connection = connection
        self._waiting: dict[int, _Asked] = {}

    def asked(self, frame: bytes | memoryview, at: float) -> None:
        """A request frame (without its size prefix) on its way to the broker."""
        try:
            api_key, version, correlation_id = messages.peek_header_prefix(frame)
        except Exception:
            return  # not even a header: the broker will close the connection
        try:
            header, body = messages.decode_request(frame)
            asked = _Asked(api_key, version, header.client_id, plain(body), at)
        except Exception as exc:
            asked = _Asked(api_key, version, None, None, at)
            asked.request = {"undecoded": f"{type(exc).__name__}: {exc}"}
        self._waiting[correlation_id] = asked

    def answered(self, frame: bytes | memoryview, at: float) -> Answer:
        """A response frame (without its size prefix) on its way to the client."""
        if len(frame) < 4:
            return Answer(None, None)
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        asked = self._waiting.pop(correlation_id, None)
        if asked is None:
            return Answer(None, None)
        exchange = asked.exchange(self.connection, correlation_id)
        exchange.answered_at = at
        try:
            _, response = messages.decode_response(frame, asked.api_key, asked.version)
        except Exception as exc:
            exchange.problems.append(f"response undecoded: {type(exc).__name__}: {exc}")
            return Answer(exchange, None)
        exchange.response = plain(response)
        return Answer(exchange, response)

    def unanswered(self) -> list[Exchange]:
        """The requests still waiting (called when the connection ends)."""
        left = [asked.exchange(self.connection, c) for c, asked in self._waiting.items()]
        self._waiting.clear()
        return left


def broker_addresses(api_key: int, response: Any) -> set[Address]:
    """Every broker address the response names."""
    found: set[Address] = set()
    for entity in _address_holders(api_key, response):
        _collect(entity, found)
    return found


def with_addresses(api_key: int, response: Any, moved: Mapping[Address, Address]) -> Any:
    """The response with each broker address replaced by `moved[address]`."""
    if api_key in _ADDRESS_APIS:
        return _replace(response, moved.get)
    if api_key in _ENDPOINT_APIS and _endpoints(response):
        endpoints = tuple(_replace(e, moved.get) for e in response.node_endpoints)
        return dataclasses.replace(response, node_endpoints=endpoints)
    return response


def _address_holders(api_key: int, response: Any) -> tuple[Any, ...]:
    if api_key in _ADDRESS_APIS:
        return (response,)
    if api_key in _ENDPOINT_APIS:
        return _endpoints(response)
    return ()


def _endpoints(response: Any) -> tuple[Any, ...]:
    """Produce and Fetch responses name brokers in node_endpoints (newer versions only)."""
    return tuple(getattr(response, "node_endpoints", None) or ())


def _address(entity: Any) -> Address | None:
    host, port = getattr(entity, "host", None), getattr(entity, "port", None)
    if isinstance(host, str) and host and isinstance(port, int) and port >= 0:
        return host, int(port)
    return None


def _collect(entity: Any, found: set[Address]) -> None:
    if not dataclasses.is_dataclass(entity):
        return
    address = _address(entity)
    if address is not None:
        found.add(address)
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if isinstance(value, tuple):
            for item in value:
                _collect(item, found)
        elif dataclasses.is_dataclass(value):
            _collect(value, found)


def _replace(entity: Any, lookup: Callable[[Address], Address | None]) -> Any:
    if not dataclasses.is_dataclass(entity) or isinstance(entity, type):
        return entity
    port_type: Any = type(getattr(entity, "port", 0))
    changes: dict[str, Any] = {}
    address = _address(entity)
    if address is not None and (target := lookup(address)) is not None:
        changes["host"] = target[0]
        changes["port"] = port_type(target[1])
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            replaced = tuple(_replace(item, lookup) for item in value)
            if any(new is not old for new, old in zip(replaced, value, strict=True)):
                changes[f.name] = replaced
        elif dataclasses.is_dataclass(value):
            new = _replace(value, lookup)
            if new is not value:
                changes[f.name] = new
    return dataclasses.replace(entity, **changes) if changes else entity
