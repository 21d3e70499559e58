"""How fast one client address may open connections. Sans-IO: the server asks `admit`
for each new connection with the time, and closes it when refused.

The rules (`max_connection_creation_rate` in `BrokerConfig`):
- Each client address (the peer's IP, exactly as the socket reports it) has a bucket of
  up to `BURST_SECONDS` x `per_second` new connections that refills at `per_second` a
  second: a client that has been quiet may open that many at once, and `per_second` a
  second after. Kafka measures its connection rate quotas over about as long (11 samples
  of a second), so a burst passes there too.
- A connection over the rate is refused: the server closes it as soon as it is accepted,
  before any of its bytes are read, so a refused connection costs less than a served one.
  Kafka throttles the same way per IP (its `connection_creation_rate` quota), holding the
  accepted socket for the throttle time before closing it; closing at once holds no
  descriptor, and a client reconnects after its own backoff.
- Connections already open are never touched: a client that keeps its connections is
  never refused, whatever another client of the same address does.
- The addresses remembered are bounded: a bucket that has refilled is the same as none,
  and such buckets are forgotten whenever more than `TRACKED_ADDRESSES` are held.
- Refusals are reported at most once every `REPORT_SECONDS` per address, with how many.
"""

from __future__ import annotations

from dataclasses import dataclass

TRACKED_ADDRESSES = 10_000
BURST_SECONDS = 2
REPORT_SECONDS = 10.0


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float  # when `tokens` was worked out (monotonic seconds)
    refused: int = 0  # refused since the last report
    reported_at: float = float("-inf")


class ConnectionRate:
    """New connections per second and client address, within `per_second` (0: no limit)."""

    def __init__(self, per_second: float) -> None:
        if per_second < 0:
            raise ValueError(f"a connection rate must not be negative: {per_second}")
        self.per_second = per_second
        self.burst = per_second * BURST_SECONDS
        self._buckets: dict[str, _Bucket] = {}
        self._prune_above = TRACKED_ADDRESSES

    def __len__(self) -> int:
        return len(self._buckets)

    def admit(self, address: str, now: float) -> bool:
        """Whether a new connection from `address` at `now` is within the rate."""
        rate = self.per_second
        if not rate:
            return True
        bucket = self._buckets.get(address)
        if bucket is None:
            if len(self._buckets) >= self._prune_above:
                self._forget_refilled(now)
            self._buckets[address] = _Bucket(self.burst - 1, now)
            return True
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return True
        bucket.refused += 1
        return False

    def to_report(self, address: str, now: float) -> int:
        """Connections from `address` refused since its last report, when one is due
        (every REPORT_SECONDS at most); else 0."""
        bucket = self._buckets.get(address)
        if bucket is None or not bucket.refused or now - bucket.reported_at < REPORT_SECONDS:
            return 0
        refused, bucket.refused, bucket.reported_at = bucket.refused, 0, now
        return refused

    def _forget_refilled(self, now: float) -> None:
        rate, burst = self.per_second, self.burst
        self._buckets = {
            address: bucket
            for address, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.at) * rate < burst
        }
        # Pruning again only once as many more are held keeps admit() O(1) on average.
        self._prune_above = max(TRACKED_ADDRESSES, 2 * len(self._buckets))
