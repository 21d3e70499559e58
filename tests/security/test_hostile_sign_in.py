"""Clients that do not sign in properly, against a broker in a child process: each one
loses its own connection, and a client that signs in properly is served throughout."""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
import scramp
from kio.schema.errors import ErrorCode

from harness.child_broker import ChildBroker, child_broker
from harness.raw_client import RawClient, metadata_request, parse_host_port
from minibroker.testing.tls import TlsFiles

HANDSHAKE, AUTHENTICATE, METADATA = 17, 36, 3
PASSWORD = "alice-secret"


@pytest.fixture(scope="module")
def broker(
    kafka_tls_files: TlsFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ChildBroker]:
    users = tmp_path_factory.mktemp("users") / "users.toml"
    users.write_text(f'[users]\nalice = "{PASSWORD}"\n')
    tls = kafka_tls_files.broker_settings()
    with child_broker(
        listeners="SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        sasl_users_file=str(users),
        ssl_certfile=tls["ssl_certfile"],
        ssl_keyfile=tls["ssl_keyfile"],
        auto_create_topics=True,
        partial_request_timeout_ms=2000,  # also the TLS handshake's limit
    ) as child:
        yield child


def signed_in_round_trip(broker: ChildBroker, value: bytes) -> None:
    """A client with the right password produces `value` and reads it back."""
    settings = {
        "bootstrap.servers": broker.listeners["SASL_PLAINTEXT"],
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
    }
    producer = confluent_kafka.Producer({**settings, "acks": "all"})
    delivered: list[confluent_kafka.Message] = []
    producer.produce("survivors", value, partition=0, on_delivery=lambda e, m: delivered.append(m))
    assert producer.flush(20) == 0
    [message] = delivered
    consumer = confluent_kafka.Consumer({**settings, "group.id": "reader"})
    try:
        partition = confluent_kafka.TopicPartition("survivors", 0, message.offset())
        consumer.assign([partition])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            read = consumer.poll(0.5)
            if read is not None and read.error() is None:
                assert read.value() == value
                return
        pytest.fail("the record produced was not read back")
    finally:
        consumer.close()


def test_requests_before_signing_in_close_only_their_connection(broker: ChildBroker) -> None:
    address = broker.listeners["SASL_PLAINTEXT"]
    with RawClient(address) as early:
        early.send(METADATA, 12, metadata_request())
        assert early.is_closed_by_peer()
    with RawClient(address) as oversized:
        # More than a client may send before signing in (Kafka's 512 KiB): closed on the
        # size alone, none of the body needed.
        oversized.send_bytes(struct.pack(">i", 600 * 1024) + b"\x00\x11\x00\x01")
        assert oversized.is_closed_by_peer()
    with RawClient(address) as unfinished:
        assert unfinished.call(HANDSHAKE, 1, mechanism="SCRAM-SHA-256").error_code == 0
        unfinished.send(METADATA, 12, metadata_request())  # instead of the exchange
        assert unfinished.is_closed_by_peer()
    assert broker.alive()
    signed_in_round_trip(broker, b"after early requests")


def test_garbage_tokens_are_refused_and_the_broker_carries_on(broker: ChildBroker) -> None:
    address = broker.listeners["SASL_PLAINTEXT"]
    rng = random.Random(7)
    tokens = [
        b"",
        b"\xff\xfe not utf-8",
        b"n,,n=alice,r=" + b"x" * 100_000,
        b"p=tls-unique,,n=alice,r=abc",
        b"n,,n=,r=",
        *(rng.randbytes(rng.randrange(1, 2000)) for _ in range(40)),
    ]
    for index, token in enumerate(tokens):
        mechanism = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")[index % 3]
        with RawClient(address) as client:
            assert client.call(HANDSHAKE, 1, mechanism=mechanism).error_code == 0
            answer = client.call(AUTHENTICATE, 2, auth_bytes=token)
            if answer.error_code == ErrorCode.none:  # a SCRAM first message: a second one
                answer = client.call(AUTHENTICATE, 2, auth_bytes=rng.randbytes(50))
            assert answer.error_code == ErrorCode.sasl_authentication_failed
            assert client.is_closed_by_peer()
    # Bare tokens after SaslHandshake v0: a refusal closes without a word. (tokens[2] is a
    # well-formed first message, with a long nonce: it is answered.)
    for token in tokens[:2] + tokens[3:12]:
        with RawClient(address) as client:
            assert client.call(HANDSHAKE, 0, mechanism="SCRAM-SHA-512").error_code == 0
            client.send_bytes(struct.pack(">i", len(token)) + token)
            assert client.is_closed_by_peer()
    assert broker.alive()
    signed_in_round_trip(broker, b"after garbage tokens")


def test_a_scram_exchange_replayed_on_a_new_connection_is_refused(broker: ChildBroker) -> None:
    """The server's nonce differs per connection, so a recorded proof is worthless."""
    address = broker.listeners["SASL_PLAINTEXT"]
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", PASSWORD)
    client_first = client.get_client_first().encode()
    with RawClient(address) as first:
        first.call(HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
        server_first = first.call(AUTHENTICATE, 2, auth_bytes=client_first)
        client.set_server_first(server_first.auth_bytes.decode())
        final = client.get_client_final().encode()
        assert first.call(AUTHENTICATE, 2, auth_bytes=final).error_code == ErrorCode.none
    with RawClient(address) as replay:
        replay.call(HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
        assert replay.call(AUTHENTICATE, 2, auth_bytes=client_first).error_code == 0
        answer = replay.call(AUTHENTICATE, 2, auth_bytes=final)
        assert answer.error_code == ErrorCode.sasl_authentication_failed


def test_bytes_that_are_not_tls_on_the_ssl_port_close_only_that_connection(
    broker: ChildBroker,
) -> None:
    host, port = parse_host_port(broker.listeners["SSL"])
    rng = random.Random(11)
    for size in (4, 100, 5000):
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(rng.randbytes(size))
            sock.settimeout(10)
            try:
                while sock.recv(65536):
                    pass
            except ConnectionResetError:
                pass
    with socket.create_connection((host, port), timeout=10) as silent:
        silent.sendall(b"\x16\x03\x01")  # the start of a TLS record, then nothing
        assert silent.recv(1) == b""  # closed at partial_request_timeout_ms
    assert broker.alive()
    signed_in_round_trip(broker, b"after bytes that are not tls")


def test_users_file_errors_are_reported_before_the_broker_starts(tmp_path: Path) -> None:
    bad = tmp_path / "users.toml"
    bad.write_text('[users]\nalice = ""\n')
    child = ChildBroker(listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_users_file=str(bad))
    with pytest.raises(RuntimeError, match="user 'alice' needs a password"):
        child.start()
    child = ChildBroker(sasl_users_file=str(tmp_path / "missing.toml"))
    with pytest.raises(RuntimeError, match="cannot read the users file") as failed:
        child.start()
    assert "Traceback" not in str(failed.value)  # a message, not a crash
    assert child.returncode() == 2
