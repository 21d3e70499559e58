"""Per-connection budgets and timeouts: the bookkeeping the server consults. Sans-IO.

The rules (settings are fields of `BrokerConfig`):
- Memory. Each node counts the bytes its connections hold: receive buffers and received
  requests not yet answered. While that count is above `queued_max_request_bytes`, a
  connection that holds part of a frame stops reading until the count falls again
  (Kafka's memory pool does the same); a connection whose buffers already hold its
  next request is unaffected, so small requests keep flowing.
- One request at a time. A connection stops reading once a request has arrived and
  resumes when the answer has left (Kafka mutes the channel the same way), so the
  memory one connection can make the broker hold is bounded by one request and one
  response, however many requests it pipelines or leaves unread.
- A frame whose first byte arrived more than `partial_request_timeout_ms` ago and that
  is still incomplete closes its connection.
- A connection with nothing in progress and no bytes received for
  `connections_max_idle_ms` is closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from minibroker.config import BrokerConfig


class Verdict(Enum):
    KEEP = "keep"
    SHRINK = "shrink"  # idle for a while: give back receive memory
    CLOSE_PARTIAL = "partial request timed out"
    CLOSE_IDLE = "idle for connections_max_idle_ms"


SHRINK_AFTER_SECONDS = 1.0


@dataclass(slots=True)
class ConnectionMeter:
    """What one connection holds and when it last did something (monotonic seconds)."""

    opened_at: float
    held: int = 0  # bytes of receive buffers and unanswered requests
    last_activity: float = 0.0
    partial_since: float | None = None  # when the first byte of an incomplete frame came
    busy: bool = False  # a request is being answered (or waits in a long poll)

    def __post_init__(self) -> None:
        self.last_activity = self.opened_at

    def received(self, now: float, *, partial: bool) -> None:
        """Bytes arrived; `partial` says whether a frame is now incomplete."""
        self.last_activity = now
        if not partial:
            self.partial_since = None
        elif self.partial_since is None:
            self.partial_since = now

    def verdict(self, now: float, config: BrokerConfig) -> Verdict:
        if self.partial_since is not None:
            if now - self.partial_since > config.partial_request_timeout_ms / 1000:
                return Verdict.CLOSE_PARTIAL
            return Verdict.KEEP
        if self.busy:
            return Verdict.KEEP
        idle = now - self.last_activity
        if idle > config.connections_max_idle_ms / 1000:
            return Verdict.CLOSE_IDLE
        return Verdict.SHRINK if idle > SHRINK_AFTER_SECONDS else Verdict.KEEP


class MemoryBudget:
    """Bytes held by all connections of a node against `queued_max_request_bytes`."""

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError("queued_max_request_bytes must be positive")
        self.limit = limit
        self.total = 0

    def update(self, meter: ConnectionMeter, held: int) -> None:
        self.total += held - meter.held
        meter.held = held

    def release(self, meter: ConnectionMeter) -> None:
        self.update(meter, 0)

    @property
    def exhausted(self) -> bool:
        return self.total > self.limit
