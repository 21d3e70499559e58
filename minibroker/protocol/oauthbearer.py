"""SASL/OAUTHBEARER (RFC 7628, KIP-255) as an exchange of tokens, without sockets.

The client's first message is `n,[a=AUTHZID],\\x01auth=Bearer TOKEN\\x01[key=value\\x01]...\\x01`.
The token is checked as Kafka's default OAuthBearerUnsecuredValidatorCallbackHandler
checks it, or by the user's own function:

- an unsecured JWS: three dot-separated base64url parts, a JSON header with alg "none",
  JSON claims and an empty signature;
- the principal claim (`sub` unless configured: unsecuredValidatorPrincipalClaimName)
  a non-blank string, `iat` if present not in the future, `exp` present and in the future
  (the broker's clock), `exp` after `iat`;
- every required scope (unsecuredValidatorRequiredScope) in the `scope` claim (a
  space-separated string or a list of strings).

A refused token is answered, as Kafka answers it, with a JSON challenge
(`{"status":"invalid_token"}`, or `{"status":"insufficient_scope", "scope":"[...]"}`);
the client acknowledges with a single \\x01 and the exchange then fails with that JSON as
the message. A first message that cannot be parsed fails at once with Kafka's message for
invalid credentials. An authorization id, if sent, must be the token's principal. The
token's expiry bounds the session (Kafka's credential lifetime).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minibroker.protocol.sasl import AuthenticationFailed, Exchange, scram_failed

log = logging.getLogger("minibroker")
OAUTHBEARER = "OAUTHBEARER"
CONTROL_A = b"\x01"

# A user's own check (Kafka: sasl.server.callback.handler.class): the token as the client
# sent it -> the principal's name, or None to refuse it ({"status":"invalid_token"}).
TokenValidator = Callable[[str], str | None]

_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_FIRST_MESSAGE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01", re.DOTALL
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")


class _Invalid(Exception):
    """The token is refused; `scope` names the missing scope (insufficient_scope)."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


@dataclass(frozen=True, slots=True)
class BearerValidation:
    """How OAUTHBEARER tokens are checked (Kafka's unsecured validator options), or
    `validator` instead; `wall_ms` is the broker's clock."""

    wall_ms: Callable[[], int]
    principal_claim: str = "sub"
    required_scope: tuple[str, ...] = ()
    validator: TokenValidator | None = None
    scope_claim: str = "scope"


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal: str
    lifetime_ms: int | None  # until exp, from now; None: not known (a user's validator)


def validate_unsecured(token: str, rules: BearerValidation) -> ValidToken:
    """The token's principal and remaining lifetime, or _Invalid."""
    parts = token.split(".")
    if len(parts) != 3:
        raise _Invalid("Unsecured JWS compact serializations must have 3 dot-separated values")
    header, claims = _json_part(parts[0]), _json_part(parts[1])
    if header.get("alg") != "none":
        raise _Invalid("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise _Invalid("Unsecured JWS must not contain a digital signature")
    principal = claims.get(rules.principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise _Invalid(f"No principal name in JWT claim: {rules.principal_claim}")
    now_ms = rules.wall_ms()
    issued_at, expires = _seconds(claims, "iat"), _seconds(claims, "exp")
    if issued_at is not None and now_ms < 1000 * issued_at:
        raise _Invalid("The Issued At value is in the future")
    if expires is None:
        raise _Invalid("No expiration time in JWT")
    if now_ms >= 1000 * expires:
        raise _Invalid("The token has expired")
    if issued_at is not None and expires <= issued_at:
        raise _Invalid("The Expiration Time is not after the Issued At time")
    scope = _scope(claims.get(rules.scope_claim))
    for required in rules.required_scope:
        if required not in scope:
            raise _Invalid(f"Scope {required} is missing", f"[{', '.join(rules.required_scope)}]")
    return ValidToken(principal, round(expires * 1000) - now_ms)


def _json_part(part: str) -> dict[str, Any]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError):
        raise _Invalid("Unsecured JWS part is not base64url-encoded JSON") from None
    if not isinstance(decoded, dict):
        raise _Invalid("Unsecured JWS part is not a JSON object")
    return decoded


def _seconds(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Invalid(f"The {name} claim is not a number")
    return float(value)


def _scope(value: Any) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return set(value)
    raise _Invalid("The scope claim is neither a string nor a list of strings")


def _challenge(status: str, scope: str | None) -> str:
    """Kafka's JSON error challenge (OAuthBearerSaslServer), spaced as Kafka spaces it."""
    text = f'{{"status":"{status}"'
    if scope is not None:
        text += f', "scope":"{scope}"'
    return text + "}"


class OAuthBearerExchange(Exchange):
    mechanism = OAUTHBEARER

    def __init__(self, rules: BearerValidation) -> None:
        self._rules = rules
        self._challenged: str | None = None  # the JSON error sent, awaiting \x01
        self.credential_lifetime_ms: int | None = None

    def respond(self, token: bytes) -> bytes:
        if self.done:
            raise AuthenticationFailed("Authentication failed: OAUTHBEARER is complete")
        if bytes(token) == CONTROL_A and self._challenged is not None:
            raise AuthenticationFailed(self._challenged)
        self._challenged = None  # another first message: checked afresh, as Kafka does
        authzid, bearer = self._first_message(bytes(token))
        try:
            if self._rules.validator is not None:
                principal = self._users_verdict(bearer)
                if not principal:
                    raise _Invalid("refused by the validator")
                valid = ValidToken(principal, None)
            else:
                valid = validate_unsecured(bearer, self._rules)
        except _Invalid as exc:
            status = "invalid_token" if exc.scope is None else "insufficient_scope"
            self._challenged = _challenge(status, exc.scope)
            return self._challenged.encode()
        if authzid and authzid != valid.principal:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({valid.principal})"
            )
        self.done = True
        self.user = valid.principal
        self.credential_lifetime_ms = valid.lifetime_ms
        return b""

    def _users_verdict(self, bearer: str) -> str | None:
        """The user's validator's principal; its exception refuses the token (and is
        logged: the broker goes on)."""
        assert self._rules.validator is not None
        try:
            return self._rules.validator(bearer)
        except Exception:
            log.exception("sasl_oauthbearer_validator raised; the token is refused")
            return None

    @staticmethod
    def _first_message(token: bytes) -> tuple[str, str]:
        """The authorization id and the bearer token; AuthenticationFailed with Kafka's
        message for a message it would not parse."""
        refused = AuthenticationFailed(scram_failed(OAUTHBEARER))
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise refused from None
        message = _FIRST_MESSAGE.fullmatch(text)
        if message is None:
            raise refused
        pairs = dict(pair.split("=", 1) for pair in message.group("kvpairs").split("\x01") if pair)
        auth = _AUTH.fullmatch(pairs.get("auth", ""))
        if auth is None or auth.group("scheme").lower() != "bearer":
            raise refused
        return message.group("authzid") or "", auth.group("token")
