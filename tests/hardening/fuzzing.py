"""A mutation fuzzer for the broker's wire protocol: real frames in, hostile frames out.

Shared by the CI test (tests/hardening/test_fuzz.py) and the long run (tools/fuzz.py).

1. Capture: real clients (aiokafka, kafka-python, confluent-kafka) produce with every
   codec, consume in a group and call admin APIs against an in-process broker through a
   loopback proxy that records every client->broker request frame. The broker advertises
   a second loopback address (127.0.0.2) where the proxy listens on the broker's own port,
   so clients reach every broker connection through the proxy without rewriting metadata.
2. Mutate: `Mutator.mutation(index)` is a pure function of (corpus, seed, index):
   hostile integers, hostile varints, bit flips, truncation, garbage, duplicated regions,
   version/API swaps, and (preferred) guessed length fields set to hostile values. The
   size prefix matches the mutated body most of the time, so the broker parses the body.
3. Run: a broker in a child process (an abort must fail the test, not kill it); many
   asyncio connections send mutations concurrently; each mutation ends in a response, a
   closed connection, silence (acks=0 Produce, detected with a probe request behind it),
   an abandoned long poll (Fetch / JoinGroup / SyncGroup waiting legitimately) or a hang.
   A dead child stops the campaign; the frames in flight and the last frames sent on each
   connection are replayed one at a time against a fresh child to name the killer.
4. Afterwards: the child is alive, records written before the campaign to a topic no
   frame names read back unchanged, a real client can still produce and fetch, and every
   ERROR the broker logged is reported with a frame that reproduces it where one is found.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import io
import os
import random
import re
import secrets
import struct
import subprocess
import threading
import time
import uuid
from array import array
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache, partial
from pathlib import Path
from typing import Any

from kio.index import KioIndexError, load_request_schema
from kio.schema.index import api_key_map
from kio.serial import entity_reader, entity_writer

from tests.childbroker import ChildBroker

# --- wire facts --------------------------------------------------------------------

_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
FETCH, JOIN_GROUP, SYNC_GROUP, PRODUCE, API_VERSIONS = 1, 11, 14, 0, 18
LONG_POLL_KEYS = frozenset({FETCH, JOIN_GROUP, SYNC_GROUP})
MAX_FRAME_BYTES = 100 * 1024 * 1024  # the broker's default socket.request.max.bytes
MAX_RESPONSE_BYTES = 512 * 1024 * 1024

# A request sent behind every mutated Produce: acks=0 gets no answer, so the probe's
# answer says the Produce was handled (responses leave in request order).
PROBE_CORRELATION_ID = 0x50524F42  # "PROB"
_PROBE_BODY = _HEAD.pack(API_VERSIONS, 0, PROBE_CORRELATION_ID) + _I16.pack(5) + b"probe"
PROBE_FRAME = _I32.pack(len(_PROBE_BODY)) + _PROBE_BODY

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
    (client_id_length,) = _I16.unpack_from(body, 8)
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
    """The max_wait a Fetch request declares, if the frame is parseable that far."""
    head = head_of(body)
    if head is None or head.api_key != FETCH:
        return None
    flexible = is_flexible(FETCH, head.api_version)
    if flexible is None:
        return None
    offset = header_end(body, flexible)
    if offset is None:
        return None
    if head.api_version < 15:
        offset += 4  # replica_id
    if offset + 4 > len(body):
        return None
    return int(_I32.unpack_from(body, offset)[0])


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
        (v16,) = _I16.unpack_from(body, offset)
        if v16 == -1:
            found.append(LengthField(offset, 2, 2, -1, False))
        elif 0 < v16 <= remaining - 2 and _printable(body, offset + 2, v16):
            found.append(LengthField(offset, 2, 2, v16, True))
        elif v16 == 0 and remaining >= 2:
            found.append(LengthField(offset, 2, 2, 0, False))
        if remaining >= 4:
            (v32,) = _I32.unpack_from(body, offset)
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
        return Mutation(index, source, tuple(ops), _I32.pack(declared) + bytes(body), declared)

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
            body.extend(_I32.pack(rng.choice(HOSTILE_INT32)))
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
            body += b"".join(_I32.pack(rng.choice(HOSTILE_INT32)) for _ in range(count // 4 + 1))

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
        (api_key,) = _I16.unpack_from(body, 0)
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


# --- the corpus: frames captured from real clients ----------------------------------

CAPTURE_HOST = "127.0.0.2"  # the proxy's address; the broker listens on 127.0.0.1
FRAMES_PER_KIND = 40
CODECS: tuple[str | None, ...] = (None, "gzip", "snappy", "lz4", "zstd")
CREATE_TIME_MS = 1_600_000_000_000


@dataclass
class Corpus:
    frames: list[bytes]  # each with its size prefix
    captured: int = 0  # frames seen before de-duplication
    errors: list[str] = field(default_factory=list)  # capture steps that failed

    @classmethod
    def from_captured(cls, frames: Iterable[bytes], errors: Iterable[str] = ()) -> Corpus:
        """De-duplicate (ignoring correlation ids) and cap each (API, version, client)."""
        captured = list(frames)
        seen: set[bytes] = set()
        kinds: dict[tuple[int, int, bytes], list[bytes]] = {}
        for frame in captured:
            body = frame[4:]
            head = head_of(body)
            if head is None:
                continue
            key = body[:4] + b"\0\0\0\0" + body[8:]
            if key in seen:
                continue
            seen.add(key)
            client_id = _client_id(body)
            kinds.setdefault((head.api_key, head.api_version, client_id), []).append(frame)
        kept: list[bytes] = []
        for group in kinds.values():
            if len(group) > FRAMES_PER_KIND:
                step = len(group) / FRAMES_PER_KIND
                group = [group[int(i * step)] for i in range(FRAMES_PER_KIND)]
            kept.extend(group)
        kept.sort(key=lambda frame: (frame[4:8], len(frame), frame))
        return cls(kept, len(captured), list(errors))

    def api_counts(self) -> Counter[str]:
        return Counter(
            head.api for head in (head_of(frame[4:]) for frame in self.frames) if head is not None
        )

    def api_keys(self) -> set[int]:
        return {head.api_key for head in (head_of(f[4:]) for f in self.frames) if head}

    def describe(self) -> str:
        counts = self.api_counts()
        listed = ", ".join(f"{api} x{n}" for api, n in sorted(counts.items()))
        return f"{len(self.frames)} frames ({self.captured} captured): {listed}"

    def dump(self, path: Path) -> None:
        lines = [f"# capture error: {error}" for error in self.errors]
        lines += [frame.hex() for frame in self.frames]
        path.write_text("\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: Path) -> Corpus:
        frames, errors = [], []
        for line in path.read_text().splitlines():
            if line.startswith("# capture error: "):
                errors.append(line.removeprefix("# capture error: "))
            elif line.strip() and not line.startswith("#"):
                frames.append(bytes.fromhex(line.strip()))
        return cls(frames, len(frames), errors)


def _client_id(body: bytes) -> bytes:
    if len(body) < 10:
        return b""
    (length,) = _I16.unpack_from(body, 8)
    return bytes(body[10 : 10 + max(length, 0)])


class RecordingProxy:
    """Forwards loopback TCP connections and records every client->broker frame."""

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int]) -> None:
        self.listen = listen
        self.upstream = upstream
        self.frames: list[bytes] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, *self.listen)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        pumps = [
            asyncio.create_task(self._requests(reader, up_writer)),
            asyncio.create_task(self._pump(up_reader, writer)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass  # the proxy is stopping
        finally:
            for pump in pumps:
                pump.cancel()
            writer.close()
            up_writer.close()
            self._tasks.discard(task)

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pending = bytearray()
        recording = True
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            if recording:
                pending += chunk
                while len(pending) >= 4:
                    (size,) = _I32.unpack_from(pending, 0)
                    if not 0 <= size <= MAX_FRAME_BYTES:
                        recording = False
                        pending.clear()
                        break
                    if len(pending) < 4 + size:
                        break
                    self.frames.append(bytes(pending[: 4 + size]))
                    del pending[: 4 + size]
            await writer.drain()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            await writer.drain()


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Awaitable[Any], timeout: float = 30) -> Any:
        async def wrapped() -> Any:
            return await coroutine

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class _Steps:
    """Runs capture steps, recording failures instead of stopping at the first."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.errors: list[str] = []

    def run(self, name: str, step: Callable[[], Any]) -> None:
        try:
            step()
        except Exception as exc:
            self.errors.append(f"{self.family} {name}: {exc!r}"[:300])

    async def arun(self, name: str, step: Awaitable[Any], timeout: float = 30) -> None:
        try:
            await asyncio.wait_for(step, timeout)
        except Exception as exc:
            self.errors.append(f"{self.family} {name}: {exc!r}"[:300])


def capture_corpus(timeout: float = 120.0) -> Corpus:
    """Run every client scenario against an in-process broker through a recording proxy."""
    from minibroker import Broker

    loop = _LoopThread()
    try:
        with Broker(advertised_host=CAPTURE_HOST) as broker:
            proxy = RecordingProxy((CAPTURE_HOST, broker.port), ("127.0.0.1", broker.port))
            loop.run(proxy.start())
            bootstrap = f"{CAPTURE_HOST}:{broker.port}"
            tag = secrets.token_hex(3)
            families = (
                ("aiokafka", lambda s: asyncio.run(_aiokafka_scenarios(bootstrap, tag, s))),
                ("kafka-python", lambda s: _kafka_python_scenarios(bootstrap, tag, s)),
                ("confluent-kafka", lambda s: _confluent_scenarios(bootstrap, tag, s)),
            )
            threads, all_steps = [], []
            for family, body in families:
                steps = _Steps(family)
                all_steps.append(steps)
                thread = threading.Thread(
                    target=steps.run, args=("scenarios", partial(body, steps)), daemon=True
                )
                thread.start()
                threads.append((family, thread))
            deadline = time.monotonic() + timeout
            errors: list[str] = []
            for family, thread in threads:
                thread.join(max(deadline - time.monotonic(), 0.1))
                if thread.is_alive():
                    errors.append(f"{family}: scenarios still running after {timeout:.0f} s")
            loop.run(proxy.stop())
            frames = list(proxy.frames)
        for steps in all_steps:
            errors.extend(steps.errors)
        return Corpus.from_captured(frames, errors)
    finally:
        loop.close()


# aiokafka ---------------------------------------------------------------------------

_GROUP_TIMEOUTS_MS = {"session": 3000, "heartbeat": 500, "poll": 3000}


async def _aiokafka_scenarios(bootstrap: str, tag: str, steps: _Steps) -> None:
    topic, group = f"fz-aio-{tag}", f"fz-aio-group-{tag}"
    for codec in CODECS:
        await steps.arun(f"produce {codec}", _aio_produce(bootstrap, topic, codec, "all", True))
    await steps.arun("produce acks=1", _aio_produce(bootstrap, topic, None, 1, False))
    await steps.arun("produce acks=0", _aio_produce(bootstrap, topic, None, 0, False))
    await steps.arun("group consumer", _aio_group(bootstrap, topic, group))
    await steps.arun("offsets", _aio_offsets(bootstrap, topic))
    await steps.arun("admin", _aio_admin(bootstrap, f"fz-aio-admin-{tag}", group, steps))


async def _aio_produce(
    bootstrap: str, topic: str, codec: str | None, acks: Any, idempotent: bool
) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=codec,
        acks=acks,
        enable_idempotence=idempotent,
        linger_ms=5,
        request_timeout_ms=10_000,
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                b"value-%d-" % i * (1 + i % 7),
                key=b"key-%d" % i,
                headers=[("trace", b"t-%d" % i)],
                timestamp_ms=CREATE_TIME_MS + i,
            )
            for i in range(20)
        ]
        await asyncio.gather(*futures)
        await producer.send_and_wait(topic, None, key=b"tombstone", partition=0)
    finally:
        await producer.stop()


async def _aio_group(bootstrap: str, topic: str, group: str) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=_GROUP_TIMEOUTS_MS["session"],
        heartbeat_interval_ms=_GROUP_TIMEOUTS_MS["heartbeat"],
        max_poll_interval_ms=_GROUP_TIMEOUTS_MS["poll"],
        rebalance_timeout_ms=_GROUP_TIMEOUTS_MS["poll"],
        fetch_max_wait_ms=100,
        request_timeout_ms=10_000,
    )
    await consumer.start()
    try:
        received = 0
        deadline = time.monotonic() + 10
        while received < 10 and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            received += sum(len(batch) for batch in batches.values())
        await consumer.commit()
        await consumer.committed(next(iter(consumer.assignment())))
    finally:
        await consumer.stop()


async def _aio_offsets(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=100, request_timeout_ms=10_000
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.beginning_offsets([tp])
        await consumer.end_offsets([tp])
        await consumer.offsets_for_times({tp: CREATE_TIME_MS + 5})
        consumer.seek(tp, 3)
        await consumer.getmany(tp, timeout_ms=300)
    finally:
        await consumer.stop()


async def _aio_admin(bootstrap: str, name: str, group: str, steps: _Steps) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        topic = NewTopic(name, 2, 1, topic_configs={"retention.ms": "60000"})
        await steps.arun("create_topics", admin.create_topics([topic]))
        await steps.arun("create_partitions", admin.create_partitions({name: NewPartitions(4)}))
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, name),
            ConfigResource(ConfigResourceType.BROKER, "0"),
        ]
        await steps.arun("describe_configs", admin.describe_configs(resources))
        await steps.arun("list_consumer_groups", admin.list_consumer_groups())
        await steps.arun("describe_consumer_groups", admin.describe_consumer_groups([group]))
        await steps.arun("list_consumer_group_offsets", admin.list_consumer_group_offsets(group))
        await steps.arun("describe_cluster", admin.describe_cluster())
        await steps.arun("describe_topics", admin.describe_topics([name]))
        await steps.arun("delete_topics", admin.delete_topics([name]))
    finally:
        await admin.close()


# kafka-python -----------------------------------------------------------------------


def _kafka_python_scenarios(bootstrap: str, tag: str, steps: _Steps) -> None:
    topic, group = f"fz-kp-{tag}", f"fz-kp-group-{tag}"
    for codec in CODECS:
        steps.run(f"produce {codec}", partial(_kp_produce, bootstrap, topic, codec, "all", True))
    steps.run("produce acks=1", lambda: _kp_produce(bootstrap, topic, None, 1, False))
    steps.run("produce acks=0", lambda: _kp_produce(bootstrap, topic, None, 0, False))
    steps.run("group consumer", lambda: _kp_group(bootstrap, topic, group))
    steps.run("offsets", lambda: _kp_offsets(bootstrap, topic))
    steps.run("admin", lambda: _kp_admin(bootstrap, f"fz-kp-admin-{tag}", topic, group, steps))


def _kp_produce(bootstrap: str, topic: str, codec: str | None, acks: Any, idem: bool) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=codec,
        acks=acks,
        enable_idempotence=idem,
        linger_ms=5,
        request_timeout_ms=10_000,
        max_block_ms=10_000,
    )
    try:
        for i in range(20):
            producer.send(
                topic,
                b"value-%d-" % i * (1 + i % 7),
                key=b"key-%d" % i,
                headers=[("trace", b"t-%d" % i)],
                timestamp_ms=CREATE_TIME_MS + i,
            )
        producer.flush(10)
    finally:
        producer.close(timeout=10)


def _kp_group(bootstrap: str, topic: str, group: str) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=_GROUP_TIMEOUTS_MS["session"],
        heartbeat_interval_ms=_GROUP_TIMEOUTS_MS["heartbeat"],
        max_poll_interval_ms=_GROUP_TIMEOUTS_MS["poll"],
        fetch_max_wait_ms=100,
        request_timeout_ms=10_000,
    )
    try:
        received = 0
        deadline = time.monotonic() + 10
        while received < 10 and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=200)
            received += sum(len(batch) for batch in batches.values())
        consumer.commit()
        for tp in consumer.assignment():
            consumer.committed(tp)
    finally:
        consumer.close()


def _kp_offsets(bootstrap: str, topic: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=100, request_timeout_ms=10_000
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.beginning_offsets([tp])
        consumer.end_offsets([tp])
        consumer.offsets_for_times({tp: CREATE_TIME_MS + 5})
        consumer.seek(tp, 3)
        consumer.poll(timeout_ms=300)
    finally:
        consumer.close()


def _kp_admin(bootstrap: str, name: str, topic: str, group: str, steps: _Steps) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec, OffsetTimestamp

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        spec = {name: {"num_partitions": 2, "replication_factor": 1}}
        steps.run("create_topics", lambda: admin.create_topics(spec))
        steps.run("create_partitions", lambda: admin.create_partitions({name: 4}))
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, name),
            ConfigResource(ConfigResourceType.BROKER, "0"),
        ]
        steps.run("describe_configs", lambda: admin.describe_configs(resources))
        steps.run("list_groups", lambda: admin.list_groups())
        steps.run("describe_groups", lambda: admin.describe_groups([group]))
        steps.run("list_group_offsets", lambda: admin.list_group_offsets(group))
        tp = TopicPartition(topic, 0)
        for label, offset_spec in (
            ("latest", OffsetSpec.LATEST),
            ("earliest", OffsetSpec.EARLIEST),
            ("max_timestamp", OffsetSpec.MAX_TIMESTAMP),
            ("timestamp", OffsetTimestamp(CREATE_TIME_MS + 5)),
        ):
            steps.run(
                f"list_partition_offsets {label}",
                partial(admin.list_partition_offsets, {tp: offset_spec}),
            )
        steps.run("describe_cluster", lambda: admin.describe_cluster())
        steps.run("describe_topics", lambda: admin.describe_topics([name]))
        steps.run("delete_topics", lambda: admin.delete_topics([name]))
        steps.run("delete_groups", lambda: admin.delete_groups([group]))
    finally:
        admin.close()


# confluent-kafka --------------------------------------------------------------------


def _confluent_common(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 10_000,
        "log.connection.close": False,
        "log_level": 0,
    }


def _confluent_scenarios(bootstrap: str, tag: str, steps: _Steps) -> None:
    topic, group = f"fz-ck-{tag}", f"fz-ck-group-{tag}"
    for codec in CODECS:
        steps.run(f"produce {codec}", partial(_ck_produce, bootstrap, topic, codec, "all", True))
    steps.run("produce acks=1", lambda: _ck_produce(bootstrap, topic, None, "1", False))
    steps.run("produce acks=0", lambda: _ck_produce(bootstrap, topic, None, "0", False))
    steps.run("group consumer", lambda: _ck_group(bootstrap, topic, group))
    steps.run(
        "consumer-protocol group", lambda: _ck_consumer_protocol(bootstrap, topic, group + "-848")
    )
    steps.run("transactions", lambda: _ck_transactions(bootstrap, topic, tag))
    steps.run("admin", lambda: _ck_admin(bootstrap, f"fz-ck-admin-{tag}", topic, group, steps))


def _ck_produce(bootstrap: str, topic: str, codec: str | None, acks: str, idem: bool) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            **_confluent_common(bootstrap),
            "compression.type": codec or "none",
            "acks": acks,
            "enable.idempotence": idem,
            "linger.ms": 5,
            "message.timeout.ms": 10_000,
        }
    )
    for i in range(20):
        producer.produce(
            topic,
            b"value-%d-" % i * (1 + i % 7),
            key=b"key-%d" % i,
            headers=[("trace", b"t-%d" % i)],
            timestamp=CREATE_TIME_MS + i,
        )
    producer.flush(10)


def _ck_group(bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **_confluent_common(bootstrap),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": _GROUP_TIMEOUTS_MS["session"],
            "heartbeat.interval.ms": _GROUP_TIMEOUTS_MS["heartbeat"],
            "max.poll.interval.ms": _GROUP_TIMEOUTS_MS["poll"],
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.subscribe([topic])
        received = 0
        deadline = time.monotonic() + 10
        while received < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received += 1
        consumer.commit(asynchronous=False)
        consumer.committed([TopicPartition(topic, 0)], timeout=10)
        consumer.offsets_for_times([TopicPartition(topic, 0, CREATE_TIME_MS + 5)], timeout=10)
        consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def _ck_consumer_protocol(bootstrap: str, topic: str, group: str) -> None:
    """A member of Kafka 4's consumer group protocol reads, commits and leaves; the admin
    client describes the group (ConsumerGroupHeartbeat and ConsumerGroupDescribe frames)."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    consumer = Consumer(
        {
            **_confluent_common(bootstrap),
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                break
        consumer.commit(asynchronous=False)
        admin = AdminClient(_confluent_common(bootstrap))
        admin.describe_consumer_groups([group])[group].result(10)
    finally:
        consumer.close()


def _ck_transactions(bootstrap: str, topic: str, tag: str) -> None:
    """A committed transaction with a group's offsets and an aborted one, read back with
    read_committed (the frames of every transaction API and isolated reads)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({**_confluent_common(bootstrap), "transactional.id": f"fz-ck-txn-{tag}"})
    producer.init_transactions(10)
    group = Consumer({**_confluent_common(bootstrap), "group.id": f"fz-ck-txn-group-{tag}"})
    for commit in (True, False):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, b"txn-%d" % i, key=b"key-%d" % i)
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 1)], group.consumer_group_metadata(), 10
        )
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    group.close()
    reader = Consumer(
        {
            **_confluent_common(bootstrap),
            "group.id": f"fz-ck-txn-reader-{tag}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is None:
                break
        reader.offsets_for_times([TopicPartition(topic, 0, -1)], timeout=10)
    finally:
        reader.close()


def _ck_admin(bootstrap: str, name: str, topic: str, group: str, steps: _Steps) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicCollection, TopicPartition
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    admin = AdminClient(_confluent_common(bootstrap))
    wait = 10

    def each(futures: Mapping[Any, Any]) -> None:
        for future in futures.values():
            future.result(wait)

    new = NewTopic(name, num_partitions=2, replication_factor=1, config={"retention.ms": "60000"})
    steps.run("create_topics", lambda: each(admin.create_topics([new], request_timeout=wait)))
    steps.run(
        "create_partitions",
        lambda: each(admin.create_partitions([NewPartitions(name, 4)], request_timeout=wait)),
    )
    resources = [ConfigResource(ResourceType.TOPIC, name), ConfigResource(ResourceType.BROKER, "0")]
    steps.run("describe_configs", lambda: each(admin.describe_configs(resources)))
    steps.run(
        "list_consumer_groups", lambda: admin.list_consumer_groups(request_timeout=wait).result()
    )
    steps.run(
        "describe_consumer_groups",
        lambda: each(admin.describe_consumer_groups([group], request_timeout=wait)),
    )
    steps.run(
        "list_consumer_group_offsets",
        lambda: each(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])),
    )
    tp = TopicPartition(topic, 0)
    for label, spec in (
        ("latest", OffsetSpec.latest()),  # type: ignore[no-untyped-call]
        ("earliest", OffsetSpec.earliest()),  # type: ignore[no-untyped-call]
        ("max_timestamp", OffsetSpec.max_timestamp()),  # type: ignore[no-untyped-call]
        ("timestamp", OffsetSpec.for_timestamp(CREATE_TIME_MS + 5)),
    ):
        steps.run(
            f"list_offsets {label}",
            partial(lambda s: each(admin.list_offsets({tp: s}, request_timeout=wait)), spec),
        )
    steps.run("describe_cluster", lambda: admin.describe_cluster(request_timeout=wait).result())
    steps.run(
        "describe_topics",
        lambda: each(admin.describe_topics(TopicCollection([name]), request_timeout=wait)),
    )
    steps.run("list_topics", lambda: admin.list_topics(timeout=wait))
    steps.run("delete_topics", lambda: each(admin.delete_topics([name], request_timeout=wait)))
    steps.run(
        "delete_consumer_groups",
        lambda: each(admin.delete_consumer_groups([group], request_timeout=wait)),
    )


# --- the child broker's log --------------------------------------------------------

_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) ([\w.]+): (.*)$")
_FAILED_API = re.compile(r"(\w+) v(-?\d+) failed")
_PEER = re.compile(r"\bfrom (\d+\.\d+\.\d+\.\d+)\b")
_TRACE_LOCATION = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


@dataclass
class LogRecord:
    at: float  # wall clock, seconds
    level: str
    logger: str
    message: str
    lines: list[str] = field(default_factory=list)  # the traceback, if any
    seq: int = 0  # how many records were read before this one

    @property
    def exception(self) -> str:
        for line in reversed(self.lines):
            if line and not line.startswith(" "):
                return line.strip()
        return ""

    @property
    def location(self) -> str:
        """The innermost frame of the traceback: where the error was raised."""
        for line in reversed(self.lines):
            found = _TRACE_LOCATION.search(line)
            if found:
                path = "/".join(Path(found.group(1)).parts[-2:])
                return f"{path}:{found.group(2)} in {found.group(3)}"
        return ""

    @property
    def peer(self) -> str | None:
        found = _PEER.search(self.message)
        return found.group(1) if found else None

    @property
    def api(self) -> str | None:
        found = _FAILED_API.search(self.message)
        return f"{found.group(1)} v{found.group(2)}" if found else None

    @property
    def signature(self) -> str:
        """What tells one bug from another: logger, API, exception type, raise site."""
        kind = self.exception.split(":", 1)[0]
        where = self.api or re.sub(r"\d+(\.\d+)*", "N", self.message)[:80]
        return f"{self.logger}: {where}: {kind or self.message[:80]} at {self.location or '?'}"

    def text(self, max_lines: int = 30) -> str:
        lines = [f"{self.level} {self.logger}: {self.message}", *self.lines]
        if len(lines) > max_lines:
            lines = [*lines[: max_lines - 1], f"... {len(lines) - max_lines + 1} more lines"]
        return "\n".join(lines)


_ERROR_LEVELS = ("ERROR", "CRITICAL", "OUTPUT")


class BrokerLog:
    """Drains the child's stdout and stderr (a full pipe would block the broker) and keeps
    the records at WARNING and above."""

    def __init__(self, process: subprocess.Popen[str], keep: int = 2000) -> None:
        self.records: deque[LogRecord] = deque(maxlen=keep)
        self.counts: Counter[str] = Counter()
        self.first_seen: dict[str, LogRecord] = {}
        self.read = 0  # records read so far
        self._lock = threading.Lock()
        self._threads = []
        for stream, parse in ((process.stderr, True), (process.stdout, False)):
            if stream is None:
                continue
            thread = threading.Thread(target=self._drain, args=(stream, parse), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _drain(self, stream: Any, parse: bool) -> None:
        current: LogRecord | None = None
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                if not parse:
                    continue
                line = line.rstrip("\n")
                found = _LOG_LINE.match(line)
                if found:
                    current = self._add(found)
                elif current is not None:
                    if len(current.lines) < 200:
                        current.lines.append(line)
                elif line.strip():
                    # Not from logging: a native crash report (a Rust panic, say);
                    # the lines that follow belong to it.
                    current = LogRecord(time.time(), "OUTPUT", "stderr", line)
                    with self._lock:
                        self._append(current)

    def _add(self, found: re.Match[str]) -> LogRecord:
        stamp, level, logger, message = found.groups()
        try:
            at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            at = time.time()
        record = LogRecord(at, level, logger, message)
        with self._lock:
            self._append(record)
        return record

    def _append(self, record: LogRecord) -> None:
        record.seq = self.read
        self.read += 1
        self.records.append(record)

    def count(self) -> int:
        with self._lock:
            return self.read

    def logged(self, text: str, since: int) -> bool:
        """Whether a record read as number `since` or later has `text` in its message."""
        with self._lock:
            return any(text in r.message for r in self.records if r.seq >= since)

    def errors_from(self, since: int) -> list[LogRecord]:
        """The errors read as number `since` or later."""
        with self._lock:
            return [r for r in self.records if r.seq >= since and r.level in _ERROR_LEVELS]

    def errors(self, since: float = 0.0) -> list[LogRecord]:
        with self._lock:
            return [r for r in self.records if r.at >= since and r.level in _ERROR_LEVELS]

    def join(self, timeout: float = 2.0) -> None:
        for thread in self._threads:
            thread.join(timeout)


# Where the child broker's code comes from: None for this checkout; a directory holding
# another `minibroker` package (say `git archive HEAD minibroker | tar -x -C DIR`) runs
# that one instead, to show the campaign failing on code without a fix.
BROKER_SOURCE_ENV = "MINIBROKER_FUZZ_BROKER_SOURCE"


def start_child(log_level: str = "ERROR", **settings: Any) -> tuple[ChildBroker, BrokerLog]:
    """A child broker logging at `log_level`, its output drained from the start."""
    broker = ChildBroker(log_level=log_level, **settings)
    source = os.environ.get(BROKER_SOURCE_ENV)
    if source:
        # `python -m` puts the working directory first on sys.path.
        previous = os.getcwd()
        os.chdir(source)
        try:
            broker.start()
        finally:
            os.chdir(previous)
    else:
        broker.start()
    assert broker.process is not None
    return broker, BrokerLog(broker.process)


# --- the campaign ------------------------------------------------------------------

RESPONSE, CLOSED, SILENT, LONG_POLL, HANG = 1, 2, 3, 4, 5


def connection_address(number: int) -> str:
    """The loopback address campaign connection `number` connects from: 127.1.0.0 on."""
    n = number % (254 << 16)
    return f"127.{1 + (n >> 16)}.{(n >> 8) & 0xFF}.{n & 0xFF}"


def connection_number(address: str) -> int | None:
    parts = address.split(".")
    if len(parts) != 4 or parts[0] != "127" or not all(p.isdigit() for p in parts):
        return None
    second, third, fourth = (int(p) for p in parts[1:])
    if second == 0:
        return None
    return ((second - 1) << 16) | (third << 8) | fourth


OUTCOMES = {RESPONSE: "responses", CLOSED: "closes", SILENT: "silent", LONG_POLL: "long_polls"}
OUTCOMES[HANG] = "hangs"


@dataclass
class Hang:
    index: int
    api: str
    waited: float
    data: bytes
    note: str = ""

    def text(self) -> str:
        waited = f"no answer in {self.waited:.1f} s{self.note}"
        return f"#{self.index} {self.api}: {waited}: {short_hex(self.data)}"


@dataclass
class CampaignResult:
    seed: int
    requested: int
    done: int = 0
    elapsed: float = 0.0
    counts: Counter[str] = field(default_factory=Counter)
    hangs: list[Hang] = field(default_factory=list)
    anomalies: Counter[str] = field(default_factory=Counter)
    anomaly_examples: dict[str, str] = field(default_factory=dict)
    died: bool = False
    returncode: int | None = None
    in_flight: list[int] = field(default_factory=list)  # mutations unanswered at death
    suspects: list[int] = field(default_factory=list)  # in flight, then recent, newest first
    peak_rss: int = 0
    connects: int = 0

    @property
    def rate(self) -> float:
        return self.done / self.elapsed if self.elapsed else 0.0

    def line(self) -> str:
        counts = " ".join(f"{name}={self.counts[name]}" for name in OUTCOMES.values())
        state = f"DIED rc={self.returncode}" if self.died else "alive"
        return (
            f"seed={self.seed} mutations={self.done}/{self.requested} in {self.elapsed:.1f} s "
            f"({self.rate:.0f}/s) aborts={int(self.died)} {counts} connects={self.connects} "
            f"peak_rss={self.peak_rss / 2**20:.0f}MiB broker={state}"
        )


class _Connection:
    """One connection to the broker. Reading a response frame survives cancellation
    midway (a long poll handed over after its grace period): the size prefix already
    read is kept, so the next read resumes the same frame."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int = -1
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.number = number
        self.previous: int | None = None  # the mutation sent before the current one
        self._size: int | None = None

    async def frame(self) -> bytes:
        if self._size is None:
            (size,) = _I32.unpack(await self.reader.readexactly(4))
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                raise BadResponse(f"response frame size {size}")
            self._size = size
        body = await self.reader.readexactly(self._size)
        self._size = None
        return body

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.transport.abort()


class BadResponse(ConnectionError):
    pass


@dataclass
class _Worker:
    number: int
    connection: _Connection | None = None
    current: int | None = None
    recent: deque[int] = field(default_factory=lambda: deque(maxlen=16))

    def drop(self) -> None:
        if self.connection is not None:
            self.connection.abort()
        self.connection = None


class Campaign:
    """Sends `count` mutations over `concurrency` connections and classifies the outcomes."""

    def __init__(
        self,
        mutator: Mutator,
        bootstrap: str,
        count: int,
        *,
        alive: Callable[[], bool],
        returncode: Callable[[], int | None] = lambda: None,
        rss: Callable[[], int] = lambda: 0,
        concurrency: int = 24,
        timeout: float = 10.0,
        long_poll_grace: float = 0.5,
        long_poll_cap: float = 20.0,
        max_long_polls: int = 256,
        start: int = 0,
        progress: Callable[[CampaignResult], None] | None = None,
        progress_every: float = 5.0,
    ) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.address = (host, int(port))
        self.mutator = mutator
        self.count = count
        self.alive = alive
        self.returncode = returncode
        self.rss = rss
        self.concurrency = concurrency
        self.timeout = timeout
        self.long_poll_grace = long_poll_grace
        self.long_poll_cap = long_poll_cap
        self.max_long_polls = max_long_polls
        self.start_index = start
        self.progress = progress
        self.progress_every = progress_every
        self.result = CampaignResult(mutator.seed, count)
        self.outcomes = bytearray(count)
        self.finished_at = [0.0] * count  # wall clock per mutation, to match broker logs
        self._last_sent = array("q")  # per connection number: the last mutation sent on it
        self._bind_sources = self.address[0] == "127.0.0.1"
        self._next = 0
        self._stopped = False
        self._workers: list[_Worker] = []
        self._watchers: dict[int, tuple[asyncio.Task[None], bool]] = {}
        self._watcher_done = asyncio.Event()

    # -- bookkeeping

    def sent_by(self, record: LogRecord) -> int | None:
        """The mutation behind a log line that names a peer address: every connection has
        an address of its own, and the broker closes a connection right after such a
        line, so it is the last mutation sent on that connection."""
        if record.peer is None or not self._bind_sources:
            return None
        number = connection_number(record.peer)
        if number is None or number >= len(self._last_sent):
            return None
        index = self._last_sent[number]
        return None if index < 0 else index

    def _take(self) -> int | None:
        if self._stopped or self._next >= self.count:
            return None
        index = self._next
        self._next += 1
        return index

    def _record(self, offset: int, outcome: int) -> None:
        self.outcomes[offset] = outcome
        self.finished_at[offset] = time.time()
        self.result.counts[OUTCOMES[outcome]] += 1
        self.result.done += 1

    def _anomaly(self, kind: str, mutation: Mutation, detail: str, connection: _Connection) -> None:
        self.result.anomalies[kind] += 1
        if kind not in self.result.anomaly_examples:
            before = connection.previous
            context = "" if before is None else f", after #{before} on the same connection"
            self.result.anomaly_examples[kind] = (
                f"{mutation.describe()}: {detail}{context}: {short_hex(mutation.data)}"
            )

    def _check_alive(self) -> bool:
        if self.alive():
            return True
        self._died()
        return False

    def _died(self) -> None:
        if self.result.died:
            return
        self.result.died = True
        self.result.returncode = self.returncode()
        self._stopped = True
        in_flight = [w.current for w in self._workers if w.current is not None]
        in_flight += list(self._watchers)
        in_flight = [self.start_index + i for i in in_flight]
        recent: list[int] = []
        for depth in range(16):
            for worker in self._workers:
                if depth < len(worker.recent):
                    recent.append(self.start_index + worker.recent[-1 - depth])
        self.result.in_flight = sorted(set(in_flight), reverse=True)
        self.result.suspects = list(dict.fromkeys([*self.result.in_flight, *recent]))
        for worker in self._workers:
            worker.drop()
        for task, _ in self._watchers.values():
            task.cancel()

    # -- running

    async def run(self) -> CampaignResult:
        started = time.monotonic()
        monitor = asyncio.create_task(self._monitor(started))
        try:
            workers = [self._work(_Worker(n)) for n in range(self.concurrency)]
            await asyncio.gather(*workers)
            await self._finish_watchers()
        finally:
            monitor.cancel()
            with contextlib.suppress(BaseException):
                await monitor
            for worker in self._workers:
                worker.drop()
        self.result.elapsed = time.monotonic() - started
        if not self.result.died and not self.alive():
            self._died()
        with contextlib.suppress(Exception):
            self.result.peak_rss = max(self.result.peak_rss, self.rss())
        return self.result

    async def _monitor(self, started: float) -> None:
        last_progress = last_rss = time.monotonic()
        while not self._stopped:
            await asyncio.sleep(0.05)
            if not self._check_alive():
                return
            now = time.monotonic()
            if now - last_rss >= 1.0:
                last_rss = now
                with contextlib.suppress(Exception):
                    self.result.peak_rss = max(self.result.peak_rss, self.rss())
            if self.progress is not None and now - last_progress >= self.progress_every:
                last_progress = now
                self.result.elapsed = now - started
                self.progress(self.result)

    async def _connect(self) -> _Connection | None:
        """A new connection, from a loopback address of its own when the broker is on
        loopback (so the broker's log lines name it; see `sent_by`)."""
        for attempt in range(20):
            if self._stopped:
                return None
            number = len(self._last_sent)
            self._last_sent.append(-1)  # reserved before the await: numbers stay unique
            source = (connection_address(number), 0) if self._bind_sources else None
            try:
                reader, writer = await asyncio.open_connection(*self.address, local_addr=source)
            except OSError as exc:
                if self._bind_sources and exc.errno == errno.EADDRNOTAVAIL:
                    self._bind_sources = False  # no 127/8 beyond 127.0.0.1 here
                    continue
                if not self._check_alive():
                    return None
                await asyncio.sleep(0.05 * (attempt + 1))
                continue
            self.result.connects += 1
            return _Connection(reader, writer, number)
        self._check_alive()
        raise ConnectionError(f"cannot connect to the broker at {self.address}")

    async def _work(self, worker: _Worker) -> None:
        self._workers.append(worker)
        try:
            while (offset := self._take()) is not None:
                mutation = self.mutator.mutation(self.start_index + offset)
                worker.current = offset
                if mutation.consistent:
                    outcome = await self._send(worker, offset, mutation)
                else:
                    outcome = await self._send_misframed(worker, offset, mutation)
                worker.current = None
                worker.recent.append(offset)
                if outcome is not None:
                    self._record(offset, outcome)
        finally:
            worker.drop()

    async def _answer(self, connection: _Connection, mutation: Mutation, probe: bool) -> int:
        """RESPONSE, or SILENT if only the probe behind the request was answered."""
        head = mutation.head
        answered = False
        while True:
            try:
                frame = await connection.frame()
            except BadResponse as exc:
                self._anomaly("bad response frame", mutation, str(exc), connection)
                raise
            (correlation_id,) = _I32.unpack_from(frame, 0)
            if probe and correlation_id == PROBE_CORRELATION_ID:
                return RESPONSE if answered else SILENT
            answered = True
            if head is not None and correlation_id != head.correlation_id:
                detail = f"response correlation id {correlation_id}, request {head.correlation_id}"
                self._anomaly("wrong correlation id", mutation, detail, connection)
            if not probe:
                return RESPONSE

    async def _send(self, worker: _Worker, offset: int, mutation: Mutation) -> int | None:
        if worker.connection is None:
            worker.connection = await self._connect()
            if worker.connection is None:
                return None
        connection = worker.connection
        head = mutation.head
        probe = head is not None and head.api_key == PRODUCE
        long_poll = head is not None and head.api_key in LONG_POLL_KEYS
        sent_at = time.monotonic()
        self._last_sent[connection.number] = mutation.index
        try:
            connection.writer.write(mutation.data + PROBE_FRAME if probe else mutation.data)
            limit = self.long_poll_grace if long_poll else self.timeout
            async with asyncio.timeout(limit):
                return await self._answer(connection, mutation, probe)
        except TimeoutError:
            worker.connection = None  # it now belongs to a watcher, or is dropped
            if long_poll:
                await self._detach(offset, mutation, connection, sent_at)
                return None
            connection.abort()
            if not self._check_alive():
                return None
            self._hang(offset, mutation, time.monotonic() - sent_at)
            return HANG
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            worker.drop()
            return CLOSED if self._check_alive() else None
        finally:
            connection.previous = mutation.index

    async def _send_misframed(self, worker: _Worker, offset: int, mutation: Mutation) -> int | None:
        """A size prefix that disagrees with the body: a fresh connection that we
        half-close, after the first answer when the prefix is short of the body."""
        connection = await self._connect()
        if connection is None:
            return None
        answered = False
        sent_at = time.monotonic()
        self._last_sent[connection.number] = mutation.index
        try:
            connection.writer.write(mutation.data)
            if 0 <= mutation.declared < len(mutation.data) - 4:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await connection.frame()
                        answered = True
            with contextlib.suppress(OSError, RuntimeError):
                connection.writer.write_eof()
            async with asyncio.timeout(self.timeout):
                while True:
                    await connection.frame()
                    answered = True
        except TimeoutError:
            connection.abort()
            if not self._check_alive():
                return None
            note = " after the client's end of stream (connection kept open)"
            self._hang(offset, mutation, time.monotonic() - sent_at, note)
            return HANG
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            connection.abort()
            if not self._check_alive():
                return None
            return RESPONSE if answered else CLOSED

    def _hang(self, offset: int, mutation: Mutation, waited: float, note: str = "") -> None:
        head = mutation.head
        if len(self.result.hangs) < 100:
            api = head.api if head else "?"
            self.result.hangs.append(Hang(mutation.index, api, waited, mutation.data, note))

    # -- long polls: waiting legitimately, watched off the worker's path

    async def _detach(
        self, offset: int, mutation: Mutation, connection: _Connection, sent_at: float
    ) -> None:
        while len(self._watchers) >= self.max_long_polls and not self._stopped:
            self._watcher_done.clear()
            await self._watcher_done.wait()
        wait_ms = fetch_max_wait_ms(mutation.body)
        bounded = wait_ms is not None and wait_ms <= self.long_poll_cap * 1000
        if wait_ms is not None and bounded:
            deadline = sent_at + max(wait_ms, 0) / 1000 + self.timeout
        else:
            deadline = sent_at + self.long_poll_cap
        task = asyncio.create_task(
            self._watch(offset, mutation, connection, deadline, bounded, sent_at)
        )
        self._watchers[offset] = (task, bounded)

    async def _watch(
        self,
        offset: int,
        mutation: Mutation,
        connection: _Connection,
        deadline: float,
        bounded: bool,
        sent_at: float,
    ) -> None:
        outcome: int | None = None
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                outcome = await self._answer(connection, mutation, probe=False)
        except TimeoutError:
            if not self._check_alive():
                return
            if bounded:
                self._hang(offset, mutation, time.monotonic() - sent_at, " (declared max_wait)")
                outcome = HANG
            else:
                outcome = LONG_POLL
        except asyncio.CancelledError:
            if not self._stopped:
                outcome = LONG_POLL  # abandoned at the end of the campaign
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            outcome = CLOSED if self._check_alive() else None
        finally:
            connection.abort()
            self._watchers.pop(offset, None)
            self._watcher_done.set()
            if outcome is not None:
                self._record(offset, outcome)

    async def _finish_watchers(self) -> None:
        """Wait out long polls with a declared bound; abandon open-ended ones."""
        for task, bounded in list(self._watchers.values()):
            if not bounded:
                task.cancel()
        tasks = [task for task, _ in list(self._watchers.values())]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


# --- checks before and after ---------------------------------------------------------


async def api_version_ranges(bootstrap: str, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions v0 answer: api key -> (min, max)."""
    host, _, port = bootstrap.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(PROBE_FRAME)
        async with asyncio.timeout(timeout):
            (size,) = _I32.unpack(await reader.readexactly(4))
            frame = await reader.readexactly(size)
    finally:
        writer.close()
    (count,) = _I32.unpack_from(frame, 6)
    ranges = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", frame, 10 + 6 * i)
        ranges[key] = (low, high)
    return ranges


async def warm_up(bootstrap: str, frames: Sequence[bytes], timeout: float = 1.0) -> int:
    """Replay the captured frames unchanged (Metadata first, which creates the topics), so
    that mutated frames meet the topics, records and groups they name. Returns how many
    were answered."""
    host, _, port = bootstrap.rpartition(":")
    metadata_first = sorted(frames, key=lambda frame: frame[4:6] != b"\x00\x03")
    connection: _Connection | None = None
    answered = 0
    for frame in metadata_first:
        head = head_of(frame[4:])
        probe = head is not None and head.api_key == PRODUCE
        if connection is None:
            connection = _Connection(*await asyncio.open_connection(host, int(port)))
        try:
            connection.writer.write(frame + PROBE_FRAME if probe else frame)
            async with asyncio.timeout(timeout):
                while True:
                    body = await connection.frame()
                    if not probe or _I32.unpack_from(body, 0)[0] == PROBE_CORRELATION_ID:
                        break
            answered += 1
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError):
            connection.abort()
            connection = None
    if connection is not None:
        connection.abort()
    return answered


@dataclass(frozen=True)
class Sentinel:
    topic: str
    records: tuple[tuple[bytes, bytes], ...]


async def write_sentinel(bootstrap: str, count: int = 100) -> Sentinel:
    """Records on a fresh topic whose name no captured frame contains."""
    from aiokafka import AIOKafkaProducer

    topic = f"fuzz-sentinel-{secrets.token_hex(8)}"
    records = tuple((b"k-%d" % i, b"sentinel-value-%d-" % i * (1 + i % 5)) for i in range(count))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10_000)
    await asyncio.wait_for(producer.start(), 20)
    try:
        for key, value in records:
            await producer.send(topic, value, key=key, partition=0)
        await asyncio.wait_for(producer.flush(), 20)
    finally:
        await asyncio.wait_for(producer.stop(), 20)
    return Sentinel(topic, records)


async def read_partition(bootstrap: str, topic: str, timeout: float = 20.0) -> list[Any]:
    """Every record of partition 0 up to its end offset, with a group-less consumer."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=10_000,
    )
    await asyncio.wait_for(consumer.start(), timeout)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await asyncio.wait_for(consumer.end_offsets([tp]), timeout))[tp]
        got: list[Any] = []

        async def collect() -> None:
            while await consumer.position(tp) < end:
                batches = await consumer.getmany(tp, timeout_ms=200)
                got.extend(batches.get(tp, []))

        await asyncio.wait_for(collect(), timeout)
        return got
    finally:
        await asyncio.wait_for(consumer.stop(), timeout)


async def check_sentinel(bootstrap: str, sentinel: Sentinel) -> list[str]:
    got = await read_partition(bootstrap, sentinel.topic)
    found = tuple((r.key, r.value) for r in got)
    if found == sentinel.records:
        return []
    pairs = zip(found, sentinel.records, strict=False)
    first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(found), 100))
    return [
        f"sentinel topic {sentinel.topic} changed: {len(found)} records, expected "
        f"{len(sentinel.records)}; first difference at offset {first}"
    ]


async def check_produce_fetch(bootstrap: str) -> list[str]:
    """A real client can still write and read a new topic."""
    sentinel = await write_sentinel(bootstrap, count=10)
    got = await read_partition(bootstrap, sentinel.topic)
    found = tuple((r.key, r.value) for r in got)
    if found != sentinel.records:
        return [f"produce+fetch after the campaign: read {len(found)} of 10 records back"]
    return []


# --- replays: name the frame behind a failure ---------------------------------------


async def exchange(bootstrap: str, data: bytes, timeout: float) -> str:
    """Send one frame on a fresh connection: 'response', 'closed' or 'timeout'."""
    host, _, port = bootstrap.rpartition(":")
    try:
        reader, writer = await asyncio.open_connection(host, int(port))
    except OSError:
        return "refused"
    try:
        writer.write(data)
        async with asyncio.timeout(timeout):
            (size,) = _I32.unpack(await reader.readexactly(4))
            await reader.readexactly(max(size, 0))
            return "response"
    except TimeoutError:
        return "timeout"
    except (asyncio.IncompleteReadError, ConnectionError, OSError, struct.error):
        return "closed"
    finally:
        writer.transport.abort()


def _died_within(broker: ChildBroker, seconds: float) -> bool:
    if broker.process is None:
        return False
    with contextlib.suppress(subprocess.TimeoutExpired):
        broker.process.wait(seconds)
    return not broker.alive()


@dataclass
class Killer:
    mutation: Mutation
    returncode: int | None
    alone: bool  # killed a fresh broker on its own

    def text(self) -> str:
        how = "kills a fresh broker on its own" if self.alone else "found by sequential replay"
        return (
            f"{self.mutation.describe()} {how} (return code {self.returncode}): "
            f"{short_hex(self.mutation.data)}"
        )


async def find_killer(mutator: Mutator, suspects: Sequence[int], limit: int = 200) -> Killer | None:
    """Replay suspects one at a time against a fresh broker until one kills it."""
    broker, _ = start_child()
    try:
        for index in suspects[:limit]:
            if not broker.alive():
                broker, _ = start_child()
            mutation = mutator.mutation(index)
            await exchange(broker.bootstrap, mutation.data, timeout=1.0)
            if _died_within(broker, 0.3):
                alone = await _kills_alone(mutation.data)
                return Killer(mutation, broker.returncode(), alone)
        return None
    finally:
        broker.stop()


async def _kills_alone(data: bytes) -> bool:
    broker, _ = start_child()
    try:
        await exchange(broker.bootstrap, data, timeout=1.0)
        return _died_within(broker, 0.5)
    finally:
        broker.stop()


@dataclass
class Failure:
    """One distinct ERROR logged by the broker, and a frame that reproduces it."""

    signature: str
    api: str | None  # of the request behind it, from the log line or the attributed frame
    count: int
    example: LogRecord
    suspects: list[int] = field(default_factory=list)  # attributed by source address
    reproducer: Mutation | None = None
    setup: list[Mutation] = field(default_factory=list)  # frames to send before it
    candidates: list[int] = field(default_factory=list)

    def text(self) -> str:
        api = f" [{self.api}]" if self.api else ""
        lines = [f"{self.signature}{api} (logged {self.count}x)", self.example.text()]
        for frame in self.setup:
            lines.append(f"after: {frame.describe()}: {short_hex(frame.data)}")
        if self.reproducer is not None:
            reproducer = self.reproducer
            lines.append(f"reproducer: {reproducer.describe()}: {short_hex(reproducer.data)}")
        elif self.candidates:
            tried = self.candidates[:16]
            lines.append(f"not reproduced on a fresh broker; tried {tried}")
        return "\n".join(lines)


def group_errors(records: Iterable[LogRecord], campaign: Campaign | None = None) -> list[Failure]:
    """One Failure per (signature, API): a line that does not name its API (an encoder
    error, say) gets it from the mutation its source address points to."""
    failures: dict[tuple[str, str | None], Failure] = {}
    for record in records:
        index = campaign.sent_by(record) if campaign is not None else None
        api = record.api
        if api is None and index is not None and campaign is not None:
            head = campaign.mutator.mutation(index).head
            api = head.api if head else None
        key = (record.signature, api)
        failure = failures.get(key)
        if failure is None:
            failure = failures[key] = Failure(record.signature, api, 0, record)
        failure.count += 1
        if index is not None and len(failure.suspects) < 8 and index not in failure.suspects:
            failure.suspects.append(index)
    return list(failures.values())


def _candidates(campaign: Campaign, failure: Failure, limit: int = 48) -> list[int]:
    """The attributed mutations, then those finished around the time the error was
    logged: same API and closed connections first."""
    at = failure.example.at
    scored = []
    for offset, finished in enumerate(campaign.finished_at):
        if not at - 1.0 <= finished <= at + 3.0:
            continue
        mutation = campaign.mutator.mutation(campaign.start_index + offset)
        head = mutation.head
        same_api = failure.api is not None and head is not None and head.api == failure.api
        closed = campaign.outcomes[offset] in (CLOSED, HANG)
        scored.append((not same_api, not closed, abs(finished - at), mutation.index))
    scored.sort()
    nearby = [index for *_, index in scored[:limit]]
    return list(dict.fromkeys([*failure.suspects, *nearby]))


async def _warm_child(frames: Sequence[bytes]) -> tuple[ChildBroker, BrokerLog]:
    # At WARNING, so that _log_barrier's marker line is logged.
    broker, log = start_child(log_level="WARNING")
    await warm_up(broker.bootstrap, frames)
    return broker, log


async def _log_barrier(broker: ChildBroker, log: BrokerLog, timeout: float = 10.0) -> None:
    """Until every line the broker has logged so far is in `log`: it logs one of ours
    after them, on the same stream (a negative frame size closes the connection with a
    WARNING naming the size). A broker that died has written all it will: read to EOF."""
    size = -1 - secrets.randbelow(1 << 24)
    marker = f"negative frame size {size}"
    start = log.count()
    await exchange(broker.bootstrap, _I32.pack(size), timeout=2.0)
    deadline = time.monotonic() + timeout
    while not log.logged(marker, start):
        if not broker.alive():
            await asyncio.to_thread(log.join)
            return
        if time.monotonic() > deadline:
            return  # a broker too old to log the marker: what was read is what there is
        await asyncio.sleep(0.02)


async def _try(
    broker: ChildBroker, log: BrokerLog, failure: Failure, setup: Sequence[Mutation], m: Mutation
) -> bool:
    """Replay setup frames, then `m`; True if `m` made the broker log the failure."""
    for frame in setup:
        await exchange(broker.bootstrap, frame.data, timeout=1.0)
    # A frame's lines are logged before it is answered or its connection closed, and read
    # in the order they were written: between a barrier after the setup frames and one
    # after `m`, the lines are m's (or a setup frame's still pending, a join say).
    await _log_barrier(broker, log)
    since = log.count()
    head = m.head
    # A join may be answered (and its answer fail) only when the rebalance completes.
    waits = head is not None and head.api_key in LONG_POLL_KEYS
    await exchange(broker.bootstrap, m.data, timeout=8.0 if waits else 2.0)
    await _log_barrier(broker, log)
    return any(r.signature == failure.signature for r in log.errors_from(since))


async def find_reproducers(
    campaign: Campaign, failures: Sequence[Failure], warm: Sequence[bytes] = ()
) -> None:
    """For each failure, replay its attributed mutations and those finished near its log
    time, one at a time against a fresh (warmed-up) broker, until one logs the same
    signature. Failures that need state are retried after the reproducers of the others
    (a group member created by one frame and described by the next, say)."""

    def same_api(failure: Failure, mutation: Mutation) -> bool:
        head = mutation.head
        return failure.api is None or (head is not None and head.api == failure.api)

    async def search(failure: Failure, setup: Sequence[Mutation], limit: int) -> None:
        broker, log = await _warm_child(warm)
        try:
            for index in failure.candidates[:limit]:
                mutation = campaign.mutator.mutation(index)
                if not same_api(failure, mutation):
                    continue
                if not broker.alive():
                    broker.stop()
                    broker, log = await _warm_child(warm)
                if await _try(broker, log, failure, setup, mutation):
                    failure.reproducer = mutation
                    failure.setup = await minimal(failure, list(setup), mutation)
                    return
        finally:
            broker.stop()

    async def minimal(failure: Failure, setup: list[Mutation], m: Mutation) -> list[Mutation]:
        """Drop setup frames the failure does not need, one at a time."""
        for frame in list(setup):
            fewer = [f for f in setup if f is not frame]
            broker, log = await _warm_child(warm)
            try:
                if await _try(broker, log, failure, fewer, m):
                    setup = fewer
            finally:
                broker.stop()
        return setup

    for failure in failures:
        failure.candidates = _candidates(campaign, failure)
        await search(failure, (), limit=len(failure.candidates))
    # Setup candidates: confirmed reproducers, else each failure's attributed frame.
    found = [
        f.reproducer or campaign.mutator.mutation(f.suspects[0])
        for f in failures
        if f.reproducer is not None or f.suspects
    ]
    for failure in failures:
        setup = [m for m in found if not same_api(failure, m)]
        if failure.reproducer is None and setup:
            await search(failure, setup, limit=8)


async def confirm_hang(hang: Hang, timeout: float, warm: Sequence[bytes] = ()) -> None:
    broker, _ = await _warm_child(warm)
    try:
        outcome = await exchange(broker.bootstrap, hang.data, timeout=timeout)
        hang.note += (
            "; reproduced alone on a fresh broker"
            if outcome == "timeout"
            else f"; alone on a fresh broker: {outcome}"
        )
    finally:
        broker.stop()


# --- one whole run -----------------------------------------------------------------


@dataclass
class FuzzReport:
    campaign: CampaignResult
    corpus: str
    killer: Killer | None = None
    failures: list[Failure] = field(default_factory=list)
    check_problems: list[str] = field(default_factory=list)
    stderr_tail: str = ""

    def fatal(self) -> list[str]:
        """What the campaign exists to rule out: a dead or hung broker, changed data."""
        result = self.campaign
        found: list[str] = []
        if result.died:
            found.append(
                f"the broker died (return code {result.returncode}) during seed {result.seed}; "
                f"mutations in flight {result.in_flight}"
            )
            if self.killer is not None:
                found.append(f"killing frame: {self.killer.text()}")
            else:
                suspects = result.suspects[:8]
                found.append(f"no single frame reproduced it; last suspects {suspects}")
        found += [f"hang: {hang.text()}" for hang in result.hangs]
        if result.counts["hangs"] > len(result.hangs):
            found.append(f"... {result.counts['hangs']} hangs in all")
        found += self.check_problems
        return found

    def errors(self) -> list[str]:
        """ERRORs the broker logged: a request that broke a handler or the encoder. The
        broker survives them (the client loses its connection), but each is a bug."""
        return [f"broker ERROR: {failure.text()}" for failure in self.failures]

    def problems(self) -> list[str]:
        return self.fatal() + self.errors()

    def frames(self) -> dict[str, bytes]:
        """Every frame the report names, whole: file name -> bytes."""
        found: dict[str, bytes] = {}
        if self.killer is not None:
            found[f"killer-{self.killer.mutation.index}.hex"] = self.killer.mutation.data
        for hang in self.campaign.hangs:
            found[f"hang-{hang.index}.hex"] = hang.data
        for number, failure in enumerate(self.failures):
            for step, frame in enumerate(failure.setup):
                found[f"error-{number}-setup-{step}-{frame.index}.hex"] = frame.data
            if failure.reproducer is not None:
                found[f"error-{number}-{failure.reproducer.index}.hex"] = failure.reproducer.data
        return found

    def save(self, directory: Path, corpus: Corpus | None = None) -> Path:
        """Write the report, each named frame (hex, size prefix included) and the corpus,
        with which `tools/fuzz.py --corpus` regenerates every mutation of the run."""
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in self.frames().items():
            (directory / name).write_text(data.hex() + "\n")
        lines = [self.text()]
        if corpus is not None:
            corpus.dump(directory / "corpus.txt")
            seed = self.campaign.seed
            lines.append(
                f"mutation I again: python tools/fuzz.py --corpus {directory / 'corpus.txt'} "
                f"--seed {seed} --start I --mutations 1"
            )
        path = directory / "fuzz-report.txt"
        path.write_text("\n".join(lines) + "\n")
        return path

    def text(self) -> str:
        lines = [f"corpus: {self.corpus}", f"summary: {self.campaign.line()}"]
        for kind, count in self.campaign.anomalies.items():
            lines.append(f"anomaly {kind} x{count}: {self.campaign.anomaly_examples[kind]}")
        lines += self.problems()
        if self.stderr_tail:
            lines.append(f"broker stderr tail:\n{self.stderr_tail}")
        return "\n".join(lines)


async def fuzz(
    corpus: Corpus,
    seed: int,
    mutations: int,
    *,
    concurrency: int = 24,
    timeout: float = 10.0,
    long_poll_cap: float = 20.0,
    start: int = 0,
    replay: bool = True,
    progress: Callable[[CampaignResult], None] | None = None,
    progress_every: float = 5.0,
    broker_settings: Mapping[str, Any] | None = None,
) -> FuzzReport:
    """Capture-independent part of a run: child broker, sentinel, campaign, checks, replays."""
    broker, log = start_child(**dict(broker_settings or {}))
    try:
        versions = await api_version_ranges(broker.bootstrap)
        await warm_up(broker.bootstrap, corpus.frames)
        sentinel = await write_sentinel(broker.bootstrap)
        mutator = Mutator(corpus.frames, seed, versions)
        campaign = Campaign(
            mutator,
            broker.bootstrap,
            mutations,
            alive=broker.alive,
            returncode=broker.returncode,
            rss=broker.peak_rss_bytes,
            concurrency=concurrency,
            timeout=timeout,
            long_poll_cap=long_poll_cap,
            start=start,
            progress=progress,
            progress_every=progress_every,
        )
        result = await campaign.run()
        problems: list[str] = []
        if broker.alive():
            for check in (
                check_sentinel(broker.bootstrap, sentinel),
                check_produce_fetch(broker.bootstrap),
            ):
                try:
                    problems += await check
                except Exception as exc:
                    problems.append(f"check after the campaign failed: {exc!r}")
            with contextlib.suppress(Exception):
                result.peak_rss = max(result.peak_rss, broker.peak_rss_bytes())
    finally:
        broker.stop()
        log.join()
    report = FuzzReport(result, corpus.describe(), check_problems=problems)
    records = log.errors()
    if result.died:  # the crash report is shown with the death, not as an ERROR of its own
        records = [r for r in records if r.level != "OUTPUT"]
    report.failures = group_errors(records, campaign)
    if result.died:
        report.stderr_tail = "\n".join(r.text(8) for r in list(log.records)[-3:])
    if replay:
        if result.died:
            report.killer = await find_killer(mutator, result.suspects)
        await find_reproducers(campaign, report.failures[:20], corpus.frames)
        for hang in result.hangs[:5]:
            await confirm_hang(hang, timeout, corpus.frames)
    return report


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default
