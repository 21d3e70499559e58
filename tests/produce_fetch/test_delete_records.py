"""DeleteRecords over the wire, and what every reader sees afterwards.

Records are produced through a raw client, deleted up to an offset, and the partition is
then read back with Fetch (records and log start offset), ListOffsets (earliest, and by
timestamp) and a real consumer, whose committed offset below the new start is reset by
its auto.offset.reset, as on Kafka.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness.raw_client import RawClient, make
from minibroker import Broker
from minibroker.protocol import records
from minibroker.testing.plugin import TopicFactory
from tests.produce_fetch.test_fetch_limits import Want, fetch, partitions_of
from tests.produce_fetch.test_list_offsets import BASE_TIMESTAMP_MS, lookup, produce

OFFSET_COMMIT, DELETE_RECORDS = 8, 21
NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 3
EARLIEST, LATEST = -2, -1


def delete(
    client: RawClient, version: int, topic: str, *wanted: tuple[int, int]
) -> list[tuple[int, int]]:
    """DeleteRecords for (partition, offset) pairs: (error code, low watermark) of each."""
    partitions = tuple(
        make(DELETE_RECORDS, version, "DeleteRecordsPartition", partition_index=p, offset=o)
        for p, o in wanted
    )
    response = client.call(
        DELETE_RECORDS,
        version,
        topics=(
            make(DELETE_RECORDS, version, "DeleteRecordsTopic", name=topic, partitions=partitions),
        ),
        timeout=datetime.timedelta(seconds=5),
    )
    (result,) = response.topics
    assert result.name == topic
    return [(p.error_code.value, int(p.low_watermark)) for p in result.partitions]


def list_offset(client: RawClient, topic: str, timestamp: int) -> tuple[int, int]:
    answer = lookup(client, 7, topic, timestamp)
    return answer.error_code.value, int(answer.offset)


def read_from(client: RawClient, topic: str, offset: int) -> tuple[int, int, list[int]]:
    """(error code, log start offset, offsets of the records returned) of a Fetch v11."""
    (partition,) = partitions_of(fetch(client, 11, [Want(0, fetch_offset=offset)], topic=topic))
    data = bytes(partition.records or b"")
    offsets = [
        r.offset for _, raw in records.split_batches(data) for r in records.iter_records(raw)
    ]
    return partition.error_code.value, int(partition.log_start_offset), offsets


@pytest.mark.parametrize("version", [0, 1, 2])
def test_deleted_records_are_gone_for_every_reader(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        for i in range(10):
            produce(client, topic, [b"r%d" % i], first_index=i)

        assert delete(client, version, topic, (0, 5)) == [(NONE, 5)]

        assert list_offset(client, topic, EARLIEST) == (NONE, 5)
        assert list_offset(client, topic, LATEST) == (NONE, 10)
        # A timestamp before every record finds the first one still there.
        assert list_offset(client, topic, BASE_TIMESTAMP_MS) == (NONE, 5)
        assert read_from(client, topic, 0)[0] == OFFSET_OUT_OF_RANGE
        assert read_from(client, topic, 4)[0] == OFFSET_OUT_OF_RANGE
        assert read_from(client, topic, 5) == (NONE, 5, [5, 6, 7, 8, 9])


def test_the_batch_holding_the_new_start_is_kept_whole(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        produce(client, topic, [b"a%d" % i for i in range(4)])  # offsets 0-3
        produce(client, topic, [b"b%d" % i for i in range(4)], first_index=4)  # 4-7

        assert delete(client, 2, topic, (0, 6)) == [(NONE, 6)]
        # The second batch comes back whole; a consumer skips 4 and 5 itself.
        assert read_from(client, topic, 6) == (NONE, 6, [4, 5, 6, 7])
        assert list_offset(client, topic, EARLIEST) == (NONE, 6)
        assert list_offset(client, topic, BASE_TIMESTAMP_MS + 4000) == (NONE, 6)


def test_minus_one_deletes_up_to_the_high_watermark_and_the_log_goes_on(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        produce(client, topic, [b"x", b"y", b"z"])
        assert delete(client, 2, topic, (0, -1)) == [(NONE, 3)]
        assert read_from(client, topic, 3) == (NONE, 3, [])
        produce(client, topic, [b"after"], first_index=3)
        assert read_from(client, topic, 3) == (NONE, 3, [3])
        assert list_offset(client, topic, EARLIEST) == (NONE, 3)


def test_out_of_range_and_unknown_partitions_change_nothing(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        produce(client, topic, [b"%d" % i for i in range(5)])
        assert delete(client, 2, topic, (0, 6), (1, 0)) == [
            (OFFSET_OUT_OF_RANGE, -1),
            (UNKNOWN_TOPIC_OR_PARTITION, -1),
        ]
        assert delete(client, 2, topic, (0, -2)) == [(OFFSET_OUT_OF_RANGE, -1)]
        assert delete(client, 2, "no-such-topic", (0, 0)) == [(UNKNOWN_TOPIC_OR_PARTITION, -1)]
        assert read_from(client, topic, 0) == (NONE, 0, [0, 1, 2, 3, 4])
        # Moving the start back is not possible: a lower offset leaves it where it is.
        assert delete(client, 2, topic, (0, 3)) == [(NONE, 3)]
        assert delete(client, 2, topic, (0, 1)) == [(NONE, 3)]
        assert list_offset(client, topic, EARLIEST) == (NONE, 3)


def test_a_consumer_below_the_new_start_resets_as_on_kafka(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """A group's committed offset below the deleted range is out of range: the consumer
    applies auto.offset.reset=earliest and reads from the new start."""
    topic = kafka_topic(partitions=1)
    group = "below-the-start"
    with RawClient(kafka_broker.bootstrap_servers) as client:
        for i in range(10):
            produce(client, topic, [b"r%d" % i], first_index=i)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    futures = admin.delete_records([TopicPartition(topic, 0, 7)])
    deleted: Any = futures[TopicPartition(topic, 0, 7)].result(timeout=10)
    assert deleted.low_watermark == 7

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        consumer.assign([TopicPartition(topic, 0)])
        values = []
        while len(values) < 3:
            message = consumer.poll(10)
            assert message is not None, f"read {values} before timing out"
            assert message.error() is None, message.error()
            values.append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert values == [(7, b"r7"), (8, b"r8"), (9, b"r9")]
