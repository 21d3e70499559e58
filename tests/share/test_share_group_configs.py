"""Share groups' configs (config resource GROUP) through the AdminClient, with Kafka 4.4's
names, defaults and bounds, and the broker-level group.share.* settings behind them."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from harness.raw_client import RawClient
from minibroker import Broker
from minibroker.config import BrokerConfig
from minibroker.state.group_configs import GroupConfigs
from minibroker.state.topic_errors import TopicError
from minibroker.testing.backends import KafkaService
from minibroker.testing.waiting import wait_for
from tests.groups.conftest import skip_before_kafka_4

SHARE_HEARTBEAT = 76
SET = 0


def _alter(admin: AdminClient, group: str, values: dict[str, str | None]) -> None:
    entries = [
        ConfigEntry(
            name,
            value,
            incremental_operation=AlterConfigOpType.DELETE
            if value is None
            else AlterConfigOpType.SET,
        )
        for name, value in values.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(15)


def _described(admin: AdminClient, group: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.GROUP, group)
    return dict(admin.describe_configs([resource])[resource].result(15))


@pytest.mark.parity
def test_share_group_configs_have_kafkas_defaults_and_bounds(
    kafka_broker: KafkaService, pytestconfig: pytest.Config
) -> None:
    skip_before_kafka_4(pytestconfig)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    group = f"share-configs-{uuid.uuid4().hex[:8]}"
    described = _described(admin, group)
    defaults = {
        "share.auto.offset.reset": "latest",
        "share.record.lock.duration.ms": "30000",
        "share.delivery.count.limit": "5",
        "share.partition.max.record.locks": "2000",
        "share.session.timeout.ms": "45000",
        "share.heartbeat.interval.ms": "5000",
        "share.isolation.level": "read_uncommitted",
        "share.renew.acknowledge.enable": "true",
        "share.assignment.interval.ms": "1000",
    }
    assert {name: described[name].value for name in defaults} == defaults
    _alter(
        admin,
        group,
        {
            "share.auto.offset.reset": "earliest",
            "share.record.lock.duration.ms": "15000",
            "share.delivery.count.limit": "10",
            "share.renew.acknowledge.enable": "false",
            "share.assignment.interval.ms": "0",
        },
    )
    described = _described(admin, group)
    lock = described["share.record.lock.duration.ms"]
    assert (lock.value, lock.source) == ("15000", ConfigSource.GROUP_CONFIG.value)
    assert described["share.auto.offset.reset"].value == "earliest"
    for refused in (
        {"share.record.lock.duration.ms": "14999"},
        {"share.record.lock.duration.ms": "60001"},
        {"share.delivery.count.limit": "1"},
        {"share.delivery.count.limit": "11"},
        {"share.partition.max.record.locks": "99"},
        {"share.session.timeout.ms": "44999"},
        {"share.heartbeat.interval.ms": "15001"},
        {"share.auto.offset.reset": "by_duration:yesterday"},
        {"share.isolation.level": "read_some"},
        {"share.renew.acknowledge.enable": "sometimes"},
        {"share.assignment.interval.ms": "15001"},
    ):
        with pytest.raises(KafkaException) as caught:
            _alter(admin, group, dict(refused))
        assert caught.value.args[0].name() == "INVALID_CONFIG", refused
    assert _described(admin, group)["share.delivery.count.limit"].value == "10"
    _alter(admin, group, {"share.delivery.count.limit": None})

    def back() -> bool:  # Kafka applies a group config change shortly after answering
        limit = _described(admin, group)["share.delivery.count.limit"]
        return (limit.value, limit.source) == ("5", ConfigSource.DEFAULT_CONFIG.value)

    assert wait_for(back, timeout=10)


def test_bounds_are_the_brokers_and_refusals_speak_kafkas_words() -> None:
    configs = GroupConfigs(
        BrokerConfig(group_share_min_record_lock_duration_ms=1_000, group_share_max_size=5)
    )
    configs.alter("g", [("share.record.lock.duration.ms", SET, "1000")])
    assert configs.int_value("g", "share.record.lock.duration.ms") == 1000
    with pytest.raises(TopicError) as caught:
        configs.alter("g", [("share.delivery.count.limit", SET, "11")])
    assert (
        caught.value.message == "share.delivery.count.limit must be in the range 2 to 10 inclusive."
    )
    configs = GroupConfigs(BrokerConfig(group_share_min_session_timeout_ms=10_000))
    with pytest.raises(TopicError) as caught:
        configs.alter(
            "g",
            [
                ("share.session.timeout.ms", SET, "10000"),
                ("share.heartbeat.interval.ms", SET, "12000"),
            ],
        )
    assert (
        caught.value.message
        == "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"
    )
    assert configs.own("g") == {}  # all or nothing


def test_broker_settings_must_hold_their_own_bounds() -> None:
    with pytest.raises(ValueError, match="group_share_delivery_count_limit=1"):
        BrokerConfig(group_share_delivery_count_limit=1)
    with pytest.raises(ValueError, match="must be less than group_share_session_timeout_ms"):
        BrokerConfig(
            group_share_min_session_timeout_ms=1_000,
            group_share_session_timeout_ms=5_000,
            group_share_heartbeat_interval_ms=5_000,
        )


def test_the_broker_settings_are_the_groups_defaults_and_reach_members() -> None:
    """A broker started with shorter share settings gives them to every share group that
    does not set its own: the heartbeat interval members are told, and the session."""
    with Broker(
        group_share_min_heartbeat_interval_ms=100,
        group_share_heartbeat_interval_ms=200,
        group_share_delivery_count_limit=3,
    ) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        described = _described(admin, "any")
        assert described["share.delivery.count.limit"].value == "3"
        assert described["share.heartbeat.interval.ms"].value == "200"
        broker.create_topic("t", 1)
        with RawClient(broker.bootstrap_servers) as client:
            joined = client.call(
                SHARE_HEARTBEAT,
                1,
                group_id="g",
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                rack_id=None,
                subscribed_topic_names=("t",),
            )
        assert joined.heartbeat_interval == datetime.timedelta(milliseconds=200)
