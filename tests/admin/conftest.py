from __future__ import annotations

from collections.abc import Iterator

import pytest

from minibroker.testing.real_kafka import RealKafka, unavailable_reason
from tests.admin.drivers import AdminDrivers

SCOPE = "kafka"  # the scope the OAUTHBEARER listeners require
# Kafka's unsecured validator on the SASL_PLAINTEXT listener (the login module's options
# configure it; the default server callback handler for OAUTHBEARER is that validator).
KAFKA_OAUTH_SETTINGS = {
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="{SCOPE}";'
    ),
}


@pytest.fixture(scope="session")
def admin_drivers(tmp_path_factory: pytest.TempPathFactory) -> AdminDrivers:
    """The admin scenario catalogue's client drivers, each built once per session."""
    return AdminDrivers(tmp_path_factory)


@pytest.fixture(scope="session")
def kafka_with_oauth(pytestconfig: pytest.Config) -> Iterator[RealKafka]:
    """Apache Kafka (the kafka-jvm backend's release) with a SASL_PLAINTEXT listener
    taking OAUTHBEARER tokens as its unsecured validator checks them: one for the session,
    shared by the tests that sign in."""
    line = str(
        pytestconfig.getoption("kafka_jvm_version") or pytestconfig.getini("kafka_jvm_version")
    )
    missing = unavailable_reason(line)
    if missing is not None:
        pytest.fail(f"--kafka-backend=kafka-jvm: {missing}")
    with RealKafka(line, settings=KAFKA_OAUTH_SETTINGS, extra_listener="SASL_PLAINTEXT") as kafka:
        yield kafka
