"""Fetch responses written straight to bytes (protocol/fetch_response.py) are the bytes
kio writes for the same response, at every served version."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from minibroker.protocol import messages
from minibroker.protocol.fetch_response import (
    AbortedTransaction,
    PartitionAnswer,
    RecordPieces,
    suffix_size,
    write_topic,
)

FETCH = 1
VERSIONS = range(4, 18)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

partitions = st.lists(
    st.builds(
        PartitionAnswer,
        partition_index=INT32,
        error_code=st.sampled_from([int(code) for code in ErrorCode]),
        high_watermark=INT64,
        last_stable_offset=INT64,
        log_start_offset=INT64,
        aborted_transactions=st.none()
        | st.lists(st.builds(AbortedTransaction, INT64, INT64), max_size=3).map(tuple),
        preferred_read_replica=INT32,
        # lengths past one varint byte (127) and past two (16,383) included
        records=st.none()
        | st.binary(max_size=300)
        | st.sampled_from([b"r" * 20_000])
        | st.lists(st.binary(max_size=100), max_size=4).map(
            lambda pieces: RecordPieces([memoryview(p) for p in pieces], sum(map(len, pieces)))
        ),
    ),
    max_size=5,
)
topics = st.lists(
    st.tuples(st.text(max_size=300), st.none() | st.uuids(), partitions),
    max_size=4,
)


Drawn = list[tuple[str, uuid.UUID | None, list[PartitionAnswer]]]


def _kio_response(version: int, drawn: Drawn) -> Any:
    module = messages.response_module(FETCH, version)
    build = messages.build
    return build(
        messages.response_class(FETCH, version),
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        node_endpoints=(),
        responses=tuple(
            build(
                module.FetchableTopicResponse,
                topic=name,
                topic_id=topic_id,
                partitions=tuple(
                    build(
                        module.PartitionData,
                        **{
                            **answer._asdict(),
                            "error_code": ErrorCode(answer.error_code),
                            "records": b"".join(answer.records.pieces)
                            if isinstance(answer.records, RecordPieces)
                            else answer.records,
                            "aborted_transactions": None
                            if answer.aborted_transactions is None
                            else tuple(
                                build(module.AbortedTransaction, **t._asdict())
                                for t in answer.aborted_transactions
                            ),
                        },
                    )
                    for answer in answers
                ),
            )
            for name, topic_id, answers in drawn
        ),
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(drawn=topics, correlation_id=INT32)
def test_spliced_fetch_response_is_the_bytes_kio_writes(
    version: int, drawn: Drawn, correlation_id: int
) -> None:
    expected = messages.encode_response(correlation_id, _kio_response(version, drawn))
    empty = _kio_response(version, [])
    # each topic joined into one item, and every topic's pieces in one list with the count
    items = []
    pieces: list[bytes | memoryview] = []
    for name, topic_id, answers in drawn:
        topic: list[bytes | memoryview] = []
        write_topic(version, name, topic_id, answers, topic)
        items.append(b"".join(topic))
        pieces += topic
    spliced = messages.SplicedResponse(empty, items, suffix_size(version))
    assert messages.encode_response(correlation_id, spliced) == expected
    in_pieces = messages.SplicedResponse(empty, pieces, suffix_size(version), len(drawn))
    assert messages.encode_response(correlation_id, in_pieces) == expected


def test_a_topic_without_its_name_or_at_a_version_not_served_is_refused() -> None:
    with pytest.raises(ValueError, match="by name"):
        write_topic(12, None, uuid.uuid4(), [], [])
    for version in (3, 18):
        with pytest.raises(ValueError, match="not written here"):
            write_topic(version, "orders", None, [], [])
