"""Pipelined requests over one raw socket: answers come back in request order, and the
answers that precede a long poll are not held back by it (the server writes the answers
to one read's requests together, but flushes them before it starts waiting)."""

from __future__ import annotations

import dataclasses
import datetime
import socket
import time
from typing import Any

from kio.schema.errors import ErrorCode

from harness.raw_client import (
    RawClient,
    encode,
    fetch_request,
    make_request,
    metadata_request,
    produce_request,
)
from minibroker import Broker
from minibroker.protocol import records

PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18


def _produce_one(topic: str, value: bytes, version: int = 9) -> Any:
    batch = records.build_batch([(None, value)], timestamp_ms=1000)
    return produce_request(topic, batch, version=version, acks=1)


def test_requests_sent_in_one_write_are_answered_in_order(kafka_broker: Broker) -> None:
    kafka_broker.create_topic("pipelined", 2)
    calls = [(API_VERSIONS, 3), (METADATA, 12), (METADATA, 1), (API_VERSIONS, 0)] * 5
    stream = b""
    for correlation_id, (api_key, version) in enumerate(calls, start=1):
        request = (
            metadata_request(version)
            if api_key == METADATA
            else make_request(
                API_VERSIONS, version, client_software_name="t", client_software_version="0"
            )
        )
        stream += encode(api_key, version, request, correlation_id)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        client.send_bytes(stream)
        for expected, (api_key, version) in enumerate(calls, start=1):
            correlation_id, body = client.receive(api_key, version)
            assert correlation_id == expected
            if api_key == METADATA:
                assert [t.name for t in body.topics] == ["pipelined"]
            else:
                assert body.error_code == ErrorCode.none


def test_answer_before_a_long_poll_is_not_held_back(kafka_broker: Broker) -> None:
    kafka_broker.create_topic("waits", 1)
    # The Fetch waits up to 30 s for data. The only data it can get is the record produced
    # below, after the Metadata answer has arrived; a server that held that answer until
    # the Fetch finished would time this socket out instead.
    stream = encode(METADATA, 12, metadata_request(), 1) + encode(
        FETCH, 12, fetch_request("waits", version=12, max_wait=datetime.timedelta(seconds=30)), 2
    )
    with RawClient(kafka_broker.bootstrap_servers, timeout=20) as client:
        client.send_bytes(stream)
        correlation_id, metadata = client.receive(METADATA, 12)
        assert correlation_id == 1
        assert [t.name for t in metadata.topics] == ["waits"]
        with RawClient(kafka_broker.bootstrap_servers) as producer:
            produced = producer.request(PRODUCE, 9, _produce_one("waits", b"wake"))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
        correlation_id, fetched = client.receive(FETCH, 12)
        assert correlation_id == 2
        data = fetched.responses[0].partitions[0].records
        assert [r.value for r in records.iter_records(bytes(data))] == [b"wake"]


def test_a_many_mib_answer_read_slowly_arrives_whole_and_before_the_next(
    kafka_broker: Broker,
) -> None:
    """A Fetch answer far past the transport's high-water mark, to a client that reads it
    a little at a time, followed by a pipelined Metadata answer: every batch arrives as
    stored, in order, and then the next answer."""
    kafka_broker.create_topic("large", 1)
    values = [bytes([n]) * 700_000 for n in range(16)]  # about 11 MiB in 16 batches
    with RawClient(kafka_broker.bootstrap_servers) as producer:
        for value in values:
            produced = producer.request(PRODUCE, 9, _produce_one("large", value))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
    fetch = fetch_request("large", version=12)
    fetch = dataclasses.replace(
        fetch,
        max_bytes=64 << 20,
        topics=(
            dataclasses.replace(
                fetch.topics[0],
                partitions=(
                    dataclasses.replace(
                        fetch.topics[0].partitions[0], partition_max_bytes=64 << 20
                    ),
                ),
            ),
        ),
    )
    stream = encode(FETCH, 12, fetch, 1) + encode(METADATA, 12, metadata_request(), 2)
    with RawClient(kafka_broker.bootstrap_servers, timeout=20) as client:
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        client.send_bytes(stream)
        time.sleep(0.3)  # the broker fills the socket and waits for it to drain
        correlation_id, fetched = client.receive(FETCH, 12)
        assert correlation_id == 1
        data = bytes(fetched.responses[0].partitions[0].records)
        batches = records.split_batches(data)
        assert [r.value for _, b in batches for r in records.iter_records(b)] == values
        correlation_id, metadata = client.receive(METADATA, 12)
        assert correlation_id == 2
        assert [t.name for t in metadata.topics] == ["large"]
