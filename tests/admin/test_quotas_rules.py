"""The quota rules without a broker (minibroker/state/quotas.py): which entity's quota a
connection gets, and the throttle time Kafka's windowed rate gives."""

from __future__ import annotations

import pytest

from minibroker.state.quotas import (
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    QuotaOp,
    make_entity,
)

# From the most to the least specific, as Kafka chooses.
PRECEDENCE = [
    {"user": "alice", "client-id": "app"},
    {"user": "alice", "client-id": None},
    {"user": "alice"},
    {"user": None, "client-id": "app"},
    {"user": None, "client-id": None},
    {"user": None},
    {"client-id": "app"},
    {"client-id": None},
]


def _quotas(entities: list[dict[str, str | None]], key: str = PRODUCER_BYTE_RATE) -> ClientQuotas:
    quotas = ClientQuotas()
    outcomes = quotas.alter(
        [
            (make_entity(entity.items()), [QuotaOp(key, float(1000 + rank), False)])
            for rank, entity in enumerate(entities)
        ],
        validate_only=False,
    )
    assert all(code == 0 for code, _ in outcomes.values())
    return quotas


@pytest.mark.parametrize("rank", range(len(PRECEDENCE)))
def test_the_most_specific_entity_that_sets_a_quota_applies(rank: int) -> None:
    quotas = _quotas(PRECEDENCE[rank:])
    found = quotas.quota_for(PRODUCER_BYTE_RATE, "alice", "app")
    assert found is not None and found[0] == 1000  # the first of those set
    assert quotas.quota_for(REQUEST_PERCENTAGE, "alice", "app") is None


def test_a_default_user_quota_gives_each_user_a_rate_of_its_own() -> None:
    quotas = _quotas([{"user": None}])
    assert quotas.record(PRODUCER_BYTE_RATE, "alice", "a", 20_000, 0) > 0
    assert quotas.record(PRODUCER_BYTE_RATE, "bob", "a", 5_000, 0) == 0
    assert quotas.record(PRODUCER_BYTE_RATE, "alice", "b", 1, 0) > 0  # alice's, any client


def test_throttle_time_is_the_excess_over_the_quota_across_the_window() -> None:
    quotas = _quotas([{"client-id": "app"}])  # 1000 B/s
    # The first 10 s count as a full window: 10,000 bytes at once are within the quota.
    assert quotas.record(PRODUCER_BYTE_RATE, "u", "app", 10_000, 0) == 0
    # 15,000 over a 10 s window: 1,500 B/s, half again the quota: 5 s.
    assert quotas.record(PRODUCER_BYTE_RATE, "u", "app", 5_000, 0) == 5000
    # 20 s on, the samples have expired: the rate starts again.
    assert quotas.record(PRODUCER_BYTE_RATE, "u", "app", 9_000, 20_000) == 0


def test_request_time_throttle_is_capped_at_one_window() -> None:
    quotas = _quotas([{"client-id": "app"}], REQUEST_PERCENTAGE)  # 1000 %
    assert quotas.record(REQUEST_PERCENTAGE, "u", "app", 1e9, 0) == 1000
