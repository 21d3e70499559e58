"""The OAUTHBEARER exchange without sockets (minibroker/protocol/oauthbearer.py): what
Kafka's unsecured validator accepts and refuses, and how each refusal reads."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from minibroker.protocol.oauthbearer import BearerValidation, OAuthBearerExchange
from minibroker.protocol.sasl import AuthenticationFailed

NOW_MS = 1_800_000_000_000
NOW = NOW_MS // 1000
INVALID = b'{"status":"invalid_token"}'
UNREADABLE = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism OAUTHBEARER"
)


def _part(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def _token(claims: Any, header: Any = None, signature: str = "") -> str:
    return f"{_part(header or {'alg': 'none'})}.{_part(claims)}.{signature}"


def _message(token: str, gs2: str = "n,,", extensions: str = "") -> bytes:
    return f"{gs2}\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def _exchange(**rules: Any) -> OAuthBearerExchange:
    return OAuthBearerExchange(BearerValidation(lambda: NOW_MS, **rules))


def _claims(**overrides: Any) -> dict[str, Any]:
    return {"sub": "alice", "iat": NOW - 10, "exp": NOW + 100, **overrides}


def test_a_valid_token_names_the_principal_and_its_remaining_life() -> None:
    exchange = _exchange()
    assert exchange.respond(_message(_token(_claims()), extensions="traceId=abc\x01")) == b""
    assert (exchange.done, exchange.user, exchange.credential_lifetime_ms) == (
        True,
        "alice",
        100_000,
    )
    with pytest.raises(AuthenticationFailed):
        exchange.respond(b"\x01")  # nothing after completion


@pytest.mark.parametrize(
    "token",
    [
        _token(_claims(exp=NOW)),  # expires now: refused (now >= exp)
        _token(_claims(exp=NOW - 1)),
        _token({"sub": "alice"}),  # no exp
        _token(_claims(exp="soon")),
        _token(_claims(iat=NOW + 5)),  # issued in the future
        _token(_claims(iat=NOW + 200)),  # exp not after iat, and iat ahead
        _token(_claims(sub="  ")),
        _token(_claims(sub=7)),
        _token(_claims(), header={"alg": "HS256"}),
        _token(_claims(), signature="c2ln"),
        _token([1, 2]),
        f"{_part({'alg': 'none'})}.bm90LWpzb24.",  # not JSON
        f"{_part({'alg': 'none'})}.{_part(_claims())}",  # two parts
        _token(_claims(scope=5)),
    ],
)
def test_tokens_the_unsecured_validator_refuses_get_invalid_token(token: str) -> None:
    exchange = _exchange()
    assert exchange.respond(_message(token)) == INVALID
    assert not exchange.done
    with pytest.raises(AuthenticationFailed, match=r'^\{"status":"invalid_token"\}$'):
        exchange.respond(b"\x01")


def test_a_challenged_client_may_send_another_token_instead() -> None:
    exchange = _exchange()
    assert exchange.respond(_message(_token(_claims(exp=NOW - 1)))) == INVALID
    assert exchange.respond(_message(_token(_claims()))) == b""
    assert exchange.user == "alice"


def test_required_scope_and_another_principal_claim() -> None:
    rules = {"required_scope": ("read", "write"), "principal_claim": "client_id"}
    token = _token(_claims(client_id="svc", scope="read"))
    answer = _exchange(**rules).respond(_message(token))
    assert answer == b'{"status":"insufficient_scope", "scope":"[read, write]"}'
    for scope in ("write read", ["read", "write", "admin"]):
        exchange = _exchange(**rules)
        assert exchange.respond(_message(_token(_claims(client_id="svc", scope=scope)))) == b""
        assert exchange.user == "svc"


@pytest.mark.parametrize(
    "message",
    [
        b"\xff\xfe",
        b"",
        b"\x01",  # an acknowledgement with no challenge before it
        b"y,,\x01auth=Bearer abc\x01\x01",
        b"n,,\x01host=example\x01\x01",  # no auth
        b"n,,\x01auth=Basic abc\x01\x01",
        b"n,,\x01auth=Bearer a+b\x01\x01",
        b"n,,auth=Bearer abc\x01\x01",
    ],
)
def test_first_messages_kafka_cannot_read_fail_at_once(message: bytes) -> None:
    with pytest.raises(AuthenticationFailed, match=f"^{UNREADABLE}$"):
        _exchange().respond(message)


def test_an_authorization_id_must_be_the_principal() -> None:
    token = _token(_claims())
    assert _exchange().respond(_message(token, gs2="n,a=alice,")) == b""
    with pytest.raises(AuthenticationFailed, match=r"authorization id \(bob\) .*\(alice\)"):
        _exchange().respond(_message(token, gs2="n,a=bob,"))


def test_a_users_validator_replaces_the_unsecured_checks() -> None:
    seen: list[str] = []

    def validate(token: str) -> str | None:
        seen.append(token)
        return "service" if token == "opaque-1" else None

    exchange = _exchange(validator=validate)
    assert exchange.respond(_message("opaque-1")) == b""
    assert (exchange.user, exchange.credential_lifetime_ms) == ("service", None)
    assert _exchange(validator=validate).respond(_message(_token(_claims()))) == INVALID
    assert seen[0] == "opaque-1"
