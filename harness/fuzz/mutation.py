"""Mutation of captured client frames: wire facts, guessed length fields, and the
`Mutator`, whose `mutation(index)` is a pure function of (corpus, seed, index): hostile
integers, hostile varints, bit flips, truncation, garbage, duplicated regions,
version/API swaps, and (preferred) guessed length fields set to hostile values. The size
prefix matches the mutated body most of the time, so the broker parses the body.
"""

from __future__ import annotations

import dataclasses
import io
import random
import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

from kio.index import KioIndexError, load_request_schema
from kio.schema.index import api_key_map
from kio.serial import entity_reader, entity_writer

# --- wire facts --------------------------------------------------------------------

_HEAD = struct.Struct(">hhi")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
FETCH, JOIN_GROUP, SYNC_GROUP, PRODUCE, API_VERSIONS = 1, 11, 14, 0, 18
SHARE_FETCH = 78
LONG_POLL_KEYS = frozenset({FETCH, JOIN_GROUP, SYNC_GROUP, SHARE_FETCH})
MAX_FRAME_BYTES = 100 * 1024 * 1024  # the broker's default socket.request.max.bytes
MAX_RESPONSE_BYTES = 512 * 1024 * 1024

# A request sent behind every mutated Produce: acks=0 gets no answer, so the probe's
# answer says the Produce was handled (responses leave in request order).
PROBE_CORRELATION_ID = 0x50524F42  # "PROB"
_PROBE_BODY = _HEAD.pack(API_VERSIONS, 0, PROBE_CORRELATION_ID) + INT16.pack(5) + b"probe"
PROBE_FRAME = INT32.pack(len(_PROBE_BODY)) + _PROBE_BODY

HOSTILE_INT16 = (0x7FFF, -0x8000, -1, 0x7FFE, -2, 0, 0xFF)
HOSTILE_INT32 = (
    0x7FFFFFFF,
    -0x80000000,
    -1,
    0xFFFF,
    0x7FFF,
    0,
    -2,
    0x10000000,
    0x7FFFFFFE,
    0x01000000,
)
HOSTILE_VARINTS = (
    b"\xff\xff\xff\xff\x0f",  # 2**32 - 1 (a compact length of 4 GiB; zigzag -2**31)
    b"\x80\x80\x80\x80\x10",  # 2**32: overflows 32 bits
    b"\xfe\xff\xff\xff\x07",  # 2**31 - 2
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # 2**64 - 1, ten bytes
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # eleven bytes, never ends in time
    b"\xff\xff\xff\xff",  # cut off mid-varint
)


def short_hex(data: bytes, limit: int = 1024) -> str:
    """The frame as hex, cut in the middle when long (FuzzReport.save keeps it whole)."""
    text = data.hex()
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}...({len(data)} bytes)...{text[-half:]}"


@dataclass(frozen=True, slots=True)
class Head:
    api_key: int
    api_version: int
    correlation_id: int

    @property
    def api(self) -> str:
        return api_label(self.api_key, self.api_version)


def api_label(api_key: int, api_version: int) -> str:
    name = api_key_map.get(api_key)
    camel = "".join(part.title() for part in name.split("_")) if name else f"api{api_key}"
    return f"{camel} v{api_version}"


def head_of(body: bytes | bytearray) -> Head | None:
    if len(body) < _HEAD.size:
        return None
    return Head(*_HEAD.unpack_from(body, 0))


@cache
def is_flexible(api_key: int, api_version: int) -> bool | None:
    """Whether kio says this request version is flexible; None for unknown versions."""
    try:
        return bool(load_request_schema(api_key, api_version).__flexible__)
    except (KioIndexError, Exception):
        return None


def read_uvarint(data: bytes | bytearray, offset: int, limit: int = 5) -> tuple[int, int] | None:
    """An unsigned varint at `offset`: (value, size), or None if cut off or too long."""
    value = shift = 0
    for size in range(1, limit + 1):
        if offset + size > len(data):
            return None
        byte = data[offset + size - 1]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, size
        shift += 7
    return None


def encode_uvarint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def header_end(body: bytes | bytearray, flexible: bool) -> int | None:
    """Where the request body starts after header v1 (or v2 when flexible)."""
    if len(body) < 10:
        return None
    (client_id_length,) = INT16.unpack_from(body, 8)
    offset = 10 + max(client_id_length, 0)
    if not flexible:
        return offset if offset <= len(body) else None
    tagged = read_uvarint(body, offset)
    if tagged is None:
        return None
    count, size = tagged
    offset += size
    for _ in range(min(count, 64)):
        tag = read_uvarint(body, offset)
        if tag is None:
            return None
        offset += tag[1]
        length = read_uvarint(body, offset)
        if length is None:
            return None
        offset += length[1] + length[0]
    return offset if offset <= len(body) else None


def fetch_max_wait_ms(body: bytes | bytearray) -> int | None:
    """The max_wait a Fetch or ShareFetch request declares, if the frame is parseable
    that far."""
    head = head_of(body)
    if head is None or head.api_key not in (FETCH, SHARE_FETCH):
        return None
    flexible = is_flexible(head.api_key, head.api_version)
    if flexible is None:
        return None
    offset = header_end(body, flexible)
    if offset is None:
        return None
    if head.api_key == SHARE_FETCH:
        for _ in range(2):  # group_id and member_id, compact strings
            length = read_uvarint(body, offset)
            if length is None:
                return None
            offset += length[1] + max(length[0] - 1, 0)
        offset += 4  # share_session_epoch
    elif head.api_version < 15:
        offset += 4  # replica_id
    if offset + 4 > len(body):
        return None
    return int(INT32.unpack_from(body, offset)[0])


# --- length fields: where a frame declares how much follows ------------------------


@dataclass(frozen=True, slots=True)
class LengthField:
    offset: int
    width: int  # 2 or 4 for int16 / int32, 0 for an unsigned varint
    size: int  # bytes the field occupies
    value: int
    strong: bool  # a string whose bytes are printable, or bytes that run to the end


_PRINTABLE = bytes(range(0x20, 0x7F))


def _printable(data: bytes | bytearray, start: int, length: int) -> bool:
    chunk = data[start : start + length]
    return len(chunk) == length and not chunk.translate(None, _PRINTABLE)


def find_length_fields(
    body: bytes | bytearray, flexible: bool | None, scan_limit: int = 4096
) -> list[LengthField]:
    """Guess the length and count fields of a request: int16 string lengths followed by
    that many printable bytes, int32 counts/lengths that fit the remaining bytes, nulls
    (-1), and in flexible versions the varint lengths of compact strings and arrays."""
    found: list[LengthField] = []
    end = len(body)
    for offset in range(8, min(end - 1, scan_limit)):
        remaining = end - offset
        (v16,) = INT16.unpack_from(body, offset)
        if v16 == -1:
            found.append(LengthField(offset, 2, 2, -1, False))
        elif 0 < v16 <= remaining - 2 and _printable(body, offset + 2, v16):
            found.append(LengthField(offset, 2, 2, v16, True))
        elif v16 == 0 and remaining >= 2:
            found.append(LengthField(offset, 2, 2, 0, False))
        if remaining >= 4:
            (v32,) = INT32.unpack_from(body, offset)
            if v32 == -1:
                found.append(LengthField(offset, 4, 4, -1, False))
            elif 0 < v32 <= remaining - 4 and (v32 <= 64 or v32 >= remaining - 96):
                found.append(LengthField(offset, 4, 4, v32, v32 >= remaining - 96))
        if flexible:
            varint = read_uvarint(body, offset)
            if varint is not None:
                value, size = varint
                if value >= 2 and value - 1 <= remaining - size:
                    text = _printable(body, offset + size, value - 1)
                    to_end = size > 1 and value - 1 >= remaining - size - 96
                    if text or to_end:
                        found.append(LengthField(offset, 0, size, value, True))
                    elif value <= 8 and body[offset - 1] == 0:
                        found.append(LengthField(offset, 0, size, value, False))
    return found


# --- mutations ---------------------------------------------------------------------

OPS: tuple[str, ...] = (
    "length",
    "int",
    "varint",
    "flip",
    "truncate",
    "extend",
    "duplicate",
    "version",
    "field",
)
OP_WEIGHTS: tuple[int, ...] = (31, 14, 9, 12, 7, 5, 5, 9, 12)

# "field": decode the frame with kio, give one field a hostile but well-formed value and
# encode it again, so the request reaches its handler instead of the decoder.
_INT_LIMITS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_HOSTILE_STRINGS = (
    "",
    "\x00",
    "x" * 32767,
    "é" * 300,
    "../../etc/passwd",
    "__consumer_offsets",
    "a.b_c-D" * 30,
    " ",
)


@dataclass(frozen=True, slots=True)
class Mutation:
    index: int
    source: int  # corpus frame it was made from
    ops: tuple[str, ...]
    data: bytes  # what goes on the wire: size prefix and body
    declared: int  # the size prefix

    @property
    def body(self) -> bytes:
        return self.data[4:]

    @property
    def consistent(self) -> bool:
        return self.declared == len(self.data) - 4

    @property
    def head(self) -> Head | None:
        return head_of(self.body)

    def describe(self) -> str:
        head = self.head
        api = head.api if head else "(no header)"
        prefix = "" if self.consistent else f", size prefix {self.declared}"
        return (
            f"mutation #{self.index} ({api}, {len(self.data) - 4} bytes{prefix}, "
            f"ops {'+'.join(self.ops)}, from corpus frame {self.source})"
        )


class Mutator:
    """Deterministic: `mutation(i)` depends only on the corpus, the seed and i."""

    def __init__(
        self,
        frames: Sequence[bytes],
        seed: int,
        versions: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        if not frames:
            raise ValueError("an empty corpus cannot be mutated")
        self.bodies = [bytes(frame[4:]) for frame in frames]
        self.seed = seed
        self.versions = dict(versions or {})
        self._api_keys = sorted(self.versions)
        self._fields: dict[int, tuple[list[LengthField], list[LengthField]]] = {}
        self._entities: dict[int, tuple[bytes, Any] | None] = {}

    def _fields_of(self, source: int) -> tuple[list[LengthField], list[LengthField]]:
        cached = self._fields.get(source)
        if cached is None:
            cached = _split(_fields(self.bodies[source]))
            self._fields[source] = cached
        return cached

    def mutation(self, index: int) -> Mutation:
        rng = random.Random(f"{self.seed}:{index}")
        source = rng.randrange(len(self.bodies))
        original = self.bodies[source]
        body = bytearray(original)
        count = rng.choices((1, 2, 3), weights=(70, 20, 10))[0]
        ops: list[str] = []
        for _ in range(count):
            op = rng.choices(OPS, weights=OP_WEIGHTS)[0]
            if op == "length":
                # Fields found in the unmutated frame; an earlier op may have moved them.
                self._length(body, rng, self._fields_of(source))
            elif op == "field":
                rewritten = self._field(source, rng) if not ops else None
                if rewritten is None:
                    self._int(body, rng)
                    op = "int"
                else:
                    body[:] = rewritten
            else:
                getattr(self, "_" + op)(body, rng)
            ops.append(op)
        declared = len(body)
        if rng.random() < 0.08:
            declared = rng.choice(
                (
                    len(original),
                    len(body) + 1,
                    len(body) - 1,
                    len(body) + rng.randint(2, 4096),
                    rng.randint(0, max(len(body) - 1, 0)),
                    0,
                    -1,
                    0x7FFFFFFF,
                    MAX_FRAME_BYTES + 1,
                    MAX_FRAME_BYTES,
                )
            )
            if declared != len(body):
                ops.append("size")
        return Mutation(index, source, tuple(ops), INT32.pack(declared) + bytes(body), declared)

    # one method per op; each edits `body` in place

    def _length(
        self,
        body: bytearray,
        rng: random.Random,
        fields: tuple[list[LengthField], list[LengthField]],
    ) -> None:
        strong, weak = fields
        pool = strong if strong and (not weak or rng.random() < 0.7) else weak
        if not pool:
            self._int(body, rng)
            return
        target = rng.choice(pool)
        if target.offset + target.size > len(body):
            self._int(body, rng)
            return
        remaining = len(body) - target.offset - target.size
        if target.width == 0:
            choices = [
                *HOSTILE_VARINTS[:4],
                encode_uvarint(target.value + 1),
                encode_uvarint(max(target.value - 1, 0)),
                encode_uvarint(remaining + 2),
                encode_uvarint(remaining * 1000 + 2),
                b"\x00",
            ]
            body[target.offset : target.offset + target.size] = rng.choice(choices)
            return
        hostile = HOSTILE_INT16 if target.width == 2 else HOSTILE_INT32
        value = rng.choice(
            (
                *hostile,
                target.value + 1,
                target.value - 1,
                remaining + 1,
                remaining * 2 + 1,
                rng.choice(hostile),
            )
        )
        _put_int(body, target.offset, target.width, value)

    def _decoded(self, source: int) -> tuple[bytes, Any] | None:
        if source not in self._entities:
            self._entities[source] = _decode(self.bodies[source])
        return self._entities[source]

    def _field(self, source: int, rng: random.Random) -> bytes | None:
        decoded = self._decoded(source)
        if decoded is None:
            return None
        header, entity = decoded
        leaves = list(_leaves(entity))
        if not leaves:
            return None
        path, spec, value = rng.choice(leaves)
        replacement = _hostile_value(spec, value, rng)
        try:
            mutated = _replace(entity, path, replacement)
            out = io.BytesIO()
            entity_writer(type(mutated))(out, mutated)
        except Exception:
            return None
        encoded = out.getvalue()
        if len(encoded) > 4 * 1024 * 1024:
            return None
        return header + encoded

    def _int(self, body: bytearray, rng: random.Random) -> None:
        if not body:
            body.extend(INT32.pack(rng.choice(HOSTILE_INT32)))
            return
        width = rng.choice((2, 4))
        offset = rng.randrange(len(body))
        current = int.from_bytes(body[offset : offset + width].ljust(width, b"\0"), "big")
        hostile = HOSTILE_INT16 if width == 2 else HOSTILE_INT32
        value = rng.choice((*hostile, current + 1, current - 1, len(body) - offset - width + 1, 0))
        _put_int(body, offset, width, value)

    def _varint(self, body: bytearray, rng: random.Random) -> None:
        varint = rng.choice(HOSTILE_VARINTS)
        offset = rng.randrange(len(body) + 1)
        if rng.random() < 0.5:
            body[offset : offset + len(varint)] = varint
        else:
            body[offset:offset] = varint

    def _flip(self, body: bytearray, rng: random.Random) -> None:
        if not body:
            return
        for _ in range(rng.randint(1, 8)):
            bit = rng.randrange(len(body) * 8)
            body[bit // 8] ^= 1 << (bit % 8)

    def _truncate(self, body: bytearray, rng: random.Random) -> None:
        if body:
            del body[rng.randrange(len(body)) :]

    def _extend(self, body: bytearray, rng: random.Random) -> None:
        count = rng.randint(1, 64)
        kind = rng.randrange(4)
        if kind == 0:
            body += rng.randbytes(count)
        elif kind == 1:
            body += b"\xff" * count
        elif kind == 2:
            body += b"\x00" * count
        else:
            body += b"".join(INT32.pack(rng.choice(HOSTILE_INT32)) for _ in range(count // 4 + 1))

    def _duplicate(self, body: bytearray, rng: random.Random) -> None:
        if not body:
            return
        start = rng.randrange(len(body))
        end = min(len(body), start + rng.randint(1, 256))
        region = bytes(body[start:end])
        at = rng.randrange(len(body) + 1)
        body[at:at] = region * rng.choice((1, 1, 2, 8))

    def _version(self, body: bytearray, rng: random.Random) -> None:
        if len(body) < 4:
            self._int(body, rng)
            return
        (api_key,) = INT16.unpack_from(body, 0)
        if self._api_keys and rng.random() < 0.25:
            api_key = rng.choice(self._api_keys)  # read this body as another API
            _put_int(body, 0, 2, api_key)
        low, high = self.versions.get(api_key, (0, 12))
        version = rng.choice(
            (rng.randint(low, high), rng.randint(low, high), high + 1, low - 1, -1, 0x7FFF)
        )
        _put_int(body, 2, 2, version)


def _decode(body: bytes) -> tuple[bytes, Any] | None:
    """(header bytes, request entity) of a well-formed captured frame."""
    head = head_of(body)
    if head is None:
        return None
    try:
        cls = load_request_schema(head.api_key, head.api_version)
        offset = header_end(body, bool(cls.__flexible__))
        if offset is None:
            return None
        entity, _ = entity_reader(cls)(body, offset)
    except Exception:
        return None
    return bytes(body[:offset]), entity


def _leaves(entity: Any, path: tuple[str | int, ...] = ()) -> Iterable[_Leaf]:
    """Every field of a request entity, nested ones included (the first 8 elements of an
    array of structs)."""
    for spec in dataclasses.fields(entity):
        value = getattr(entity, spec.name)
        here = (*path, spec.name)
        yield here, spec, value
        if isinstance(value, tuple):
            for i, item in enumerate(value[:8]):
                if dataclasses.is_dataclass(item):
                    yield from _leaves(item, (*here, i))
        elif dataclasses.is_dataclass(value):
            yield from _leaves(value, here)


_Leaf = tuple[tuple[str | int, ...], "dataclasses.Field[Any]", Any]


def _replace(entity: Any, path: Sequence[str | int], value: Any) -> Any:
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(step, int):
        items = list(entity)
        items[step] = _replace(items[step], rest, value)
        return tuple(items)
    return dataclasses.replace(entity, **{step: _replace(getattr(entity, step), rest, value)})


def _hostile_value(spec: dataclasses.Field[Any], value: Any, rng: random.Random) -> Any:
    kind = spec.metadata.get("kafka_type")
    nullable = "None" in str(spec.type)
    if isinstance(value, tuple):
        if not value:
            return value
        choice = rng.randrange(5)
        if choice == 0:
            return ()
        if choice == 1:
            return value[::-1]
        if choice == 2 and kind in _INT_LIMITS:
            bits = _INT_LIMITS[kind]
            return tuple(rng.choice((-1, 0, (1 << bits) - 1, -(1 << bits))) for _ in value)
        repeat = rng.choice((2, 3, 100, 1000))
        return (value * repeat)[: max(len(value) * 2, 20_000 // max(len(value), 1))]
    if nullable and rng.random() < 0.15:
        return None
    if kind in _INT_LIMITS:
        bits = _INT_LIMITS[kind]
        top, bottom = (1 << bits) - 1, -(1 << bits)
        current = value if isinstance(value, int) else 0
        return rng.choice((-1, 0, 1, top, bottom, top - 1, max(min(current + 1, top), bottom)))
    if kind == "bool":
        return not value
    if kind == "string":
        return rng.choice(_HOSTILE_STRINGS)
    if kind == "bytes":
        return rng.choice((b"", b"\x00" * 64, b"\xff" * 7, rng.randbytes(40)))
    if kind in ("timedelta_i32", "timedelta_i64"):
        top = (1 << (31 if kind == "timedelta_i32" else 47)) - 1
        return timedelta(milliseconds=rng.choice((-1, 0, 1, top, -top)))
    if kind == "uuid":
        return rng.choice(
            (uuid.UUID(int=0), uuid.UUID(int=(1 << 128) - 1), uuid.UUID(int=rng.getrandbits(128)))
        )
    return None if nullable else value


def _fields(body: bytes | bytearray) -> list[LengthField]:
    head = head_of(body)
    flexible = is_flexible(head.api_key, head.api_version) if head else None
    return find_length_fields(body, flexible)


def _split(fields: list[LengthField]) -> tuple[list[LengthField], list[LengthField]]:
    return [f for f in fields if f.strong], [f for f in fields if not f.strong]


def _put_int(body: bytearray, offset: int, width: int, value: int) -> None:
    mask = (1 << (8 * width)) - 1
    body[offset : offset + width] = (value & mask).to_bytes(width, "big")
