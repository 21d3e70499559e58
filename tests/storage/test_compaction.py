"""Compaction as clients see it: once the broker's clock moves, a topic with
cleanup.policy=compact holds only the latest record of each key, at its original offset;
a read from the beginning or from an offset that was removed returns what is left, and
a tombstone goes once delete.retention.ms has passed.

Each scenario is written once and run through each Python client's driver
(tests/interop/clients); confluent-kafka (librdkafka) writes the records. The broker is
in-process, so the tests advance its clock and read its cleaner checkpoint to know the
cleaning has run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from minibroker import Broker
from tests.interop.clients.aiokafka_client import AiokafkaClient
from tests.interop.clients.base import Client, Reader, Record
from tests.interop.clients.confluent_kafka_client import ConfluentKafkaClient
from tests.interop.clients.kafka_python_client import KafkaPythonClient
from tests.interop.conftest import wait_until

CLEANING_TIMEOUT = 10.0  # seconds for the broker to clean once its clock has moved
DELETE_RETENTION_S = 60
QUIET_MS = 300  # a poll after the last record: nothing more may arrive

# Sent one list at a time, so each is a batch of its own.
SENT = [
    [Record(b"a", b"1", partition=0), Record(b"b", b"1", partition=0)],  # offsets 0-1: go
    [Record(b"a", b"2", partition=0), Record(b"c", b"1", partition=0)],  # 2-3: go
    [Record(b"b", b"2", partition=0), Record(b"a", b"3", partition=0)],  # 4 goes, 5 stays
    [Record(b"b", None, partition=0), Record(b"c", b"2", partition=0)],  # 6-7: stay
]
LATEST = [(5, b"a", b"3"), (6, b"b", None), (7, b"c", b"2")]
END = 8

Seen = list[tuple[int, bytes | None, bytes | None]]


@pytest.fixture(params=["in-memory", "data-dir"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    data_dir = str(tmp_path) if request.param == "data-dir" else None
    with Broker(data_dir=data_dir) as started:
        yield started


@pytest.fixture(
    params=[ConfluentKafkaClient, AiokafkaClient, KafkaPythonClient],
    ids=lambda driver: driver.name,
)
def client(request: pytest.FixtureRequest, broker: Broker) -> Iterator[Client]:
    driver: type[Client] = request.param
    reason = driver.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with driver(broker) as chosen:
        yield chosen


def _compacted_topic(broker: Broker) -> str:
    topic = f"compacted-{uuid.uuid4().hex[:10]}"
    configs = {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(DELETE_RETENTION_S * 1000),
    }
    with ConfluentKafkaClient(broker).admin() as admin:
        admin.create_topic(topic, 1, configs)
    return topic


def _produce(broker: Broker, topic: str, batches: list[list[Record]]) -> None:
    with ConfluentKafkaClient(broker).producer() as producer:
        for records in batches:
            producer.send(topic, records)


def _clean(broker: Broker, topic: str, end: int, seconds: float = 1) -> None:
    """Move the broker's clock on and give its cleaner the time to reach `end`. The
    clients' reads decide the outcome, so a cleaning that never comes fails there."""
    broker.clock.advance(seconds)
    found = broker.state.topics.get(topic)
    assert found is not None
    partition = found.partitions[0]
    wait_until(lambda: partition.cleaned_offset >= end, CLEANING_TIMEOUT)


def _read(reader: Reader, count: int) -> Seen:
    """The next `count` records, and then nothing more."""
    seen = [(r.offset, r.key, r.value) for r in reader.read(count)]
    extra = [(r.offset, r.key, r.value) for r in reader.poll(QUIET_MS)]
    return seen + extra


def test_readers_see_the_latest_record_of_each_key_at_its_offset(
    broker: Broker, client: Client
) -> None:
    topic = _compacted_topic(broker)
    _produce(broker, topic, SENT)
    _clean(broker, topic, END)
    with client.reader(topic) as reader:
        assert _read(reader, 3) == LATEST
        assert reader.watermarks() == (0, END)  # the log start and end stay
        # 3 was in a batch that went whole; 4 in one rewritten around offset 5.
        for removed in (3, 4):
            reader.seek(removed)
            assert _read(reader, 3) == LATEST, removed
        reader.seek(6)
        assert _read(reader, 2) == LATEST[1:]


def test_a_tombstone_goes_after_delete_retention_ms(broker: Broker, client: Client) -> None:
    topic = _compacted_topic(broker)
    _produce(broker, topic, SENT)
    _clean(broker, topic, END)
    with client.reader(topic) as reader:
        assert _read(reader, 3) == LATEST  # the tombstone stays for now
    broker.clock.advance(DELETE_RETENTION_S)
    # A cleaning needs something new to clean: one more record makes the log dirty.
    _produce(broker, topic, [[Record(b"d", b"1", partition=0)]])
    _clean(broker, topic, END + 1)
    with client.reader(topic) as reader:
        assert _read(reader, 3) == [(5, b"a", b"3"), (7, b"c", b"2"), (8, b"d", b"1")]
        reader.seek(6)
        assert _read(reader, 2) == [(7, b"c", b"2"), (8, b"d", b"1")]
