"""Request decoding at its edges: the shortest header prefix, names of unknown APIs in
what the broker reports, and compact strings that are null or long (the bounds pass
walks those out of line), in the body and inside a tagged field.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from harness.raw_client import encode, make_request
from minibroker.protocol import messages
from minibroker.protocol.messages import InvalidRequest

FETCH, METADATA, FIND_COORDINATOR = 1, 3, 10


def test_api_names_are_kafkas_and_unknown_keys_are_numbered() -> None:
    assert messages.api_name(3) == "metadata"
    assert messages.api_name(999) == "api_999"


def test_a_header_prefix_of_exactly_eight_bytes_is_read() -> None:
    prefix = struct.pack(">hhi", 3, 12, 77)
    assert messages.peek_header_prefix(prefix) == (3, 12, 77)
    assert messages.peek_header_prefix(memoryview(prefix + b"rest")) == (3, 12, 77)


def test_a_shorter_prefix_is_refused_with_a_reason() -> None:
    with pytest.raises(InvalidRequest) as raised:
        messages.peek_header_prefix(struct.pack(">hhi", 3, 12, 77)[:7])
    assert str(raised.value) == "frame shorter than a request header"


def _fetch_v12(**fields: object) -> bytes:
    """A Fetch v12 frame body (a flexible version: compact strings, tagged fields)."""
    request = make_request(
        FETCH,
        12,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=1,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(),
        forgotten_topics_data=(),
        **fields,
    )
    return encode(FETCH, 12, request, 1)[4:]


def test_a_long_compact_string_is_read_whole() -> None:
    _, request = messages.decode_request(_fetch_v12(rack_id="r" * 200))
    assert request.rack_id == "r" * 200


def test_a_long_compact_string_that_ends_its_tagged_field_is_read() -> None:
    _, request = messages.decode_request(_fetch_v12(rack_id="", cluster_id="c" * 200))
    assert request.cluster_id == "c" * 200


@pytest.mark.parametrize("missing", [1, 4])
def test_a_long_compact_string_past_the_frame_says_by_how_much(missing: int) -> None:
    frame = _fetch_v12(rack_id="r" * 200)
    # Cut the body's tag section (its last byte) and `missing` bytes of the string.
    with pytest.raises(InvalidRequest) as raised:
        messages.decode_request(frame[: -1 - missing])
    assert str(raised.value) == (
        f"FetchRequest.rack_id: declared length runs {missing} bytes past the frame"
    )


def test_a_null_where_a_string_is_required_is_refused() -> None:
    frame = bytearray(_fetch_v12(rack_id=""))
    assert frame[-2:] == b"\x01\x00"  # rack_id "" (compact length 0 + 1), no tags
    frame[-2] = 0  # compact length 0: null
    with pytest.raises(InvalidRequest) as raised:
        messages.decode_request(bytes(frame))
    assert str(raised.value) == "FetchRequest.rack_id: null where the schema does not allow it"


def test_a_null_where_a_string_may_be_null_is_read() -> None:
    _, request = messages.decode_request(_fetch_v12(rack_id="", cluster_id=None))
    assert request.cluster_id is None


def _coordinator(version: int) -> Any:
    """A FindCoordinator coordinator entry: its key comes first and its error message
    last (before the tags), so the bytes before the message hold an empty string too."""
    cls = messages.response_module(FIND_COORDINATOR, version).Coordinator
    return messages.build(
        cls, key="", node_id=1, host="h", port=9092, error_code=ErrorCode.none, error_message=""
    )


def _metadata_topic(version: int, code: ErrorCode) -> Any:
    cls = messages.response_module(METADATA, version).MetadataResponseTopic
    return messages.build(
        cls,
        error_code=code,
        name="",
        topic_id=None,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=-(2**31),
    )


ENTITIES = {
    "coordinator-v4-error_message": (lambda: _coordinator(4), "error_message"),
    "coordinator-v4-host": (lambda: _coordinator(4), "host"),
    "metadata-v8-none": (lambda: _metadata_topic(8, ErrorCode.none), "name"),
    "metadata-v12-unknown": (lambda: _metadata_topic(12, ErrorCode.unknown_topic_id), "name"),
}


@pytest.mark.parametrize("entity", list(ENTITIES))
@pytest.mark.parametrize("text", ["", "x", "orders", "é" * 100, "t" * 300])
def test_string_variants_encode_as_kio_does(entity: str, text: str) -> None:
    make_entity, field_name = ENTITIES[entity]
    template = make_entity()
    variants = messages.StringVariants(template, field_name)
    expected = messages.encode_entity(dataclasses.replace(template, **{field_name: text}))
    assert variants.encode(text) == expected
