"""A broker without sockets for handler tests: requests are encoded as a client sends
them, dispatched, and the framed answers decoded as a client reads them.

The clock is a FakeClock, so long polls are finished by calling them (when a key they
wait on changes, or at their deadline), never by sleeping.
"""

from __future__ import annotations

import itertools
from typing import Any

from harness.raw_client import encode, make_request
from minibroker.config import BrokerConfig
from minibroker.dispatch import Dispatcher, PendingReply
from minibroker.protocol import messages
from minibroker.state.clock import FakeClock
from minibroker.state.cluster import ClusterState, Node


class SansIOBroker:
    """`nodes` brokers' shared state; requests are served by node 0's dispatcher."""

    def __init__(
        self,
        config: BrokerConfig | None = None,
        *,
        nodes: int = 1,
        wall_ms: int = 1_700_000_000_000,
    ) -> None:
        self.clock = FakeClock(wall_ms=wall_ms)
        self.cluster = ClusterState(config or BrokerConfig(), self.clock)
        for node_id in range(nodes):
            self.cluster.add_node(Node(node_id=node_id, host="127.0.0.1", port=9092 + node_id))
        self.dispatcher = Dispatcher(self.cluster, node_id=0)
        self._ids = itertools.count(1)

    def send(self, api_key: int, version: int, **fields: Any) -> bytes | PendingReply | None:
        """Dispatch one request; the framed answer, a long poll, or None (no answer)."""
        return self.send_request(api_key, version, make_request(api_key, version, **fields))

    def send_request(self, api_key: int, version: int, request: Any) -> bytes | PendingReply | None:
        """`send` for a request already built (harness.raw_client's builders)."""
        frame = encode(api_key, version, request, next(self._ids))
        return self.dispatcher.dispatch(frame[4:])

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        """Dispatch one request that is answered at once; the decoded response body."""
        return self.request(api_key, version, make_request(api_key, version, **fields))

    def request(self, api_key: int, version: int, request: Any) -> Any:
        """`call` for a request already built, as RawClient.request."""
        reply = self.send_request(api_key, version, request)
        assert isinstance(reply, bytes), f"expected an answer now, got {reply!r}"
        return decode(reply, api_key, version)


def decode(reply: bytes, api_key: int, version: int) -> Any:
    """A framed response (size prefix included) as a client decodes it."""
    assert int.from_bytes(reply[:4], "big") == len(reply) - 4
    _, body = messages.decode_response(reply[4:], api_key, version)
    return body
