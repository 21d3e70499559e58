"""The users SASL listeners accept.

A user added with a password can sign in with PLAIN and with both SCRAM mechanisms. For
PLAIN only the password's salted hash is kept; for SCRAM the stored credential (salt,
stored key, server key, iterations), as Kafka keeps it. Users come from the Python API
(`Broker(sasl_users={...})`, `broker.add_user(...)`) or a users file: TOML with one
`[users]` table of `name = "password"` entries.

SCRAM credentials can also be set and removed over the protocol (AlterUserScramCredentials,
listed by DescribeUserScramCredentials), as Kafka's controller applies them:
- the client sends the salt, iteration count and salted password; the broker keeps the
  stored and server keys derived from it (RFC 5802), never the salted password;
- a user with only such credentials signs in with SCRAM, not PLAIN;
- iterations must be within 4096..16384 (UNACCEPTABLE_CREDENTIAL), the mechanism
  SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) (UNSUPPORTED_SASL_MECHANISM), the name not empty
  (UNACCEPTABLE_CREDENTIAL), the salt at least 12 bytes (UNACCEPTABLE_CREDENTIAL; Kafka
  takes shorter ones, which the SCRAM exchange here could not use); deleting a
  credential the user does not have is RESOURCE_NOT_FOUND;
- deletions are checked first, then upsertions; a user's first refused change decides
  its error, and a user named a second time (whatever the mechanism) gets
  DUPLICATE_RESOURCE: one change per user per request;
- the answer has one result per user named; a refused user gets none of its changes.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from minibroker.protocol import oauthbearer, sasl

# Error codes (Kafka's Errors.java).
NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93

SCRAM_MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_ID = {name: number for number, name in SCRAM_MECHANISM_IDS.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
MIN_SALT_BYTES = 12  # the SCRAM exchange refuses shorter salts (Kafka has no such floor)

Outcome = tuple[int, str | None]  # error code and message


@dataclass(frozen=True, slots=True)
class ScramChange:
    """One change of AlterUserScramCredentials: an upsertion, or a deletion (no salt)."""

    user: str
    mechanism: int
    iterations: int = 0
    salt: bytes | None = None
    salted_password: bytes = b""


@dataclass(slots=True)
class _User:
    salt: bytes
    password_hash: bytes | None  # None: SCRAM only (credentials set over the protocol)
    scram: dict[str, sasl.ScramCredential] = field(default_factory=dict)


def _hash(salt: bytes, password: str) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 1000)


class Credentials:
    def __init__(self) -> None:
        self._users: dict[str, _User] = {}
        # Users whose SCRAM credentials the protocol changed, and who hears of it (a data
        # directory keeps them): called with each such user's credentials now.
        self._altered: set[str] = set()
        self.on_scram_change: Callable[[dict[str, dict[str, sasl.ScramCredential]]], None] = (
            lambda altered: None
        )
        # How OAUTHBEARER tokens are checked (the cluster sets it from its settings).
        self.bearer: oauthbearer.BearerValidation | None = None

    def __len__(self) -> int:
        return len(self._users)

    def __contains__(self, user: object) -> bool:
        return user in self._users

    def users(self) -> list[str]:
        return sorted(self._users)

    def add_user(self, name: str, password: str) -> None:
        """Add the user, or replace its password."""
        if not name:
            raise ValueError("a user needs a name")
        if not password:
            raise ValueError(f"user {name!r} needs a password")
        salt = os.urandom(16)
        self._users[name] = _User(
            salt,
            _hash(salt, password),
            {m: sasl.scram_credential(m, password) for m in sasl.SCRAM_MECHANISMS},
        )

    def remove_user(self, name: str) -> bool:
        return self._users.pop(name, None) is not None

    def add_all(self, users: Mapping[str, str]) -> None:
        for name, password in users.items():
            self.add_user(name, password)

    def check_password(self, name: str, password: str) -> bool:
        user = self._users.get(name)
        if user is None or user.password_hash is None:
            return False
        return hmac.compare_digest(user.password_hash, _hash(user.salt, password))

    def scram_users(self) -> dict[str, dict[int, int]]:
        """Every user with SCRAM credentials: mechanism id -> iterations."""
        return {
            name: {MECHANISM_ID[m]: c.iterations for m, c in sorted(user.scram.items())}
            for name, user in sorted(self._users.items())
            if user.scram
        }

    def alter_scram(self, changes: list[ScramChange]) -> dict[str, Outcome]:
        """Apply AlterUserScramCredentials' changes (the rules above), deletions first;
        outcome per user."""
        ordered = [c for c in changes if c.salt is None] + [
            c for c in changes if c.salt is not None
        ]
        accepted: dict[str, ScramChange] = {}
        refused: dict[str, Outcome] = {}
        for change in ordered:
            if change.user in refused:
                continue
            if accepted.pop(change.user, None) is not None:
                refused[change.user] = (
                    DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request",
                )
                continue
            refusal = self._refusal(change)
            if refusal is None:
                accepted[change.user] = change
            else:
                refused[change.user] = refusal
        for change in accepted.values():
            mechanism = SCRAM_MECHANISM_IDS[change.mechanism]
            user = self._users.setdefault(change.user, _User(b"", None))
            if change.salt is None:
                del user.scram[mechanism]
                if not user.scram and user.password_hash is None:
                    del self._users[change.user]
            else:
                user.scram[mechanism] = sasl.scram_from_salted_password(
                    mechanism, change.salt, change.salted_password, change.iterations
                )
            self._altered.add(change.user)
        if accepted:
            self.on_scram_change(self.altered_scram())
        done: Outcome = (NONE, None)
        return {c.user: refused.get(c.user, done) for c in changes}

    def altered_scram(self) -> dict[str, dict[str, sasl.ScramCredential]]:
        """The SCRAM credentials, now, of every user the protocol changed."""
        return {
            name: dict(self._users[name].scram) if name in self._users else {}
            for name in sorted(self._altered)
        }

    def restore_scram(self, altered: Mapping[str, Mapping[str, sasl.ScramCredential]]) -> None:
        """Give users the SCRAM credentials the protocol had left them (at a restart)."""
        for name, credentials in altered.items():
            self._altered.add(name)
            user = self._users.setdefault(name, _User(b"", None))
            user.scram = dict(credentials)
            if not user.scram and user.password_hash is None:
                del self._users[name]

    def _refusal(self, change: ScramChange) -> Outcome | None:
        if not change.user:
            return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        mechanism = SCRAM_MECHANISM_IDS.get(change.mechanism)
        if mechanism is None:
            return UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        if change.salt is None:
            user = self._users.get(change.user)
            if user is None or mechanism not in user.scram:
                return (
                    RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
            return None
        if change.iterations < MIN_ITERATIONS:
            return UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if change.iterations > MAX_ITERATIONS:
            return UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if len(change.salt) < MIN_SALT_BYTES or not change.salted_password:
            return (
                UNACCEPTABLE_CREDENTIAL,
                f"The salt must be at least {MIN_SALT_BYTES} bytes and the salted password "
                "not empty",
            )
        return None

    def scram(self, mechanism: str, name: str) -> sasl.ScramCredential | None:
        user = self._users.get(name)
        return None if user is None else user.scram.get(mechanism)

    def exchange(self, mechanism: str) -> sasl.Exchange:
        if mechanism == oauthbearer.OAUTHBEARER:
            if self.bearer is None:
                raise ValueError("OAUTHBEARER needs the cluster's token validation")
            return oauthbearer.OAuthBearerExchange(self.bearer)
        return sasl.start_exchange(mechanism, self.check_password, self.scram)


def read_users_file(path: str) -> dict[str, str]:
    """name -> password from a TOML users file; ValueError saying what is wrong."""
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as exc:
        raise ValueError(f"cannot read the users file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"users file {path}: {exc}") from None
    users = document.get("users")
    if not isinstance(users, dict):
        raise ValueError(f'users file {path}: expected a [users] table of name = "password"')
    for name, password in users.items():
        if not isinstance(password, str) or not password:
            raise ValueError(f"users file {path}: user {name!r} needs a password (a string)")
    return dict(users)
