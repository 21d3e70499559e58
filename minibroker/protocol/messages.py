"""Request and response codec on top of kio's generated message classes.

Header rules (Kafka's RequestHeader.json / ResponseHeader.json):
- a request at a flexible version carries header v2 (tagged fields), otherwise v1;
- a response at a flexible version carries header v1, otherwise v0;
- ApiVersions responses always carry header v0, so that a client that does not yet know
  the broker's versions can read the correlation id.

kio's native reader is only ever handed a request frame that `bounds` has walked and
accepted (every declared length fits in the frame): given a huge array count it would
reserve that much memory first and abort the process.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import cache
from types import ModuleType
from typing import Any, Literal, overload

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

from minibroker.protocol import bounds, legacy, produce_request
from minibroker.protocol.bounds import InvalidRequest as InvalidRequest

PRODUCE_KEY = 0
API_VERSIONS_KEY = 18
_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_CLIENT_ID_SIZE = struct.Struct(">h")
_CLIENT_ID_AT = _PREFIX.size  # client_id follows the prefix in header v1 and v2


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


# Setting a frozen dataclass's fields through its slots' descriptors, as __init__ would
# but without a call to object.__setattr__ per field: a third of the cost, and decoding
# the header is on every request's path.
_HEADER_FIELDS = ("api_key", "api_version", "correlation_id", "client_id")
if tuple(field.name for field in fields(RequestHeader)) != _HEADER_FIELDS:
    raise TypeError("update _new_header for RequestHeader's fields")
_set_api_key, _set_api_version, _set_correlation_id, _set_client_id = (
    vars(RequestHeader)[name].__set__ for name in _HEADER_FIELDS
)


def _new_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> RequestHeader:
    header = object.__new__(RequestHeader)
    _set_api_key(header, api_key)
    _set_api_version(header, api_version)
    _set_correlation_id(header, correlation_id)
    _set_client_id(header, client_id)
    return header


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
    """The module of a response version: handlers build its nested structures by name
    (a legacy version's are those of its proxy version; see protocol/legacy.py)."""
    if legacy.is_legacy(api_key, version):
        version = legacy.proxy_version(api_key)
    return load_payload_module(api_key, version, EntityType.response)


@cache
def request_class(api_key: int, version: int) -> type[Any] | None:
    try:
        return load_request_schema(api_key, version)
    except KioIndexError:
        return None


@cache
def response_class(api_key: int, version: int) -> type[Any]:
    if legacy.is_legacy(api_key, version):
        version = legacy.proxy_version(api_key)
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


def _checked_header(
    frame: bytes | memoryview, api_key: int, version: int, correlation_id: int
) -> RequestHeader:
    """The header of a frame the bounds pass accepted (so client_id's length fits).

    Read here rather than by kio's header reader: the bounds pass has already walked it,
    and v2's tagged fields (none are defined) are skipped, as Kafka does.
    """
    (size,) = _CLIENT_ID_SIZE.unpack_from(frame, _CLIENT_ID_AT)
    if size < 0:
        return _new_header(api_key, version, correlation_id, None)
    start = _CLIENT_ID_AT + _CLIENT_ID_SIZE.size
    try:
        client_id = str(frame[start : start + size], "utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"malformed request header: client id: {exc}") from exc
    return _new_header(api_key, version, correlation_id, client_id)


def decode_request_header(frame: bytes | memoryview, flexible: bool) -> tuple[RequestHeader, int]:
    """Decode the header; return it and the offset where the body starts."""
    offset = bounds.check_header(frame, flexible)
    api_key, version, correlation_id = _PREFIX.unpack_from(frame, 0)
    return _checked_header(frame, api_key, version, correlation_id), offset


_Reader = Callable[[bytes | memoryview, int], tuple[Any, int]]
# (api key, version) -> the bounds pass and kio's reader for it; served versions only.
_decoders: dict[tuple[int, int], tuple[bounds.Checker, _Reader]] = {}


def _decoder(api_key: int, version: int) -> tuple[bounds.Checker, _Reader]:
    """Look up (and remember) how to decode a request version; LookupError if unknown."""
    if legacy.is_legacy(api_key, version):
        decoder = _decoders[api_key, version] = _legacy_decoder(api_key, version)
        return decoder
    cls = request_class(api_key, version)
    if cls is None:
        raise LookupError(f"{api_name(api_key)} v{version} is not known")
    read = produce_request.reader(version) if api_key == PRODUCE_KEY else _reader(cls)
    decoder = _decoders[api_key, version] = (bounds.request_checker(cls), read)
    return decoder


def _legacy_decoder(api_key: int, version: int) -> tuple[bounds.Checker, _Reader]:
    """The header is walked like any other; the legacy body reader checks each length
    itself as it reads."""

    def check(frame: bytes | memoryview) -> int:
        return bounds.check_header(frame, False)

    def read(frame: bytes | memoryview, offset: int) -> tuple[Any, int]:
        return legacy.read_request_body(frame, offset, api_key, version), len(frame)

    return check, read


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """Decode a whole request frame. Raises InvalidRequest or LookupError (unknown version)."""
    try:  # peek_header_prefix, inline: this is every request's path
        api_key, version, correlation_id = _PREFIX.unpack_from(frame, 0)
    except struct.error:
        raise InvalidRequest("frame shorter than a request header") from None
    try:
        check, read = _decoders[api_key, version]
    except KeyError:
        check, read = _decoder(api_key, version)
    # Header and body, before kio sees a byte: it would reserve memory for whatever
    # array count the frame declares.
    offset = check(frame)
    header = _checked_header(frame, api_key, version, correlation_id)
    try:
        body, _ = read(frame, offset)
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


@dataclass(frozen=True, slots=True)
class SplicedResponse:
    """A response whose one top-level array is given as items already encoded (so a
    handler can cache them), spliced in where `response` has that array empty.

    `suffix_size` is the number of body bytes that follow the array, a fact of the
    API version's schema the handler states (and its tests check against kio). `count`,
    when given, is the array's length and `items` are pieces of its entries, so large
    entries (stored record batches) are copied once, into the frame.
    """

    response: Any
    items: Sequence[bytes | memoryview]
    suffix_size: int
    count: int | None = None


def encode_entity(entity: Any) -> bytes:
    """One (nested) entity as it appears inside a message."""
    out = io.BytesIO()
    _writer(type(entity))(out, entity)
    return out.getvalue()


class StringVariants:
    """Encodings of one entity that differ only in one (non-null) string field.

    kio encodes the entity once with the field empty and once with it set to "x"; each
    variant is then the bytes before the field, the string's own encoding and the bytes
    after it. A response listing many entries that differ only by name (topics refused
    or unknown) is encoded in a fraction of the time kio takes per entry.
    """

    def __init__(self, entity: Any, field_name: str) -> None:
        self._compact = bool(type(entity).__flexible__)
        empty = encode_entity(dataclasses.replace(entity, **{field_name: ""}))
        probe = encode_entity(dataclasses.replace(entity, **{field_name: "x"}))
        empty_field, probe_field = self._string(""), self._string("x")
        for start in range(len(empty) - len(empty_field) + 1):
            end = start + len(empty_field)
            if (
                empty[start:end] == empty_field
                and probe[:start] == empty[:start]
                and probe[start : start + len(probe_field)] == probe_field
                and probe[start + len(probe_field) :] == empty[end:]
            ):
                self._before, self._after = empty[:start], empty[end:]
                return
        raise ValueError(f"{field_name} is not a string field of {type(entity).__name__}")

    def _string(self, text: str) -> bytes:
        return string_field(text, self._compact)

    def encode(self, text: str) -> bytes:
        return b"".join((self._before, self._string(text), self._after))


# Compact lengths below 0x7F are one byte; prebuilt, they cost a lookup.
_ONE_BYTE = tuple(bytes((value,)) for value in range(0x80))


def array_length(count: int, flexible: bool) -> bytes:
    """An array's (or bytes field's) length as the version writes it: int32, or compact."""
    if not flexible:
        return _SIZE.pack(count)
    if count < 0x7F:  # the usual case: a one-byte varint
        return _ONE_BYTE[count + 1]
    value, out = count + 1, bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_NULL_INT32 = _SIZE.pack(-1)
_STRING_LENGTH = struct.Struct(">h")  # of a non-flexible string
_NULL_STRING = _STRING_LENGTH.pack(-1)
_NULL_COMPACT = b"\x00"


def nullable_length(count: int | None, flexible: bool) -> bytes:
    """A nullable array's (or bytes field's) length; None is null."""
    if count is None:
        return _NULL_COMPACT if flexible else _NULL_INT32
    return array_length(count, flexible)


def string_field(text: str | None, flexible: bool) -> bytes:
    """A (nullable) string field: its length (int16, or compact), then its UTF-8 bytes."""
    if text is None:
        return _NULL_COMPACT if flexible else _NULL_STRING
    data = text.encode()
    return (array_length(len(data), True) if flexible else _STRING_LENGTH.pack(len(data))) + data


def encode_array(items: list[bytes], flexible: bool) -> bytes:
    """An array field of already encoded entities: its length, then the items."""
    return b"".join([array_length(len(items), flexible), *items])


# Envelopes of spliced responses (everything but the correlation id and the array), by
# response: a Produce or Fetch answer's top-level fields are almost always the same.
_envelopes: dict[Any, tuple[bytes, bytes]] = {}
MAX_ENVELOPES = 256


def _envelope(response: Any, suffix_size: int) -> tuple[bytes, bytes]:
    """(the bytes between the correlation id and the spliced array, the bytes after it)."""
    try:
        return _envelopes[response]
    except KeyError:
        cacheable = True
    except TypeError:  # a field that cannot be hashed: worked out each time
        cacheable = False
    frame = encode_response(0, response)
    empty = array_length(0, response.__flexible__)
    end = len(frame) - suffix_size
    start = end - len(empty)
    if frame[start:end] != empty:
        raise ValueError("the spliced array is not where the schema puts it")
    envelope = frame[8:start], frame[end:]
    if cacheable:
        if len(_envelopes) >= MAX_ENVELOPES:
            _envelopes.clear()
        _envelopes[response] = envelope
    return envelope


@dataclass(frozen=True, slots=True)
class FramePieces:
    """An encoded response frame left in pieces (a Fetch answer's record batches are
    views of the log), for a transport that writes them without joining them first:
    joining a many-MB answer means writing it into fresh memory, page by page."""

    pieces: list[bytes | memoryview]
    size: int

    def __len__(self) -> int:
        return self.size

    def joined(self) -> bytes:
        return b"".join(self.pieces)


Encoded = bytes | FramePieces


def _encode_spliced(
    correlation_id: int, spliced: SplicedResponse, *, in_pieces: bool = False
) -> Encoded:
    head, tail = _envelope(spliced.response, spliced.suffix_size)
    items = spliced.items
    count = len(items) if spliced.count is None else spliced.count
    length = array_length(count, spliced.response.__flexible__)
    # the frame's size is counted first, so that its (possibly many-MB) body is copied once
    size = 4 + len(head) + len(length) + sum(map(len, items)) + len(tail)
    pieces = [_SIZE.pack(size), _SIZE.pack(correlation_id), head, length, *items, tail]
    if in_pieces:
        return FramePieces(pieces, size + 4)
    return b"".join(pieces)


@overload
def encode_response(
    correlation_id: int,
    response: Any,
    version: int | None = None,
    *,
    in_pieces: Literal[False] = ...,
) -> bytes: ...
@overload
def encode_response(
    correlation_id: int, response: Any, version: int | None = None, *, in_pieces: bool
) -> Encoded: ...
def encode_response(
    correlation_id: int, response: Any, version: int | None = None, *, in_pieces: bool = False
) -> Encoded:
    """Serialise a response body with the header its API and version call for. A
    `version` other than the response class's is a legacy version built with its proxy
    class (protocol/legacy.py). With `in_pieces`, a spliced response comes back as
    FramePieces."""
    if type(response) is SplicedResponse:
        if version is not None and version != response.response.__version__:
            raise TypeError("a legacy version's response cannot be spliced")
        return _encode_spliced(correlation_id, response, in_pieces=in_pieces)
    if version is not None and version != response.__version__:
        return legacy.encode_response(correlation_id, response, response.__api_key__, version)
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")  # frame size, patched below
    header_cls = _response_header_class(response.__api_key__, response.__flexible__)
    _writer(header_cls)(out, header_cls(correlation_id=i32(correlation_id)))
    _writer(type(response))(out, response)
    return _finish_frame(out)


def encode_request(header: RequestHeader, request: Any) -> bytes:
    """Serialise a request with its header (used by tests and the benchmark client); a
    header version other than the request class's is a legacy version (its proxy class)."""
    if header.api_version != request.__version__:
        return legacy.encode_request(
            header.api_key, header.api_version, header.correlation_id, header.client_id, request
        )
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


def decode_response(frame: bytes | memoryview, api_key: int, version: int) -> tuple[int, Any]:
    """Decode a response frame body (without the size prefix): correlation id and body
    (of a legacy version, as an entity of its proxy class)."""
    if legacy.is_legacy(api_key, version):
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        return correlation_id, legacy.read_response_body(frame, _SIZE.size, api_key, version)
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
