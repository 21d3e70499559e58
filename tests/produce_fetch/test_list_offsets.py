"""ListOffsets answers over a raw client: what a timestamp lookup returns, found or not."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from harness.raw_client import RawClient, make, produce_batch
from minibroker import Broker
from minibroker.protocol import records
from minibroker.testing.plugin import TopicFactory

LIST_OFFSETS = 2
NONE = 0
LATEST = -1
BASE_TIMESTAMP_MS = 1_700_000_000_000


def produce(client: RawClient, topic: str, values: list[bytes], first_index: int = 0) -> None:
    """One batch holding `values`, all with timestamp BASE + 1000 * first_index."""
    batch = records.build_batch(
        [(None, value) for value in values], timestamp_ms=BASE_TIMESTAMP_MS + 1000 * first_index
    )
    produce_batch(client.request, topic, 0, batch)


def lookup(client: RawClient, version: int, topic: str, timestamp: int) -> Any:
    wanted = make(
        LIST_OFFSETS,
        version,
        "ListOffsetsPartition",
        partition_index=0,
        timestamp=timestamp,
        current_leader_epoch=-1,
    )
    response = client.call(
        LIST_OFFSETS,
        version,
        replica_id=-1,
        isolation_level=0,
        timeout=datetime.timedelta(seconds=10),
        topics=(make(LIST_OFFSETS, version, "ListOffsetsTopic", name=topic, partitions=(wanted,)),),
    )
    (answer,) = response.topics[0].partitions
    return answer


@pytest.mark.parametrize("version", [4, 7, 10])
def test_a_timestamp_past_every_record_finds_no_offset_and_no_epoch(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    """As on Kafka: offset, timestamp and leader epoch are all -1 when no record is at or
    after the timestamp; a found record carries the partition's leader epoch (0 here)."""
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        for index in range(3):
            produce(client, topic, [b"x"], first_index=index)
        found = lookup(client, version, topic, BASE_TIMESTAMP_MS + 1000)
        missing = lookup(client, version, topic, BASE_TIMESTAMP_MS + 10_000)
        latest = lookup(client, version, topic, LATEST)
    assert (found.error_code.value, int(found.offset), int(found.leader_epoch)) == (NONE, 1, 0)
    assert int(found.timestamp) == BASE_TIMESTAMP_MS + 1000
    assert (missing.error_code.value, int(missing.offset)) == (NONE, -1)
    assert (int(missing.timestamp), int(missing.leader_epoch)) == (-1, -1)
    assert (int(latest.offset), int(latest.leader_epoch)) == (3, 0)
