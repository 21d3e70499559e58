"""Record batches (magic v2) as raw bytes: a view over the fixed header, validation,
offset assignment by rewriting the header, and a small codec for tests and tools.

Layout of the 61-byte batch header (Kafka's DefaultRecordBatch):
    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordCount int32
The CRC32C covers everything from attributes to the end of the batch, so the base offset
and leader epoch can be rewritten without recomputing it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import crc32c as _crc32c

try:  # optional: lets timestamp lookups see inside snappy, lz4 and zstd batches
    import cramjam as _cramjam
except ImportError:  # pragma: no cover - depends on the environment
    _cramjam = None  # type: ignore[assignment]

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength precede what batchLength counts
CRC_START = 21
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08  # set: LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

# Decoding is off the hot path (timestamp lookups, tools); a bound keeps a small
# compressed batch from expanding without limit.
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, version, compatible version

_HEADER = struct.Struct(">qiibIhiqqqhii")
BASE_OFFSET = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35
_ATTRIBUTES_AT = 21
_CRC_AT = 17


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return int(_crc32c.crc32c(data))


class InvalidBatch(Exception):
    """The bytes are not a well-formed record batch."""


class CorruptBatch(InvalidBatch):
    """The batch is framed correctly but its CRC does not match its contents."""


class UnsupportedMagic(InvalidBatch):
    """A legacy message set (magic 0 or 1); only magic 2 is accepted."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def total_size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def read_header(data: bytes | bytearray | memoryview, offset: int = 0) -> BatchHeader:
    if len(data) - offset < HEADER_SIZE:
        raise InvalidBatch("record batch shorter than its 61-byte header")
    return BatchHeader(*_HEADER.unpack_from(data, offset))


def split_batches(data: bytes) -> list[tuple[BatchHeader, bytes]]:
    """Split a records field into batches, checking framing, magic and CRC of each."""
    batches: list[tuple[BatchHeader, bytes]] = []
    position = 0
    view = memoryview(data)
    while position < len(data):
        if len(data) - position < LOG_OVERHEAD + 5:
            raise InvalidBatch("truncated record batch")
        magic = data[position + 16]
        if magic != 2:
            raise UnsupportedMagic(f"message format magic {magic} is not supported")
        header = read_header(data, position)
        end = position + header.total_size
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or end > len(data):
            raise InvalidBatch(f"batch length {header.batch_length} does not match the data")
        # CRC first: a damaged count or delta is reported as the damage it is.
        if crc32c(view[position + CRC_START : end]) != header.crc:
            raise CorruptBatch("record batch CRC32C mismatch")
        if header.record_count < 0 or header.last_offset_delta < 0:
            raise InvalidBatch("negative record count or offset delta")
        batches.append((header, data[position:end]))
        position = end
    return batches


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """Return the batch with its base offset rewritten (CRC unaffected)."""
    # join over a view copies the batch once; `+ batch[8:]` would copy it twice
    with memoryview(batch) as view:
        return b"".join((BASE_OFFSET.pack(base_offset), view[8:]))


def with_log_append_time(batch: bytes, base_offset: int, now_ms: int) -> bytes:
    """Stamp a batch with LogAppendTime: set the flag and max timestamp, redo the CRC."""
    out = bytearray(batch)
    BASE_OFFSET.pack_into(out, 0, base_offset)
    (attributes,) = struct.unpack_from(">h", out, _ATTRIBUTES_AT)
    struct.pack_into(">h", out, _ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_FLAG)
    struct.pack_into(">q", out, _MAX_TIMESTAMP_AT, now_ms)
    struct.pack_into(">I", out, _CRC_AT, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


# --- record codec: used off the hot path (timestamp lookups, tests, tools) ---


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if position >= len(data):
            raise InvalidBatch("truncated varint")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidBatch("varint too long")
    return (raw >> 1) ^ -(raw & 1), position


def _write_varint(value: int, out: bytearray) -> None:
    raw = (value << 1) ^ (value >> 63)
    while raw & ~0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _read_bytes(data: bytes, position: int) -> tuple[bytes | None, int]:
    length, position = _read_varint(data, position)
    if length < 0:
        return None, position
    if position + length > len(data):
        raise InvalidBatch("truncated record field")
    return data[position : position + length], position + length


def _decompress(codec: int, payload: bytes) -> bytes | None:
    if codec == 0:
        return payload
    if codec == 1:
        inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
        try:
            out = inflater.decompress(payload, MAX_DECOMPRESSED_BYTES)
        except zlib.error as exc:
            raise InvalidBatch(f"gzip payload cannot be decompressed: {exc}") from exc
        if inflater.unconsumed_tail:
            raise InvalidBatch(f"gzip payload expands beyond {MAX_DECOMPRESSED_BYTES} bytes")
        return out
    if _cramjam is None:
        return None  # other codecs need cramjam; callers fall back to batch level
    try:
        if codec == 2:
            return _snappy_decompress(payload)
        if codec == 3:
            return bytes(_cramjam.lz4.decompress(payload))
        if codec == 4:
            return bytes(_cramjam.zstd.decompress(payload))
    except _cramjam.DecompressionError as exc:
        raise InvalidBatch(f"cannot decode {CODEC_NAMES[codec]} payload: {exc}") from exc
    return None


def _snappy_decompress(payload: bytes) -> bytes:
    """Raw snappy, or the xerial framing Java clients use: header, then sized blocks."""
    assert _cramjam is not None
    if not payload.startswith(_XERIAL_MAGIC):
        return bytes(_cramjam.snappy.decompress_raw(payload))
    out = bytearray()
    position = _XERIAL_HEADER_SIZE
    while position < len(payload):
        if position + 4 > len(payload):
            raise InvalidBatch("truncated xerial snappy block length")
        (size,) = struct.unpack_from(">i", payload, position)
        position += 4
        if size < 0 or position + size > len(payload):
            raise InvalidBatch(f"xerial snappy block of {size} bytes does not fit")
        out += bytes(_cramjam.snappy.decompress_raw(payload[position : position + size]))
        position += size
    return bytes(out)


def iter_records(batch: bytes) -> Iterator[Record]:
    """Decode the records of one batch. Raises InvalidBatch for codecs it cannot read."""
    header = read_header(batch)
    payload = _decompress(header.compression, batch[HEADER_SIZE : header.total_size])
    if payload is None:
        raise InvalidBatch(f"cannot decode {CODEC_NAMES.get(header.compression)} batches")
    position = 0
    for _ in range(header.record_count):
        length, position = _read_varint(payload, position)
        end = position + length
        # A CRC only proves the bytes arrived intact, not that the producer framed
        # them right: keep every record inside the payload.
        if length <= 0 or end > len(payload):
            raise InvalidBatch(f"record length {length} does not fit the batch")
        position += 1  # attributes
        timestamp_delta, position = _read_varint(payload, position)
        offset_delta, position = _read_varint(payload, position)
        key, position = _read_bytes(payload, position)
        value, position = _read_bytes(payload, position)
        header_count, position = _read_varint(payload, position)
        headers = []
        for _ in range(header_count):
            name, position = _read_bytes(payload, position)
            header_value, position = _read_bytes(payload, position)
            try:
                headers.append(((name or b"").decode(), header_value))
            except UnicodeDecodeError as exc:
                raise InvalidBatch("record header name is not UTF-8") from exc
        if position > end:
            raise InvalidBatch("record fields overrun the record length")
        position = end
        timestamp = (
            header.max_timestamp
            if header.attributes & TIMESTAMP_TYPE_FLAG
            else header.base_timestamp + timestamp_delta
        )
        yield Record(
            offset=header.base_offset + offset_delta,
            timestamp=timestamp,
            key=key,
            value=value,
            headers=tuple(headers),
        )


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp_ms: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    headers: Sequence[tuple[str, bytes]] = (),
) -> bytes:
    """Encode an uncompressed batch of (key, value) records sharing one timestamp."""
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        record = bytearray(b"\x00")
        _write_varint(0, record)
        _write_varint(delta, record)
        for item in (key, value):
            if item is None:
                _write_varint(-1, record)
            else:
                _write_varint(len(item), record)
                record += item
        _write_varint(len(headers), record)
        for name, header_value in headers:
            encoded = name.encode()
            _write_varint(len(encoded), record)
            record += encoded
            _write_varint(len(header_value), record)
            record += header_value
        _write_varint(len(record), body)
        body += record
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,
            len(records) - 1,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + body
    )
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, -1, 2, crc32c(after_crc)) + after_crc
