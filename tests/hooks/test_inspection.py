"""Inspection: what a broker recorded of its requests and answers (decoded, queried,
written as JSON lines) and its groups' state, read directly."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from minibroker import Broker
from minibroker.inspection import KEPT_PAYLOAD_BYTES


def consume_in_group(broker: Broker, topic: str, group: str, client_id: str, count: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "client.id": client_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got += 1
                consumer.commit(message=message, asynchronous=False)
        assert got == count
        assignments = broker.group_assignments(group)
        assert list(assignments.values()) == [{topic: [0, 1]}]
    finally:
        consumer.close()


def produce(broker: Broker, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "writer"})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0


def test_nothing_is_recorded_unless_asked() -> None:
    # A broker of its own: the test fixtures' brokers record by default (for the report).
    with Broker() as broker:
        broker.create_topic("quiet", 2)
        produce(broker, "quiet", 2)
        assert broker.requests() == []


def test_requests_are_recorded_decoded_and_queried(tmp_path: Path) -> None:
    with Broker(record_requests=True) as broker:
        topic, group = "seen", f"group-{uuid.uuid4()}"
        broker.create_topic(topic, 2)
        produce(broker, topic, 4)
        consume_in_group(broker, topic, group, "reader-1", 4)

        joins = broker.requests("JoinGroup", client_id="reader-1")
        assert joins and {j.request.group_id for j in joins} == {group}
        assert joins[-1].response.error_code.value == 0
        assert joins[-1].response.member_id.startswith("reader-1")
        # spliced answers (Produce, Fetch) decode like any other
        produced = broker.requests("Produce", client_id="writer")
        assert sum(len(r.response.responses[0].partition_responses) for r in produced) >= 2
        fetched = broker.requests("Fetch", client_id="reader-1")
        assert any(p.records for r in fetched for t in r.response.responses for p in t.partitions)
        assert broker.requests(client_id="nobody") == []

        # what the group committed, and the log end offsets, read directly
        assert broker.committed_offsets(group) == {(topic, 0): 2, (topic, 1): 2}
        assert broker.end_offsets(topic) == {0: 2, 1: 2}

        written = broker.write_requests(tmp_path / "requests.jsonl")
        lines = [
            json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()
        ]
        assert len(lines) == written == len(broker.requests())
        join_line = next(line for line in lines if line["api"] == "JoinGroup")
        assert join_line["request"]["group_id"] == group
        assert join_line["client_id"] == "reader-1"
        assert "member_id" in join_line["response"]

        broker.record_requests(False)
        produce(broker, topic, 2)
        assert broker.requests() == []


@pytest.mark.kafka(record_requests=False)
def test_recording_can_start_while_the_broker_runs(kafka_broker: Broker) -> None:
    kafka_broker.create_topic("later", 2)
    produce(kafka_broker, "later", 2)
    assert kafka_broker.requests() == []
    kafka_broker.record_requests()
    produce(kafka_broker, "later", 2)
    recorded = kafka_broker.requests("Produce")
    assert recorded and all(r.client_id == "writer" for r in recorded)
    assert [r.at for r in kafka_broker.requests()] == sorted(r.at for r in kafka_broker.requests())


def test_the_recording_cuts_long_payloads_and_keeps_within_its_byte_budget() -> None:
    value = bytes(300 * 1024)
    with Broker(record_requests=True, record_requests_max_bytes=1024 * 1024) as broker:
        broker.create_topic("large", 1)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "client.id": "big"}
        )
        for _ in range(20):
            producer.produce("large", value)
            assert producer.flush(30) == 0
        recorded = broker.requests("Produce", client_id="big")
        # 20 requests of 300 KiB each: only the newest fit in 1 MiB, each cut to 64 KiB
        assert 1 <= len(recorded) < 20
        assert recorded[-1].correlation_id > recorded[0].correlation_id
        for produce_request in recorded:
            records = produce_request.request.topic_data[0].partition_data[0].records
            assert len(records) == KEPT_PAYLOAD_BYTES
        assert broker.nodes[0].dispatcher.recording is not None
        assert broker.nodes[0].dispatcher.recording.bytes <= 1024 * 1024
        assert broker.end_offsets("large") == {0: 20}

        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "large-reader",
                "client.id": "big-reader",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe(["large"])
            message = None
            deadline = time.monotonic() + 30
            while message is None and time.monotonic() < deadline:
                message = consumer.poll(0.2)
            assert message is not None and message.value() == value
        finally:
            consumer.close()
        fetched = [
            p.records
            for r in broker.requests("Fetch", client_id="big-reader")
            for t in r.response.responses
            for p in t.partitions
            if p.records
        ]
        # an answer over 64 KiB is kept decoded, its records cut
        assert fetched and all(len(records) == KEPT_PAYLOAD_BYTES for records in fetched)
