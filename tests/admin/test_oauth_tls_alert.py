"""A client without the client certificate an SSL listener requires gets a fatal TLS
alert, as Kafka's broker sends one, rather than a bare close: clients then fail at once
with an authentication error (Java: SslAuthenticationException) instead of reconnecting.

OpenSSL picks the alert: handshake_failure in TLS 1.2, certificate_required in TLS 1.3
(Kafka's JVM sends bad_certificate; Python's ssl module cannot choose the alert)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator

import pytest

from minibroker import Broker
from minibroker.testing.tls import TlsFiles


@pytest.fixture(scope="module")
def required_certificates(kafka_tls_files: TlsFiles) -> Iterator[tuple[str, TlsFiles]]:
    with Broker(
        listeners="SSL://127.0.0.1:0", **kafka_tls_files.broker_settings("required")
    ) as broker:
        yield broker.bootstrap_servers_for("SSL"), kafka_tls_files


@pytest.mark.parametrize(
    ("version", "alert"),
    [
        (ssl.TLSVersion.TLSv1_2, "SSLV3_ALERT_HANDSHAKE_FAILURE"),
        (ssl.TLSVersion.TLSv1_3, "TLSV13_ALERT_CERTIFICATE_REQUIRED"),
    ],
)
def test_a_client_without_a_required_certificate_gets_an_alert(
    required_certificates: tuple[str, TlsFiles], version: ssl.TLSVersion, alert: str
) -> None:
    address, tls = required_certificates
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(tls.ca))
    context.maximum_version = version
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        pytest.raises(ssl.SSLError, match=alert),  # not an EOF
        context.wrap_socket(raw, server_hostname=host) as wrapped,
    ):
        # TLS 1.3: the server checks the certificate after the client's Finished, so the
        # alert comes with the first read.
        wrapped.sendall(b"\0\0\0\0")
        wrapped.recv(4)


def test_a_client_with_its_certificate_is_served(
    required_certificates: tuple[str, TlsFiles],
) -> None:
    address, tls = required_certificates
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(tls.ca))
    context.load_cert_chain(str(tls.client_certificate), str(tls.client_key))
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as wrapped,
    ):
        # ApiVersions v0, correlation id 7: answered (frame length, then the id).
        request = b"\x00\x12\x00\x00\x00\x00\x00\x07\x00\x00"
        wrapped.sendall(len(request).to_bytes(4, "big") + request)
        answer = wrapped.recv(8)
        assert answer[4:8] == (7).to_bytes(4, "big")
