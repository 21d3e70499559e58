"""Request and response codec on top of kio's generated message classes.

Header rules (Kafka's RequestHeader.json / ResponseHeader.json):
- a request at a flexible version carries header v2 (tagged fields), otherwise v1;
- a response at a flexible version carries header v1, otherwise v0;
- ApiVersions responses always carry header v0, so that a client that does not yet know
  the broker's versions can read the correlation id.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import (
    KioIndexError,
    load_payload_module,
    load_request_schema,
    load_response_schema,
)
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i32

API_VERSIONS_KEY = 18
_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


class InvalidRequest(Exception):
    """A frame that cannot be decoded as a request; the connection gets closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, f"api_{api_key}")


@cache
def request_module(api_key: int, version: int) -> ModuleType | None:
    """The module of a request version (for building nested request structures)."""
    try:
        return load_payload_module(api_key, version, EntityType.request)
    except KioIndexError:
        return None


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    """The module of a response version: handlers build its nested structures by name."""
    return load_payload_module(api_key, version, EntityType.response)


@cache
def request_class(api_key: int, version: int) -> type[Any] | None:
    try:
        return load_request_schema(api_key, version)
    except KioIndexError:
        return None


@cache
def response_class(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)


# kio caches the reader and writer it builds for each class.
def _reader(cls: type[Any]) -> Callable[[bytes | memoryview, int], tuple[Any, int]]:
    return entity_reader(cls)  # type: ignore[return-value]


def _writer(cls: type[Any]) -> Callable[[io.BytesIO, Any], None]:
    return entity_writer(cls)  # type: ignore[return-value]


def peek_header_prefix(frame: bytes | memoryview) -> tuple[int, int, int]:
    """api_key, api_version and correlation_id: the part every header version shares."""
    if len(frame) < _PREFIX.size:
        raise InvalidRequest("frame shorter than a request header")
    key, version, correlation_id = _PREFIX.unpack_from(frame, 0)
    return key, version, correlation_id


def decode_request_header(frame: bytes | memoryview, flexible: bool) -> tuple[RequestHeader, int]:
    """Decode the header; return it and the offset where the body starts."""
    header_cls = RequestHeaderV2 if flexible else RequestHeaderV1
    try:
        header, size = _reader(header_cls)(frame, 0)
    except Exception as exc:
        raise InvalidRequest(f"malformed request header: {exc}") from exc
    return (
        RequestHeader(
            api_key=header.request_api_key,
            api_version=header.request_api_version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
        ),
        size,
    )


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """Decode a whole request frame. Raises InvalidRequest or LookupError (unknown version)."""
    api_key, version, _ = peek_header_prefix(frame)
    cls = request_class(api_key, version)
    if cls is None:
        raise LookupError(f"{api_name(api_key)} v{version} is not known")
    header, offset = decode_request_header(frame, cls.__flexible__)
    try:
        body, _ = _reader(cls)(frame, offset)
    except Exception as exc:
        raise InvalidRequest(f"malformed {api_name(api_key)} v{version} body: {exc}") from exc
    # Bytes after the body are ignored, as Kafka does: librdkafka's all-topics Metadata
    # v9+ writes an int32 0 where the compact array length (one varint byte) belongs.
    return header, body


def _finish_frame(out: io.BytesIO) -> bytes:
    """Patch the size prefix and take the bytes without copying them.

    getvalue() hands over the BytesIO's own buffer while no view of it exists; going
    through getbuffer() and bytes() would copy every (possibly multi-MB) frame once more.
    """
    size = out.tell() - 4
    out.seek(0)
    out.write(_SIZE.pack(size))
    return out.getvalue()


def _response_header_class(api_key: int, flexible: bool) -> type[Any]:
    """Header v1 for flexible versions, except ApiVersions, which always uses v0."""
    if flexible and api_key != API_VERSIONS_KEY:
        return ResponseHeaderV1
    return ResponseHeaderV0


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Serialise a response body with the header its API and version call for."""
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")  # frame size, patched below
    header_cls = _response_header_class(response.__api_key__, response.__flexible__)
    _writer(header_cls)(out, header_cls(correlation_id=i32(correlation_id)))
    _writer(type(response))(out, response)
    return _finish_frame(out)


def encode_request(header: RequestHeader, request: Any) -> bytes:
    """Serialise a request with its header (used by tests and the benchmark client)."""
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    header_cls = RequestHeaderV2 if request.__flexible__ else RequestHeaderV1
    _writer(header_cls)(
        out,
        header_cls(
            request_api_key=header.api_key,  # type: ignore[arg-type]
            request_api_version=header.api_version,  # type: ignore[arg-type]
            correlation_id=header.correlation_id,  # type: ignore[arg-type]
            client_id=header.client_id,
        ),
    )
    _writer(type(request))(out, request)
    return _finish_frame(out)


def decode_response(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """Decode a response frame body (without the size prefix): correlation id and body."""
    cls = response_class(api_key, version)
    header, offset = _reader(_response_header_class(api_key, cls.__flexible__))(frame, 0)
    body, _ = _reader(cls)(frame, offset)
    return int(header.correlation_id), body


def build(cls: type[Any], **fields: Any) -> Any:
    """Construct a kio entity, dropping fields its version does not have.

    Handlers serve many versions of an API with one function; a field that was added
    in a later version (throttle time, log start offset, ...) is simply left out of
    older ones.
    """
    known = cls.__dataclass_fields__
    return cls(**{name: value for name, value in fields.items() if name in known})
