"""Known-answer vectors: the codecs checked against published values, not against themselves.

- CRC32C: the catalogue check value and the RFC 3720 (iSCSI) appendix B.4 vectors.
- Varints and zigzag: the encodings protobuf's encoding guide documents.
- Record batches: written out byte by byte from Kafka's v2 batch layout, their CRCs
  checked with a table-driven CRC32C written here.
- Requests and responses: hand-written frames for a few APIs, and for every served API
  and version that Kafka 3.9 defines, frames built by a small encoder in this file that
  reads Kafka's own JSON message definitions (it shares no code with kio or
  minibroker.protocol.messages).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import os
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.static.primitive import Records

from harness.raw_client import make, make_request
from minibroker.handlers import HANDLERS
from minibroker.protocol import bounds, legacy, messages, records
from minibroker.protocol.messages import InvalidRequest, RequestHeader
from minibroker.protocol.records import Record

# --- CRC32C -------------------------------------------------------------------------


def _crc32c_table() -> tuple[int, ...]:
    """The byte table of the reflected Castagnoli polynomial 0x82F63B78."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC_TABLE = _crc32c_table()


def reference_crc32c(data: bytes) -> int:
    """CRC32C, one table lookup per byte: slow, short, and independent of records.py."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


CRC32C_VECTORS = [
    pytest.param(b"123456789", 0xE3069283, id="check-value"),
    pytest.param(bytes(32), 0x8A9136AA, id="rfc3720-zeros"),
    pytest.param(b"\xff" * 32, 0x62A8AB43, id="rfc3720-ones"),
    pytest.param(bytes(range(32)), 0x46DD794E, id="rfc3720-incrementing"),
    pytest.param(bytes(range(31, -1, -1)), 0x113FDB5C, id="rfc3720-decrementing"),
    pytest.param(b"", 0x00000000, id="empty"),
]


@pytest.mark.parametrize(("data", "expected"), CRC32C_VECTORS)
def test_reference_crc32c_matches_published_values(data: bytes, expected: int) -> None:
    assert reference_crc32c(data) == expected


@pytest.mark.parametrize(("data", "expected"), CRC32C_VECTORS)
def test_records_crc32c_matches_published_values(data: bytes, expected: int) -> None:
    assert records.crc32c(data) == expected
    assert records.crc32c(memoryview(data)) == expected


# --- varints and zigzag ---------------------------------------------------------------

# (value, its zigzag varint): protobuf's sint32/sint64 mapping (0, -1, 1, -2, ... ->
# 0, 1, 2, 3, ...) written as a base-128 varint, least significant group first.
ZIGZAG_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (2, "04"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (150, "ac02"),
    (-150, "ab02"),
    (8191, "fe7f"),
    (-8192, "ff7f"),
    (8192, "808001"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]

# (value, its unsigned varint): the protobuf guide's 1, 150 and 300, and the byte edges.
UNSIGNED_VECTORS = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (150, "9601"),
    (300, "ac02"),
    (16383, "ff7f"),
    (16384, "808001"),
    (2**21 - 1, "ffff7f"),
    (2**21, "80808001"),
    (2**28 - 1, "ffffff7f"),
    (2**28, "8080808001"),
    (2**32 - 1, "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "encoded"), ZIGZAG_VECTORS)
def test_zigzag_varint_encoding(value: int, encoded: str) -> None:
    out = bytearray()
    records._write_varint(value, out)
    assert out.hex() == encoded


@pytest.mark.parametrize(("value", "encoded"), ZIGZAG_VECTORS)
def test_zigzag_varint_decoding(value: int, encoded: str) -> None:
    data = bytes.fromhex(encoded)
    assert records._read_varint(data, 0) == (value, len(data))
    # with bytes before and after it: the position counts from where it starts
    assert records._read_varint(b"\xaa" + data + b"\x55", 1) == (value, 1 + len(data))


@pytest.mark.parametrize(("value", "encoded"), UNSIGNED_VECTORS)
def test_unsigned_varint_decoding(value: int, encoded: str) -> None:
    data = bytes.fromhex(encoded)
    assert records._read_uvarint32(data, 0) == (value, len(data))  # snappy's preamble
    assert bounds.uvarint(data, 0) == (value, len(data))  # the request bounds pass
    # with bytes before and after it: the position counts from where it starts
    framed = b"\x81\x82\x83" + data + b"\x00"
    assert records._read_uvarint32(framed, 3) == (value, 3 + len(data))
    assert bounds.uvarint(framed, 3) == (value, 3 + len(data))


@pytest.mark.parametrize("encoded", ["8080808010", "ffffffff1f", "ffffffff8f01"])
def test_an_unsigned_varint_past_32_bits_is_refused(encoded: str) -> None:
    """A request's lengths are at most 32 bits: a fifth byte above 0x0F (a continuation
    bit or bits past the 32nd) is refused, naming where the varint starts."""
    with pytest.raises(
        InvalidRequest, match=r"^varint at offset 2 is longer than 5 bytes or 32 bits$"
    ):
        bounds.uvarint(b"\x00\x00" + bytes.fromhex(encoded), 2)


@pytest.mark.parametrize(("value", "encoded"), UNSIGNED_VECTORS)
def test_compact_length_encoding(value: int, encoded: str) -> None:
    """A compact array length is the count plus one as an unsigned varint (0 is null)."""
    assert messages.array_length(value - 1, True).hex() == encoded


# --- record batches -------------------------------------------------------------------

# Kafka's v2 batch: baseOffset int64 | batchLength int32 (bytes after this field) |
# partitionLeaderEpoch int32 | magic int8 = 2 | crc uint32 (CRC32C of attributes .. end) |
# attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
# producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32 |
# records. A record: length varint | attributes int8 | timestampDelta varint |
# offsetDelta varint | keyLength varint (-1 null) | key | valueLength varint | value |
# headerCount varint | per header: keyLength varint | key | valueLength varint | value.
# Every varint here is zigzag.
BATCH_IDEMPOTENT = bytes.fromhex(
    "00000000 00000064"  # baseOffset 100
    "0000005f"  # batchLength 95 = 4 + 1 + 4 + 40 + 46
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic
    "95580d0b"  # CRC32C of everything below
    "0000"  # attributes: no compression, CreateTime, not transactional
    "00000001"  # lastOffsetDelta 1
    "0000018b cfe56800"  # baseTimestamp 1,700,000,000,000
    "0000018b cfe56800"  # maxTimestamp
    "00000000 000003e8"  # producerId 1000
    "0002"  # producerEpoch 2
    "00000005"  # baseSequence 5
    "00000002"  # 2 records
    # length 23 | attributes | timestampDelta 0 | offsetDelta 0 | key "k1" | value "hello" |
    # 1 header: "trace" = "abc"
    "2e 00 00 00 04 6b31 0a 68656c6c6f 02 0a 7472616365 06 616263"
    # length 21 | attributes | timestampDelta 0 | offsetDelta 1 | key null | value "world" |
    # 1 header: "trace" = "abc"
    "2a 00 00 02 01 0a 776f726c64 02 0a 7472616365 06 616263"
)

BATCH_MIXED = bytes.fromhex(
    "00000001 00000000"  # baseOffset 2**32
    "0000004d"  # batchLength 77 = 4 + 1 + 4 + 40 + 28
    "00000005"  # partitionLeaderEpoch 5
    "02"  # magic
    "fec12a4c"  # CRC32C
    "0000"  # attributes
    "00000002"  # lastOffsetDelta 2
    "0000018b cfe56800"  # baseTimestamp 1,700,000,000,000
    "0000018b cfe56896"  # maxTimestamp 1,700,000,000,150
    "ffffffff ffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000003"  # 3 records
    # length 7 | attributes | timestampDelta 0 | offsetDelta 0 | key "a" | value null |
    # no headers
    "0e 00 00 00 02 61 01 00"
    # length 10 | attributes | timestampDelta 150 (two varint bytes) | offsetDelta 1 |
    # key null | value empty | 1 header: "h" = null
    "14 00 ac02 02 01 00 02 02 68 01"
    # length 8 | attributes | timestampDelta -1 | offsetDelta 2 | key empty | value 00 ff |
    # no headers
    "10 00 01 04 00 04 00ff 00"
)

_CRC_AT = 17  # magic is at 16, the CRC after it
_CRC_FROM = 21  # the CRC covers attributes to the end


@pytest.mark.parametrize("batch", [BATCH_IDEMPOTENT, BATCH_MIXED], ids=["idempotent", "mixed"])
def test_hand_built_batch_framing_and_crc(batch: bytes) -> None:
    """The literals are what the layout says: lengths add up, the CRC is the standard one."""
    (batch_length,) = struct.unpack_from(">i", batch, 8)
    assert batch_length == len(batch) - 12
    (crc,) = struct.unpack_from(">I", batch, _CRC_AT)
    assert crc == reference_crc32c(batch[_CRC_FROM:])
    assert crc == records.crc32c(batch[_CRC_FROM:])


def test_decoder_reads_the_idempotent_batch() -> None:
    [(header, raw)] = records.split_batches(BATCH_IDEMPOTENT)
    assert raw == BATCH_IDEMPOTENT
    assert header == records.BatchHeader(
        base_offset=100,
        batch_length=95,
        partition_leader_epoch=-1,
        magic=2,
        crc=0x95580D0B,
        attributes=0,
        last_offset_delta=1,
        base_timestamp=1_700_000_000_000,
        max_timestamp=1_700_000_000_000,
        producer_id=1000,
        producer_epoch=2,
        base_sequence=5,
        record_count=2,
    )
    assert header.last_sequence == 6
    assert list(records.iter_records(BATCH_IDEMPOTENT)) == [
        Record(100, 1_700_000_000_000, b"k1", b"hello", (("trace", b"abc"),)),
        Record(101, 1_700_000_000_000, None, b"world", (("trace", b"abc"),)),
    ]


def test_encoder_writes_the_idempotent_batch_byte_for_byte() -> None:
    built = records.build_batch(
        [(b"k1", b"hello"), (None, b"world")],
        base_offset=100,
        timestamp_ms=1_700_000_000_000,
        producer_id=1000,
        producer_epoch=2,
        base_sequence=5,
        headers=[("trace", b"abc")],
    )
    assert built.hex() == BATCH_IDEMPOTENT.hex()


def test_decoder_reads_the_mixed_batch() -> None:
    [(header, _)] = records.split_batches(BATCH_MIXED)
    assert (header.base_offset, header.partition_leader_epoch) == (2**32, 5)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert header.last_sequence == -1
    assert list(records.iter_records(BATCH_MIXED)) == [
        Record(2**32, 1_700_000_000_000, b"a", None, ()),
        Record(2**32 + 1, 1_700_000_000_150, None, b"", (("h", None),)),
        Record(2**32 + 2, 1_699_999_999_999, b"", b"\x00\xff", ()),
    ]


def test_log_append_time_known_answer() -> None:
    """Stamped with LogAppendTime: attribute bit 3 set, maxTimestamp the broker's time,
    a new CRC over the changed bytes, and every record read at that time."""
    stamped = records.with_log_append_time(BATCH_MIXED, 7, 1_800_000_000_000)
    expected = bytearray(BATCH_MIXED)
    expected[0:8] = bytes.fromhex("0000000000000007")
    expected[21:23] = bytes.fromhex("0008")
    expected[35:43] = bytes.fromhex("000001a3185c5000")  # 1,800,000,000,000
    expected[_CRC_AT:_CRC_FROM] = struct.pack(">I", reference_crc32c(bytes(expected[21:])))
    assert stamped.hex() == expected.hex()
    assert [r.timestamp for r in records.iter_records(stamped)] == [1_800_000_000_000] * 3
    assert [r.offset for r in records.iter_records(stamped)] == [7, 8, 9]


def test_base_offset_rewrite_keeps_the_crc() -> None:
    moved = records.with_base_offset(BATCH_IDEMPOTENT, 0x0102030405060708, 0x0A0B0C0D)
    assert moved.hex() == (
        "0102030405060708" + BATCH_IDEMPOTENT[8:12].hex() + "0a0b0c0d" + BATCH_IDEMPOTENT[16:].hex()
    )
    [(header, _)] = records.split_batches(moved)
    assert header.base_offset == 0x0102030405060708
    assert header.partition_leader_epoch == 0x0A0B0C0D


# --- Kafka's JSON message definitions, and an encoder that follows them --------------

# Kafka 3.9's definitions sit in shared/kafka beside the repository checkout.
DEFAULT_SCHEMA_DIR = Path(__file__).resolve().parents[3] / "shared" / "kafka" / "messages-3.9"
SCHEMA_DIR = Path(os.environ.get("MINIBROKER_KAFKA_MESSAGES", DEFAULT_SCHEMA_DIR)).resolve()
needs_schemas = pytest.mark.skipif(
    not (SCHEMA_DIR / "ApiVersionsRequest.json").is_file(),
    reason=f"Kafka's message definitions are not at {SCHEMA_DIR} (MINIBROKER_KAFKA_MESSAGES)",
)

# Served versions newer than Kafka 3.9, whose definitions are not in SCHEMA_DIR
# (Kafka 4.0 added them); the live test in tests/versions/test_api_versions.py covers them.
NEWER_THAN_3_9 = {(0, 12), (2, 10), (3, 13), (15, 6), (26, 5), (28, 5), (60, 2), (68, 1), (69, 1)}
# Share group membership and offsets (KIP-932) at the versions Kafka 4.2+ serves.
NEWER_THAN_3_9 |= {(76, 1), (77, 1), (90, 0), (90, 1), (91, 0), (92, 0)}
# Share groups' APIs: Kafka 3.9 defined only their early-access v0, which 4.x removed.
NEWER_THAN_3_9 |= {(78, 1), (78, 2), (79, 1), (79, 2)}
# AlterPartitionReassignments v1 (allow_replication_factor_change, Kafka 4.1).
NEWER_THAN_3_9 |= {(45, 1)}

_PRIMITIVES = {
    "bool",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "uuid",
    "string",
    "bytes",
    "records",
}
_FIXED = {
    "int8": ">b",
    "int16": ">h",
    "uint16": ">H",
    "int32": ">i",
    "uint32": ">I",
    "int64": ">q",
    "float64": ">d",
}
Json = dict[str, Any]


def _strip_comments(text: str) -> str:
    """Kafka's message files are JSON with whole-line // comments."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


@functools.cache
def _definitions() -> dict[tuple[str, int], Json]:
    """(type, api key) -> message definition; headers as ("header", 0 / 1)."""
    found: dict[tuple[str, int], Json] = {}
    for path in sorted(SCHEMA_DIR.glob("*.json")):
        spec = json.loads(_strip_comments(path.read_text()))
        if spec["type"] in ("request", "response"):
            found[spec["type"], spec["apiKey"]] = spec
        elif spec["name"] in ("RequestHeader", "ResponseHeader"):
            found["header", int(spec["name"] == "ResponseHeader")] = spec
    return found


def _definition(kind: str, api_key: int) -> Json:
    return _definitions()[kind, api_key]


def _in_versions(spec: str | None, version: int) -> bool:
    """Kafka's version ranges: "3+", "1-4", "7", "none"."""
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    low, _, high = spec.partition("-")
    return int(low) <= version <= int(high or low)


def _valid_versions(kind: str, api_key: int) -> range:
    spec = _definitions().get((kind, api_key))
    if spec is None:
        return range(0)  # an API Kafka 3.9 does not define (one of Kafka 4's)
    low, _, high = spec["validVersions"].partition("-")
    return range(int(low), int(high or low) + 1)


def _struct_fields(field: Json, message: Json) -> list[Json]:
    """A struct's fields: inline, or from the message's common structs."""
    if "fields" in field:
        return list(field["fields"])
    name = field["type"].removeprefix("[]")
    for common in message.get("commonStructs", ()):
        if common["name"] == name:
            return list(common["fields"])
    raise KeyError(f"struct {name} is not defined in {message['name']}")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class SchemaEncoder:
    """Encodes a value tree (JSON field names -> values) the way the definition lays it out
    at one version: int16 / int32 lengths and counts, or compact ones (unsigned varint of
    length + 1, 0 for null) and tagged-field sections from the first flexible version."""

    def __init__(self, message: Json, version: int, flexible: bool) -> None:
        self.message = message
        self.version = version
        self.flexible = flexible

    def present(self, field: Json) -> bool:
        return _in_versions(field["versions"], self.version)

    def nullable(self, field: Json) -> bool:
        return _in_versions(field.get("nullableVersions"), self.version)

    def tagged(self, field: Json) -> bool:
        return self.flexible and _in_versions(field.get("taggedVersions"), self.version)

    def struct(self, fields: list[Json], values: Json) -> bytes:
        out = bytearray()
        tags: list[tuple[int, bytes]] = []
        for field in fields:
            if not self.present(field):
                continue
            value = values[field["name"]]
            if self.tagged(field):
                if not self.is_default(field, value):
                    tags.append((field["tag"], self.value(field, value)))
            else:
                out += self.value(field, value)
        if self.flexible:
            out += _uvarint(len(tags))
            for tag, data in sorted(tags):
                out += _uvarint(tag) + _uvarint(len(data)) + data
        return bytes(out)

    def value(self, field: Json, value: Any) -> bytes:
        kind = field["type"]
        compact = self.flexible and field.get("flexibleVersions") != "none"
        if kind.startswith("[]"):
            if value is None:
                assert self.nullable(field), f"{field['name']} is not nullable"
                return b"\x00" if compact else struct.pack(">i", -1)
            count = _uvarint(len(value) + 1) if compact else struct.pack(">i", len(value))
            inner = kind[2:]
            if inner in _PRIMITIVES:
                items = [self.primitive(inner, item, compact, False) for item in value]
            else:
                fields = _struct_fields(field, self.message)
                items = [self.struct(fields, item) for item in value]
            return count + b"".join(items)
        if kind in _PRIMITIVES:
            return self.primitive(kind, value, compact, self.nullable(field))
        fields = _struct_fields(field, self.message)
        if self.nullable(field):  # KIP-893: an int8 marker, -1 for null
            return b"\xff" if value is None else b"\x01" + self.struct(fields, value)
        return self.struct(fields, value)

    @staticmethod
    def primitive(kind: str, value: Any, compact: bool, nullable: bool) -> bytes:
        if kind in _FIXED:
            return struct.pack(_FIXED[kind], value)
        if kind == "bool":
            return b"\x01" if value else b"\x00"
        if kind == "uuid":
            return bytes(value.bytes)
        if value is None:
            assert nullable, f"null {kind} where the definition does not allow it"
            if compact:
                return b"\x00"
            return struct.pack(">h" if kind == "string" else ">i", -1)
        data = value.encode() if kind == "string" else bytes(value)
        if compact:
            return _uvarint(len(data) + 1) + data
        return struct.pack(">h" if kind == "string" else ">i", len(data)) + data

    def is_default(self, field: Json, value: Any) -> bool:
        """Tagged fields at their default are left out (Kafka's rule)."""
        kind = field["type"]
        default = field.get("default")
        if kind.startswith("[]"):
            return not value
        if kind == "string":
            return bool(value == (None if default == "null" else default or ""))
        if kind == "bool":
            return bool(value == (default == "true"))
        if kind == "uuid":
            return bool(value == uuid.UUID(int=0))
        if kind in _FIXED:
            return bool(value == int(default or "0", 0))
        if kind in ("bytes", "records"):
            return value is None if default == "null" else not value
        fields = _struct_fields(field, self.message)
        return all(self.is_default(f, value[f["name"]]) for f in fields if self.present(f))


def _is_flexible(api_key: int, version: int) -> bool:
    return _in_versions(_definition("request", api_key).get("flexibleVersions"), version)


def reference_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Json
) -> bytes:
    """A whole request frame (size prefix included) from Kafka's definitions alone."""
    flexible = _is_flexible(api_key, version)
    header_spec = _definition("header", 0)
    header = SchemaEncoder(header_spec, 2 if flexible else 1, flexible).struct(
        header_spec["fields"],
        {
            "RequestApiKey": api_key,
            "RequestApiVersion": version,
            "CorrelationId": correlation_id,
            "ClientId": client_id,
        },
    )
    spec = _definition("request", api_key)
    payload = header + SchemaEncoder(spec, version, flexible).struct(spec["fields"], body)
    return struct.pack(">i", len(payload)) + payload


def reference_response(api_key: int, version: int, correlation_id: int, body: Json) -> bytes:
    """A whole response frame; ApiVersions answers always carry header v0."""
    flexible = _is_flexible(api_key, version)
    header_version = 1 if flexible and api_key != 18 else 0
    header_spec = _definition("header", 1)
    header = SchemaEncoder(header_spec, header_version, header_version == 1).struct(
        header_spec["fields"], {"CorrelationId": correlation_id}
    )
    spec = _definition("response", api_key)
    payload = header + SchemaEncoder(spec, version, flexible).struct(spec["fields"], body)
    return struct.pack(">i", len(payload)) + payload


# --- sample values for every field of a definition ----------------------------------

# Codes kio's ErrorCode knows: NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION,
# NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, ...
_ERROR_CODES = (0, 1, 3, 6, 7, 15, 16, 22, 25, 27, 35, 36, 41, 79)


class Sampler:
    """Fixed, distinct values for every field present at a version: each field gets the
    next number of a counter, so two fields swapped or one left out cannot go unseen.
    Arrays get two elements and every third nullable string or bytes is null; numbers,
    strings and structures are never at their default, so tagged fields are written."""

    def __init__(self, message: Json, version: int) -> None:
        flexible = _in_versions(message.get("flexibleVersions"), version)
        self.encoder = SchemaEncoder(message, version, flexible)
        self.count = 0

    def struct(self, fields: list[Json]) -> Json:
        return {f["name"]: self.value(f) for f in fields if self.encoder.present(f)}

    def value(self, field: Json) -> Any:
        kind = field["type"]
        if kind.startswith("[]"):
            inner = kind[2:]
            if inner in _PRIMITIVES:
                return [self.primitive(field["name"], inner, False) for _ in range(2)]
            fields = _struct_fields(field, self.encoder.message)
            return [self.struct(fields) for _ in range(2)]
        if kind in _PRIMITIVES:
            nullable = self.encoder.nullable(field) and not self.encoder.tagged(field)
            return self.primitive(field["name"], kind, nullable)
        return self.struct(_struct_fields(field, self.encoder.message))

    def primitive(self, name: str, kind: str, nullable: bool) -> Any:
        self.count += 1
        n = self.count
        if kind == "int16" and name.endswith("ErrorCode"):
            return _ERROR_CODES[n % len(_ERROR_CODES)]
        if nullable and kind in ("string", "bytes") and n % 3 == 0:
            return None
        match kind:
            case "bool":
                return n % 2 == 1  # a tagged false is left out, and read back as false
            case "int8":
                return n % 100 + 1
            case "int16" | "uint16":
                return 0x100 + n
            case "int32" | "uint32":
                return 0x10000 + n
            case "int64":
                return 0x1_0000_0000 + n
            case "float64":
                return n + 0.5
            case "uuid":
                return uuid.UUID(int=(0xABCD << 112) | n)
            case "string":
                return f"{name.lower()}-{n}-\u00e9"  # a two-byte character: lengths in bytes
            case "bytes":
                return bytes([n % 256]) * 3 + b"\x00\xff"
            case "records":
                return BATCH_MIXED
        raise AssertionError(f"no sample for {kind}")


def _values(fields: list[Json], values: Json, encoder: SchemaEncoder) -> list[Any]:
    """A value tree as nested lists, in definition order (kio's field order)."""

    def convert(field: Json, value: Any) -> Any:
        kind = field["type"]
        if value is None or kind.removeprefix("[]") in _PRIMITIVES:
            return list(value) if isinstance(value, list) else value
        inner = _struct_fields(field, encoder.message)
        if kind.startswith("[]"):
            return [_values(inner, item, encoder) for item in value]
        return _values(inner, value, encoder)

    return [convert(f, values[f["name"]]) for f in fields if encoder.present(f)]


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)


def _kio_values(entity: Any) -> Any:
    """A decoded kio entity as nested lists of plain values, in field order."""
    if dataclasses.is_dataclass(entity):
        return [_kio_values(getattr(entity, f.name)) for f in dataclasses.fields(entity)]
    if isinstance(entity, tuple):
        return [_kio_values(item) for item in entity]
    if isinstance(entity, datetime.datetime):
        return (entity - _EPOCH) // _MS
    if isinstance(entity, datetime.timedelta):
        return entity // _MS
    if isinstance(entity, bool):
        return entity
    if isinstance(entity, int):
        return int(entity)
    if isinstance(entity, bytes):
        return bytes(entity)
    return entity


def _served_pairs() -> list[tuple[int, int]]:
    return [
        (api_key, version)
        for api_key, handler in sorted(HANDLERS.items())
        for version in range(handler.min_version, handler.max_version + 1)
    ]


def _defined_pairs() -> list[tuple[int, int]]:
    """Served (api key, version) pairs that Kafka 3.9 defines and kio has classes for."""
    return [
        pair
        for pair in _served_pairs()
        if pair not in NEWER_THAN_3_9 and not legacy.is_legacy(*pair)
    ]


def _legacy_pairs() -> list[tuple[int, int]]:
    """Served pairs older than kio's classes (protocol/legacy.py)."""
    return [pair for pair in _served_pairs() if legacy.is_legacy(*pair)]


def _pair_id(pair: tuple[int, int]) -> str:
    return f"{messages.api_name(pair[0])}-v{pair[1]}"


@needs_schemas
def test_every_served_version_is_defined_by_kafka() -> None:
    """Each served version is one Kafka 3.9 defines, or one of the few Kafka 4.0 added."""
    newer = set()
    for api_key, version in _served_pairs():
        if version not in _valid_versions("request", api_key):
            newer.add((api_key, version))
        assert _valid_versions("request", api_key) == _valid_versions("response", api_key)
    assert newer == NEWER_THAN_3_9


@needs_schemas
@pytest.mark.parametrize("pair", _defined_pairs(), ids=_pair_id)
def test_request_known_answer(pair: tuple[int, int]) -> None:
    """The broker reads Kafka's layout of every field and writes exactly those bytes."""
    api_key, version = pair
    spec = _definition("request", api_key)
    sampler = Sampler(spec, version)
    body = sampler.struct(spec["fields"])
    frame = reference_request(api_key, version, 0x01020304, "known-answer", body)

    header, request = messages.decode_request(frame[4:])
    assert header == RequestHeader(api_key, version, 0x01020304, "known-answer")
    assert _kio_values(request) == _values(spec["fields"], body, sampler.encoder)
    encoded = messages.encode_request(header, request)
    assert encoded.hex() == frame.hex()


@needs_schemas
@pytest.mark.parametrize("pair", _defined_pairs(), ids=_pair_id)
def test_response_known_answer(pair: tuple[int, int]) -> None:
    """A response laid out by Kafka's definition decodes field by field and re-encodes to
    the same bytes, header version included."""
    api_key, version = pair
    spec = _definition("response", api_key)
    sampler = Sampler(spec, version)
    body = sampler.struct(spec["fields"])
    frame = reference_response(api_key, version, 0x7FFFFFFE, body)

    correlation_id, response = messages.decode_response(frame[4:], api_key, version)
    assert correlation_id == 0x7FFFFFFE
    assert _kio_values(response) == _values(spec["fields"], body, sampler.encoder)
    assert messages.encode_response(correlation_id, response).hex() == frame.hex()


# --- versions older than kio's classes ------------------------------------------------


def _plain(tree: Any) -> Any:
    """legacy's dict reading as nested lists in field order, like `_values`."""
    if isinstance(tree, dict):
        return [_plain(value) for value in tree.values()]
    if isinstance(tree, tuple | list):
        return [_plain(item) for item in tree]
    return tree


def _load_tool(name: str) -> Any:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"tools_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Produce v0-2 and Fetch v0-3 carry only the old message formats (magic 0 and 1), which
# the broker does not store or convert; no client it is tested with sends them.
MESSAGE_FORMAT_FLOORS = {0: 3, 1: 4}
# Share group APIs: Kafka 4.2+ serves ShareGroupHeartbeat and ShareGroupDescribe from v1
# (v0 was the early-access version 3.9 defined) and the share group offset APIs, which 3.9
# does not define, from v0.
KAFKA_4_FLOORS = {76: 1, 77: 1, 78: 1, 79: 1, 90: 0, 91: 0, 92: 0}


@needs_schemas
def test_legacy_layouts_are_what_kafkas_definitions_give() -> None:
    """The table legacy.py reads is derived from the definitions (tools/legacy_schemas.py)
    and covers every version Kafka 3.9 serves below kio's classes, for every served API."""
    tool = _load_tool("legacy_schemas")
    assert tool.derive(SCHEMA_DIR) == legacy.SCHEMAS
    # The reader and writer serve integers, booleans, strings and arrays of those or of
    # structs: every kind in the table is one of them.
    scalars = {"int8", "int16", "int32", "int64", "bool", "string"}

    def kinds(layout: tuple[Any, ...]) -> set[str]:
        return {k for _, k, _, _, children in layout for k in (k, *kinds(children))}

    every = set().union(*(kinds(req) | kinds(resp) for req, resp in legacy.SCHEMAS.values()))
    assert every <= scalars | {f"[]{s}" for s in scalars} | {"[]"}, every
    for api_key, handler in HANDLERS.items():
        if api_key in KAFKA_4_FLOORS:
            floor = KAFKA_4_FLOORS[api_key]
        else:
            floor = min(_valid_versions("request", api_key))
        assert handler.min_version == MESSAGE_FORMAT_FLOORS.get(api_key, floor), handler.name
        below_kio = range(handler.min_version, legacy.proxy_version(api_key))
        assert [v for v in below_kio if legacy.is_legacy(api_key, v)] == list(below_kio)


def _proxy_names(api_key: int, kind: str) -> set[str]:
    """Every field name of the proxy version's classes (and its `_ms` wire spelling)."""
    version = legacy.proxy_version(api_key)
    module = (
        messages.request_module(api_key, version)
        if kind == "request"
        else messages.response_module(api_key, version)
    )
    names: set[str] = set()
    for value in vars(module).values():
        if dataclasses.is_dataclass(value):
            for field in dataclasses.fields(value):
                names |= {field.name, f"{field.name}_ms"}
    return names


# Legacy response fields that newer ones replaced, as they come back through the proxy
# class: ListOffsets v0's list keeps its first offset; DescribeConfigs v0's flag is written
# false whatever the source, as Kafka 3.9 writes it.
_THROUGH_PROXY = {"OldStyleOffsets": lambda offsets: offsets[:1], "IsDefault": lambda flag: False}


def _at_defaults(fields: list[Json], values: Json, message: Json, keep: set[str]) -> Json:
    """`values` with every field whose snake-case name is not in `keep` at its default."""
    out: Json = {}
    for field in fields:
        if field["name"] not in values:
            continue
        value = values[field["name"]]
        snake = legacy_snake(field["name"])
        if message["type"] == "response" and field["name"] in _THROUGH_PROXY:
            value = _THROUGH_PROXY[field["name"]](value)
        elif snake not in keep:
            kind = field["type"]
            default = field.get("default")
            if kind.startswith("[]"):
                value = []
            elif kind == "bool":
                value = default == "true"
            elif kind.startswith("int"):
                value = int(default or "0", 0)
            else:
                value = None if default == "null" else (default or "")
        elif field["type"].startswith("[]") and field["type"][2:] not in _PRIMITIVES:
            inner = _struct_fields(field, message)
            value = [_at_defaults(inner, item, message, keep) for item in value]
        out[field["name"]] = value
    return out


def legacy_snake(name: str) -> str:
    import re

    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@needs_schemas
@pytest.mark.parametrize("pair", _legacy_pairs(), ids=_pair_id)
def test_legacy_request_known_answer(pair: tuple[int, int]) -> None:
    """Every field of an old version is read where Kafka's definition puts it; what the
    handlers see (the proxy class) re-encodes to the same frame, except fields the proxy
    does not have, which Kafka 3.9 ignores too (they come back at their defaults)."""
    api_key, version = pair
    spec = _definition("request", api_key)
    sampler = Sampler(spec, version)
    body = sampler.struct(spec["fields"])
    frame = reference_request(api_key, version, 0x01020304, "known-answer", body)

    plain = legacy.read_request(frame[4:])
    assert plain.pop("client_id") == "known-answer"
    assert [plain.pop(k) for k in ("api_key", "api_version", "correlation_id")] == [
        api_key,
        version,
        0x01020304,
    ]
    assert _plain(plain) == _values(spec["fields"], body, sampler.encoder)

    header, request = messages.decode_request(frame[4:])
    assert header == RequestHeader(api_key, version, 0x01020304, "known-answer")
    assert type(request).__version__ == legacy.proxy_version(api_key)
    kept = _at_defaults(spec["fields"], body, spec, _proxy_names(api_key, "request"))
    expected = reference_request(api_key, version, 0x01020304, "known-answer", kept)
    assert messages.encode_request(header, request).hex() == expected.hex()


@needs_schemas
@pytest.mark.parametrize("pair", _legacy_pairs(), ids=_pair_id)
def test_legacy_response_known_answer(pair: tuple[int, int]) -> None:
    """An old version's response is read field by field, and a proxy-class response is
    written in exactly Kafka's layout (header v0). The fields a newer one replaced
    (ListOffsets v0's offsets list, DescribeConfigs v0's is_default) go through the
    fields that replaced them (tests/versions/test_legacy_versions.py: real values)."""
    api_key, version = pair
    spec = _definition("response", api_key)
    sampler = Sampler(spec, version)
    body = sampler.struct(spec["fields"])
    frame = reference_response(api_key, version, 0x7FFFFFFE, body)

    plain = legacy.read_response(frame[4:], api_key, version)
    assert plain.pop("correlation_id") == 0x7FFFFFFE
    assert _plain(plain) == _values(spec["fields"], body, sampler.encoder)

    correlation_id, response = messages.decode_response(frame[4:], api_key, version)
    assert correlation_id == 0x7FFFFFFE
    kept = _at_defaults(spec["fields"], body, spec, _proxy_names(api_key, "response"))
    expected = reference_response(api_key, version, 0x7FFFFFFE, kept)
    assert messages.encode_response(correlation_id, response, version).hex() == expected.hex()


# --- frames written out by hand -------------------------------------------------------

# The client id "client" (636c69656e74) keeps its int16 length in every header version.

# ApiVersions v3: request header v2 (a tagged-field count after the client id), then
# compact strings (unsigned varint length + 1) and an empty tag section.
API_VERSIONS_V3_REQUEST = bytes.fromhex(
    "00000019"  # size 25
    "0012 0003 00000007 0006 636c69656e74 00"  # key 18, v3, correlation 7, client, no tags
    "03 6d62"  # ClientSoftwareName "mb"
    "04 312e30"  # ClientSoftwareVersion "1.0"
    "00"  # no tagged fields
)

# Metadata v1: request header v1, then an int32 array count and int16-length strings.
METADATA_V1_REQUEST = bytes.fromhex(
    "0000001c"  # size 28
    "0003 0001 00000001 0006 636c69656e74"  # key 3, v1, correlation 1, client
    "00000001 0006 6f7264657273"  # Topics: ["orders"]
)
METADATA_V1_ALL_TOPICS = bytes.fromhex(
    "00000014"  # size 20
    "0003 0001 00000001 0006 636c69656e74"
    "ffffffff"  # Topics null: every topic
)

# Produce v3: header v1; TransactionalId null, Acks -1, TimeoutMs 30000, one topic with
# one partition carrying the idempotent batch above as its int32-length records.
PRODUCE_V3_HEADER = bytes.fromhex(
    "0000009b"  # size 155
    "0000 0003 00000002 0006 636c69656e74"  # key 0, v3, correlation 2, client
)
PRODUCE_V3_REQUEST = (
    PRODUCE_V3_HEADER
    + bytes.fromhex(
        "ffff"  # TransactionalId null
        "ffff"  # Acks -1
        "00007530"  # TimeoutMs 30000
        "00000001 0006 6f7264657273"  # one topic, "orders"
        "00000001 00000000"  # one partition, index 0
        "0000006b"  # Records: 107 bytes
    )
    + BATCH_IDEMPOTENT
)

# Heartbeat v4 (flexible): GroupInstanceId null is a single 00 byte.
HEARTBEAT_V4_REQUEST = bytes.fromhex(
    "0000001e"  # size 30
    "000c 0004 00000003 0006 636c69656e74 00"  # header v2
    "03 6731"  # GroupId "g1"
    "00000005"  # GenerationId 5
    "04 6d2d31"  # MemberId "m-1"
    "00"  # GroupInstanceId null
    "00"  # no tagged fields
)

# ApiVersions v3 response: header v0 (no tag section) even though v3 is flexible;
# FinalizedFeaturesEpoch is tagged field 1 and, not at its default -1, is written.
API_VERSIONS_V3_RESPONSE = bytes.fromhex(
    "00000024"  # size 36
    "00000007"  # correlation id 7
    "0000"  # ErrorCode
    "03"  # two ApiKeys
    "0003 0000 000d 00"  # Metadata 0-13, no tags
    "0012 0000 0004 00"  # ApiVersions 0-4, no tags
    "00000000"  # ThrottleTimeMs
    "01 01 08 00000000 00000005"  # one tagged field: tag 1, 8 bytes, epoch 5
)

# Metadata v1 response: header v0, one broker (rack null), controller 0, one topic.
METADATA_V1_RESPONSE = bytes.fromhex(
    "0000004e"  # size 78
    "00000001"  # correlation id
    "00000001 00000000 0009 6c6f63616c686f7374 00002384 ffff"  # node 0, localhost:9092
    "00000000"  # ControllerId 0
    "00000001 0000 0006 6f7264657273 00"  # topic "orders", no error, not internal
    "00000001 0000 00000000 00000000"  # partition 0, no error, leader 0
    "00000001 00000000"  # ReplicaNodes [0]
    "00000001 00000000"  # IsrNodes [0]
)

HAND_WRITTEN: list[tuple[str, int, int, bytes, Json]] = [
    (
        "request",
        18,
        3,
        API_VERSIONS_V3_REQUEST,
        {"ClientSoftwareName": "mb", "ClientSoftwareVersion": "1.0"},
    ),
    ("request", 3, 1, METADATA_V1_REQUEST, {"Topics": [{"Name": "orders"}]}),
    ("request", 3, 1, METADATA_V1_ALL_TOPICS, {"Topics": None}),
    (
        "request",
        0,
        3,
        PRODUCE_V3_REQUEST,
        {
            "TransactionalId": None,
            "Acks": -1,
            "TimeoutMs": 30000,
            "TopicData": [
                {"Name": "orders", "PartitionData": [{"Index": 0, "Records": BATCH_IDEMPOTENT}]}
            ],
        },
    ),
    (
        "request",
        12,
        4,
        HEARTBEAT_V4_REQUEST,
        {"GroupId": "g1", "GenerationId": 5, "MemberId": "m-1", "GroupInstanceId": None},
    ),
    (
        "response",
        18,
        3,
        API_VERSIONS_V3_RESPONSE,
        {
            "ErrorCode": 0,
            "ApiKeys": [
                {"ApiKey": 3, "MinVersion": 0, "MaxVersion": 13},
                {"ApiKey": 18, "MinVersion": 0, "MaxVersion": 4},
            ],
            "ThrottleTimeMs": 0,
            "SupportedFeatures": [],
            "FinalizedFeaturesEpoch": 5,
            "FinalizedFeatures": [],
            "ZkMigrationReady": False,
        },
    ),
    (
        "response",
        3,
        1,
        METADATA_V1_RESPONSE,
        {
            "Brokers": [{"NodeId": 0, "Host": "localhost", "Port": 9092, "Rack": None}],
            "ControllerId": 0,
            "Topics": [
                {
                    "ErrorCode": 0,
                    "Name": "orders",
                    "IsInternal": False,
                    "Partitions": [
                        {
                            "ErrorCode": 0,
                            "PartitionIndex": 0,
                            "LeaderId": 0,
                            "ReplicaNodes": [0],
                            "IsrNodes": [0],
                        }
                    ],
                }
            ],
        },
    ),
]
_REQUEST_CORRELATION_AT = 8  # after the size, api key and version
_RESPONSE_CORRELATION_AT = 4  # after the size


def _hand_id(vector: tuple[str, int, int, bytes, Json]) -> str:
    kind, api_key, version, frame, _ = vector
    return f"{messages.api_name(api_key)}-v{version}-{kind}-{len(frame)}B"


@pytest.mark.parametrize("vector", HAND_WRITTEN, ids=_hand_id)
def test_hand_written_frame_lengths(vector: tuple[str, int, int, bytes, Json]) -> None:
    """Each literal's size prefix counts the bytes after it."""
    frame = vector[3]
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4


@needs_schemas
@pytest.mark.parametrize("vector", HAND_WRITTEN, ids=_hand_id)
def test_schema_encoder_reproduces_hand_written_frames(
    vector: tuple[str, int, int, bytes, Json],
) -> None:
    """The encoder above agrees with frames written out by hand, so it can stand in for
    hand-written hex for the other APIs."""
    kind, api_key, version, frame, body = vector
    if kind == "request":
        (correlation_id,) = struct.unpack_from(">i", frame, _REQUEST_CORRELATION_AT)
        built = reference_request(api_key, version, correlation_id, "client", body)
    else:
        (correlation_id,) = struct.unpack_from(">i", frame, _RESPONSE_CORRELATION_AT)
        built = reference_response(api_key, version, correlation_id, body)
    assert built.hex() == frame.hex()


@needs_schemas
@pytest.mark.parametrize("vector", HAND_WRITTEN, ids=_hand_id)
def test_hand_written_frames_decode_and_reencode(
    vector: tuple[str, int, int, bytes, Json],
) -> None:
    kind, api_key, version, frame, body = vector
    spec = _definition(kind, api_key)
    flexible = _is_flexible(api_key, version)
    expected = _values(spec["fields"], body, SchemaEncoder(spec, version, flexible))
    if kind == "request":
        header, decoded = messages.decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.client_id) == (
            api_key,
            version,
            "client",
        )
        assert _kio_values(decoded) == expected
        assert messages.encode_request(header, decoded).hex() == frame.hex()
    else:
        correlation_id, decoded = messages.decode_response(frame[4:], api_key, version)
        assert correlation_id == struct.unpack_from(">i", frame, _RESPONSE_CORRELATION_AT)[0]
        assert _kio_values(decoded) == expected
        assert messages.encode_response(correlation_id, decoded).hex() == frame.hex()


def test_api_versions_v3_request_from_fields() -> None:
    request = make_request(18, 3, client_software_name="mb", client_software_version="1.0")
    header = RequestHeader(18, 3, 7, "client")
    assert messages.encode_request(header, request).hex() == API_VERSIONS_V3_REQUEST.hex()


def test_metadata_v1_request_from_fields() -> None:
    header = RequestHeader(3, 1, 1, "client")
    topics = (make(3, 1, "MetadataRequestTopic", name="orders"),)
    assert (
        messages.encode_request(header, make_request(3, 1, topics=topics)).hex()
        == METADATA_V1_REQUEST.hex()
    )
    assert (
        messages.encode_request(header, make_request(3, 1, topics=None)).hex()
        == METADATA_V1_ALL_TOPICS.hex()
    )
    decoded_header, decoded = messages.decode_request(METADATA_V1_REQUEST[4:])
    assert decoded_header == header
    assert [t.name for t in decoded.topics] == ["orders"]
    assert messages.decode_request(METADATA_V1_ALL_TOPICS[4:])[1].topics is None


def test_produce_v3_request_from_fields() -> None:
    partition = make(0, 3, "PartitionProduceData", index=0, records=Records(BATCH_IDEMPOTENT))
    topic = make(0, 3, "TopicProduceData", name="orders", partition_data=(partition,))
    request = make_request(
        0,
        3,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(topic,),
    )
    encoded = messages.encode_request(RequestHeader(0, 3, 2, "client"), request)
    assert encoded[:20] == PRODUCE_V3_HEADER
    assert encoded.hex() == PRODUCE_V3_REQUEST.hex()
    header, decoded = messages.decode_request(PRODUCE_V3_REQUEST[4:])
    assert header == RequestHeader(0, 3, 2, "client")
    [data] = decoded.topic_data[0].partition_data
    assert list(records.iter_records(bytes(data.records)))[1].value == b"world"


def test_heartbeat_v4_request_from_fields() -> None:
    request = make_request(12, 4, group_id="g1", generation_id=5, member_id="m-1")
    encoded = messages.encode_request(RequestHeader(12, 4, 3, "client"), request)
    assert encoded.hex() == HEARTBEAT_V4_REQUEST.hex()
