"""Record batches (magic v2) as raw bytes: a view over the fixed header, validation,
offset assignment by rewriting the header, and a small codec for tests and tools.

Layout of the 61-byte batch header (Kafka's DefaultRecordBatch):
    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordCount int32
The CRC32C covers everything from attributes to the end of the batch, so the base offset
and leader epoch can be rewritten without recomputing it.

Reading records (off the hot path) decompresses as a stream and only as far as the
reader goes, and refuses a payload that expands past a limit (decompression bombs).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import crc32c as _crc32c

# Optional codec libraries (none is a runtime dependency). Without them a batch of that
# codec cannot be looked into, and callers answer at batch granularity. zstandard and lz4
# decompress as a stream; cramjam (what aiokafka installs) decodes snappy, and zstd or lz4
# into a bounded buffer when the streaming library is missing.
try:
    import cramjam as _cramjam
except ImportError:  # pragma: no cover - depends on the environment
    _cramjam = None  # type: ignore[assignment]
try:
    import zstandard as _zstandard
except ImportError:  # pragma: no cover - depends on the environment
    _zstandard = None  # type: ignore[assignment]
try:
    import lz4.frame as _lz4_frame  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - depends on the environment
    _lz4_frame = None

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength precede what batchLength counts
CRC_START = 21
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08  # set: LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

# Decoding is off the hot path (timestamp lookups, tools). A compressed batch may expand
# to at most this many bytes (BrokerConfig.max_decompressed_batch_bytes overrides it), and
# it is decompressed as a stream, DECOMPRESS_STEP bytes at a time, so a lookup that finds
# its record early stops early and holds one record plus one step, not the whole payload.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
DECOMPRESS_STEP = 256 * 1024

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, version, compatible version

_HEADER = struct.Struct(">qiibIhiqqqhii")
BASE_OFFSET = struct.Struct(">q")
# baseOffset, batchLength and partitionLeaderEpoch: the header fields before the CRC, which
# the broker sets when it stores a batch (so rewriting them leaves the CRC valid).
STORED_PREFIX = struct.Struct(">qii")
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


class DecompressionLimitExceeded(InvalidBatch):
    """A compressed batch expands beyond the allowed size (a decompression bomb?)."""


class CodecUnavailable(InvalidBatch):
    """No installed library decodes this batch's compression codec."""


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


def split_batches(data: bytes | memoryview) -> list[tuple[BatchHeader, bytes | memoryview]]:
    """Split a records field into batches, checking framing, magic and CRC of each; a
    batch is a slice of `data` (a view of a view: no copy)."""
    batches: list[tuple[BatchHeader, bytes | memoryview]] = []
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


def with_base_offset(batch: bytes | memoryview, base_offset: int, leader_epoch: int) -> bytes:
    """Return the batch with its base offset and partition leader epoch rewritten, as a
    broker stores it (CRC unaffected)."""
    # join over a view copies the batch once; `+ batch[16:]` would copy it twice
    with memoryview(batch) as view:
        prefix = STORED_PREFIX.pack(base_offset, len(batch) - LOG_OVERHEAD, leader_epoch)
        return b"".join((prefix, view[STORED_PREFIX.size :]))


def with_log_append_time(batch: bytes | memoryview, base_offset: int, now_ms: int) -> bytes:
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


def _read_varint(data: bytes | bytearray, position: int) -> tuple[int, int]:
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


# --- decompression: every codec streamed, or bounded before it starts ---


def _gzip_pieces(payload: bytes, limit: int) -> Iterator[bytes]:
    inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
    data = payload
    while not inflater.eof:
        try:
            piece = inflater.decompress(data, DECOMPRESS_STEP)
        except zlib.error as exc:
            raise InvalidBatch(f"cannot decode gzip payload: {exc}") from exc
        if not piece:
            break  # input used up (a truncated stream ends here; the records tell)
        data = inflater.unconsumed_tail
        yield piece


def _zstd_pieces(payload: bytes, limit: int) -> Iterator[bytes]:
    if _zstandard is None:
        yield from _cramjam_bounded(4, payload, limit)
        return
    # The frame's window is memory the decoder allocates: bound it too.
    window = min(max(limit, 8 << 20), 1 << 31)
    decompressor = _zstandard.ZstdDecompressor(max_window_size=window)
    try:
        with decompressor.stream_reader(payload, read_across_frames=True) as reader:
            while piece := reader.read(DECOMPRESS_STEP):
                yield piece
    except _zstandard.ZstdError as exc:
        raise InvalidBatch(f"cannot decode zstd payload: {exc}") from exc


def _lz4_pieces(payload: bytes, limit: int) -> Iterator[bytes]:
    if _lz4_frame is None:
        yield from _cramjam_bounded(3, payload, limit)
        return
    decompressor = _lz4_frame.LZ4FrameDecompressor()
    data = payload
    while not decompressor.eof:
        try:
            piece = decompressor.decompress(data, max_length=DECOMPRESS_STEP)
        except RuntimeError as exc:  # lz4.frame reports every decoding error so
            raise InvalidBatch(f"cannot decode lz4 payload: {exc}") from exc
        data = b""  # the decompressor keeps what it has not used yet
        if not piece:
            break  # input used up (a truncated frame ends here; the records tell)
        yield piece


def _cramjam_bounded(codec: int, payload: bytes, limit: int) -> Iterator[bytes]:
    """zstd or lz4 through cramjam, which cannot stream: decode into a buffer that grows
    by steps up to the limit (cramjam stops when the buffer is full)."""
    name = CODEC_NAMES[codec]
    if _cramjam is None:
        raise CodecUnavailable(
            f"cannot decode {name} batches: install {'zstandard' if codec == 4 else 'lz4'}"
        )
    decompress_into = _cramjam.zstd.decompress_into if codec == 4 else _cramjam.lz4.decompress_into
    size = min(limit + 1, 1 << 20)
    while True:
        buffer = bytearray(size)
        try:
            written = int(decompress_into(payload, buffer))
        except _cramjam.DecompressionError as exc:
            if "failed to write whole buffer" not in str(exc):
                raise InvalidBatch(f"cannot decode {name} payload: {exc}") from exc
            written = size
        if written < size:
            with memoryview(buffer) as view:
                for start in range(0, written, DECOMPRESS_STEP):
                    yield bytes(view[start : min(start + DECOMPRESS_STEP, written)])
            return
        del buffer  # before a larger one is made
        if size > limit:
            raise DecompressionLimitExceeded(f"{name} payload expands beyond {limit} bytes")
        size = limit + 1 if size * 4 >= limit else size * 4


def _read_uvarint32(data: bytes, position: int) -> tuple[int, int]:
    """Snappy's preamble: the uncompressed length as an unsigned little-endian varint."""
    value = 0
    for shift in range(0, 35, 7):
        if position >= len(data):
            break
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
    raise InvalidBatch("cannot decode snappy payload: bad length preamble")


def _snappy_block(block: bytes, budget: int, limit: int) -> bytes:
    """One raw snappy block, its declared length checked against the budget first."""
    assert _cramjam is not None
    length, _ = _read_uvarint32(block, 0)
    if length > budget:
        raise DecompressionLimitExceeded(f"snappy payload expands beyond {limit} bytes")
    try:
        out = bytes(_cramjam.snappy.decompress_raw(block))
    except _cramjam.DecompressionError as exc:
        raise InvalidBatch(f"cannot decode snappy payload: {exc}") from exc
    if len(out) != length:  # the library checks this too; never trust it with the cap
        raise InvalidBatch("cannot decode snappy payload: length does not match its preamble")
    return out


def _snappy_pieces(payload: bytes, limit: int) -> Iterator[bytes]:
    """Raw snappy, or the xerial framing Java clients use: header, then sized blocks."""
    if _cramjam is None:
        raise CodecUnavailable("cannot decode snappy batches: install cramjam")
    if not payload.startswith(_XERIAL_MAGIC):
        yield _snappy_block(payload, limit, limit)
        return
    budget = limit
    position = _XERIAL_HEADER_SIZE
    while position < len(payload):
        if position + 4 > len(payload):
            raise InvalidBatch("cannot decode snappy payload: truncated xerial block length")
        (size,) = struct.unpack_from(">i", payload, position)
        position += 4
        if size < 0 or position + size > len(payload):
            raise InvalidBatch(f"cannot decode snappy payload: xerial block of {size} bytes")
        piece = _snappy_block(payload[position : position + size], budget, limit)
        budget -= len(piece)
        position += size
        yield piece


_CODECS: dict[int, Callable[[bytes, int], Iterator[bytes]]] = {
    1: _gzip_pieces,
    2: _snappy_pieces,
    3: _lz4_pieces,
    4: _zstd_pieces,
}


def decompress_stream(codec: int, payload: bytes, limit: int) -> Iterator[bytes]:
    """The payload decompressed, piece by piece; past `limit` bytes in all, refused.

    An uncompressed payload (codec 0) comes back as it is, in one piece.
    """
    if codec == 0:
        yield payload
        return
    pieces = _CODECS.get(codec)
    if pieces is None:
        raise InvalidBatch(f"cannot decode batches with compression codec {codec}")
    produced = 0
    for piece in pieces(payload, limit):
        produced += len(piece)
        if produced > limit:
            raise DecompressionLimitExceeded(
                f"{CODEC_NAMES[codec]} payload expands beyond {limit} bytes"
            )
        yield piece


class _Window:
    """Reads through decompressed pieces, pulling the next one only when needed and
    keeping only the unread bytes: at most one record and one piece are held."""

    __slots__ = ("_buffer", "_pieces", "_position")

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces
        self._buffer = bytearray()
        self._position = 0

    def _fill(self, size: int) -> bool:
        while len(self._buffer) - self._position < size:
            piece = next(self._pieces, None)
            if piece is None:
                return False
            del self._buffer[: self._position]
            self._position = 0
            self._buffer += piece
        return True

    def varint(self) -> int:
        self._fill(10)
        value, self._position = _read_varint(self._buffer, self._position)
        return value

    def take(self, size: int) -> bytes | None:
        if not self._fill(size):
            return None
        start = self._position
        self._position += size
        return bytes(self._buffer[start : self._position])


def iter_records(
    batch: bytes | memoryview, *, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES
) -> Iterator[Record]:
    """Decode the records of one batch, decompressing only as far as they are read.

    Raises InvalidBatch for malformed records and for codecs it cannot read (its
    subclass CodecUnavailable when the codec's library is missing), and the subclass
    DecompressionLimitExceeded when a compressed payload expands beyond the limit.
    """
    header = read_header(batch)
    payload = bytes(batch[HEADER_SIZE : header.total_size])  # a stored batch may be a view
    window = _Window(decompress_stream(header.compression, payload, max_decompressed_bytes))
    for _ in range(header.record_count):
        length = window.varint()
        if length > max_decompressed_bytes and header.compression:
            raise DecompressionLimitExceeded(
                f"a record of {length} bytes is over the {max_decompressed_bytes}-byte limit"
            )
        # A CRC only proves the bytes arrived intact, not that the producer framed
        # them right: keep every record inside the payload.
        record = window.take(length) if length > 0 else None
        if record is None:
            raise InvalidBatch(f"record length {length} does not fit the batch")
        yield _decode_record(header, record)


def _decode_record(header: BatchHeader, record: bytes) -> Record:
    position = 1  # attributes
    timestamp_delta, position = _read_varint(record, position)
    offset_delta, position = _read_varint(record, position)
    key, position = _read_bytes(record, position)
    value, position = _read_bytes(record, position)
    header_count, position = _read_varint(record, position)
    headers = []
    for _ in range(header_count):
        name, position = _read_bytes(record, position)
        header_value, position = _read_bytes(record, position)
        try:
            headers.append(((name or b"").decode(), header_value))
        except UnicodeDecodeError as exc:
            raise InvalidBatch("record header name is not UTF-8") from exc
    timestamp = (
        header.max_timestamp
        if header.attributes & TIMESTAMP_TYPE_FLAG
        else header.base_timestamp + timestamp_delta
    )
    return Record(
        offset=header.base_offset + offset_delta,
        timestamp=timestamp,
        key=key,
        value=value,
        headers=tuple(headers),
    )


def _write_bytes(item: bytes | None, out: bytearray) -> None:
    if item is None:
        _write_varint(-1, out)
    else:
        _write_varint(len(item), out)
        out += item


def encode_batch(
    batch_records: Sequence[Record],
    *,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A v2 batch of `batch_records` under the header fields given, written uncompressed
    (the compression bits of `attributes` are cleared). Each record's offset and
    timestamp are absolute (as iter_records yields them) and written as deltas from
    `base_offset` and `base_timestamp`; `last_offset_delta` may pass the last record's
    (compaction keeps it, so producer sequences stay valid)."""
    body = bytearray()
    for item in batch_records:
        record = bytearray(b"\x00")
        _write_varint(item.timestamp - base_timestamp, record)
        _write_varint(item.offset - base_offset, record)
        _write_bytes(item.key, record)
        _write_bytes(item.value, record)
        _write_varint(len(item.headers), record)
        for name, header_value in item.headers:
            _write_bytes(name.encode(), record)
            _write_bytes(header_value, record)
        _write_varint(len(record), body)
        body += record
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes & ~COMPRESSION_MASK,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(batch_records),
        )
        + body
    )
    batch_length = 4 + 1 + 4 + len(after_crc)
    return (
        struct.pack(
            ">qiibI", base_offset, batch_length, partition_leader_epoch, 2, crc32c(after_crc)
        )
        + after_crc
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
    attributes: int = 0,
) -> bytes:
    """Encode an uncompressed batch of (key, value) records sharing one timestamp."""
    shared = tuple(headers)
    return encode_batch(
        [
            Record(base_offset + delta, timestamp_ms, key, value, shared)
            for delta, (key, value) in enumerate(records)
        ],
        base_offset=base_offset,
        last_offset_delta=len(records) - 1,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


# Control records (markers): key = version 0 and type, value = version 0 and the
# coordinator epoch (Kafka's ControlRecordType and EndTransactionMarker).
ABORT_MARKER = 0
COMMIT_MARKER = 1
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


def control_batch(
    producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int, now_ms: int
) -> bytes:
    """The batch of one commit or abort marker ending a producer's transaction."""
    key = _CONTROL_KEY.pack(0, COMMIT_MARKER if commit else ABORT_MARKER)
    return build_batch(
        [(key, _MARKER_VALUE.pack(0, coordinator_epoch))],
        timestamp_ms=now_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG,
    )
