"""Requests and answers as a broker saw them, for tests that check what a client sent.

Off by default (`Broker(record_requests=True)` or `cluster.record_requests()` turns it
on): then every answered request is kept, decoded, with its encoded answer, which is
decoded only when a test looks at it, so recording costs one append per request.

What is kept is bounded by bytes (`record_requests_max_bytes` per broker, oldest dropped
first) and by count (`RECORDED_MAX`). Payloads are kept short: a bytes field (a record
batch, a group assignment) longer than `KEPT_PAYLOAD_BYTES` is kept as its first
`KEPT_PAYLOAD_BYTES` bytes, and an answer longer than that is decoded when it is
recorded and kept decoded with its bytes fields cut the same way. A recording that writes
to a file (`minibroker serve --record-file`) writes each request as a JSON line as it is
answered and keeps none of them.

While recording, each connection is noted too (`Recording.connections`, the newest
`CONNECTIONS_KEPT`): its client's address, when it opened and closed, and the client id
of its first request.
"""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minibroker.protocol import messages
from minibroker.protocol.recording import kafka_api_name, plain

RECORDED_MAX = 100_000
RECORDED_MAX_BYTES = 64 * 1024 * 1024
KEPT_PAYLOAD_BYTES = 64 * 1024
# What one recorded request costs beyond its payloads (its decoded objects, roughly).
ENTRY_BYTES = 1024
NODE_BYTES = 64  # each decoded message, struct or array item
CONNECTIONS_KEPT = 10_000


@dataclass(slots=True)
class ConnectionSeen:
    """One client connection while recording: the server fills in its client id (that
    of its first request) and when it closed."""

    node_id: int
    address: str  # host:port of the client
    opened_at: float  # time.time()
    client_id: str | None = None
    closed_at: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "node": self.node_id,
            "address": self.address,
            "client_id": self.client_id,
            "opened_ms": int(self.opened_at * 1000),
            "closed_ms": None if self.closed_at is None else int(self.closed_at * 1000),
        }


@dataclass(slots=True)
class Recorded:
    """One request a broker answered, and its answer."""

    at: float  # time.time() when answered
    node_id: int
    client_id: str | None
    api_key: int
    version: int
    correlation_id: int
    request: Any  # the decoded request (a kio entity), long payloads cut
    frame: bytes = field(repr=False)  # the answer as sent (b"" when kept decoded)
    _response: Any = field(default=None, repr=False)

    @property
    def api(self) -> str:
        return kafka_api_name(self.api_key)

    @property
    def response(self) -> Any:
        """The answer, decoded (on first use)."""
        if self._response is None:
            _, self._response = messages.decode_response(self.frame[4:], self.api_key, self.version)
        return self._response

    def answer(self) -> Any:
        """The answer, decoded, without keeping the decoded form (what reads a whole
        recording uses, so that the recording stays within its bound)."""
        if self._response is not None:
            return self._response
        return messages.decode_response(self.frame[4:], self.api_key, self.version)[1]

    def as_json(self) -> dict[str, Any]:
        return {
            "at": round(self.at, 6),
            "node_id": self.node_id,
            "client_id": self.client_id,
            "api": self.api,
            "version": self.version,
            "correlation_id": self.correlation_id,
            "request": plain(self.request),
            "response": plain(self.response),
        }

    def json_line(self) -> str:
        return json.dumps(self.as_json(), separators=(",", ":"))


class Recording:
    """The requests one broker answered, newest last, within `max_bytes` (estimated) and
    `RECORDED_MAX` entries; or, with `write_line`, each handed on as a JSON line and not
    kept."""

    def __init__(
        self,
        max_bytes: int = RECORDED_MAX_BYTES,
        write_line: Callable[[str], object] | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.write_line = write_line
        self.bytes = 0  # the estimated size of what is kept
        self.written = 0  # lines handed to write_line
        self.dropped = 0  # the oldest requests let go to stay within the bounds
        self._kept: deque[tuple[Recorded, int]] = deque()
        self.connections: deque[ConnectionSeen] = deque(maxlen=CONNECTIONS_KEPT)

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self) -> Any:
        return (recorded for recorded, _ in tuple(self._kept))

    def connection_opened(self, node_id: int, address: str, at: float) -> ConnectionSeen:
        seen = ConnectionSeen(node_id, address, at)
        self.connections.append(seen)
        return seen

    def keep(
        self,
        at: float,
        node_id: int,
        header: messages.RequestHeader,
        version: int,
        request: Any,
        encoded: messages.Encoded,
    ) -> None:
        size = ENTRY_BYTES
        trimmed, request_bytes = cut_payloads(request)
        size += request_bytes
        frame: bytes = b""
        response: Any = None
        if len(encoded) <= KEPT_PAYLOAD_BYTES:
            frame = encoded.joined() if isinstance(encoded, messages.FramePieces) else encoded
            size += len(frame)
        else:  # a long answer (a Fetch's records): decoded now, kept cut
            whole = encoded.joined() if isinstance(encoded, messages.FramePieces) else encoded
            _, decoded = messages.decode_response(whole[4:], header.api_key, version)
            del whole
            response, response_bytes = cut_payloads(decoded)
            size += response_bytes
        recorded = Recorded(
            at,
            node_id,
            header.client_id,
            header.api_key,
            version,
            header.correlation_id,
            trimmed,
            frame,
            response,
        )
        if self.write_line is not None:
            self.write_line(recorded.json_line() + "\n")
            self.written += 1
            return
        self._kept.append((recorded, size))
        self.bytes += size
        while self._kept and (self.bytes > self.max_bytes or len(self._kept) > RECORDED_MAX):
            _, dropped = self._kept.popleft()
            self.bytes -= dropped
            self.dropped += 1


def cut_payloads(value: Any, limit: int = KEPT_PAYLOAD_BYTES) -> tuple[Any, int]:
    """`value` (a kio entity) with every bytes field longer than `limit` cut to its first
    `limit` bytes, and the estimated size of what is left."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        size = NODE_BYTES
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            old = getattr(value, f.name)
            new, cost = cut_payloads(old, limit)
            size += cost
            if new is not old:
                changes[f.name] = new
        return (dataclasses.replace(value, **changes) if changes else value), size
    if isinstance(value, bytes | bytearray | memoryview):
        if len(value) > limit:
            return bytes(value[:limit]), limit
        return value, len(value)
    if isinstance(value, str):
        return value, len(value)
    if isinstance(value, tuple):
        size = NODE_BYTES
        items = []
        changed = False
        for item in value:
            new, cost = cut_payloads(item, limit)
            size += cost
            changed = changed or new is not item
            items.append(new)
        return (tuple(items) if changed else value), size
    return value, 8


def client_id_of(frame: bytes | memoryview) -> str:
    """The client id in a request frame's header ("" when it has none or is not one):
    every header version from v1 on carries it as an int16-sized string after the
    api key, version and correlation id."""
    if len(frame) < 10:
        return ""
    size = int.from_bytes(frame[8:10], "big", signed=True)
    if size <= 0 or len(frame) < 10 + size:
        return ""
    return bytes(frame[10 : 10 + size]).decode("utf-8", "replace")
