"""Where minibroker's group coordinator deliberately differs from Kafka's defaults, each
test states the difference and checks both sides: against minibroker in every run, and
against Apache Kafka in CI's parity run (--kafka-backend=kafka-jvm)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from harness.raw_client import RawClient, make, make_request
from minibroker import Broker
from minibroker.testing.backends import KafkaService
from tests.groups.conftest import KAFKA_MIN_SESSION_MS, unique

JOIN_GROUP = 11
NONE, INVALID_SESSION_TIMEOUT = 0, 26
# minibroker's group.min.session.timeout.ms (Kafka's is KAFKA_MIN_SESSION_MS).
MINIBROKER_MIN_SESSION_MS = 100
JOIN_VERSION = 3  # served by Kafka 2.x to 4.x, and joins without a member-id round trip


def join_with_session(broker: KafkaService, session_ms: int) -> Any:
    request = make_request(
        JOIN_GROUP,
        JOIN_VERSION,
        group_id=unique("session"),
        session_timeout=timedelta(milliseconds=session_ms),
        rebalance_timeout=timedelta(seconds=10),
        member_id="",
        protocol_type="consumer",
        protocols=(
            make(JOIN_GROUP, JOIN_VERSION, "JoinGroupRequestProtocol", name="range", metadata=b""),
        ),
    )
    with RawClient(broker.bootstrap_servers, timeout=30) as client:
        return client.request(JOIN_GROUP, JOIN_VERSION, request)


@pytest.mark.parity
def test_session_timeouts_below_kafkas_minimum_are_accepted_by_minibroker_only(
    kafka_broker: KafkaService,
) -> None:
    """Kafka refuses a session shorter than group.min.session.timeout.ms (6000 ms by
    default); minibroker's minimum is 100 ms, so tests of session expiry take about a
    second instead of six."""
    short = join_with_session(kafka_broker, 1_500)
    if isinstance(kafka_broker, Broker):
        assert short.error_code == NONE
        assert short.member_id and short.leader == short.member_id
        floor = join_with_session(kafka_broker, MINIBROKER_MIN_SESSION_MS - 1)
        assert floor.error_code == INVALID_SESSION_TIMEOUT
    else:
        assert short.error_code == INVALID_SESSION_TIMEOUT
        assert short.member_id == ""
    # At Kafka's own minimum both accept the member and make it the leader.
    accepted = join_with_session(kafka_broker, KAFKA_MIN_SESSION_MS)
    assert accepted.error_code == NONE
    assert accepted.leader == accepted.member_id != ""
