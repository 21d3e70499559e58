"""TLS of SSL and SASL_SSL listeners: the server's context and a client certificate's
principal."""

from __future__ import annotations

import ssl

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
