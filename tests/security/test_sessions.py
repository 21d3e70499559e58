"""SASL authentication as a connection goes through it, without sockets: each request is
encoded as a client sends it and dispatched with the connection's session
(state/sessions.py holds the rules these check)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import scramp
from kio.schema.errors import ErrorCode

from harness.raw_client import encode, make_request
from minibroker.config import PLAINTEXT, SASL_PLAINTEXT, SASL_SSL, BrokerConfig
from minibroker.dispatch import CloseConnection
from minibroker.state.sessions import ANONYMOUS, Session
from tests.sansio import SansIOBroker, decode

HANDSHAKE, AUTHENTICATE, API_VERSIONS, METADATA = 17, 36, 18, 3
USERS = {"alice": "alice-secret", "bob": "bob-secret", "a,b=c": "odd-secret"}
PLAIN_FAILED = "Authentication failed: Invalid username or password"


class Connection:
    """One client connection to a SASL listener of a sans-IO broker."""

    def __init__(self, broker: SansIOBroker, **session: Any) -> None:
        self.broker = broker
        config = broker.cluster.config
        self.session = Session(
            "SASL_PLAINTEXT",
            session.pop("security_protocol", SASL_PLAINTEXT),
            broker.cluster.credentials,
            mechanisms=config.mechanisms(),
            max_reauth_ms=config.connections_max_reauth_ms,
            **session,
        )
        self._ids = itertools.count(1)

    def send(self, api_key: int, version: int, **fields: Any) -> Any:
        frame = encode(api_key, version, make_request(api_key, version, **fields), next(self._ids))
        reply = self.broker.dispatcher.dispatch(frame[4:], session=self.session)
        assert isinstance(reply, bytes)
        return decode(reply, api_key, version)

    def bare(self, token: bytes) -> bytes:
        """A token sent without a request header (after SaslHandshake v0)."""
        reply = self.broker.dispatcher.dispatch(token, session=self.session)
        assert isinstance(reply, bytes)
        assert int.from_bytes(reply[:4], "big") == len(reply) - 4
        return reply[4:]

    def handshake(self, mechanism: str, version: int = 1) -> Any:
        return self.send(HANDSHAKE, version, mechanism=mechanism)

    def authenticate(self, token: bytes, version: int = 2) -> Any:
        return self.send(AUTHENTICATE, version, auth_bytes=token)

    def plain(self, user: str, password: str, authzid: str = "") -> Any:
        assert self.handshake("PLAIN").error_code == ErrorCode.none
        return self.authenticate(f"{authzid}\0{user}\0{password}".encode())

    def scram(self, mechanism: str, user: str, password: str) -> Any:
        """The whole SCRAM exchange; the last answer (or the first refusal)."""
        assert self.handshake(mechanism).error_code == ErrorCode.none
        client = scramp.ScramClient([mechanism], user, password)
        first = self.authenticate(client.get_client_first().encode())
        if first.error_code != ErrorCode.none:
            return first
        client.set_server_first(first.auth_bytes.decode())
        final = self.authenticate(client.get_client_final().encode())
        if final.error_code == ErrorCode.none:
            client.set_server_final(final.auth_bytes.decode())  # the server proved itself
        return final

    def metadata(self) -> Any:
        return self.send(
            METADATA,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )


@pytest.fixture
def broker() -> SansIOBroker:
    sansio = SansIOBroker(BrokerConfig(connections_max_reauth_ms=0))
    sansio.cluster.credentials.add_all(USERS)
    return sansio


def test_plain_signs_in_and_then_every_api_is_served(broker: SansIOBroker) -> None:
    connection = Connection(broker)
    assert connection.send(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    handshake = connection.handshake("PLAIN")
    assert (handshake.error_code, handshake.mechanisms) == (
        ErrorCode.none,
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    )
    answer = connection.authenticate(b"\0alice\0alice-secret")
    assert (answer.error_code, answer.error_message, answer.auth_bytes) == (
        ErrorCode.none,
        None,
        b"",
    )
    assert answer.session_lifetime.total_seconds() == 0  # no re-authentication asked for
    assert connection.session.principal == "User:alice"
    assert connection.metadata().brokers


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_signs_in_and_the_server_proves_it_knows_the_password(
    broker: SansIOBroker, mechanism: str
) -> None:
    connection = Connection(broker)
    assert connection.scram(mechanism, "bob", "bob-secret").error_code == ErrorCode.none
    assert connection.session.principal == "User:bob"
    assert connection.metadata().brokers


def test_a_scram_user_name_with_a_comma_and_an_equals_sign(broker: SansIOBroker) -> None:
    connection = Connection(broker)
    assert connection.scram("SCRAM-SHA-256", "a,b=c", "odd-secret").error_code == ErrorCode.none
    assert connection.session.principal == "User:a,b=c"


@pytest.mark.parametrize(
    ("user", "password"), [("alice", "wrong"), ("nobody", "alice-secret"), ("alice", "bob-secret")]
)
def test_plain_refuses_a_wrong_password_or_user_and_the_connection_closes(
    broker: SansIOBroker, user: str, password: str
) -> None:
    connection = Connection(broker)
    answer = connection.plain(user, password)
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.sasl_authentication_failed,
        PLAIN_FAILED,
    )
    assert connection.session.closing
    with pytest.raises(CloseConnection):
        connection.metadata()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(("user", "password"), [("bob", "wrong"), ("nobody", "bob-secret")])
def test_scram_refuses_a_wrong_password_or_an_unknown_user(
    broker: SansIOBroker, mechanism: str, user: str, password: str
) -> None:
    connection = Connection(broker)
    answer = connection.scram(mechanism, user, password)
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.sasl_authentication_failed,
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}",
    )
    assert connection.session.closing


def test_plain_refuses_an_authorization_id_other_than_the_user(broker: SansIOBroker) -> None:
    assert Connection(broker).plain("alice", "alice-secret", authzid="alice").error_code == 0
    refused = Connection(broker).plain("alice", "alice-secret", authzid="bob")
    assert refused.error_code == ErrorCode.sasl_authentication_failed
    assert "authorization id" in refused.error_message


def test_only_api_versions_and_the_handshake_come_before_authentication(
    broker: SansIOBroker,
) -> None:
    with pytest.raises(CloseConnection):
        Connection(broker).metadata()
    connection = Connection(broker)
    assert connection.handshake("PLAIN").error_code == ErrorCode.none
    with pytest.raises(CloseConnection):  # not ApiVersions after the handshake either
        connection.send(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    unfinished = Connection(broker)
    client = scramp.ScramClient(["SCRAM-SHA-256"], "bob", "bob-secret")
    assert unfinished.handshake("SCRAM-SHA-256").error_code == ErrorCode.none
    assert unfinished.authenticate(client.get_client_first().encode()).error_code == 0
    with pytest.raises(CloseConnection):  # half way through the exchange
        unfinished.metadata()


def test_a_mechanism_not_enabled_is_refused_with_the_enabled_list() -> None:
    broker = SansIOBroker(BrokerConfig(sasl_enabled_mechanisms="SCRAM-SHA-512"))
    broker.cluster.credentials.add_all(USERS)
    connection = Connection(broker)
    answer = connection.handshake("PLAIN")
    assert (answer.error_code, answer.mechanisms) == (
        ErrorCode.unsupported_sasl_mechanism,
        ("SCRAM-SHA-512",),
    )
    assert connection.session.closing
    assert Connection(broker).handshake("GSSAPI").error_code == ErrorCode.unsupported_sasl_mechanism
    assert Connection(broker).scram("SCRAM-SHA-512", "bob", "bob-secret").error_code == 0


def test_after_handshake_v0_tokens_travel_bare(broker: SansIOBroker) -> None:
    plain = Connection(broker)
    assert plain.handshake("PLAIN", version=0).error_code == ErrorCode.none
    assert plain.bare(b"\0alice\0alice-secret") == b""
    assert plain.session.principal == "User:alice"
    assert plain.metadata().brokers

    scram = Connection(broker)
    assert scram.handshake("SCRAM-SHA-512", version=0).error_code == ErrorCode.none
    client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", "bob-secret")
    client.set_server_first(scram.bare(client.get_client_first().encode()).decode())
    client.set_server_final(scram.bare(client.get_client_final().encode()).decode())
    assert scram.session.principal == "User:bob"

    refused = Connection(broker)
    assert refused.handshake("PLAIN", version=0).error_code == ErrorCode.none
    with pytest.raises(CloseConnection):  # a bare refusal has no answer: it closes
        refused.bare(b"\0alice\0wrong")


def test_a_session_lasts_connections_max_reauth_ms_and_re_authentication_renews_it() -> None:
    broker = SansIOBroker(BrokerConfig(connections_max_reauth_ms=10_000))
    broker.cluster.credentials.add_all(USERS)
    connection = Connection(broker)
    answer = connection.plain("alice", "alice-secret")
    assert answer.session_lifetime.total_seconds() == 10
    broker.clock.advance(9)
    renewed = connection.plain("alice", "alice-secret")  # on the same connection
    assert (renewed.error_code, renewed.session_lifetime.total_seconds()) == (0, 10)
    broker.clock.advance(9)  # 18 s after the first sign-in, 9 after the second
    assert connection.metadata().brokers
    broker.clock.advance(1)
    with pytest.raises(CloseConnection):
        connection.metadata()

    v0 = Connection(broker)  # re-authentication needs SaslAuthenticate (handshake v1)
    assert v0.plain("alice", "alice-secret").error_code == ErrorCode.none
    assert v0.handshake("PLAIN", version=0).error_code == ErrorCode.illegal_sasl_state


def test_re_authentication_keeps_the_principal_and_the_mechanism() -> None:
    broker = SansIOBroker(BrokerConfig(connections_max_reauth_ms=60_000))
    broker.cluster.credentials.add_all(USERS)
    other_user = Connection(broker)
    assert other_user.plain("alice", "alice-secret").error_code == ErrorCode.none
    changed = other_user.plain("bob", "bob-secret")
    assert changed.error_code == ErrorCode.sasl_authentication_failed
    assert changed.error_message.startswith("Cannot change principals during re-authentication")
    assert other_user.session.closing

    other_mechanism = Connection(broker)
    assert other_mechanism.plain("alice", "alice-secret").error_code == ErrorCode.none
    refused = other_mechanism.scram("SCRAM-SHA-256", "alice", "alice-secret")
    assert refused.error_code == ErrorCode.sasl_authentication_failed
    assert "PLAIN" in refused.error_message


def test_a_listener_without_sasl_answers_the_sasl_apis_with_illegal_state(
    broker: SansIOBroker,
) -> None:
    for protocol in (PLAINTEXT, "SSL"):
        connection = Connection(broker, security_protocol=protocol)
        assert connection.session.principal == ANONYMOUS
        assert connection.handshake("PLAIN").error_code == ErrorCode.illegal_sasl_state
        assert connection.authenticate(b"\0alice\0alice-secret").error_code == (
            ErrorCode.illegal_sasl_state
        )
        assert connection.metadata().brokers  # and it stays open
        assert connection.session.principal == ANONYMOUS


def test_an_authenticated_connection_cannot_authenticate_again_without_a_handshake(
    broker: SansIOBroker,
) -> None:
    connection = Connection(broker, security_protocol=SASL_SSL)
    assert connection.plain("alice", "alice-secret").error_code == ErrorCode.none
    again = connection.authenticate(b"\0alice\0alice-secret")
    assert (again.error_code, again.error_message) == (
        ErrorCode.illegal_sasl_state,
        "SaslAuthenticate request received after successful authentication",
    )


def test_users_change_while_the_broker_runs(broker: SansIOBroker) -> None:
    credentials = broker.cluster.credentials
    credentials.add_user("carol", "first")
    assert Connection(broker).plain("carol", "first").error_code == ErrorCode.none
    credentials.add_user("carol", "second")
    assert Connection(broker).plain("carol", "first").error_code != ErrorCode.none
    assert Connection(broker).scram("SCRAM-SHA-256", "carol", "second").error_code == 0
    assert credentials.remove_user("carol") and not credentials.remove_user("carol")
    assert Connection(broker).plain("carol", "second").error_code != ErrorCode.none


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "PLAINTEXT//127.0.0.1:1"}, "is not NAME://HOST:PORT"),
        ({"listeners": "PLAINTEXT://127.0.0.1:99999"}, "is not NAME://HOST:PORT"),
        ({"listeners": "INTERNAL://127.0.0.1:0"}, "listener_security_protocol_map"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:1"},
            "PLAINTEXT is named twice",
        ),
        ({"listeners": "SSL://127.0.0.1:0"}, "needs ssl_certfile and ssl_keyfile"),
        ({"ssl_client_auth": "required"}, "needs ssl_cafile"),
        ({"ssl_client_auth": "sometimes"}, "must be one of none, requested, required"),
        ({"sasl_enabled_mechanisms": "PLAIN,GSSAPI"}, "GSSAPI is not one of"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:0", "advertised_listeners": "SSL://h:1"},
            "SSL is not a listener",
        ),
        ({"connections_max_reauth_ms": -1}, "must be at least 0"),
    ],
)
def test_security_settings_the_broker_cannot_work_with_are_refused(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        BrokerConfig(**settings)


def test_a_listener_named_freely_takes_its_protocol_from_the_map() -> None:
    config = BrokerConfig(
        listeners="INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:9094",
        listener_security_protocol_map="INTERNAL:SASL_PLAINTEXT,EXTERNAL:PLAINTEXT",
        advertised_listeners="EXTERNAL://kafka.example:19094",
    )
    assert [(x.name, x.security_protocol, x.port) for x in config.listener_list()] == [
        ("INTERNAL", "SASL_PLAINTEXT", 0),
        ("EXTERNAL", "PLAINTEXT", 9094),
    ]
    assert config.advertised_addresses() == {"EXTERNAL": ("kafka.example", 19094)}
