"""Requests and answers as a broker saw them, for tests that check what a client sent.

Off by default (`Broker(record_requests=True)` or `cluster.record_requests()` turns it
on): then every answered request is kept, decoded, with its encoded answer, which is
decoded only when a test looks at it, so recording costs one append per request. The
newest `RECORDED_MAX` are kept per broker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from minibroker.protocol import messages
from minibroker.protocol.recording import kafka_api_name, plain

RECORDED_MAX = 100_000


@dataclass(slots=True)
class Recorded:
    """One request a broker answered, and its answer."""

    at: float  # time.time() when answered
    node_id: int
    client_id: str | None
    api_key: int
    version: int
    correlation_id: int
    request: Any  # the decoded request (a kio entity)
    frame: bytes = field(repr=False)  # the answer as sent
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
