"""TLS of SSL and SASL_SSL listeners: the server's context and a client certificate's
principal."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import Any

from minibroker.config import BrokerConfig
from minibroker.state.sessions import ANONYMOUS

# Certificate subject attributes as RFC 2253 names them (Kafka's principal is the subject
# as Java's X500Principal.getName() writes it).
_RDN_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def principal_of(certificate: dict[str, object] | None) -> str:
    """User:<subject> of a client certificate (most specific part first, as RFC 2253
    writes it), or User:ANONYMOUS without one."""
    subject = (certificate or {}).get("subject")
    if not subject:
        return ANONYMOUS
    parts = []
    for rdn in reversed(subject):  # type: ignore[call-overload]
        parts.append("+".join(f"{_RDN_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(parts)


def _escape(value: str) -> str:
    escaped = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    return escaped[:-1] + "\\ " if escaped.endswith(" ") else escaped


def tls_context(config: BrokerConfig) -> ssl.SSLContext:
    """The server side of SSL and SASL_SSL listeners."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    assert config.ssl_certfile and config.ssl_keyfile  # BrokerConfig checks it
    context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile)
    if config.ssl_cafile:
        context.load_verify_locations(config.ssl_cafile)
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[config.ssl_client_auth]
    return context


class _AlertingTlsProtocol(sslproto.SSLProtocol):
    """asyncio's server side of TLS, except that the alert OpenSSL writes when it refuses
    a handshake (a required client certificate missing: certificate_required in TLS 1.3,
    handshake_failure in 1.2) reaches the client before the connection closes, as Kafka's
    alert does. asyncio closes the socket at once and drops it, so Java clients saw the
    connection end and reconnected instead of failing with SslAuthenticationException."""

    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        if handshake_exc is not None:
            with contextlib.suppress(Exception):  # best effort: the close goes on regardless
                outgoing: ssl.MemoryBIO = getattr(self, "_outgoing")  # noqa: B009 (untyped)
                alert = outgoing.read()
                transport: Any = self._transport
                if alert and transport is not None:
                    transport.write(alert)  # sent at once: a few bytes, buffer empty
        super()._on_handshake_complete(handshake_exc)


def tls_server_protocol(
    app_protocol: Callable[[], asyncio.BaseProtocol],
    context: ssl.SSLContext,
    handshake_timeout: float,
) -> Callable[[], asyncio.BaseProtocol]:
    """A protocol factory for a plain TCP server that speaks TLS on `app_protocol`'s
    behalf, as `create_server(ssl=context)` does, alerts included (above)."""

    def make() -> asyncio.BaseProtocol:
        loop = asyncio.get_running_loop()
        waiter: Any = None  # nobody awaits the handshake: the protocol starts serving
        timeout: Any = handshake_timeout  # typeshed says int; asyncio takes seconds as float
        return _AlertingTlsProtocol(
            loop, app_protocol(), context, waiter, server_side=True, ssl_handshake_timeout=timeout
        )

    return make
