"""The quota rules without a broker (minibroker/state/quotas.py): which entity's quota a
connection gets, and the throttle time Kafka's windowed rate gives."""

from __future__ import annotations

from typing import Any

import pytest

from harness.raw_client import encode, make, make_request, produce_request
from minibroker.config import BrokerConfig
from minibroker.protocol.records import build_batch
from minibroker.state.quotas import (
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    QuotaOp,
    make_entity,
)
from minibroker.state.sessions import open_session
from tests.sansio import SansIOBroker, decode

CLUSTER_AUTHORIZATION_FAILED = 31

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


# --- through the dispatcher, as an authenticated principal ---


def _as(broker: SansIOBroker, principal: str, api_key: int, version: int, request: Any) -> Any:
    """The decoded answer to `request` from a connection of `principal`, and the throttle
    time its connection is muted for."""
    session = open_session(principal=principal)
    frame = encode(api_key, version, request, 7)
    reply = broker.dispatcher.dispatch(frame[4:], session=session)
    assert isinstance(reply, bytes)
    return decode(reply, api_key, version), broker.dispatcher.take_throttle(session)


def _alter_request(user: str, key: str, value: float) -> Any:
    entity = (make(49, 1, "EntityData", entity_type="user", entity_name=user),)
    op = make(49, 1, "OpData", key=key, value=value, remove=False)
    entries = (make(49, 1, "EntryData", entity=entity, ops=(op,)),)
    return make_request(49, 1, entries=entries, validate_only=False)


def test_only_principals_allowed_on_the_cluster_alter_or_describe_quotas() -> None:
    broker = SansIOBroker(BrokerConfig(acls_enabled=True, super_users="User:admin"))
    request = _alter_request("bob", PRODUCER_BYTE_RATE, 100)
    answer, _ = _as(broker, "User:bob", 49, 1, request)
    assert [int(e.error_code) for e in answer.entries] == [CLUSTER_AUTHORIZATION_FAILED]
    describe = make_request(48, 1, components=(), strict=False)
    answer, _ = _as(broker, "User:bob", 48, 1, describe)
    assert (int(answer.error_code), answer.entries) == (CLUSTER_AUTHORIZATION_FAILED, None)
    answer, _ = _as(broker, "User:admin", 49, 1, request)
    assert [int(e.error_code) for e in answer.entries] == [0]
    answer, _ = _as(broker, "User:admin", 48, 1, describe)
    assert [e.entity[0].entity_name for e in answer.entries] == ["bob"]


def test_a_user_quota_throttles_that_users_connections_only() -> None:
    broker = SansIOBroker()
    broker.cluster.topics.create("t", 1)
    _as(broker, "User:admin", 49, 1, _alter_request("bob", PRODUCER_BYTE_RATE, 100))
    produce = produce_request("t", build_batch([(None, b"x" * 3000)]))
    answer, throttle_ms = _as(broker, "User:bob", 0, 9, produce)
    assert throttle_ms > 0
    assert answer.throttle_time.total_seconds() * 1000 == throttle_ms
    answer, throttle_ms = _as(broker, "User:alice", 0, 9, produce)
    assert throttle_ms == 0 and answer.throttle_time.total_seconds() == 0
