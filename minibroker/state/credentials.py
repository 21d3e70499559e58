"""The users SASL listeners accept.

A user added with a password can sign in with PLAIN and with both SCRAM mechanisms. For
PLAIN only the password's salted hash is kept; for SCRAM the stored credential (salt,
stored key, server key, iterations), as Kafka keeps it. Users come from the Python API
(`Broker(sasl_users={...})`, `broker.add_user(...)`) or a users file: TOML with one
`[users]` table of `name = "password"` entries.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field

from minibroker.protocol import sasl


@dataclass(slots=True)
class _User:
    salt: bytes
    password_hash: bytes
    scram: dict[str, sasl.ScramCredential] = field(default_factory=dict)


def _hash(salt: bytes, password: str) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 1000)


class Credentials:
    def __init__(self) -> None:
        self._users: dict[str, _User] = {}

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
        if user is None:
            return False
        return hmac.compare_digest(user.password_hash, _hash(user.salt, password))

    def scram(self, mechanism: str, name: str) -> sasl.ScramCredential | None:
        user = self._users.get(name)
        return None if user is None else user.scram.get(mechanism)

    def exchange(self, mechanism: str) -> sasl.Exchange:
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
