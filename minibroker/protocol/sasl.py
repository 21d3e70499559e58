"""SASL mechanisms as exchanges of tokens, without sockets.

An exchange takes the client's tokens one at a time (`respond`) and returns the server's
answer to each, until `done`; then `user` is the authenticated user name. A token that
fails authentication raises AuthenticationFailed with the message Kafka's broker sends
for it (clients show it to users, and some test for it).

- PLAIN (RFC 4616): one token, `authzid NUL user NUL password`; the answer is empty. An
  authorization id other than empty or the user's own is refused, as Kafka refuses it.
- SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): client-first, server-first,
  client-final, server-final, computed by `scramp`. The stored credential is Kafka's:
  salt, stored key, server key and iteration count, never the password itself.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

import scramp

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
# Kafka's default for new SCRAM credentials (kafka-configs --add-config SCRAM-SHA-256=[...])
# and the least it accepts.
SCRAM_ITERATIONS = 4096
MIN_SCRAM_ITERATIONS = 4096
MAX_SCRAM_ITERATIONS = 16384

PLAIN_FAILED = "Authentication failed: Invalid username or password"


def scram_failed(mechanism: str) -> str:
    return (
        "Authentication failed during authentication due to invalid credentials with "
        f"SASL mechanism {mechanism}"
    )


class AuthenticationFailed(Exception):
    """The client's credentials or tokens were refused; the message is Kafka's."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def scram_credential(
    mechanism: str, password: str, iterations: int = SCRAM_ITERATIONS
) -> ScramCredential:
    """The credential a SCRAM server keeps for `password` (a fresh random salt)."""
    salt, stored_key, server_key, count = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations
    )
    return ScramCredential(salt, stored_key, server_key, count)


def scram_from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential for a salted password a client computed (RFC 5802: the stored key
    is H(HMAC(salted password, "Client Key")), the server key HMAC(salted password,
    "Server Key"))."""
    digest = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha512
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(salt, digest(client_key).digest(), server_key, iterations)


# A mechanism's view of the users: PLAIN asks whether a password is right, SCRAM for the
# user's stored credential (None: no such user).
PasswordCheck = Callable[[str, str], bool]
ScramLookup = Callable[[str, str], ScramCredential | None]


class Exchange:
    mechanism: str
    done: bool = False
    user: str | None = None

    def respond(self, token: bytes) -> bytes:
        raise NotImplementedError


class PlainExchange(Exchange):
    mechanism = PLAIN

    def __init__(self, check: PasswordCheck) -> None:
        self._check = check

    def respond(self, token: bytes) -> bytes:
        if self.done:
            raise AuthenticationFailed("Authentication failed: PLAIN takes one token")
        try:
            authzid, user, password = bytes(token).decode("utf-8").split("\x00")
        except ValueError:
            raise AuthenticationFailed(
                "Invalid SASL/PLAIN response: expected 3 tokens separated by NUL"
            ) from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if not self._check(user, password):
            raise AuthenticationFailed(PLAIN_FAILED)
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.done = True
        self.user = user
        return b""


class ScramExchange(Exchange):
    def __init__(self, mechanism: str, lookup: ScramLookup) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._lookup = lookup
        self._server = scramp.ScramMechanism(mechanism).make_server(self._credential)
        self._named: str | None = None
        self._step = 0

    def _credential(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        self._named = user
        found = self._lookup(self.mechanism, user)
        if found is None:
            raise KeyError(user)  # scramp turns it into a failed exchange
        return found.salt, found.stored_key, found.server_key, found.iterations

    def respond(self, token: bytes) -> bytes:
        try:
            text = bytes(token).decode("utf-8")
            if self._step == 0:
                self._server.set_client_first(text)
                self._step = 1
                return str(self._server.get_server_first()).encode()
            if self._step == 1:
                self._server.set_client_final(text)
                self._step = 2
                self.done = True
                self.user = self._named
                return str(self._server.get_server_final()).encode()
        except (scramp.ScramException, UnicodeDecodeError, ValueError):
            raise AuthenticationFailed(scram_failed(self.mechanism)) from None
        raise AuthenticationFailed(f"Authentication failed: {self.mechanism} is complete")


def start_exchange(mechanism: str, check: PasswordCheck, lookup: ScramLookup) -> Exchange:
    if mechanism == PLAIN:
        return PlainExchange(check)
    return ScramExchange(mechanism, lookup)
