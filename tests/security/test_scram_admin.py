"""SCRAM credentials managed over the protocol (AlterUserScramCredentials and
DescribeUserScramCredentials) with confluent-kafka's admin client. The `parity` tests run
against Apache Kafka too and give the same answers."""

from __future__ import annotations

import pathlib
import uuid

import confluent_kafka
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from minibroker import Broker

TIMEOUT = 20.0
SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def _user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def _upsert(user: str, mechanism: ScramMechanism = SHA256, iterations: int = 8192) -> object:
    return UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), b"password", b"sixteen-byte-salt"
    )


def _alter(admin: AdminClient, alterations: list[object]) -> dict[str, object]:
    """user -> None (done) or the KafkaError refusing it."""
    outcomes: dict[str, object] = {}
    for user, future in admin.alter_user_scram_credentials(alterations).items():
        try:
            outcomes[user] = future.result(TIMEOUT)
        except KafkaException as exc:
            outcomes[user] = exc.args[0].code()
    return outcomes


def _described(admin: AdminClient, users: list[str]) -> dict[str, object]:
    """user -> {mechanism: iterations} or the error code refusing it."""
    found: dict[str, object] = {}
    for user, future in admin.describe_user_scram_credentials(users).items():
        try:
            description = future.result(TIMEOUT)
            found[user] = {
                info.mechanism: info.iterations for info in description.scram_credential_infos
            }
        except KafkaException as exc:
            found[user] = exc.args[0].code()
    return found


@pytest.mark.parity
def test_credentials_are_set_described_and_deleted(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    alice = _user()
    assert _alter(admin, [_upsert(alice)]) == {alice: None}
    assert _alter(admin, [_upsert(alice, SHA512, 4096)]) == {alice: None}
    assert _described(admin, [alice]) == {alice: {SHA256: 8192, SHA512: 4096}}
    assert _alter(admin, [UserScramCredentialDeletion(alice, SHA256)]) == {alice: None}
    assert _described(admin, [alice]) == {alice: {SHA512: 4096}}
    assert _alter(admin, [UserScramCredentialDeletion(alice, SHA512)]) == {alice: None}
    assert _described(admin, [alice]) == {alice: confluent_kafka.KafkaError.RESOURCE_NOT_FOUND}


@pytest.mark.parity
def test_refused_changes_get_kafkas_errors_and_change_nothing(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    few, many, ghost, twice, both = _user(), _user(), _user(), _user(), _user()
    outcomes = _alter(
        admin,
        [
            _upsert(few, iterations=100),
            _upsert(many, iterations=20_000),
            UserScramCredentialDeletion(ghost, SHA256),
            _upsert(twice),
            _upsert(twice, SHA512),  # one change per user per request
            _upsert(both),
            UserScramCredentialDeletion(both, SHA256),  # deletions count first: none to delete
        ],
    )
    assert outcomes == {
        few: confluent_kafka.KafkaError.UNACCEPTABLE_CREDENTIAL,
        many: confluent_kafka.KafkaError.UNACCEPTABLE_CREDENTIAL,
        ghost: confluent_kafka.KafkaError.RESOURCE_NOT_FOUND,
        twice: confluent_kafka.KafkaError.DUPLICATE_RESOURCE,
        both: confluent_kafka.KafkaError.RESOURCE_NOT_FOUND,
    }
    missing = confluent_kafka.KafkaError.RESOURCE_NOT_FOUND
    users = [few, many, twice, both]
    assert _described(admin, users) == dict.fromkeys(users, missing)


def test_a_user_set_over_the_protocol_signs_in_with_scram_only() -> None:
    listeners = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
    with Broker(listeners=listeners, sasl_users={"admin": "admin-secret"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers_for("PLAINTEXT")})
        assert _alter(admin, [_upsert("carol", SHA512)]) == {"carol": None}
        sasl = broker.bootstrap_servers_for("SASL_PLAINTEXT")

        def signs_in(mechanism: str, password: str) -> bool:
            errors: list[object] = []
            producer = confluent_kafka.Producer(
                {
                    "bootstrap.servers": sasl,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": mechanism,
                    "sasl.username": "carol",
                    "sasl.password": password,
                    "error_cb": errors.append,
                }
            )
            try:
                producer.list_topics(timeout=5)
            except KafkaException:
                return False
            return not errors

        assert signs_in("SCRAM-SHA-512", "password")
        assert not signs_in("SCRAM-SHA-512", "wrong")
        assert not signs_in("SCRAM-SHA-256", "password")  # only SHA-512 was set
        assert not signs_in("PLAIN", "password")  # the password itself is never kept


def test_only_principals_allowed_on_the_cluster_manage_credentials() -> None:
    listeners = "SASL_PLAINTEXT://127.0.0.1:0"
    users = {"admin": "admin-secret", "bob": "bob-secret"}
    with Broker(
        listeners=listeners, sasl_users=users, acls_enabled=True, super_users="User:admin"
    ) as broker:

        def admin_as(user: str) -> AdminClient:
            return AdminClient(
                {
                    "bootstrap.servers": broker.bootstrap_servers,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-256",
                    "sasl.username": user,
                    "sasl.password": users[user],
                }
            )

        # Each client outlives its futures: librdkafka aborts when a client is destroyed
        # from its own background thread.
        bob, admin = admin_as("bob"), admin_as("admin")
        refused = confluent_kafka.KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert _alter(bob, [_upsert("dave")]) == {"dave": refused}
        assert _described(bob, ["admin"]) == {"admin": refused}
        assert _alter(admin, [_upsert("dave")]) == {"dave": None}
        assert _described(admin, ["dave"]) == {"dave": {SHA256: 8192}}


def test_credentials_set_over_the_protocol_are_kept_in_a_data_directory(
    tmp_path: pathlib.Path,
) -> None:
    listeners = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
    with Broker(listeners=listeners, data_dir=str(tmp_path)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers_for("PLAINTEXT")})
        assert _alter(admin, [_upsert("erin", SHA512), _upsert("frank")]) == {
            "erin": None,
            "frank": None,
        }
        assert _alter(admin, [UserScramCredentialDeletion("frank", SHA256)]) == {"frank": None}
    assert (tmp_path / "scram-credentials.json").stat().st_mode & 0o777 == 0o600
    assert b"password" not in (tmp_path / "scram-credentials.json").read_bytes()
    with Broker(listeners=listeners, data_dir=str(tmp_path)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers_for("PLAINTEXT")})
        missing = confluent_kafka.KafkaError.RESOURCE_NOT_FOUND
        assert _described(admin, ["erin", "frank"]) == {"erin": {SHA512: 8192}, "frank": missing}
        errors: list[object] = []
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "erin",
                "sasl.password": "password",
                "error_cb": errors.append,
            }
        )
        producer.list_topics(timeout=10)
        assert not errors
