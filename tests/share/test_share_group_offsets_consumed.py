"""Share group offsets after real consumption: a confluent-kafka share consumer reads a
topic to its end, and DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets and `broker.share_group_state` say where the share partition
starts and what is left, as the share-partition state holds it."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin import ResourceType as AdminResource

from harness.raw_client import RawClient, make
from minibroker import Broker
from minibroker.testing.clients import KafkaHelper

DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
RECORDS = 10
SETTLE = 20.0


def _start_and_lag(bootstrap: str, group: str, topic: str) -> tuple[int, int]:
    asked = make(
        DESCRIBE_OFFSETS,
        1,
        "DescribeShareGroupOffsetsRequestGroup",
        group_id=group,
        topics=(
            make(
                DESCRIBE_OFFSETS,
                1,
                "DescribeShareGroupOffsetsRequestTopic",
                topic_name=topic,
                partitions=(0,),
            ),
        ),
    )
    with RawClient(bootstrap) as client:
        [described] = client.call(DESCRIBE_OFFSETS, 1, groups=(asked,)).groups
    [[partition]] = [t.partitions for t in described.topics]
    return partition.start_offset, partition.lag


def _call(bootstrap: str, api_key: int, **fields: Any) -> Any:
    with RawClient(bootstrap) as client:
        return client.call(api_key, 0, **fields)


def test_offsets_of_a_share_group_that_read_a_topic_are_described_altered_and_deleted() -> None:
    topic, group = f"read-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    with Broker() as broker:
        broker.create_topic(topic, 1)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        earliest = ConfigResource(
            AdminResource.GROUP,
            group,
            incremental_configs=[
                ConfigEntry(
                    "share.auto.offset.reset",
                    "earliest",
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        admin.incremental_alter_configs([earliest])[earliest].result(10)
        helper = KafkaHelper(broker.bootstrap_servers)
        try:
            helper.produce(topic, [f"r{i}" for i in range(RECORDS)])
        finally:
            helper.close()
        consumer = ShareConsumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "log_level": 0}
        )
        received = 0
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + SETTLE
            while received < RECORDS and time.monotonic() < deadline:
                received += sum(1 for m in consumer.poll(0.2) if m.error() is None)
            consumer.poll(0.2)  # acknowledges the last ones (implicit mode)
        finally:
            consumer.close()
        assert received == RECORDS

        state = broker.share_group_state(group)
        assert state is not None and state.state == "Empty"
        held = state.partitions[(topic, 0)]
        assert (held.start_offset, held.in_flight, held.lag) == (RECORDS, 0, 0)
        assert _start_and_lag(broker.bootstrap_servers, group, topic) == (RECORDS, 0)

        altered = _call(
            broker.bootstrap_servers,
            ALTER_OFFSETS,
            group_id=group,
            topics=(
                make(
                    ALTER_OFFSETS,
                    0,
                    "AlterShareGroupOffsetsRequestTopic",
                    topic_name=topic,
                    partitions=(
                        make(
                            ALTER_OFFSETS,
                            0,
                            "AlterShareGroupOffsetsRequestPartition",
                            partition_index=0,
                            start_offset=3,
                        ),
                    ),
                ),
            ),
        )
        assert [p.error_code for t in altered.responses for p in t.partitions] == [0]
        assert _start_and_lag(broker.bootstrap_servers, group, topic) == (3, RECORDS - 3)

        deleted = _call(
            broker.bootstrap_servers,
            DELETE_OFFSETS,
            group_id=group,
            topics=(
                make(DELETE_OFFSETS, 0, "DeleteShareGroupOffsetsRequestTopic", topic_name=topic),
            ),
        )
        assert [t.error_code for t in deleted.responses] == [0]
        assert _start_and_lag(broker.bootstrap_servers, group, topic) == (-1, -1)
