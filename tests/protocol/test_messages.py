"""The request/response codec: a hypothesis round trip for every served API and version,
header versions, and malformed frames."""

from __future__ import annotations

import contextlib
import datetime
import functools
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from minibroker.protocol import messages
from minibroker.protocol.messages import (
    InvalidRequest,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from tests.protocol.kio_strategies import SERVED

# Small counts: there are well over a hundred (api, version) pairs and kio's nested
# strategies are slow to draw from.
ROUND_TRIP = settings(
    max_examples=4,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
RESPONSE_ROUND_TRIP = settings(ROUND_TRIP, max_examples=2)


@functools.cache
def _strategy(cls: type[Any]) -> st.SearchStrategy[Any]:
    return st.from_type(cls)


def _id(pair: tuple[int, int]) -> str:
    return f"{messages.api_name(pair[0])}-v{pair[1]}"


def test_every_served_version_has_kio_classes() -> None:
    assert SERVED
    for api_key, version in SERVED:
        request_cls = messages.request_class(api_key, version)
        assert request_cls is not None, (api_key, version)
        assert request_cls.__api_key__ == api_key
        assert messages.response_class(api_key, version).__api_key__ == api_key


@pytest.mark.parametrize("pair", SERVED, ids=_id)
@given(data=st.data())
@ROUND_TRIP
def test_request_round_trip(pair: tuple[int, int], data: st.DataObject) -> None:
    api_key, version = pair
    cls = messages.request_class(api_key, version)
    assert cls is not None
    request = data.draw(_strategy(cls))
    header = RequestHeader(
        api_key=api_key,
        api_version=version,
        correlation_id=data.draw(st.integers(-(2**31), 2**31 - 1)),
        client_id=data.draw(st.none() | st.text(max_size=20)),
    )
    frame = encode_request(header, request)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    decoded_header, decoded = decode_request(frame[4:])
    assert decoded_header == header
    assert decoded == request


@pytest.mark.parametrize("pair", SERVED, ids=_id)
@given(data=st.data())
@RESPONSE_ROUND_TRIP
def test_response_round_trip(pair: tuple[int, int], data: st.DataObject) -> None:
    api_key, version = pair
    response = data.draw(_strategy(messages.response_class(api_key, version)))
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1))
    frame = encode_response(correlation_id, response)
    assert decode_response(frame[4:], api_key, version) == (correlation_id, response)


def _api_versions_request(version: int) -> Any:
    cls = messages.request_class(18, version)
    assert cls is not None
    return messages.build(cls, client_software_name="t", client_software_version="1")


def test_flexible_request_carries_header_v2() -> None:
    header = RequestHeader(18, 3, 5, "client")
    frame = encode_request(header, _api_versions_request(3))
    body = frame[4:]
    # v2 header: key, version, correlation id, nullable int16 string, then tagged fields.
    assert body[:8] == struct.pack(">hhi", 18, 3, 5)
    assert body[8:16] == struct.pack(">h", 6) + b"client"
    assert body[16] == 0  # no tagged fields
    parsed, offset = messages.decode_request_header(body, flexible=True)
    assert parsed == header and offset == 17


def test_non_flexible_request_carries_header_v1() -> None:
    frame = encode_request(RequestHeader(18, 2, 5, None), _api_versions_request(2))
    assert frame[4:] == struct.pack(">hhih", 18, 2, 5, -1)  # ApiVersions v2 has no body


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    response = messages.build(
        messages.response_class(18, 3),
        error_code=ErrorCode.none,
        api_keys=(),
        throttle_time=datetime.timedelta(0),
    )
    assert response.__flexible__
    frame = encode_response(77, response)
    # Header v0 is the bare correlation id; the body's int16 error code follows at once.
    assert frame[4:10] == struct.pack(">ih", 77, 0)


def test_other_flexible_responses_use_header_v1() -> None:
    cls = messages.response_class(3, 9)  # Metadata v9: first flexible version
    response = messages.build(
        cls,
        throttle_time=datetime.timedelta(0),
        brokers=(),
        cluster_id=None,
        controller_id=0,
        topics=(),
    )
    frame = encode_response(77, response)
    assert frame[4:9] == struct.pack(">i", 77) + b"\x00"  # correlation id, tagged fields


def test_peek_header_prefix() -> None:
    assert messages.peek_header_prefix(struct.pack(">hhi", 3, 12, -9) + b"rest") == (3, 12, -9)
    with pytest.raises(InvalidRequest):
        messages.peek_header_prefix(b"\x00\x03\x00")


def test_unknown_api_or_version_is_a_lookup_error() -> None:
    with pytest.raises(LookupError):
        decode_request(struct.pack(">hhih", 9999, 0, 1, -1))
    with pytest.raises(LookupError):
        decode_request(struct.pack(">hhih", 18, 127, 1, -1))


def test_trailing_bytes_after_the_body_are_ignored() -> None:
    header = RequestHeader(18, 2, 1, "c")
    frame = encode_request(header, _api_versions_request(2))
    assert decode_request(frame[4:] + b"\x00\x00\x00\x00") == (header, _api_versions_request(2))


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_truncated_request_is_invalid(data: st.DataObject) -> None:
    cls = messages.request_class(3, 12)
    assert cls is not None
    request = data.draw(st.from_type(cls))
    body = encode_request(RequestHeader(3, 12, 1, "client"), request)[4:]
    cut = data.draw(st.integers(8, len(body) - 1))
    with pytest.raises(InvalidRequest):
        decode_request(body[:cut])


@given(garbage=st.binary(max_size=200), pair=st.sampled_from(SERVED))
@settings(max_examples=300, deadline=None)
def test_garbage_bodies_raise_only_invalid_request(garbage: bytes, pair: tuple[int, int]) -> None:
    api_key, version = pair
    frame = struct.pack(">hhi", api_key, version, 1) + garbage
    with contextlib.suppress(InvalidRequest):
        decode_request(frame)


def test_build_drops_fields_the_version_lacks() -> None:
    fields = {"error_code": ErrorCode.none, "api_keys": (), "throttle_time": datetime.timedelta(0)}
    old = messages.build(messages.response_class(18, 0), **fields)
    assert not hasattr(old, "throttle_time")
    new = messages.build(messages.response_class(18, 1), **fields)
    assert new.throttle_time == datetime.timedelta(0)
