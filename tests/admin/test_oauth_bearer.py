"""SASL/OAUTHBEARER with unsecured JWS tokens, as Kafka's default unsecured validator
checks them (required scope "kafka"). The `parity` tests run against Apache Kafka too,
on a SASL_PLAINTEXT listener of its own configured with that validator."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from harness.raw_client import RawClient, metadata_request
from minibroker import Broker
from minibroker.testing import jvm
from minibroker.testing.real_kafka import RealKafka
from tests.admin.conftest import SCOPE
from tests.admin.drivers import FRANZ_GO, AdminDrivers
from tests.interop.test_client_matrix import Built, Driver

HANDSHAKE, AUTHENTICATE, METADATA = 17, 36, 3
TIMEOUT = 20.0


@pytest.fixture(scope="module")
def oauth_bootstrap(request: pytest.FixtureRequest, kafka_backend: str) -> Iterator[str]:
    """bootstrap.servers of a SASL_PLAINTEXT listener taking OAUTHBEARER tokens."""
    if kafka_backend == "kafka-jvm":
        kafka: RealKafka = request.getfixturevalue("kafka_with_oauth")
        yield kafka.extra_bootstrap_servers
        return
    if kafka_backend != "embedded":
        pytest.skip("needs a broker whose listeners the test configures")
    with Broker(
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        sasl_enabled_mechanisms="OAUTHBEARER",
        sasl_oauthbearer_required_scope=SCOPE,
        auto_create_topics=True,
    ) as broker:
        yield broker.bootstrap_servers_for("SASL_PLAINTEXT")


def unsecured_token(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}."


def first_message(token: str, authzid: str = "") -> bytes:
    """RFC 7628's client initial response."""
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01\x01".encode()


def _claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": "alice", "iat": now, "exp": now + 3600, "scope": SCOPE, **overrides}


def _authenticate(client: RawClient, token: bytes) -> Any:
    assert client.call(HANDSHAKE, 1, mechanism="OAUTHBEARER").error_code == ErrorCode.none
    return client.call(AUTHENTICATE, 2, auth_bytes=token)


def _librdkafka(bootstrap: str, errors: list[str], oauth_config: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": oauth_config,
        "error_cb": lambda error: errors.append(str(error)),
    }


@pytest.mark.parity
def test_librdkafka_signs_in_with_an_unsecured_token_and_round_trips(
    oauth_bootstrap: str,
) -> None:
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    errors: list[str] = []
    settings = _librdkafka(oauth_bootstrap, errors, f"principal=alice scope={SCOPE}")
    admin = AdminClient(settings)
    admin.create_topics([NewTopic(topic, 1)])[topic].result(TIMEOUT)
    producer = confluent_kafka.Producer({**settings, "acks": "all"})
    producer.produce(topic, b"signed-in", partition=0)
    assert producer.flush(TIMEOUT) == 0
    consumer = confluent_kafka.Consumer(
        {**settings, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        read = None
        while read is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read = message.value()
        assert read == b"signed-in", errors
    finally:
        consumer.close()


@pytest.mark.parity
def test_librdkafka_without_the_required_scope_is_refused(oauth_bootstrap: str) -> None:
    errors: list[str] = []
    settings = _librdkafka(oauth_bootstrap, errors, "principal=alice scope=other")
    refusal = '{"status":"insufficient_scope", "scope":"[kafka]"}'
    producer = confluent_kafka.Producer(settings)
    deadline = time.monotonic() + TIMEOUT
    while not any(refusal in error for error in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(refusal in error for error in errors), errors


@pytest.mark.parity
@pytest.mark.parametrize(
    ("claims", "challenge"),
    [
        (_claims(exp=int(time.time()) - 60), {"status": "invalid_token"}),
        (_claims(sub=""), {"status": "invalid_token"}),
        (_claims(scope="reader writer"), {"status": "insufficient_scope", "scope": "[kafka]"}),
    ],
    ids=["expired", "no-subject", "no-scope"],
)
def test_a_refused_token_gets_kafkas_challenge_then_the_failure(
    oauth_bootstrap: str, claims: dict[str, Any], challenge: dict[str, str]
) -> None:
    with RawClient(oauth_bootstrap) as client:
        answer = _authenticate(client, first_message(unsecured_token(claims)))
        assert answer.error_code == ErrorCode.none
        assert json.loads(answer.auth_bytes) == challenge
        refused = client.call(AUTHENTICATE, 2, auth_bytes=b"\x01")  # the client's ack
        assert refused.error_code == ErrorCode.sasl_authentication_failed
        assert refused.error_message == answer.auth_bytes.decode()
        assert client.is_closed_by_peer()


@pytest.mark.parity
def test_malformed_messages_and_another_authzid_are_refused_as_kafka_refuses_them(
    oauth_bootstrap: str,
) -> None:
    token = unsecured_token(_claims())
    for malformed in (b"n,,\x01host=localhost\x01\x01", f"auth=Bearer {token}".encode()):
        with RawClient(oauth_bootstrap) as client:
            answer = _authenticate(client, malformed)
            assert answer.error_code == ErrorCode.sasl_authentication_failed
            assert answer.error_message == (
                "Authentication failed during authentication due to invalid credentials "
                "with SASL mechanism OAUTHBEARER"
            )
            assert client.is_closed_by_peer()
    with RawClient(oauth_bootstrap) as client:
        answer = _authenticate(client, first_message(token, authzid="bob"))
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == (
            "Authentication failed: Client requested an authorization id (bob) that is "
            "different from the token's principal name (alice)"
        )


@pytest.mark.parity
def test_the_session_lasts_until_the_token_expires(oauth_bootstrap: str) -> None:
    """connections.max.reauth.ms is unset: the token's expiry alone bounds the session."""
    with RawClient(oauth_bootstrap) as client:
        token = unsecured_token(_claims(exp=int(time.time()) + 600))
        answer = _authenticate(client, first_message(token))
        assert answer.error_code == ErrorCode.none and answer.auth_bytes == b""
        lifetime_ms = answer.session_lifetime.total_seconds() * 1000
        assert 590_000 < lifetime_ms <= 600_000


def test_a_users_own_validator_decides_and_names_the_principal() -> None:
    def validate(token: str) -> str | None:
        if token == "crash":
            raise RuntimeError("the user's validator failed")
        return {"let-me-in": "service-a"}.get(token)

    with Broker(
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        sasl_enabled_mechanisms="OAUTHBEARER",
        sasl_oauthbearer_validator=validate,
        acls_enabled=True,
        super_users="User:service-a",
    ) as broker:
        bootstrap = broker.bootstrap_servers_for("SASL_PLAINTEXT")
        with RawClient(bootstrap) as client:
            answer = _authenticate(client, first_message("let-me-in"))
            assert answer.error_code == ErrorCode.none
            assert answer.session_lifetime.total_seconds() == 0  # for ever
            # served, as a super user
            assert client.request(METADATA, 12, metadata_request()).brokers
        for refused in (unsecured_token(_claims()), "crash"):
            with RawClient(bootstrap) as client:
                answer = _authenticate(client, first_message(refused))
                assert json.loads(answer.auth_bytes) == {"status": "invalid_token"}


def test_the_broker_clock_expires_the_session_with_the_token() -> None:
    """connections_max_reauth_ms longer than the token's life: the token's expiry wins."""
    with (
        Broker(
            listeners="SASL_PLAINTEXT://127.0.0.1:0",
            sasl_enabled_mechanisms="OAUTHBEARER",
            connections_max_reauth_ms=600_000,
        ) as broker,
        RawClient(broker.bootstrap_servers_for("SASL_PLAINTEXT")) as client,
    ):
        token = unsecured_token(_claims(exp=int(time.time()) + 60))
        answer = _authenticate(client, first_message(token))
        assert answer.error_code == ErrorCode.none
        assert 50_000 < answer.session_lifetime.total_seconds() * 1000 <= 60_000
        assert client.request(METADATA, 12, metadata_request()).brokers
        broker.clock.advance(120)
        client.send(METADATA, 12, metadata_request())
        assert client.is_closed_by_peer()


@pytest.fixture(scope="module")
def java_built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory)


JAVA_DRIVER = Driver("java-oauth", "java", "../admin/oauth", "OAuthSignIn", java_line="4")


def _java_sign_in(built: Built, bootstrap: str, scope: str) -> dict[str, Any]:
    topic = f"oauth-java-{uuid.uuid4().hex[:8]}"
    command = list(built.command(JAVA_DRIVER))
    # The unsecured login handler builds its token with Jackson, which kafka-clients
    # leaves to the application: the Kafka broker's copy serves.
    broker_jars = jvm.kafka_broker("4").jars()
    if broker_jars is None:
        pytest.skip("the Kafka 4 broker jars (for Jackson) are not fetched")
    jackson = [str(jar) for jar in broker_jars if jar.name.startswith("jackson-")]
    where = command.index("-cp") + 1
    command[where] = os.pathsep.join([command[where], *jackson])
    done = subprocess.run(
        [*command, bootstrap, topic, scope],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parity
def test_the_java_client_signs_in_with_its_unsecured_login_or_is_refused(
    oauth_bootstrap: str, java_built: Built
) -> None:
    assert _java_sign_in(java_built, oauth_bootstrap, SCOPE) == {"value": "signed-in"}
    refused = _java_sign_in(java_built, oauth_bootstrap, "other")
    assert refused == {
        "error": "org.apache.kafka.common.errors.SaslAuthenticationException",
        "message": '{"status":"insufficient_scope", "scope":"[kafka]"}',
    }


@pytest.mark.parity
def test_franz_go_signs_in_with_an_unsecured_token_or_is_refused(
    oauth_bootstrap: str, admin_drivers: AdminDrivers
) -> None:
    topic = f"oauth-go-{uuid.uuid4().hex[:8]}"
    signed_in = f"signin:{topic}:{unsecured_token(_claims())}"
    assert admin_drivers.json_steps(FRANZ_GO, oauth_bootstrap, signed_in)[0]["value"] == (
        "signed-in"
    )
    refused = f"signin:{topic}-refused:{unsecured_token(_claims(scope='other'))}"
    printed = admin_drivers.run_steps(FRANZ_GO, oauth_bootstrap, refused)
    [line] = [json.loads(text) for text in printed.splitlines() if text.startswith("{")]
    # franz-go fails at the broker's challenge ({"status":"insufficient_scope", ...})
    # without reading it out, on Kafka as here.
    assert "unexpected data in oauth response" in line["error"], line
