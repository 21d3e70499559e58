"""Group configs (Kafka 4: config resource GROUP, type 32) through the AdminClient, and
their effect on a consumer-protocol group: the session timeout and heartbeat interval a
group is given are the ones its members get."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
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
from minibroker.testing.backends import KafkaService
from tests.groups.conftest import SETTLE_TIMEOUT, skip_before_kafka_4, unique, wait_until

CONSUMER_GROUP_HEARTBEAT = 68
UNKNOWN_MEMBER_ID = 25


def _alter(admin: AdminClient, group: str, **values: str | None) -> None:
    entries = [
        ConfigEntry(
            name.replace("_", "."),
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
def test_group_configs_are_set_described_and_refused_as_kafka_does(
    kafka_broker: KafkaService, pytestconfig: pytest.Config
) -> None:
    skip_before_kafka_4(pytestconfig)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    group = unique("configured")  # a group need not exist to be configured
    _alter(admin, group, consumer_session_timeout_ms="50000")
    described = _described(admin, group)
    session = described["consumer.session.timeout.ms"]
    assert (session.value, session.source) == ("50000", ConfigSource.GROUP_CONFIG.value)
    interval = described["consumer.heartbeat.interval.ms"]
    assert interval.source != ConfigSource.GROUP_CONFIG.value
    assert {"share.auto.offset.reset", "share.isolation.level"} <= set(described)

    for refused in (
        {"consumer.no.such.config": "1"},
        {"consumer.session.timeout.ms": "soon"},
        {"consumer.heartbeat.interval.ms": "60000"},  # not below the session timeout
        {"share.auto.offset.reset": "sometimes"},
    ):
        with pytest.raises(KafkaException) as caught:
            _alter(admin, group, **{k.replace(".", "_"): v for k, v in refused.items()})
        assert caught.value.args[0].name() == "INVALID_CONFIG", refused
    assert _described(admin, group)["consumer.session.timeout.ms"].value == "50000"

    _alter(admin, group, consumer_session_timeout_ms=None)
    back = _described(admin, group)["consumer.session.timeout.ms"]
    assert back.source != ConfigSource.GROUP_CONFIG.value


def test_a_groups_session_timeout_and_heartbeat_interval_reach_its_members() -> None:
    """With the broker's clock advanced: a member lasts the group's 50 s session, not the
    broker's 45 s, and is told the group's heartbeat interval."""
    with Broker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        group, topic = unique("session"), unique("session-topic")
        broker.create_topic(topic, 2)
        _alter(
            admin, group, consumer_session_timeout_ms="50000", consumer_heartbeat_interval_ms="700"
        )
        member_id = str(uuid.uuid4())
        with RawClient(broker.bootstrap_servers) as member:

            def beat(epoch: int, **fields: Any) -> Any:
                fields.setdefault("topic_partitions", None)
                return member.call(
                    CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id=member_id,
                    member_epoch=epoch, **fields,
                )  # fmt: skip

            joined = beat(
                0,
                rebalance_timeout=timedelta(seconds=30),
                subscribed_topic_names=(topic,),
                topic_partitions=(),
            )
            assert joined.error_code == 0
            assert joined.heartbeat_interval == timedelta(milliseconds=700)
            broker.clock.advance(46)
            time.sleep(0.5)  # the broker's timer runs on the advance
            assert broker.group_states()[group] == "Stable"
            broker.clock.advance(5)
            assert wait_until(lambda: broker.group_states()[group] == "Empty", SETTLE_TIMEOUT)
            assert beat(joined.member_epoch).error_code == UNKNOWN_MEMBER_ID
