"""Produce responses written straight to bytes (protocol/produce_response.py) are the bytes
kio writes for the same response, at every served version."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from minibroker.protocol import messages
from minibroker.protocol.produce_response import (
    ProducePartitionAnswer,
    RecordError,
    suffix_size,
    write_topic,
)

PRODUCE = 0
VERSIONS = range(3, 13)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# kio writes log_append_time from a datetime in milliseconds: -1 (none) or a real instant
APPEND_TIMES = st.just(-1) | st.integers(0, 2**41)
TEXT = st.none() | st.text(max_size=200)

partitions = st.lists(
    st.builds(
        ProducePartitionAnswer,
        partition_index=INT32,
        error_code=st.sampled_from([int(code) for code in ErrorCode]),
        base_offset=INT64,
        log_append_time_ms=APPEND_TIMES,
        log_start_offset=INT64,
        record_errors=st.lists(st.builds(RecordError, INT32, TEXT), max_size=3).map(tuple),
        error_message=TEXT,
    ),
    max_size=5,
)
topics = st.lists(st.tuples(st.text(max_size=300), partitions), max_size=4)


def _kio_response(version: int, drawn: list[tuple[str, list[ProducePartitionAnswer]]]) -> Any:
    module = messages.response_module(PRODUCE, version)
    build = messages.build

    def partition(answer: ProducePartitionAnswer) -> Any:
        append = answer.log_append_time_ms
        return build(
            module.PartitionProduceResponse,
            index=answer.partition_index,
            error_code=ErrorCode(answer.error_code),
            base_offset=answer.base_offset,
            log_append_time=None
            if append < 0
            else datetime.datetime.fromtimestamp(append / 1000, datetime.UTC),
            log_start_offset=answer.log_start_offset,
            record_errors=tuple(
                build(
                    module.BatchIndexAndErrorMessage,
                    batch_index=error.batch_index,
                    batch_index_error_message=error.message,
                )
                for error in answer.record_errors
            )
            if hasattr(module, "BatchIndexAndErrorMessage")
            else (),
            error_message=answer.error_message,
        )

    return build(
        messages.response_class(PRODUCE, version),
        throttle_time=datetime.timedelta(0),
        node_endpoints=(),
        responses=tuple(
            build(
                module.TopicProduceResponse,
                name=name,
                partition_responses=tuple(partition(answer) for answer in answers),
            )
            for name, answers in drawn
        ),
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(drawn=topics, correlation_id=INT32)
def test_spliced_produce_response_is_the_bytes_kio_writes(
    version: int, drawn: list[tuple[str, list[ProducePartitionAnswer]]], correlation_id: int
) -> None:
    expected = messages.encode_response(correlation_id, _kio_response(version, drawn))
    pieces: list[bytes] = []
    for name, answers in drawn:
        write_topic(version, name, answers, pieces)
    spliced = messages.SplicedResponse(
        _kio_response(version, []), pieces, suffix_size(version), len(drawn)
    )
    assert messages.encode_response(correlation_id, spliced) == expected


def test_a_version_not_served_is_refused() -> None:
    with pytest.raises(ValueError, match="not written here"):
        write_topic(2, "orders", [], [])
    with pytest.raises(ValueError, match="not written here"):
        write_topic(13, "orders", [], [])
