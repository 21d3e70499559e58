"""Produce requests read without copying their batches (protocol/produce_request.py) give
what kio's reader gives for the same frame, at every served version, and each
partition's records are a view of the frame itself."""

from __future__ import annotations

import datetime
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial.errors import InvalidUnicode

from minibroker.protocol import messages, produce_request
from minibroker.protocol.bounds import InvalidRequest

PRODUCE = 0
VERSIONS = range(3, 13)
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
TEXT = st.text(max_size=200)

partitions = st.lists(st.tuples(INT32, st.none() | st.binary(max_size=300)), max_size=5)
topics = st.lists(st.tuples(TEXT, partitions), max_size=4)


def _request(
    version: int, transactional_id: str | None, acks: int, timeout_ms: int, drawn: Any
) -> Any:
    module = messages.request_module(PRODUCE, version)
    assert module is not None
    return module.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(
            module.TopicProduceData(
                name=name,
                partition_data=tuple(
                    module.PartitionProduceData(index=index, records=records)
                    for index, records in parts
                ),
            )
            for name, parts in drawn
        ),
    )


def _frame(version: int, request: Any) -> bytes:
    framed = messages.encode_request(messages.RequestHeader(PRODUCE, version, 7, "c"), request)
    return framed[4:]


def _plain(request: Any) -> tuple[Any, ...]:
    """The request's values, records as bytes (kio gives bytes, this reader views)."""
    return (
        request.transactional_id,
        request.acks,
        request.timeout,
        [
            (
                topic.name,
                [
                    (p.index, None if p.records is None else bytes(p.records))
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ],
    )


def _kio_read(frame: bytes, version: int) -> Any:
    cls = messages.request_class(PRODUCE, version)
    offset = messages.bounds.request_checker(cls)(frame)
    body, _ = messages._reader(cls)(frame, offset)
    return body


@pytest.mark.parametrize("version", VERSIONS)
@given(
    transactional_id=st.none() | TEXT,
    acks=INT16,
    timeout_ms=INT32,
    drawn=topics,
)
@settings(max_examples=60, deadline=None)
def test_the_same_request_as_kio_reads_with_records_viewing_the_frame(
    version: int, transactional_id: str | None, acks: int, timeout_ms: int, drawn: Any
) -> None:
    frame = _frame(version, _request(version, transactional_id, acks, timeout_ms, drawn))
    _, ours = messages.decode_request(frame)
    theirs = _kio_read(frame, version)
    assert type(ours) is type(theirs)
    assert _plain(ours) == _plain(theirs)
    for topic in ours.topic_data:
        assert type(topic) is type(theirs.topic_data[0])
        for partition in topic.partition_data:
            if partition.records is not None:
                assert isinstance(partition.records, memoryview)
                assert partition.records.obj is frame  # no copy
                assert partition.records.readonly


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tags(*entries: tuple[int, bytes]) -> bytes:
    return _uvarint(len(entries)) + b"".join(
        _uvarint(tag) + _uvarint(len(data)) + data for tag, data in entries
    )


def _compact(data: bytes) -> bytes:
    return _uvarint(len(data) + 1) + data


@pytest.mark.parametrize("version", [9, 10, 11, 12])
def test_unknown_tagged_fields_are_skipped_everywhere(version: int) -> None:
    """As Kafka skips them (kio's reader refuses them)."""
    header = struct.pack(">hhih", PRODUCE, version, 7, 1) + b"c" + _tags((5, b"h"))
    unknown = _tags((3, b"abc"), (200, b"\x00" * 130))
    batch = b"B" * 150  # over 126 bytes: a two-byte compact length
    body = (
        _compact(b"tx")
        + struct.pack(">hi", -1, 1000)
        + _uvarint(2)  # one topic
        + _compact(b"t")
        + _uvarint(3)  # two partitions
        + struct.pack(">i", 0)
        + _compact(batch)
        + unknown
        + struct.pack(">i", 1)
        + _uvarint(0)  # null records
        + b"\x00"
        + unknown  # the topic's
        + unknown  # the request's
    )
    _, ours = messages.decode_request(header + body)
    assert _plain(ours) == (
        "tx",
        -1,
        datetime.timedelta(seconds=1),
        [("t", [(0, batch), (1, None)])],
    )


@pytest.mark.parametrize("version", [3, 9])
def test_a_topic_name_that_is_not_utf8_closes_the_connection(version: int) -> None:
    frame = bytearray(_frame(version, _request(version, None, 1, 100, [("\u00e9", [(0, b"r")])])))
    at = frame.index("\u00e9".encode())
    frame[at : at + 2] = b"\xff\xfe"
    with pytest.raises(InvalidRequest, match=r"malformed produce v[39] body: .utf-8. codec"):
        messages.decode_request(bytes(frame))
    with pytest.raises(InvalidUnicode):  # as kio's reader refuses it
        _kio_read(bytes(frame), version)


@pytest.mark.parametrize("version", [2, 13])
def test_versions_outside_3_to_12_are_not_read_here(version: int) -> None:
    with pytest.raises(LookupError, match=f"Produce v{version} is not read here"):
        produce_request.reader(version)
