"""Bounds pass over a request frame, run before kio's native reader ever sees it.

Why: kio's Rust reader reserves memory for an array's *declared* item count before it
reads a single item. One 18-byte Metadata v12 frame whose topics count is the varint
`ff ff ff ff 0f` asks for 34 GB and the allocator aborts the process (SIGABRT, which
Python cannot catch); an int32 count of 2**31-1 asks for 17 GB. So every frame is walked
here first, with no allocation per declared length, and refused unless every length in
it fits in the bytes it holds.

What is checked, following the request's kio schema class field by field (the same
classes, metadata and rules kio's reader uses, so both walk the frame identically):
- request header v1/v2: api key, version, correlation id, client id (a nullable int16
  string in both versions, as Kafka special-cases it), and v2's tagged-field section;
- array counts (int32, -1 = null; or compact unsigned varint, 0 = null, else count + 1):
  at most the bytes left divided by the smallest encoding of one item (at least 1);
  null only where the schema allows it. (A compact count under 127, one varint byte, is
  not compared up front: walking its items finds a short frame just the same, and it
  cannot make kio reserve much.)
- string, bytes and records lengths (int16/int32, -1 = null, or compact varint minus 1):
  at most the bytes left; null only where the schema allows it;
- nullable structs (int8 marker, -1 = null), uuids and fixed-width primitives;
- tagged-field sections: the tag count (at most the bytes left / 2), then per tag its id
  and size varints, the size within the bytes left; a tag the schema knows (and kio
  decodes) is walked with its field's schema and must fill exactly its declared size, an
  unknown one is skipped by size;
- unsigned varints: at most 5 bytes and at most 32 bits (request schemas have no varlong).

Every failure raises `InvalidRequest`; the dispatcher closes the connection on it, which
is what Kafka does with a frame it cannot parse. Bytes after the body are not looked at:
Kafka ignores them and so does the decoder (see `messages.decode_request`).

How: each request class is compiled once into a small Python function and cached
(`request_checker`; `checker_source` shows the code). Nested structs are inlined,
fixed-width fields cost nothing at run time (their sizes are folded into constant
offsets), arrays of variable-size items get one loop each, and arrays of fixed-size items
are skipped in one step (for flexible structs: when every item's tag section is empty,
tested on a strided slice, one byte per item). The cost per frame is a few dozen integer
operations on the frame's bytes, with no objects per field and no copy of the frame:
about 1 us for a one-partition Produce, 2 us for a 256-partition Fetch.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import Field, dataclass, fields, is_dataclass
from functools import cache
from types import NoneType, UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

__all__ = [
    "Checker",
    "InvalidRequest",
    "check_header",
    "check_request",
    "checker_source",
    "header_checker",
    "request_checker",
    "uvarint",
]


class InvalidRequest(Exception):
    """A frame that cannot be decoded as a request; the connection gets closed."""


Buffer = bytes | memoryview
Checker = Callable[[Buffer], int]
"""Walks a whole frame (header and body); returns the offset where the body starts."""

_TagWalker = Callable[[Buffer, int, int], int]
_T = TypeVar("_T")

_i32 = struct.Struct(">i").unpack_from

# Encoded size of kio's fixed-width kafka types.
_FIXED: dict[str, int] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_BLOBS = frozenset({"string", "bytes", "records"})


# --- runtime helpers called by the generated code ---------------------------------------
# The generated code handles the common case inline (a one-byte varint, an empty tag
# section) and calls these for the rest.


def uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes and 32 bits; returns (value, new position)."""
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    byte = buf[pos + 1]
    if byte < 0x80:
        return value | byte << 7, pos + 2
    value |= (byte & 0x7F) << 7
    byte = buf[pos + 2]
    if byte < 0x80:
        return value | byte << 14, pos + 3
    value |= (byte & 0x7F) << 14
    byte = buf[pos + 3]
    if byte < 0x80:
        return value | byte << 21, pos + 4
    value |= (byte & 0x7F) << 21
    byte = buf[pos + 4]
    if byte > 0x0F:  # a continuation bit, or bits past the 32nd
        raise InvalidRequest(f"varint at offset {pos} is longer than 5 bytes or 32 bits")
    return value | byte << 28, pos + 5


def _compact_blob(buf: Buffer, pos: int, end: int, nullable: bool, where: str) -> int:
    """A compact string/bytes that is null or 127+ bytes long; returns the position after."""
    size, pos = uvarint(buf, pos)
    if size == 0:
        if nullable:
            return pos
        raise _null(where)
    pos += size - 1
    if pos > end:
        raise _too_long(where, pos, end)
    return pos


def _compact_count(
    buf: Buffer, pos: int, end: int, item_size: int, nullable: bool, where: str
) -> tuple[int, int]:
    """A compact array count that is null (returned as -1) or over 126 items, which must
    fit in the bytes left at `item_size` bytes or more each."""
    count, pos = uvarint(buf, pos)
    if count == 0:
        if nullable:
            return -1, pos
        raise _null(where)
    count -= 1
    if count > (end - pos) // item_size:
        raise _too_many(where, count, end - pos)
    return count, pos


def _tags(buf: Buffer, pos: int, end: int, known: dict[int, _TagWalker], where: str) -> int:
    """A tagged-field section; returns the position after it."""
    count, pos = uvarint(buf, pos)
    if count > (end - pos) // 2:  # a tag takes at least its id and its size
        raise InvalidRequest(f"{where}: {count} tagged fields in {end - pos} bytes")
    for _ in range(count):
        tag, pos = uvarint(buf, pos)
        size, pos = uvarint(buf, pos)
        if size > end - pos:
            raise InvalidRequest(f"{where}: tag {tag} of {size} bytes, {end - pos} left")
        walk = known.get(tag)
        if walk is not None and walk(buf, pos, pos + size) != pos + size:
            raise InvalidRequest(f"{where}: tag {tag} does not fill its {size} bytes")
        pos += size
    return pos


def _too_long(where: str, pos: int, end: int) -> InvalidRequest:
    return InvalidRequest(f"{where}: declared length runs {pos - end} bytes past the frame")


def _null(where: str) -> InvalidRequest:
    return InvalidRequest(f"{where}: null where the schema does not allow it")


def _bad_length(where: str, value: int) -> InvalidRequest:
    return InvalidRequest(f"{where}: invalid length {value}")


def _too_many(where: str, count: int, left: int) -> InvalidRequest:
    return InvalidRequest(f"{where}: {count} items cannot fit in {max(left, 0)} bytes")


_RUNTIME: dict[str, Any] = {
    "InvalidRequest": InvalidRequest,
    "StructError": struct.error,
    "_i32": _i32,
    "_uvarint": uvarint,
    "_compact_blob": _compact_blob,
    "_compact_count": _compact_count,
    "_tags": _tags,
    "_too_long": _too_long,
    "_null": _null,
    "_bad_length": _bad_length,
    "_too_many": _too_many,
}


# --- the schema, as the walker sees it --------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fixed:
    size: int


@dataclass(frozen=True, slots=True)
class _Blob:
    """A string, bytes or records: `width` 0 = compact varint length, else int16/int32."""

    width: int
    nullable: bool


@dataclass(frozen=True, slots=True)
class _Struct:
    cls: type[Any]
    nullable: bool


@dataclass(frozen=True, slots=True)
class _Array:
    item: _Fixed | _Blob | _Struct
    compact: bool
    nullable: bool


_Kind = _Fixed | _Blob | _Struct | _Array


def _primitive(kafka_type: str, flexible: bool, nullable: bool, where: str) -> _Fixed | _Blob:
    if kafka_type in _FIXED:
        return _Fixed(_FIXED[kafka_type])
    if kafka_type in _BLOBS:
        width = 0 if flexible else 2 if kafka_type == "string" else 4
        return _Blob(width, nullable)
    raise TypeError(f"{where}: no bounds rule for kafka type {kafka_type!r}")


def _may_be_none(annotation: Any) -> bool:
    return get_origin(annotation) in (UnionType, Union) and NoneType in get_args(annotation)


def _kind(cls: type[Any], field: Field[Any], tagged: bool) -> _Kind:
    """How kio reads this field (mirrors kio's field-schema rules)."""
    flexible: bool = cls.__flexible__
    where = f"{cls.__qualname__}.{field.name}"
    if cls.__name__ == "RequestHeader" and field.name == "client_id":
        return _Blob(2, True)  # always a nullable int16 string, even in header v2
    shape = classify_field(field)
    if isinstance(shape, PrimitiveField):
        # kio reads a tagged primitive as non-nullable: its absence is the null.
        nullable = is_optional(field) and not tagged
        return _primitive(get_schema_field_type(field), flexible, nullable, where)
    if isinstance(shape, EntityField):
        return _Struct(shape.type_, is_optional(field))
    item: _Fixed | _Blob | _Struct
    if isinstance(shape, PrimitiveTupleField):
        item = _primitive(get_schema_field_type(field), flexible, False, where)
    elif isinstance(shape, EntityTupleField):
        item = _Struct(shape.type_, False)
    else:  # pragma: no cover - kio has no other field classes
        raise TypeError(f"{where}: unknown field class {shape!r}")
    return _Array(item, flexible, _may_be_none(field.type))


_Fields = tuple[tuple[str, _Kind], ...]
_Tagged = tuple[tuple[int, str, _Kind], ...]


def _per_class(build: Callable[[type[Any]], _T]) -> Callable[[type[Any]], _T]:
    """Cache `build` per class (functools.cache works too, but mypy does not see classes
    as hashable)."""
    built: dict[type[Any], _T] = {}

    def get(cls: type[Any]) -> _T:
        try:
            return built[cls]
        except KeyError:
            result = built[cls] = build(cls)
            return result

    get.__doc__ = build.__doc__
    setattr(get, "cache_clear", built.clear)  # noqa: B010  (as functools.cache offers)
    return get


@_per_class
def _layout(cls: type[Any]) -> tuple[_Fields, _Tagged]:
    """(name, kind) of the fields in wire order, and (tag, name, kind) of the tagged ones."""
    plain: list[tuple[str, _Kind]] = []
    tagged: list[tuple[int, str, _Kind]] = []
    for field in fields(cls):
        tag = get_field_tag(field)
        if tag is None:
            plain.append((field.name, _kind(cls, field, tagged=False)))
        else:
            tagged.append((int(tag), field.name, _kind(cls, field, tagged=True)))
    return tuple(plain), tuple(tagged)


@cache
def _min_size(kind: _Kind) -> int:
    """The fewest bytes an encoding of `kind` can take (at least 1)."""
    if isinstance(kind, _Fixed):
        return kind.size
    if isinstance(kind, _Blob):
        return kind.width or 1
    if isinstance(kind, _Array):
        return 1 if kind.compact else 4
    if kind.nullable:
        return 1
    plain, _ = _layout(kind.cls)
    size = sum(_min_size(k) for _, k in plain) + (1 if kind.cls.__flexible__ else 0)
    return max(size, 1)


@_per_class
def _fixed_part(cls: type[Any]) -> int | None:
    """Bytes of the untagged fields when they are all fixed-width, else None."""
    plain, _ = _layout(cls)
    if not all(isinstance(k, _Fixed) for _, k in plain):
        return None
    return sum(k.size for _, k in plain if isinstance(k, _Fixed))


# --- code generation --------------------------------------------------------------------


class _Writer:
    """Emits the body of one generated function.

    In the generated code `buf` is the frame, `end` its length, and the walk is at
    `pos + k`, where `k` is an offset known at generation time (`self.k`): fixed-width
    fields only add to it, so they cost nothing at run time. Reading past the frame
    raises IndexError or struct.error, which the caller turns into InvalidRequest.
    """

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.lines: list[str] = []
        self.namespace = namespace
        self.depth = 0  # array nesting, for the names of count variables
        self.k = 0

    def line(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def at(self, extra: int = 0) -> str:
        """The expression for the walk's position, plus `extra`."""
        offset = self.k + extra
        return f"pos + {offset}" if offset else "pos"

    def minus_k(self) -> str:
        return f" - {self.k}" if self.k else ""

    def restore(self, indent: int, k: int) -> None:
        """Make the pending offset `k` again (the end of a loop body or a branch)."""
        if self.k != k:
            self.line(indent, f"pos += {self.k - k}")
            self.k = k

    def constant(self, value: Any, prefix: str) -> str:
        name = f"{prefix}{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def struct(self, indent: int, cls: type[Any], where: str) -> None:
        plain, tagged = _layout(cls)
        for name, kind in plain:
            self.field(indent, kind, f"{where}.{name}")
        if cls.__flexible__:
            known = {tag: _tag_walker(kind, f"{where}.{name}") for tag, name, kind in tagged}
            table = self.constant(known, "_known")
            self.line(indent, f"if buf[{self.at()}]:  # tagged fields (else one 0 byte)")
            self.line(
                indent + 1,
                f"pos = _tags(buf, {self.at()}, end, {table}, {where!r}) - {self.k + 1}",
            )
            self.k += 1

    def field(self, indent: int, kind: _Kind, where: str) -> None:
        if isinstance(kind, _Fixed):
            self.k += kind.size
        elif isinstance(kind, _Blob):
            self.blob(indent, kind, where)
        elif isinstance(kind, _Array):
            self.array(indent, kind, where)
        elif kind.nullable:
            self.line(indent, f"if buf[{self.at()}] != 0xFF:  # int8 -1 is null")
            self.k += 1
            k = self.k
            self.struct(indent + 1, kind.cls, where)
            self.restore(indent + 1, k)
        else:
            self.struct(indent, kind.cls, where)

    def blob(self, indent: int, kind: _Blob, where: str) -> None:
        w = repr(where)
        if kind.width == 0:
            # Length + 1 in one varint byte: that byte and the bytes it counts, in one
            # step (a short overrun is caught by the next read or the final check).
            self.line(indent, f"n = buf[{self.at()}]")
            if kind.nullable:
                self.line(indent, "if n < 0x80:")
                self.line(indent + 1, "pos += n or 1  # 0: null, one byte")
            else:
                self.line(indent, "if 0 < n < 0x80:")
                self.line(indent + 1, "pos += n")
            self.line(indent, "else:")
            self.line(
                indent + 1,
                f"pos = _compact_blob(buf, {self.at()}, end, {kind.nullable}, {w})"
                + self.minus_k(),
            )
            return
        if kind.width == 2:
            self.line(indent, f"n = buf[{self.at()}] << 8 | buf[{self.at(1)}]")
            self.line(indent, "if n < 0x8000:")
        else:
            self.line(indent, f"n = _i32(buf, {self.at()})[0]")
            self.line(indent, "if n > 0:")
        self.k += kind.width
        self.line(indent + 1, "pos += n")
        self.line(indent + 1, f"if pos > end - {self.k}:")
        self.line(indent + 2, f"raise _too_long({w}, {self.at()}, end)")
        # Negative: -1 is null, anything else is malformed.
        if kind.width == 2 and kind.nullable:
            self.line(indent, "elif n != 0xFFFF:")
            self.line(indent + 1, f"raise _bad_length({w}, n - 0x10000)")
        elif kind.width == 2:
            self.line(indent, "else:")
            self.line(
                indent + 1, f"raise _null({w}) if n == 0xFFFF else _bad_length({w}, n - 0x10000)"
            )
        elif kind.nullable:
            self.line(indent, "elif n < -1:")
            self.line(indent + 1, f"raise _bad_length({w}, n)")
        else:
            self.line(indent, "elif n < 0:")
            self.line(indent + 1, f"raise _null({w}) if n == -1 else _bad_length({w}, n)")

    def array(self, indent: int, kind: _Array, where: str) -> None:
        self.depth += 1
        count = f"c{self.depth}"
        w = repr(where)
        item_size = _min_size(kind.item)
        if kind.compact:
            # A count that fits in one varint byte (under 127) is not compared with the
            # bytes left up front: walking its items finds a short frame as well, and
            # it cannot make kio reserve much. Longer counts are, in _compact_count.
            self.line(indent, f"{count} = buf[{self.at()}] - 1")
            self.line(indent, f"if not 0 <= {count} < 0x7F:  # null, or a longer varint")
            self.line(
                indent + 1,
                f"{count}, pos = _compact_count(buf, {self.at()}, end, {item_size}, "
                f"{kind.nullable}, {w})",
            )
            self.line(indent + 1, f"pos -= {self.k + 1}")
            self.k += 1
            self.items(indent, kind.item, count, where + "[]")
        else:
            self.line(indent, f"{count} = _i32(buf, {self.at()})[0]")
            self.k += 4
            self.line(indent, f"if {count} > 0:")
            left = f"end - pos - {self.k}"
            limit = f"({left}) // {item_size}" if item_size > 1 else left
            self.line(indent + 1, f"if {count} > {limit}:")
            self.line(indent + 2, f"raise _too_many({w}, {count}, {left})")
            self.items(indent + 1, kind.item, count, where + "[]")
            if kind.nullable:
                self.line(indent, f"elif {count} < -1:")
                self.line(indent + 1, f"raise _bad_length({w}, {count})")
            else:
                self.line(indent, f"elif {count} < 0:")
                self.line(
                    indent + 1,
                    f"raise _null({w}) if {count} == -1 else _bad_length({w}, {count})",
                )
        self.depth -= 1

    def items(self, indent: int, item: _Fixed | _Blob | _Struct, count: str, where: str) -> None:
        """`count` items; nothing when `count` is 0 or -1 (null)."""
        k = self.k
        fixed = None if isinstance(item, _Blob | _Struct) else item.size
        if isinstance(item, _Struct) and not item.nullable:
            fixed = _fixed_part(item.cls)
        if fixed is not None and not (isinstance(item, _Struct) and item.cls.__flexible__):
            self.line(indent, f"if {count} > 0:")
            self.line(indent + 1, f"pos += {count} * {fixed}")
            return
        if fixed is not None:
            # Fixed fields, then a tag section that is nearly always empty (one 0 byte):
            # when every item's tag count is 0, skip them all at once. (Were the frame
            # shorter than `count * stride`, the slice would be too, and fail the test.)
            stride = fixed + 1
            self.line(indent, f"if {count} > 0:")
            indent += 1
            self.line(indent, f"stop = pos + {count} * {stride}")
            stop = f"stop + {k}" if k else "stop"
            self.line(
                indent, f"if bytes(buf[{self.at(fixed)}:{stop}:{stride}]).count(0) == {count}:"
            )
            self.line(indent + 1, "pos = stop")
            self.line(indent, "else:")
            indent += 1
        self.line(indent, f"while {count} > 0:")
        self.line(indent + 1, f"{count} -= 1")
        self.field(indent + 1, item, where)
        self.restore(indent + 1, k)


def _tag_walker(kind: _Kind, where: str) -> _TagWalker:
    """A function walking one known tagged field: (buf, pos, end) -> position after it."""
    namespace = dict(_RUNTIME)
    writer = _Writer(namespace)
    writer.field(1, kind, where)
    source = "\n".join(["def walk(buf, pos, end):", *writer.lines, f"    return {writer.at()}", ""])
    exec(compile(source, f"<bounds {where}>", "exec"), namespace)
    walker: _TagWalker = namespace["walk"]
    return walker


def _source(header: type[Any], body: type[Any] | None, namespace: dict[str, Any]) -> str:
    writer = _Writer(namespace)
    writer.struct(2, header, "RequestHeader")
    writer.line(2, f"body = {writer.at()}")
    if body is not None:
        writer.struct(2, body, body.__qualname__)
    truncated = repr(("request header" if body is None else body.__qualname__) + ": truncated")
    return "\n".join(
        [
            "def check(buf):",
            "    end = len(buf)",
            "    pos = 0",
            "    try:",
            *writer.lines,
            "    except (IndexError, StructError):",
            f"        raise InvalidRequest({truncated}) from None",
            f"    if pos > end - {writer.k}:",
            f"        raise InvalidRequest({truncated})",
            "    return body",
            "",
        ]
    )


def _compile(header: type[Any], body: type[Any] | None) -> Checker:
    namespace = dict(_RUNTIME)
    source = _source(header, body, namespace)
    name = "header" if body is None else body.__module__
    exec(compile(source, f"<bounds {name}>", "exec"), namespace)
    checker: Checker = namespace["check"]
    return checker


def _header_class(flexible: bool) -> type[Any]:
    return RequestHeaderV2 if flexible else RequestHeaderV1


# --- public API -------------------------------------------------------------------------


@_per_class
def request_checker(cls: type[Any]) -> Checker:
    """The compiled bounds pass for a kio request class (built once, then cached)."""
    if not is_dataclass(cls) or not hasattr(cls, "__flexible__"):
        raise TypeError(f"{cls!r} is not a kio schema class")
    return _compile(_header_class(cls.__flexible__), cls)


@cache
def header_checker(flexible: bool) -> Checker:
    """The bounds pass for the request header alone (v2 when flexible, else v1)."""
    return _compile(_header_class(flexible), None)


def check_request(frame: Buffer, cls: type[Any]) -> int:
    """Walk header and body of `frame` (no size prefix); return where the body starts.

    Raises InvalidRequest unless every declared length fits in the frame.
    """
    return request_checker(cls)(frame)


def check_header(frame: Buffer, flexible: bool) -> int:
    """Walk the request header; return where the body starts. Raises InvalidRequest."""
    return header_checker(flexible)(frame)


def checker_source(cls: type[Any] | None, flexible: bool = False) -> str:
    """The generated code for a request class (or the header alone), for reading."""
    if cls is None:
        return _source(_header_class(flexible), None, dict(_RUNTIME))
    return _source(_header_class(cls.__flexible__), cls, dict(_RUNTIME))
