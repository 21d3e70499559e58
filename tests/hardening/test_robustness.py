"""Hostile and broken input over real sockets: the broker answers with a Kafka error code
or closes that one connection, and never loses data or other clients' connections."""

from __future__ import annotations

import contextlib
import datetime
import logging
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import confluent_kafka
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from harness.raw_client import (
    RawClient,
    encode,
    fetch_request,
    list_offsets_request,
    make,
    make_request,
    parse_host_port,
    produce_codes,
    produce_request,
    request_class,
)
from minibroker import Broker, BrokerConfig
from minibroker.handlers import HANDLERS
from minibroker.protocol import messages, records
from minibroker.protocol.framing import DEFAULT_MAX_FRAME_BYTES

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION = 2, 10, 3

# Admin APIs change the cluster on purpose (a well-formed random CreateTopics may ask for
# 100,000 partitions, which is legal); the group joins and Fetch are long polls that only
# slow the run down. Neither says anything about robustness.
NOT_FUZZED_WELL_FORMED = {1, 11, 14, 19, 20, 37}

st.register_type_strategy(Records, st.binary(max_size=200).map(Records))


# --- building blocks -----------------------------------------------------------------


def _batch(count: int = 3, value: bytes = b"value") -> bytes:
    return records.build_batch([(b"key-%d" % i, value) for i in range(count)], timestamp_ms=1000)


def _produce(topic: str, batch: bytes, version: int = 9, partition: int = 0) -> Any:
    return produce_request(topic, batch, version=version, acks=1, partition=partition)


def _produce_codes(client: RawClient, topic: str, batch: bytes, version: int = 9) -> list[int]:
    return produce_codes(client.request(PRODUCE, version, _produce(topic, batch, version)))


def _metadata(topic: str, version: int = 12) -> Any:
    entry = make(METADATA, version, "MetadataRequestTopic", name=topic, topic_id=None)
    return make_request(
        METADATA,
        version,
        topics=(entry,),
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def _api_versions(version: int = 3) -> Any:
    return make_request(
        API_VERSIONS, version, client_software_name="fuzz", client_software_version="0"
    )


@dataclass(frozen=True)
class Abuse:
    """Bytes for one abusive connection, and what the test may check in the answer."""

    kind: str
    data: bytes
    produce_batch: bytes | None = None  # set for a well-framed Produce of a damaged batch
    produce_version: int = 9

    def __repr__(self) -> str:
        # Printed for a failing example: the whole frame, so it can be replayed.
        return f"Abuse({self.kind}, {len(self.data)} bytes: {self.data.hex()})"


ABUSE_TOPIC = "abuse"
TEMPLATES: list[tuple[int, int, Any]] = [
    (API_VERSIONS, 3, _api_versions(3)),
    (API_VERSIONS, 0, make_request(API_VERSIONS, 0)),
    (METADATA, 12, _metadata(ABUSE_TOPIC, 12)),
    (METADATA, 4, _metadata(ABUSE_TOPIC, 4)),
    (PRODUCE, 9, _produce(ABUSE_TOPIC, _batch(), 9)),
    (PRODUCE, 3, _produce(ABUSE_TOPIC, _batch(), 3)),
    (FETCH, 11, fetch_request(ABUSE_TOPIC, version=11)),
    (FETCH, 4, fetch_request(ABUSE_TOPIC, version=4)),
    (LIST_OFFSETS, 7, list_offsets_request(ABUSE_TOPIC, version=7)),
    (
        22,
        4,
        make_request(
            22,
            4,
            transactional_id=None,
            transaction_timeout=datetime.timedelta(minutes=1),
            producer_id=-1,
            producer_epoch=-1,
        ),
    ),
]
TEMPLATE_FRAMES = [encode(key, version, body, 77) for key, version, body in TEMPLATES]


@st.composite
def random_frames(draw: st.DrawFn) -> Abuse:
    body = draw(st.binary(max_size=300))
    if draw(st.booleans()):
        return Abuse("raw bytes", body)
    return Abuse("random body", struct.pack(">i", len(body)) + body)


@st.composite
def random_headers(draw: st.DrawFn) -> Abuse:
    served = sorted(HANDLERS)
    api_key = draw(st.sampled_from(served) | st.integers(-(2**15), 2**15 - 1))
    version = draw(st.integers(-2, 20) | st.integers(-(2**15), 2**15 - 1))
    body = struct.pack(">hhi", api_key, version, draw(st.integers(-(2**31), 2**31 - 1)))
    body += draw(st.binary(max_size=200))
    return Abuse(f"api {api_key} v{version}", struct.pack(">i", len(body)) + body)


@st.composite
def mutated_frames(draw: st.DrawFn) -> Abuse:
    frame = bytearray(draw(st.sampled_from(TEMPLATE_FRAMES)))
    how = draw(st.sampled_from(["flip", "truncate", "length", "huge", "extend", "repeat"]))
    if how == "flip":
        position = draw(st.integers(0, len(frame) - 1))
        frame[position] ^= 1 << draw(st.integers(0, 7))
    elif how == "truncate":
        del frame[draw(st.integers(1, len(frame) - 1)) :]
    elif how == "length":
        struct.pack_into(">i", frame, 0, draw(st.integers(-(2**31), 2 * len(frame))))
    elif how == "huge":
        size = draw(st.integers(DEFAULT_MAX_FRAME_BYTES - 10, 2**31 - 1))
        struct.pack_into(">i", frame, 0, size)
    elif how == "extend":
        extra = draw(st.binary(min_size=1, max_size=50))
        struct.pack_into(">i", frame, 0, len(frame) - 4 + len(extra))
        frame += extra
    else:
        frame = frame * draw(st.integers(2, 5))
    return Abuse(f"mutated ({how})", bytes(frame))


@st.composite
def damaged_batches(draw: st.DrawFn) -> Abuse:
    """A well-formed Produce request whose record batch is damaged."""
    batch = bytearray(_batch(draw(st.integers(1, 5))))
    how = draw(st.sampled_from(["flip", "truncate", "extend", "field", "field+crc", "magic"]))
    if how == "flip":
        position = draw(st.integers(0, len(batch) - 1))
        batch[position] ^= 1 << draw(st.integers(0, 7))
    elif how == "truncate":
        del batch[draw(st.integers(0, len(batch) - 1)) :]
    elif how == "extend":
        batch += draw(st.binary(min_size=1, max_size=80))
    elif how in ("field", "field+crc"):
        # attributes, lastOffsetDelta, recordCount, producer fields, batchLength...
        position, fmt = draw(
            st.sampled_from(
                [(8, ">i"), (21, ">h"), (23, ">i"), (43, ">q"), (51, ">h"), (53, ">i"), (57, ">i")]
            )
        )
        bits = struct.calcsize(fmt) * 8
        value = draw(st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
        struct.pack_into(fmt, batch, position, value)
        if how == "field+crc" and position >= records.CRC_START:
            struct.pack_into(">I", batch, 17, records.crc32c(bytes(batch[records.CRC_START :])))
    else:
        batch[16] = draw(st.sampled_from([0, 1, 3, 255]))
    version = draw(st.sampled_from([3, 7, 9, 11]))
    frame = encode(PRODUCE, version, _produce(ABUSE_TOPIC, bytes(batch), version), 77)
    return Abuse(
        f"damaged batch ({how})", frame, produce_batch=bytes(batch), produce_version=version
    )


@st.composite
def well_formed_requests(draw: st.DrawFn) -> Abuse:
    api_key = draw(st.sampled_from(sorted(set(HANDLERS) - NOT_FUZZED_WELL_FORMED)))
    handler = HANDLERS[api_key]
    version = draw(st.integers(handler.min_version, handler.max_version))
    request = draw(st.from_type(request_class(api_key, version)))
    return Abuse(f"well-formed {handler.name} v{version}", encode(api_key, version, request, 77))


abuses = st.one_of(
    random_frames(), random_headers(), mutated_frames(), damaged_batches(), well_formed_requests()
)


# --- helpers around a running broker ---------------------------------------------------


class ErrorLog(logging.Handler):
    """Collects ERROR records (an unexpected exception in a handler or the server)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def error_log() -> Iterator[ErrorLog]:
    handler = ErrorLog()
    logger = logging.getLogger("minibroker")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _abuse(bootstrap: str, abuse: Abuse, timeout: float = 5.0) -> list[bytes] | None:
    """Send the bytes, then a valid ApiVersions, then half-close; read until the broker
    closes. Returns the frames received, or None if the broker kept waiting (long poll)."""
    with RawClient(bootstrap) as client:
        try:
            client.send_bytes(
                abuse.data + encode(API_VERSIONS, 0, make_request(API_VERSIONS, 0), 0x5EA1)
            )
            client.sock.shutdown(socket.SHUT_WR)
        except OSError:
            return []  # the broker closed while we were still sending
        try:
            return client.drain_until_closed(timeout)
        except TimeoutError:
            return None
        except OSError:
            return []


def _snapshot(broker: Broker, topic: str) -> list[list[bytes]]:
    found = broker.state.topics.get(topic)
    assert found is not None
    return [partition.log.batches() for partition in found.partitions]


def _records(snapshot: list[list[bytes]]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (index, r.key, r.value)
        for index, batches in enumerate(snapshot)
        for batch in batches
        for r in records.iter_records(batch)
    ]


def _produce_with_confluent(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failures: list[Any] = []
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value,
            key=b"k%d" % i,
            on_delivery=lambda err, _msg: failures.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert failures == []


def _consume_with_confluent(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign(
            [
                confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(partitions)
            ]
        )
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
        return values
    finally:
        consumer.close()


# --- the property test ----------------------------------------------------------------


def test_broker_survives_hostile_input(error_log: ErrorLog) -> None:
    with Broker() as broker:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("kept", 2)
        broker.create_topic(ABUSE_TOPIC, 1)
        values = [b"well-behaved-%d" % i for i in range(200)]
        _produce_with_confluent(bootstrap, "kept", values)
        before = _snapshot(broker, "kept")
        assert sorted(v for _, _, v in _records(before) if v) == sorted(values)

        bystanders = [RawClient(bootstrap, client_id=f"bystander-{i}") for i in range(3)]
        for client in bystanders:
            assert (
                client.call(
                    API_VERSIONS, 3, client_software_name="b", client_software_version="1"
                ).error_code
                == ErrorCode.none
            )
        seen: dict[str, int] = {}
        waited: list[Abuse] = []

        @given(abuse=abuses)
        @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
        def throw(abuse: Abuse) -> None:
            # Every check is inside the property, so hypothesis shrinks a failure and
            # prints the frame that caused it.
            logged = len(error_log.records)
            kind = abuse.kind.split(" ")[0]
            seen[kind] = seen.get(kind, 0) + 1
            frames = _abuse(bootstrap, abuse)
            if frames is None:
                waited.append(abuse)
            elif abuse.produce_batch is not None and frames:
                _, response = messages.decode_response(frames[0], PRODUCE, abuse.produce_version)
                [code] = [
                    p.error_code.value for t in response.responses for p in t.partition_responses
                ]
                batch = abuse.produce_batch
                framed = (
                    len(batch) >= records.HEADER_SIZE
                    and batch[16] == 2
                    and (records.read_header(batch).total_size == len(batch))
                )
                if (
                    framed
                    and records.crc32c(batch[records.CRC_START :])
                    != struct.unpack_from(">I", batch, 17)[0]
                ):
                    assert code == CORRUPT_MESSAGE, abuse
            # A bystander still gets its answer on its old connection.
            client = bystanders[sum(seen.values()) % len(bystanders)]
            assert client.call(API_VERSIONS, 0).error_code == ErrorCode.none
            # The broker logged no error (an unexpected exception) for this frame.
            new_errors = [r.getMessage() for r in error_log.records[logged:]]
            assert not new_errors, new_errors

        throw()

        # The data a well-behaved client wrote earlier is untouched, byte for byte.
        after = _snapshot(broker, "kept")
        assert after == before
        assert broker.end_offsets("kept") == {
            i: sum(h.last_offset_delta + 1 for h in map(records.read_header, b))
            for i, b in enumerate(before)
        }
        # No connection but the abusive ones was dropped.
        for client in bystanders:
            body = client.call(METADATA, 4, topics=None, allow_auto_topic_creation=False)
            assert {t.name for t in body.topics} >= {"kept", ABUSE_TOPIC}
            client.close()
        # Real clients still produce and fetch.
        _produce_with_confluent(bootstrap, "kept", [b"after-%d" % i for i in range(20)])
        got = _consume_with_confluent(bootstrap, "kept", 2, 220)
        assert sorted(got) == sorted(values + [b"after-%d" % i for i in range(20)])
    assert {"random", "raw", "api", "mutated", "damaged", "well-formed"} <= set(seen), seen
    assert len(waited) < 10, f"abusive connections left waiting: {waited}"


# --- specific limits and error codes ------------------------------------------------------


def test_frame_over_max_frame_bytes_closes_the_connection() -> None:
    with Broker(max_frame_bytes=4096) as broker, RawClient(broker.bootstrap_servers) as ok:
        with RawClient(broker.bootstrap_servers) as client:
            # A request just under the limit is served...
            assert client.call(METADATA, 4, topics=None, allow_auto_topic_creation=False)
            # ...a size prefix over it is refused before any body is sent.
            client.send_bytes(struct.pack(">i", 4097))
            assert client.is_closed_by_peer()
        with RawClient(broker.bootstrap_servers) as client:
            big = _produce("t", _batch(1, b"x" * 5000))
            client.send_bytes(encode(PRODUCE, 9, big, 1))
            assert client.is_closed_by_peer()
        assert ok.call(API_VERSIONS, 0).error_code == ErrorCode.none


def test_default_frame_limit_is_100_mib() -> None:
    assert BrokerConfig().max_frame_bytes == 100 * 1024 * 1024
    with Broker() as broker, RawClient(broker.bootstrap_servers) as client:
        client.send_bytes(struct.pack(">i", 100 * 1024 * 1024 + 1))
        assert client.is_closed_by_peer()


def test_max_connections_is_enforced() -> None:
    with Broker(max_connections=3) as broker:
        clients = [RawClient(broker.bootstrap_servers) for _ in range(3)]
        for client in clients:
            assert client.call(API_VERSIONS, 0).error_code == ErrorCode.none
        with RawClient(broker.bootstrap_servers) as extra:
            with contextlib.suppress(OSError):  # closed before the request was written
                extra.send(API_VERSIONS, 0, make_request(API_VERSIONS, 0))
            assert extra.is_closed_by_peer()
        for client in clients:
            assert client.call(API_VERSIONS, 0).error_code == ErrorCode.none
        clients.pop().close()
        deadline = time.monotonic() + 10
        while broker.connection_count >= 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert broker.connection_count < 3, "the closed client's slot was never freed"
        with RawClient(broker.bootstrap_servers) as replacement:
            assert replacement.call(API_VERSIONS, 0).error_code == ErrorCode.none
        for client in clients:
            client.close()


def test_corrupt_crc_gets_corrupt_message() -> None:
    with Broker() as broker, RawClient(broker.bootstrap_servers) as client:
        broker.create_topic("t", 1)
        batch = bytearray(_batch())
        batch[-1] ^= 0x01
        for version in (3, 9, 11):
            assert _produce_codes(client, "t", bytes(batch), version) == [CORRUPT_MESSAGE]
        assert broker.end_offsets("t") == {0: 0}
        assert _produce_codes(client, "t", _batch()) == [0]
        assert broker.end_offsets("t") == {0: 3}


def test_batch_over_max_message_bytes_gets_message_too_large() -> None:
    with Broker() as broker, RawClient(broker.bootstrap_servers) as client:
        broker.create_topic("small", 1, {"max.message.bytes": "1000"})
        assert _produce_codes(client, "small", _batch(1, b"x" * 2000)) == [MESSAGE_TOO_LARGE]
        assert _produce_codes(client, "small", _batch(1, b"x" * 100)) == [0]
        assert broker.end_offsets("small") == {0: 1}


def test_produce_to_unknown_topic_gets_unknown_topic_or_partition() -> None:
    with Broker() as broker, RawClient(broker.bootstrap_servers) as client:
        assert _produce_codes(client, "missing", _batch()) == [UNKNOWN_TOPIC_OR_PARTITION]
        assert "missing" not in broker.topics(), "produce does not create topics"
        broker.create_topic("present", 1)
        assert _produce_codes(client, "present", _batch(), version=3) == [0]
        response = client.request(PRODUCE, 9, _produce("present", _batch(), partition=5))
        codes = [p.error_code.value for t in response.responses for p in t.partition_responses]
        assert codes == [UNKNOWN_TOPIC_OR_PARTITION]


def test_empty_frame_closes_the_connection(error_log: ErrorLog) -> None:
    with Broker() as broker, RawClient(broker.bootstrap_servers) as client:
        client.send_bytes(struct.pack(">i", 0))
        assert client.is_closed_by_peer()
        host, port = parse_host_port(broker.bootstrap_servers)
        with RawClient(f"{host}:{port}") as other:
            assert other.call(API_VERSIONS, 0).error_code == ErrorCode.none
    assert not error_log.records, [r.getMessage() for r in error_log.records]


def test_a_batch_claiming_more_records_than_it_can_hold_is_refused() -> None:
    """Regression: a valid CRC over a header claiming 2**31-1 records moved the log end
    offset by two billion."""
    honest = records.build_batch([(b"k", b"v")])
    tampered = bytearray(honest)
    struct.pack_into(">i", tampered, 23, 2**31 - 2)  # last offset delta
    struct.pack_into(">i", tampered, 57, 2**31 - 1)  # record count
    struct.pack_into(">I", tampered, 17, records.crc32c(bytes(tampered[21:])))
    with Broker() as broker:
        broker.create_topic("lying", 1)
        with RawClient(broker.bootstrap_servers) as client:
            assert _produce_codes(client, "lying", bytes(tampered)) == [87]  # INVALID_RECORD
            assert broker.end_offsets("lying") == {0: 0}
            assert _produce_codes(client, "lying", honest) == [0]
        assert broker.end_offsets("lying") == {0: 1}
