"""CreateTopics results sans-IO: from v5 a created topic (and one validate_only would
create) carries every topic config with its value and source, as Kafka's does; the Java
Admin client's createTopics fails with a NullPointerException on a null list."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from harness.raw_client import make
from minibroker.config import BrokerConfig
from minibroker.state.topic_configs import SET, TOPIC_CONFIG_DEFAULTS
from tests.sansio import SansIOBroker

CREATE_TOPICS = 19
NONE = 0
INVALID_CONFIG = 40
SOURCE_DYNAMIC_TOPIC, SOURCE_DYNAMIC_DEFAULT_BROKER, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = (
    1,
    3,
    4,
    5,
)


def create(
    broker: SansIOBroker, version: int, name: str, validate_only: bool = False, **configs: str
) -> Any:
    wanted = make(
        CREATE_TOPICS,
        version,
        "CreatableTopic",
        name=name,
        num_partitions=2,
        replication_factor=1,
        assignments=(),
        configs=tuple(
            make(CREATE_TOPICS, version, "CreatableTopicConfig", name=key, value=value)
            for key, value in configs.items()
        ),
    )
    response = broker.call(
        CREATE_TOPICS,
        version,
        topics=(wanted,),
        timeout=datetime.timedelta(seconds=5),
        validate_only=validate_only,
    )
    (result,) = response.topics
    return result


def reported(result: Any) -> dict[str, tuple[str | None, int, bool, bool]]:
    return {
        c.name: (c.value, int(c.config_source), c.read_only, c.is_sensitive) for c in result.configs
    }


@pytest.mark.parametrize("version", [5, 6, 7])
@pytest.mark.parametrize("validate_only", [False, True])
def test_a_created_topic_reports_every_config_with_its_source(
    version: int, validate_only: bool
) -> None:
    broker = SansIOBroker()
    result = create(broker, version, "orders", validate_only, **{"retention.ms": "1000"})
    assert result.error_code.value == NONE
    assert (int(result.num_partitions), int(result.replication_factor)) == (2, 1)
    expected = {
        name: (default, SOURCE_DEFAULT, False, False)
        for name, default in TOPIC_CONFIG_DEFAULTS.items()
    }
    expected["retention.ms"] = ("1000", SOURCE_DYNAMIC_TOPIC, False, False)
    assert reported(result) == expected
    assert (broker.cluster.topics.get("orders") is None) is validate_only


@pytest.mark.parametrize("version", [5, 7])
def test_a_refused_topic_reports_no_configs(version: int) -> None:
    result = create(SansIOBroker(), version, "orders", **{"no.such.config": "1"})
    assert result.error_code.value == INVALID_CONFIG
    assert result.configs is None


@pytest.mark.parametrize("version", [3, 7])
def test_a_huge_invalid_config_value_is_answered_with_a_short_message(version: int) -> None:
    # The message quotes the value; a legacy response string holds at most 32,767 bytes.
    result = create(SansIOBroker(), version, "orders", **{"retention.ms": "x" * 32_000})
    assert result.error_code.value == INVALID_CONFIG
    assert result.error_message.startswith("Invalid value xxx")
    assert len(result.error_message) < 2_000


def test_before_v5_results_have_no_configs() -> None:
    result = create(SansIOBroker(), 4, "orders")
    assert result.error_code.value == NONE
    assert not hasattr(result, "configs")


@pytest.mark.parametrize("version", [5, 7])
def test_each_broker_reports_its_own_defaults_before_and_after_they_change(
    version: int,
) -> None:
    """The encoded config lists are cached across brokers: a broker whose
    message.max.bytes differs (at start or changed while running) reports its own."""
    plain, larger = SansIOBroker(), SansIOBroker(BrokerConfig(message_max_bytes=2_000_000))
    assert reported(create(plain, version, "a"))["max.message.bytes"][:2] == (
        "1048588",
        SOURCE_DEFAULT,
    )
    assert reported(create(larger, version, "a"))["max.message.bytes"][:2] == (
        "2000000",
        SOURCE_STATIC_BROKER,
    )
    plain.cluster.broker_configs.alter("", [("message.max.bytes", SET, "3000000")], node_id=0)
    plain.cluster.broker_configs_changed()
    assert reported(create(plain, version, "b"))["max.message.bytes"][:2] == (
        "3000000",
        SOURCE_DYNAMIC_DEFAULT_BROKER,
    )
