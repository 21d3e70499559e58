"""SASL sessions that end (connections_max_reauth_ms): clients that re-authenticate keep
their connection, those that do not lose it at their next request."""

from __future__ import annotations

import time

import confluent_kafka
import scramp
from kio.schema.errors import ErrorCode

from harness.raw_client import RawClient, metadata_request
from minibroker import Broker

HANDSHAKE, AUTHENTICATE, METADATA = 17, 36, 3
LIFETIME_MS = 1500


def _metadata(client: RawClient) -> object:
    return client.request(METADATA, 12, metadata_request())


def _sign_in(client: RawClient) -> int:
    """SCRAM-SHA-512 as alice; the session lifetime the broker gives, in ms."""
    scram = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    assert client.call(HANDSHAKE, 1, mechanism="SCRAM-SHA-512").error_code == 0
    first = client.call(AUTHENTICATE, 2, auth_bytes=scram.get_client_first().encode())
    scram.set_server_first(first.auth_bytes.decode())
    final = client.call(AUTHENTICATE, 2, auth_bytes=scram.get_client_final().encode())
    assert final.error_code == ErrorCode.none
    scram.set_server_final(final.auth_bytes.decode())
    return int(final.session_lifetime.total_seconds() * 1000)


def test_librdkafka_re_authenticates_on_its_connection_and_loses_nothing() -> None:
    with Broker(
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        sasl_users={"alice": "alice-secret"},
        connections_max_reauth_ms=LIFETIME_MS,
    ) as broker:
        broker.create_topic("steady", 1)
        errors: list[str] = []
        delivered: list[object] = []
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
                "error_cb": lambda error: errors.append(str(error)),
            }
        )
        sent = 0
        handshakes: list[int] = []
        deadline = time.monotonic() + 30
        # Until the producer has re-authenticated twice on an open connection (a
        # handshake with a correlation id past the first few requests).
        while len(handshakes) < 2 and time.monotonic() < deadline:
            producer.produce(
                "steady", str(sent).encode(), on_delivery=lambda e, m: delivered.append(e)
            )
            sent += 1
            producer.poll(0.1)
            handshakes = [
                r.correlation_id
                for r in broker.recent_requests()
                if r.api == "SaslHandshake" and r.correlation_id > 5
            ]
        assert len(handshakes) >= 2, "the producer never re-authenticated"
        assert producer.flush(20) == 0
        assert delivered == [None] * sent
        assert broker.end_offsets("steady") == {0: sent}
        assert errors == []


def test_a_client_that_does_not_re_authenticate_loses_its_connection() -> None:
    with Broker(
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        sasl_users={"alice": "alice-secret"},
        connections_max_reauth_ms=LIFETIME_MS,
    ) as broker:
        with RawClient(broker.bootstrap_servers) as client:
            assert _sign_in(client) == LIFETIME_MS
            assert _metadata(client)
            broker.clock.advance(LIFETIME_MS / 1000)
            client.send(METADATA, 12, metadata_request())
            assert client.is_closed_by_peer()
        with RawClient(broker.bootstrap_servers) as renewing:
            _sign_in(renewing)
            broker.clock.advance(LIFETIME_MS / 2000)
            assert _sign_in(renewing) == LIFETIME_MS  # re-authenticated, same connection
            broker.clock.advance(LIFETIME_MS / 1000 * 0.9)
            assert _metadata(renewing)  # within the renewed session


def test_without_a_limit_sessions_last_and_the_lifetime_is_zero() -> None:
    with (
        Broker(
            listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_users={"alice": "alice-secret"}
        ) as broker,
        RawClient(broker.bootstrap_servers) as client,
    ):
        assert _sign_in(client) == 0
        broker.clock.advance(7 * 24 * 3600)
        assert _metadata(client)
