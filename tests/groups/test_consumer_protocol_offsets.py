"""Offsets of a Kafka 4 consumer-protocol group, over raw requests: a member commits and
fetches with its member epoch, and every other epoch, member or version is refused with
Kafka's error (the same answers from Kafka 4.4, with --kafka-backend=kafka-jvm)."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.raw_client import RawClient, make
from minibroker.testing.backends import KafkaService
from tests.groups.conftest import skip_before_kafka_4, unique

FIND_COORDINATOR, CONSUMER_GROUP_HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH = 10, 68, 8, 9
NONE, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION, STALE_MEMBER_EPOCH = 0, 25, 35, 113
RETRIES = 60  # a fresh Kafka needs a few seconds before it coordinates a new group


@pytest.fixture(autouse=True)
def _consumer_protocol_served(pytestconfig: pytest.Config) -> None:
    skip_before_kafka_4(pytestconfig)


def _coordinator(bootstrap: str, group: str) -> str:
    with RawClient(bootstrap) as client:
        for _ in range(RETRIES):
            found = client.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(group,))
            (coordinator,) = found.coordinators
            if coordinator.error_code == NONE:
                return f"{coordinator.host}:{coordinator.port}"
            time.sleep(0.5)
    raise AssertionError(f"no coordinator for {group}")


@pytest.mark.parity
def test_commits_and_fetches_carry_the_member_epoch(kafka_broker: KafkaService) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group, member_id = unique("epochs"), unique("epochs-group"), str(uuid.uuid4())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    with RawClient(_coordinator(bootstrap, group)) as client:
        for _ in range(RETRIES):
            joined = client.call(
                CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id=member_id,
                member_epoch=0, rebalance_timeout=timedelta(seconds=30),
                subscribed_topic_names=(topic,), topic_partitions=(),
            )  # fmt: skip
            if joined.error_code == NONE:
                break
            time.sleep(0.5)
        assert joined.error_code == NONE
        epoch = joined.member_epoch
        assert epoch > 0

        def commit(version: int, member_epoch: int, member: str = member_id) -> int:
            partition = make(
                OFFSET_COMMIT, version, "OffsetCommitRequestPartition", partition_index=0,
                committed_offset=1, committed_leader_epoch=-1, committed_metadata="",
            )  # fmt: skip
            topics = (make(OFFSET_COMMIT, version, "OffsetCommitRequestTopic", name=topic,
                           partitions=(partition,)),)  # fmt: skip
            answer = client.call(
                OFFSET_COMMIT, version, group_id=group, generation_id_or_member_epoch=member_epoch,
                member_id=member, group_instance_id=None, topics=topics,
            )  # fmt: skip
            return int(answer.topics[0].partitions[0].error_code)

        def fetch(member_epoch: int, member: str | None) -> Any:
            wanted = make(
                OFFSET_FETCH, 9, "OffsetFetchRequestGroup", group_id=group, member_id=member,
                member_epoch=member_epoch, topics=None,
            )  # fmt: skip
            (answered,) = client.call(
                OFFSET_FETCH, 9, groups=(wanted,), require_stable=False
            ).groups
            return answered

        assert commit(9, epoch) == NONE
        assert commit(9, epoch - 1) == STALE_MEMBER_EPOCH
        assert commit(9, epoch + 1) == STALE_MEMBER_EPOCH
        assert commit(9, epoch, "ghost") == UNKNOWN_MEMBER_ID
        assert commit(8, epoch) == UNSUPPORTED_VERSION  # members of this protocol use v9+
        assert commit(9, -1, "") == UNKNOWN_MEMBER_ID  # only while the group has no members
        assert fetch(epoch, member_id).error_code == NONE
        assert fetch(epoch - 1, member_id).error_code == STALE_MEMBER_EPOCH
        assert fetch(epoch, "ghost").error_code == UNKNOWN_MEMBER_ID
        anyone = fetch(-1, None)
        assert anyone.error_code == NONE
        assert [(p.partition_index, p.committed_offset) for p in anyone.topics[0].partitions] == [
            (0, 1)
        ]
