"""Produce answers a client acts on, checked sans-IO at v9 (error messages are in the
response from v8): the error code and message of every way a partition's records are
refused, the base offset, log start offset and log append time of an accepted batch.

A producer retries, refreshes metadata or gives up by the error code, and shows the
error message to its user; LogAppendTime topics report the broker's clock, which is a
FakeClock here.
"""

from __future__ import annotations

import dataclasses
import gzip
import struct
from typing import Any

import pytest

from harness.raw_client import produce_request
from minibroker.config import BrokerConfig
from minibroker.protocol import records
from minibroker.protocol.records import BatchHeader
from tests.record_bytes import zigzag_varint
from tests.sansio import SansIOBroker

PRODUCE, FETCH, INIT_PRODUCER_ID = 0, 1, 22
VERSION = 9

NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
INVALID_TIMESTAMP = 32
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

NOW_MS = 1_700_000_000_000
_HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclasses.dataclass(frozen=True)
class Answer:
    error_code: int
    base_offset: int
    log_append_time: int
    log_start_offset: int
    error_message: str | None
    record_errors: Any


def batch(values: list[bytes], **header: int) -> bytes:
    """An uncompressed batch of `values`, with header fields replaced (CRC redone)."""
    return restamp(records.build_batch([(None, v) for v in values], timestamp_ms=NOW_MS), **header)


def restamp(data: bytes, **fields: int) -> bytes:
    """The batch with header fields replaced and a CRC that matches them."""
    header = dataclasses.replace(records.read_header(data), **fields)
    out = bytearray(data)
    _HEADER.pack_into(out, 0, *dataclasses.astuple(header))
    struct.pack_into(">I", out, 17, records.crc32c(memoryview(out)[records.CRC_START :]))
    return bytes(out)


def gzipped(values: list[bytes]) -> bytes:
    """`values` as one gzip batch, compressed as a client does."""
    plain = records.build_batch([(None, v) for v in values], timestamp_ms=NOW_MS)
    payload = gzip.compress(plain[records.HEADER_SIZE :])
    head = bytearray(plain[: records.HEADER_SIZE])
    struct.pack_into(">i", head, 8, records.HEADER_SIZE - records.LOG_OVERHEAD + len(payload))
    struct.pack_into(">h", head, 21, 1)  # attributes: gzip
    return restamp(bytes(head) + payload)


def produce(broker: SansIOBroker, topic: str, data: bytes | None, *, partition: int = 0) -> Answer:
    request = produce_request(topic, data, partition=partition, version=VERSION)
    response = broker.request(PRODUCE, VERSION, request)
    (topic_response,) = response.responses
    assert topic_response.name == topic
    (answer,) = topic_response.partition_responses
    assert answer.index == partition
    append_time = answer.log_append_time
    return Answer(
        answer.error_code.value,
        int(answer.base_offset),
        -1 if append_time is None else int(append_time.timestamp() * 1000),
        int(answer.log_start_offset),
        answer.error_message,
        answer.record_errors,
    )


def stored(broker: SansIOBroker, topic: str) -> list[BatchHeader]:
    """The headers of the batches partition 0 of `topic` holds."""
    log = broker.cluster.topics.get(topic).partitions[0].log  # type: ignore[union-attr]
    data = log.read(0, 1 << 30)
    return [header for header, _ in records.split_batches(data)] if data else []


@pytest.fixture
def broker() -> SansIOBroker:
    broker = SansIOBroker(nodes=2)
    broker.cluster.topics.create("orders", 2)  # partition 0 led by node 0, 1 by node 1
    return broker


def refused(code: int, message: str) -> Answer:
    return Answer(code, -1, -1, -1, message, ())


def test_an_accepted_batch_reports_its_offsets(broker: SansIOBroker) -> None:
    assert produce(broker, "orders", batch([b"a", b"b"])) == Answer(NONE, 0, -1, 0, None, ())
    assert produce(broker, "orders", batch([b"c"])) == Answer(NONE, 2, -1, 0, None, ())
    assert [h.base_offset for h in stored(broker, "orders")] == [0, 2]


@pytest.mark.parametrize("partition", [2, -1])
def test_a_partition_the_topic_lacks(broker: SansIOBroker, partition: int) -> None:
    answer = produce(broker, "orders", batch([b"a"]), partition=partition)
    assert answer == refused(UNKNOWN_TOPIC_OR_PARTITION, f"orders-{partition} does not exist")


def test_a_partition_another_broker_leads(broker: SansIOBroker) -> None:
    answer = produce(broker, "orders", batch([b"a"]), partition=1)
    assert answer == refused(NOT_LEADER_OR_FOLLOWER, "broker 0 does not lead orders-1 (leader 1)")


@pytest.mark.parametrize("data", [None, b""])
def test_no_records(broker: SansIOBroker, data: bytes | None) -> None:
    answer = produce(broker, "orders", data)
    assert answer == refused(INVALID_RECORD, "no record batch in the request")


def test_a_damaged_batch_is_corrupt(broker: SansIOBroker) -> None:
    data = bytearray(batch([b"value"]))
    data[-1] ^= 0xFF
    answer = produce(broker, "orders", bytes(data))
    assert answer == refused(CORRUPT_MESSAGE, "record batch CRC32C mismatch")


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (15, "truncated record batch"),  # too short to hold the magic byte
        (40, "record batch shorter than its 61-byte header"),
        (60, "record batch shorter than its 61-byte header"),
    ],
    ids=["15-bytes", "40-bytes", "60-bytes"],
)
def test_a_truncated_batch_is_corrupt(broker: SansIOBroker, size: int, message: str) -> None:
    answer = produce(broker, "orders", batch([b"value"])[:size])
    assert answer == refused(CORRUPT_MESSAGE, message)


def test_an_old_message_format_is_unsupported(broker: SansIOBroker) -> None:
    data = bytearray(batch([b"value"]))
    data[16] = 1  # magic
    answer = produce(broker, "orders", bytes(data))
    assert answer == refused(
        UNSUPPORTED_FOR_MESSAGE_FORMAT, "message format magic 1 is not supported"
    )


def test_two_batches_are_refused(broker: SansIOBroker) -> None:
    answer = produce(broker, "orders", batch([b"a"]) + batch([b"b"]))
    assert answer == refused(INVALID_RECORD, "expected one record batch, got 2")
    assert stored(broker, "orders") == []


def test_a_record_count_that_does_not_match_the_offset_delta(broker: SansIOBroker) -> None:
    answer = produce(broker, "orders", batch([b"a"], record_count=2))
    assert answer == refused(INVALID_RECORD, "record count 2 does not match offset delta 0")
    assert stored(broker, "orders") == []


def _most_records(size: int, ratio: int = 1) -> int:
    return (size - records.HEADER_SIZE) * ratio // 7


def test_more_records_than_the_batch_can_hold(broker: SansIOBroker) -> None:
    """Each record takes at least 7 bytes: a header claiming more is refused, and the
    log end offset does not move by the claimed count."""
    size = len(batch([b"x" * 30]))
    most = _most_records(size)
    fits = batch([b"x" * 30], record_count=most, last_offset_delta=most - 1)
    assert produce(broker, "orders", fits) == Answer(NONE, 0, -1, 0, None, ())
    too_many = batch([b"x" * 30], record_count=most + 1, last_offset_delta=most)
    answer = produce(broker, "orders", too_many)
    assert answer == refused(
        INVALID_RECORD, f"{most + 1} records cannot fit in a {size}-byte batch"
    )
    assert broker.cluster.topics.get("orders").partitions[0].log.next_offset == most  # type: ignore[union-attr]


def test_compressed_records_may_outnumber_their_bytes(broker: SansIOBroker) -> None:
    """A compressed batch of many small alike records is far smaller than 7 bytes each."""
    data = gzipped([b"same"] * 2000)
    assert _most_records(len(data)) < 2000
    assert produce(broker, "orders", data) == Answer(NONE, 0, -1, 0, None, ())


def test_a_compressed_batch_with_no_payload_holds_no_records(broker: SansIOBroker) -> None:
    head = gzipped([b"a"])[: records.HEADER_SIZE]
    empty = restamp(head, batch_length=records.HEADER_SIZE - records.LOG_OVERHEAD)
    answer = produce(broker, "orders", empty)
    assert answer == refused(
        INVALID_RECORD, f"1 records cannot fit in a {records.HEADER_SIZE}-byte batch"
    )


def test_max_message_bytes_is_inclusive(broker: SansIOBroker) -> None:
    data = batch([b"v" * 100])
    broker.cluster.topics.create("limited", 1, configs={"max.message.bytes": str(len(data))})
    assert produce(broker, "limited", data).error_code == NONE
    bigger = batch([b"v" * 101])
    answer = produce(broker, "limited", bigger)
    assert answer == refused(
        MESSAGE_TOO_LARGE,
        f"batch of {len(bigger)} bytes exceeds max.message.bytes {len(data)}",
    )


@pytest.mark.parametrize("attributes", [0x20, 0x30], ids=["control", "control-txn"])
def test_control_batches_from_clients_are_refused(broker: SansIOBroker, attributes: int) -> None:
    """Markers are the transaction coordinator's to write, as on Kafka."""
    data = batch([b"a"], attributes=attributes, producer_id=7, producer_epoch=0, base_sequence=0)
    answer = produce(broker, "orders", data)
    assert answer == refused(INVALID_RECORD, "clients may not write control records")
    assert stored(broker, "orders") == []


def test_a_transactional_batch_without_a_transactional_id_is_refused(
    broker: SansIOBroker,
) -> None:
    """As Kafka answers it: the request must name the transactional id."""
    data = batch([b"a"], attributes=0x10, producer_id=7, producer_epoch=0, base_sequence=0)
    answer = produce(broker, "orders", data)
    assert answer == refused(
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "transactional records need the request's transactional id",
    )
    assert stored(broker, "orders") == []


def test_an_out_of_order_sequence_says_what_was_expected(broker: SansIOBroker) -> None:
    first = batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=0)
    assert produce(broker, "orders", first).error_code == NONE
    gap = batch([b"b"], producer_id=7, producer_epoch=0, base_sequence=5)
    answer = produce(broker, "orders", gap)
    assert answer == refused(OUT_OF_ORDER_SEQUENCE_NUMBER, "producer 7 sent sequence 5, expected 1")


def test_a_duplicate_is_acknowledged_without_a_log_append_time() -> None:
    broker = SansIOBroker()
    broker.cluster.topics.create("stamped", 1, configs={"message.timestamp.type": "LogAppendTime"})
    first = batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=0)
    assert produce(broker, "stamped", first) == Answer(NONE, 0, NOW_MS, 0, None, ())
    broker.clock.advance(1.0)
    assert produce(broker, "stamped", first) == Answer(NONE, 0, -1, 0, None, ())
    assert len(stored(broker, "stamped")) == 1


@pytest.mark.parametrize("wall_ms", [NOW_MS, 0, 1234])
def test_log_append_time_is_the_brokers_clock(wall_ms: int) -> None:
    broker = SansIOBroker(wall_ms=wall_ms)
    broker.cluster.topics.create("stamped", 1, configs={"message.timestamp.type": "LogAppendTime"})
    assert produce(broker, "stamped", batch([b"a"])) == Answer(NONE, 0, wall_ms, 0, None, ())
    (header,) = stored(broker, "stamped")
    assert header.attributes & records.TIMESTAMP_TYPE_FLAG
    assert header.max_timestamp == wall_ms


def test_create_time_topics_report_no_log_append_time(broker: SansIOBroker) -> None:
    assert produce(broker, "orders", batch([b"a"])).log_append_time == -1
    (header,) = stored(broker, "orders")
    assert not header.attributes & records.TIMESTAMP_TYPE_FLAG
    assert header.max_timestamp == NOW_MS


def test_log_append_time_keeps_the_compression_codec() -> None:
    """Stamping LogAppendTime rewrites the attributes: the codec bits must survive, or
    consumers read a gzip payload as plain records."""
    broker = SansIOBroker()
    broker.cluster.topics.create("stamped", 1, configs={"message.timestamp.type": "LogAppendTime"})
    assert produce(broker, "stamped", gzipped([b"a", b"b"])).error_code == NONE
    assert produce(broker, "stamped", gzipped([b"c"])).base_offset == 2
    for header in stored(broker, "stamped"):
        assert header.compression == 1
        assert header.attributes & records.TIMESTAMP_TYPE_FLAG
        assert header.max_timestamp == NOW_MS


# --- a topic with timestamp limits: every record is decoded, and refused as it fails ---

LIMIT = 1024  # the broker's max_decompressed_batch_bytes in these tests
BEFORE_MS = AFTER_MS = 1000


@pytest.fixture
def checked() -> SansIOBroker:
    """A broker whose compressed batches may expand to LIMIT bytes, with a topic
    "checked" that limits how far a record's timestamp may be from the broker's clock
    (so Produce decodes every record of every batch sent to it)."""
    broker = SansIOBroker(BrokerConfig(max_decompressed_batch_bytes=LIMIT))
    broker.cluster.topics.create(
        "checked",
        1,
        configs={
            "message.timestamp.before.max.ms": str(BEFORE_MS),
            "message.timestamp.after.max.ms": str(AFTER_MS),
        },
    )
    return broker


def record(body: bytes) -> bytes:
    """A record: its length, then `body` (attributes onwards)."""
    return zigzag_varint(len(body)) + body


def framed(payload: bytes, *, attributes: int = 0, count: int = 1) -> bytes:
    """A batch stamped NOW_MS of `count` records whose records field is `payload` as
    given (compressed or not, as `attributes` says), under a valid CRC."""
    head = batch([b""])[: records.HEADER_SIZE]
    return restamp(
        head + payload,
        batch_length=records.HEADER_SIZE - records.LOG_OVERHEAD + len(payload),
        attributes=attributes,
        record_count=count,
        last_offset_delta=count - 1,
    )


# attributes 0, timestamp delta 0, offset delta 0: how each record below starts
RECORD_START = b"\x00" + zigzag_varint(0) + zigzag_varint(0)
GZIP, SNAPPY = 1, 2


@pytest.mark.parametrize(
    "timestamp",
    [NOW_MS - BEFORE_MS, NOW_MS, NOW_MS + AFTER_MS],
    ids=["before-max-ms-ago", "now", "after-max-ms-ahead"],
)
def test_a_timestamp_at_either_limit_is_accepted(checked: SansIOBroker, timestamp: int) -> None:
    data = records.build_batch([(None, b"v")], timestamp_ms=timestamp)
    assert produce(checked, "checked", data) == Answer(NONE, 0, -1, 0, None, ())


@pytest.mark.parametrize(
    "timestamp", [NOW_MS - BEFORE_MS - 1, NOW_MS + AFTER_MS + 1], ids=["too-old", "too-new"]
)
def test_a_timestamp_one_millisecond_past_a_limit_is_refused(
    checked: SansIOBroker, timestamp: int
) -> None:
    data = records.build_batch([(None, b"v")], timestamp_ms=timestamp)
    answer = produce(checked, "checked", data)
    assert dataclasses.replace(answer, record_errors=()) == refused(
        INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp"
    )
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (
            0,
            f"Timestamp {timestamp} of message with offset 0 is out of range. The timestamp "
            f"should be within [{NOW_MS - BEFORE_MS}, {NOW_MS + AFTER_MS}]",
        )
    ]
    assert stored(checked, "checked") == []


UNDECODABLE = {
    "header-name-not-utf8": (
        framed(
            record(
                RECORD_START
                + zigzag_varint(-1)  # key: null
                + zigzag_varint(1)
                + b"v"
                + zigzag_varint(1)  # one header
                + zigzag_varint(1)
                + b"\xff"
                + zigzag_varint(1)
                + b"x"
            )
        ),
        "record header name is not UTF-8",
    ),
    "key-longer-than-its-record": (
        framed(record(RECORD_START + zigzag_varint(50) + b"abc")),
        "truncated record field",
    ),
    "timestamp-delta-varint-too-long": (
        framed(
            record(
                b"\x00"
                + b"\xff" * 10
                + b"\x01"
                + zigzag_varint(0)
                + zigzag_varint(-1)
                + zigzag_varint(-1)
            )
        ),
        "varint too long",
    ),
    "payload-ends-inside-a-length-varint": (
        framed(gzip.compress(b"\x80"), attributes=GZIP),
        "truncated varint",
    ),
    "record-length-past-the-payload": (
        framed(
            zigzag_varint(63)
            + RECORD_START
            + zigzag_varint(-1)
            + zigzag_varint(1)
            + b"v"
            + zigzag_varint(0)
        ),
        "record length 63 does not fit the batch",
    ),
    "record-length-0": (
        framed(zigzag_varint(0) + bytes(6)),
        "record length 0 does not fit the batch",
    ),
    "record-length-1": (framed(zigzag_varint(1) + bytes(6)), "truncated varint"),  # attributes only
    "record-length-negative": (
        framed(zigzag_varint(-1) + bytes(6)),
        "record length -1 does not fit the batch",
    ),
    "compression-codec-5": (
        framed(
            record(RECORD_START + zigzag_varint(-1) + zigzag_varint(1) + b"v" + zigzag_varint(0)),
            attributes=5,
        ),
        "cannot decode batches with compression codec 5",
    ),
    "gzip-payload-not-gzip": (
        framed(b"not a gzip stream", attributes=GZIP),
        "cannot decode gzip payload: Error -3 while decompressing data: incorrect header check",
    ),
    "gzip-payload-expands-past-the-limit": (
        framed(
            gzip.compress(
                record(RECORD_START + zigzag_varint(-1) + zigzag_varint(10_000) + bytes(10_001))
            ),
            attributes=GZIP,
        ),
        f"gzip payload expands beyond {LIMIT} bytes",
    ),
    "compressed-record-longer-than-the-limit": (
        framed(gzip.compress(zigzag_varint(LIMIT + 1) + bytes(6)), attributes=GZIP),
        f"a record of {LIMIT + 1} bytes is over the {LIMIT}-byte limit",
    ),
    "compressed-record-of-the-limit-past-the-payload": (
        framed(gzip.compress(zigzag_varint(LIMIT) + bytes(6)), attributes=GZIP),
        f"record length {LIMIT} does not fit the batch",
    ),
    "snappy-preamble-past-the-limit": (
        framed(b"\x81\x08" + bytes(6), attributes=SNAPPY),  # 1025, unsigned little-endian
        f"snappy payload expands beyond {LIMIT} bytes",
    ),
}


@pytest.mark.parametrize(("data", "message"), UNDECODABLE.values(), ids=UNDECODABLE.keys())
def test_records_that_cannot_be_decoded_are_corrupt(
    checked: SansIOBroker, data: bytes, message: str
) -> None:
    """The batch's CRC matches, but its records cannot be read: the client is told what
    is wrong with them, and nothing is stored."""
    assert produce(checked, "checked", data) == refused(CORRUPT_MESSAGE, message)
    assert stored(checked, "checked") == []


@pytest.mark.parametrize(
    ("attributes", "library"), [(SNAPPY, "cramjam"), (3, "lz4"), (4, "zstandard")]
)
def test_a_codec_without_its_library_is_an_unsupported_compression_type(
    checked: SansIOBroker, monkeypatch: pytest.MonkeyPatch, attributes: int, library: str
) -> None:
    for name in ("_cramjam", "_zstandard", "_lz4_frame"):
        monkeypatch.setattr(records, name, None)
    answer = produce(checked, "checked", framed(bytes(20), attributes=attributes))
    codec = records.CODEC_NAMES[attributes]
    assert answer == refused(
        UNSUPPORTED_COMPRESSION_TYPE, f"cannot decode {codec} batches: install {library}"
    )
    assert stored(checked, "checked") == []


# --- a compacted topic: every record needs a key ---


@pytest.fixture
def compacted() -> SansIOBroker:
    broker = SansIOBroker()
    broker.cluster.topics.create("compacted", 1, configs={"cleanup.policy": "compact,delete"})
    return broker


def keyless_refusal(indexes: list[int], partition: str = "compacted-0") -> Answer:
    message = f"Compacted topic cannot accept message without key in topic partition {partition}"
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i in indexes[:3])
    return Answer(
        INVALID_RECORD,
        -1,
        -1,
        -1,
        f"One or more records have been rejected due to {len(indexes)} record errors in total,"
        f" and only showing the first three errors at most: [{shown}]",
        [(i, message) for i in indexes],
    )


def _errors(answer: Answer) -> Answer:
    return dataclasses.replace(
        answer,
        record_errors=[(e.batch_index, e.batch_index_error_message) for e in answer.record_errors],
    )


def test_a_compacted_topic_refuses_records_without_a_key(compacted: SansIOBroker) -> None:
    items: list[tuple[bytes | None, bytes | None]] = [
        (None, b"a"),
        (b"k", b"b"),
        (None, b"c"),
        (None, None),
        (None, b"d"),
    ]
    data = records.build_batch(items, timestamp_ms=NOW_MS)
    assert _errors(produce(compacted, "compacted", data)) == keyless_refusal([0, 2, 3, 4])
    assert stored(compacted, "compacted") == []


def test_a_compacted_topic_takes_empty_keys_and_tombstones(compacted: SansIOBroker) -> None:
    data = records.build_batch([(b"", b"empty key"), (b"k", None)], timestamp_ms=NOW_MS)
    assert produce(compacted, "compacted", data) == Answer(NONE, 0, -1, 0, None, ())


def test_a_compressed_keyless_record_is_found(compacted: SansIOBroker) -> None:
    assert _errors(produce(compacted, "compacted", gzipped([b"x"]))) == keyless_refusal([0])


def test_a_timestamp_error_wins_over_a_missing_key() -> None:
    broker = SansIOBroker()
    broker.cluster.topics.create(
        "both",
        1,
        configs={
            "cleanup.policy": "compact",
            "message.timestamp.before.max.ms": "1000",
            "message.timestamp.after.max.ms": "1000",
        },
    )
    # Each record reports its first fault (a missing key before its timestamp); a
    # timestamp fault anywhere makes the batch's error INVALID_TIMESTAMP.
    data = records.build_batch([(None, b"v"), (b"k", b"v")], timestamp_ms=NOW_MS - 5000)
    answer = produce(broker, "both", data)
    assert (answer.error_code, answer.error_message) == (
        INVALID_TIMESTAMP,
        "One or more records have been rejected due to invalid timestamp",
    )
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (0, "Compacted topic cannot accept message without key in topic partition both-0"),
        (
            1,
            f"Timestamp {NOW_MS - 5000} of message with offset 1 is out of range. The "
            f"timestamp should be within [{NOW_MS - 1000}, {NOW_MS + 1000}]",
        ),
    ]
