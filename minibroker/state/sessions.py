"""A connection's authentication: who is on the other end, and what it may send yet.

Rules (Kafka's SaslServerAuthenticator, as clients meet it):
- A PLAINTEXT or SSL listener's connection is authenticated when it opens. Its principal
  is User:ANONYMOUS, or on SSL with a client certificate User:<the certificate's subject,
  RFC 2253>. SaslHandshake and SaslAuthenticate there get ILLEGAL_SASL_STATE.
- A SASL_PLAINTEXT or SASL_SSL connection starts unauthenticated. Until it is
  authenticated it may send ApiVersions (before SaslHandshake only) and SaslHandshake;
  any other request closes it. Its frames may not exceed 512 KiB
  (sasl.server.max.receive.size) meanwhile.
- SaslHandshake names a mechanism. One that is not enabled gets UNSUPPORTED_SASL_MECHANISM
  with the enabled list, and the connection closes after that answer.
- After SaslHandshake v0 the client's next frames are bare SASL tokens (no request
  header), each answered with a bare token; after v1 they travel in SaslAuthenticate
  requests. A SaslAuthenticate after v0, or a request other than SaslAuthenticate after
  v1, closes the connection.
- A refused token: SaslAuthenticate answers SASL_AUTHENTICATION_FAILED with Kafka's
  message and the connection closes after that answer; a refused bare token closes the
  connection at once.
- Success: the principal is User:<name>. With connections_max_reauth_ms > 0 the session
  lasts that long (SaslAuthenticate v1+ tells the client); the first request after it ends
  that is not SaslHandshake closes the connection. An OAUTHBEARER token's expiry caps the
  session likewise, with or without connections_max_reauth_ms (Kafka's credential
  lifetime); a token from the user's own validator has none.
- Re-authentication (KIP-368): an authenticated SASL connection may send SaslHandshake v1
  and SaslAuthenticate again. The mechanism and the principal must stay the same, or the
  SaslAuthenticate that completes the exchange is refused (and the connection closes).
  Requests other than SaslAuthenticate meanwhile are served as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kio.schema.errors import ErrorCode

from minibroker.config import (  # the listener types live with the settings that make them
    PLAINTEXT,
    SASL_PLAINTEXT,
    SASL_SSL,
)
from minibroker.protocol import sasl
from minibroker.protocol.oauthbearer import OAuthBearerExchange
from minibroker.state.credentials import Credentials

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
PRE_AUTH_MAX_FRAME_BYTES = 524_288  # Kafka's sasl.server.max.receive.size
ANONYMOUS = "User:ANONYMOUS"


class Refused(Exception):
    """The connection must close (after the answer, if one is given)."""


class Stage(Enum):
    OPEN = "open"  # PLAINTEXT or SSL: nothing to do
    START = "start"  # SASL: ApiVersions or SaslHandshake
    HANDSHAKEN = "handshaken"  # a mechanism is chosen; tokens next
    AUTHENTICATED = "authenticated"
    REAUTHENTICATING = "reauthenticating"
    CLOSING = "closing"  # an answer refusing it is on its way


@dataclass(frozen=True, slots=True)
class AuthenticateOutcome:
    error_code: ErrorCode
    error_message: str | None
    token: bytes
    session_lifetime_ms: int


class Session:
    """One connection's authentication state (the rules above)."""

    def __init__(
        self,
        listener_name: str,
        security_protocol: str,
        credentials: Credentials,
        *,
        mechanisms: tuple[str, ...] = sasl.MECHANISMS,
        max_reauth_ms: int = 0,
        principal: str = ANONYMOUS,
    ) -> None:
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.principal = principal
        self._credentials = credentials
        self._mechanisms = mechanisms
        self._max_reauth_ms = max_reauth_ms
        sasl_listener = security_protocol in (SASL_PLAINTEXT, SASL_SSL)
        self.stage = Stage.START if sasl_listener else Stage.OPEN
        self._exchange: sasl.Exchange | None = None
        self._bare_tokens = False
        self._mechanism: str | None = None  # the one authenticated with
        self._expires_at_ms: int | None = None
        self._lifetime_ms = 0  # the session's, told to the client
        # True while every request may pass without a look (the hot path's one test).
        self.unrestricted = not sasl_listener
        # Called once when the connection closes (share sessions end with it).
        self.on_close: list[Callable[[], None]] = []

    @property
    def authenticated(self) -> bool:
        return self.stage in (Stage.OPEN, Stage.AUTHENTICATED, Stage.REAUTHENTICATING)

    @property
    def expects_bare_token(self) -> bool:
        return self.stage is Stage.HANDSHAKEN and self._bare_tokens

    @property
    def closing(self) -> bool:
        return self.stage is Stage.CLOSING

    def admit(self, api_key: int, now_ms: int) -> None:
        """Raise Refused unless a request of `api_key` may be served now."""
        stage = self.stage
        if stage is Stage.OPEN:
            return
        if stage is Stage.START:
            if api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY):
                return
            raise Refused(f"api key {api_key} before SASL authentication")
        if stage is Stage.HANDSHAKEN:
            if api_key == SASL_AUTHENTICATE_KEY:
                return
            raise Refused(f"api key {api_key} during SASL authentication")
        if stage is Stage.CLOSING:
            raise Refused("a request after authentication failed")
        expired = self._expires_at_ms is not None and now_ms >= self._expires_at_ms
        if expired and api_key != SASL_HANDSHAKE_KEY and stage is Stage.AUTHENTICATED:
            raise Refused("the SASL session expired without re-authentication")

    def handshake(self, mechanism: str, version: int) -> tuple[ErrorCode, tuple[str, ...]]:
        enabled = self._mechanisms
        stage = self.stage
        if stage is Stage.OPEN:
            return ErrorCode.illegal_sasl_state, ()
        if stage not in (Stage.START, Stage.AUTHENTICATED) or (
            stage is Stage.AUTHENTICATED and version < 1
        ):
            self._close()
            return ErrorCode.illegal_sasl_state, enabled
        if mechanism not in enabled:
            self._close()
            return ErrorCode.unsupported_sasl_mechanism, enabled
        self._exchange = self._credentials.exchange(mechanism)
        self._bare_tokens = version == 0
        self.stage = Stage.HANDSHAKEN if stage is Stage.START else Stage.REAUTHENTICATING
        self.unrestricted = False
        return ErrorCode.none, enabled

    def authenticate(self, token: bytes, now_ms: int) -> AuthenticateOutcome:
        """A SaslAuthenticate request's token."""
        exchange = self._exchange
        if self.stage not in (Stage.HANDSHAKEN, Stage.REAUTHENTICATING) or exchange is None:
            message = (
                "SaslAuthenticate request received after successful authentication"
                if self.authenticated
                else "Unexpected SaslAuthenticate request"
            )
            if self.stage is not Stage.OPEN:
                self._close()
            return AuthenticateOutcome(ErrorCode.illegal_sasl_state, message, b"", 0)
        try:
            answer = self._respond(exchange, token, now_ms)
        except sasl.AuthenticationFailed as exc:
            return AuthenticateOutcome(ErrorCode.sasl_authentication_failed, str(exc), b"", 0)
        lifetime = self._lifetime_ms if exchange.done else 0
        return AuthenticateOutcome(ErrorCode.none, None, answer, lifetime)

    def bare_token(self, token: bytes, now_ms: int) -> bytes:
        """A token sent without a request header (after SaslHandshake v0): the answer
        token, or Refused."""
        exchange = self._exchange
        assert exchange is not None and self.expects_bare_token
        try:
            return self._respond(exchange, token, now_ms)
        except sasl.AuthenticationFailed as exc:
            raise Refused(str(exc)) from None

    def _respond(self, exchange: sasl.Exchange, token: bytes, now_ms: int) -> bytes:
        """The exchange's answer to `token`; a refusal closes the session."""
        try:
            answer = exchange.respond(token)
            if exchange.done:
                self._complete(exchange, now_ms)
        except sasl.AuthenticationFailed:
            self._close()
            raise
        return answer

    def _complete(self, exchange: sasl.Exchange, now_ms: int) -> None:
        principal = f"User:{exchange.user}"
        if self.stage is Stage.REAUTHENTICATING:
            if exchange.mechanism != self._mechanism:
                raise sasl.AuthenticationFailed(
                    f"SASL mechanism {exchange.mechanism} is not {self._mechanism}, the one "
                    "this connection authenticated with"
                )
            if principal != self.principal:
                raise sasl.AuthenticationFailed(
                    f"Cannot change principals during re-authentication from "
                    f"{self.principal}: {principal}"
                )
        self.principal = principal
        self._mechanism = exchange.mechanism
        self._exchange = None
        self.stage = Stage.AUTHENTICATED
        lifetime = self._session_lifetime_ms(exchange)
        self._lifetime_ms = lifetime or 0
        if lifetime is not None:
            self._expires_at_ms = now_ms + lifetime
        else:
            self._expires_at_ms = None
            self.unrestricted = True

    def _session_lifetime_ms(self, exchange: sasl.Exchange) -> int | None:
        """connections_max_reauth_ms, capped by the credential's own lifetime (an
        OAUTHBEARER token's expiry), as Kafka's SaslServerAuthenticator computes it;
        None: for ever."""
        credential = None
        if isinstance(exchange, OAuthBearerExchange):
            credential = exchange.credential_lifetime_ms
        reauth = self._max_reauth_ms if self._max_reauth_ms > 0 else None
        if credential is None:
            return reauth
        return max(credential if reauth is None else min(credential, reauth), 0)

    def _close(self) -> None:
        self.stage = Stage.CLOSING
        self._exchange = None
        self.unrestricted = False


def open_session(listener_name: str = PLAINTEXT, principal: str = ANONYMOUS) -> Session:
    """A connection that needs no authentication (PLAINTEXT or SSL)."""
    return Session(listener_name, PLAINTEXT, Credentials(), principal=principal)
