"""Decompression bombs: every codec is streamed and capped, a lookup stops at its record.

Regression for "a 32 KB zstd batch named 10 times in ListOffsets took 2.1 GiB and 25 s":
only gzip was capped; zstd, lz4 and snappy (raw and xerial-framed) expanded whole.
Bombs are built here from a stream of zeros (a record's value and its empty header list
are zeros), so building one never holds its decompressed size.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import struct
import subprocess
import sys
import textwrap
import types
import zlib
from collections.abc import Callable, Iterable, Iterator

import cramjam
import lz4.frame  # type: ignore[import-untyped]
import pytest
import zstandard
from aiokafka.codec import snappy_encode
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from harness.raw_client import encode, make, make_request
from minibroker.config import BrokerConfig
from minibroker.dispatch import Dispatcher
from minibroker.handlers import list_offsets
from minibroker.handlers.registry import RequestContext
from minibroker.protocol import messages, records
from minibroker.protocol.records import (
    CRC_START,
    HEADER_SIZE,
    CodecUnavailable,
    DecompressionLimitExceeded,
    InvalidBatch,
    build_batch,
    iter_records,
    read_header,
)
from minibroker.state.cluster import ClusterState, Node
from minibroker.state.log import MemoryLog
from tests.record_bytes import zigzag_varint

optional_bytes = st.none() | st.binary(max_size=64)
record_lists = st.lists(st.tuples(optional_bytes, optional_bytes), min_size=1, max_size=20)
CODEC_IDS = {"gzip": 1, "snappy-raw": 2, "snappy-xerial": 2, "lz4": 3, "zstd": 4}
CODECS = list(CODEC_IDS)
MiB = 1 << 20
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def _record_head(value_size: int, offset_delta: int = 0) -> bytes:
    """A record up to its value; value_size + 1 zero bytes complete it (zero headers)."""
    body = (
        b"\x00"
        + zigzag_varint(0)
        + zigzag_varint(offset_delta)
        + zigzag_varint(-1)
        + zigzag_varint(value_size)
    )
    return zigzag_varint(len(body) + value_size + 1) + body


def _zeros(count: int) -> Iterator[bytes]:
    chunk = bytes(MiB)
    while count > 0:
        yield chunk[: min(count, MiB)]
        count -= MiB


def _one_huge_record(size: int) -> tuple[int, Iterator[bytes]]:
    """(record count, payload chunks): one record with a `size`-byte value."""

    def chunks() -> Iterator[bytes]:
        yield _record_head(size)
        yield from _zeros(size + 1)

    return 1, chunks()


def _many_records(size: int) -> tuple[int, Iterator[bytes]]:
    """(record count, payload chunks): 1 KiB-value records adding up to about `size`."""
    record = _record_head(1024) + bytes(1025)
    per_chunk = MiB // len(record)
    chunks = max(size // (per_chunk * len(record)), 1)
    return per_chunk * chunks, iter([record * per_chunk] * chunks)


def _snappy_raw_zeros(prefix: bytes, zeros: int) -> bytes:
    """Raw snappy by hand: a literal (prefix and one zero), then copies of offset 1."""
    literal = prefix + b"\x00"
    assert 0 < len(literal) <= 60
    out = bytearray()
    length = len(prefix) + zeros
    while length > 0x7F:
        out.append((length & 0x7F) | 0x80)
        length >>= 7
    out.append(length)
    out += bytes([(len(literal) - 1) << 2]) + literal
    full, rest = divmod(zeros - 1, 64)
    out += bytes([(63 << 2) | 2, 1, 0]) * full
    if rest:
        out += bytes([((rest - 1) << 2) | 2, 1, 0])
    return bytes(out)


def _compress(codec: str, chunks: Iterable[bytes]) -> bytes:
    out = bytearray()
    if codec == "gzip":
        deflater = zlib.compressobj(1, zlib.DEFLATED, 31)
        for chunk in chunks:
            out += deflater.compress(chunk)
        out += deflater.flush()
    elif codec == "zstd":
        compressor = zstandard.ZstdCompressor(level=1).compressobj()
        for chunk in chunks:
            out += compressor.compress(chunk)
        out += compressor.flush()
    elif codec == "lz4":
        frame = lz4.frame.LZ4FrameCompressor()
        out += frame.begin()
        for chunk in chunks:
            out += frame.compress(chunk)
        out += frame.flush()
    elif codec == "snappy-xerial":
        out += XERIAL_HEADER
        for chunk in chunks:
            block = bytes(cramjam.snappy.compress_raw(chunk))
            out += struct.pack(">i", len(block)) + block
    else:
        assert codec == "snappy-raw"
        out += bytes(cramjam.snappy.compress_raw(b"".join(chunks)))
    return bytes(out)


def compressed_batch(
    codec: str, payload: bytes, record_count: int, *, max_timestamp: int = 1000
) -> bytes:
    """A batch of `record_count` records (timestamp 1000) whose payload is given, CRC valid."""
    head = bytearray(build_batch([(None, b"")], timestamp_ms=1000)[:HEADER_SIZE])
    struct.pack_into(">i", head, 8, HEADER_SIZE - 12 + len(payload))
    struct.pack_into(">h", head, 21, CODEC_IDS[codec])
    struct.pack_into(">i", head, 23, record_count - 1)
    struct.pack_into(">q", head, 35, max_timestamp)
    struct.pack_into(">i", head, 57, record_count)
    batch = head + payload
    struct.pack_into(">I", batch, 17, records.crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


def bomb(codec: str, size: int, *, shape: str = "many", max_timestamp: int = 1000) -> bytes:
    """A batch decompressing to about `size` bytes of valid-looking records."""
    if codec == "snappy-raw":  # raw snappy cannot be written as a stream: by hand
        head = _record_head(size)
        return compressed_batch(codec, _snappy_raw_zeros(head, size + 1), 1)
    count, chunks = (_many_records if shape == "many" else _one_huge_record)(size)
    return compressed_batch(codec, _compress(codec, chunks), count, max_timestamp=max_timestamp)


def normal(codec: str, items: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """`items` as a batch compressed the way clients do it (one-shot library calls)."""
    plain = build_batch(items)[HEADER_SIZE:]
    payload = {
        "gzip": gzip.compress,
        "zstd": zstandard.compress,
        "lz4": lz4.frame.compress,
        "snappy-raw": lambda data: bytes(cramjam.snappy.compress_raw(data)),
        "snappy-xerial": lambda data: snappy_encode(data, xerial_compatible=True),
    }[codec](plain)
    return compressed_batch(codec, payload, len(items))


ITEMS: list[tuple[bytes | None, bytes | None]] = [
    (b"k%d" % i, b"v" * (i * 37 % 500)) for i in range(3000)
] + [(None, b"big" * 300_000), (b"last", None)]  # the big one spans several pieces


@pytest.mark.parametrize("codec", CODECS)
def test_a_normal_compressed_batch_yields_its_records(codec: str) -> None:
    decoded = list(iter_records(normal(codec, ITEMS), max_decompressed_bytes=4 * MiB))
    assert [(r.key, r.value) for r in decoded] == ITEMS
    assert [r.offset for r in decoded] == list(range(len(ITEMS)))


@given(items=record_lists, codec=st.sampled_from(CODECS))
@settings(max_examples=100, deadline=None)
def test_compressed_batches_decode_like_the_plain_one(
    items: list[tuple[bytes | None, bytes | None]], codec: str
) -> None:
    decoded = list(iter_records(normal(codec, items)))
    assert [(r.key, r.value) for r in decoded] == items


@given(data=st.data(), codec=st.sampled_from(CODECS))
@settings(max_examples=300, deadline=None)
def test_damaged_compressed_payloads_raise_invalid_batch(data: st.DataObject, codec: str) -> None:
    """Damage under a valid CRC: each decoder fails as InvalidBatch, or decodes."""
    batch = bytearray(normal(codec, [(b"key", b"value" * 20)] * 5))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
        batch[position] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del batch[data.draw(st.integers(HEADER_SIZE, len(batch))) :]
    payload = bytes(batch[HEADER_SIZE:])
    damaged = compressed_batch(codec, payload, 5)
    with contextlib.suppress(InvalidBatch):
        list(iter_records(damaged, max_decompressed_bytes=MiB))


@pytest.mark.parametrize("shape", ["many", "one"])
@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_is_refused_past_the_limit(codec: str, shape: str) -> None:
    batch = bomb(codec, 32 * MiB, shape=shape)
    assert len(batch) < 2 * MiB
    with pytest.raises(DecompressionLimitExceeded):
        list(iter_records(batch, max_decompressed_bytes=MiB))


@pytest.mark.parametrize("codec", ["gzip", "snappy-xerial", "lz4", "zstd"])
def test_records_before_the_limit_are_read_lazily(codec: str) -> None:
    """Streaming: the first records come out although the whole batch is over the limit."""
    records_iter = iter_records(bomb(codec, 32 * MiB), max_decompressed_bytes=MiB)
    first = next(records_iter)
    assert (first.offset, first.timestamp, first.value) == (0, 1000, bytes(1024))


def test_the_limit_counts_decompressed_bytes_exactly() -> None:
    batch = normal("zstd", [(None, bytes(1000))] * 100)
    size = sum(len(piece) for piece in records.decompress_stream(4, batch[HEADER_SIZE:], MiB))
    assert len(list(iter_records(batch, max_decompressed_bytes=size))) == 100
    with pytest.raises(DecompressionLimitExceeded):
        list(iter_records(batch, max_decompressed_bytes=size - 1))


# --- snappy: known answers, and lengths checked before anything is decompressed ---

ABC = b"\x09\x08abc\x09\x03"  # 9 bytes: literal "abc", then copy 6 from offset 3


def _snappy(payload: bytes, limit: int = MiB) -> bytes:
    return b"".join(records.decompress_stream(2, payload, limit))


def test_raw_snappy_known_answer() -> None:
    assert _snappy(ABC) == b"abcabcabc"
    assert _snappy(b"\x05\x10hello") == b"hello"


def test_xerial_snappy_known_answer() -> None:
    framed = XERIAL_HEADER + struct.pack(">i", len(ABC)) + ABC
    framed += struct.pack(">i", 7) + b"\x05\x10hello"
    assert _snappy(framed) == b"abcabcabchello"
    assert _snappy(XERIAL_HEADER) == b""
    # What Java clients (and aiokafka) write: 32 KiB blocks behind the xerial header.
    data = bytes(range(256)) * 1000
    encoded = snappy_encode(data, xerial_compatible=True)
    assert encoded.startswith(XERIAL_HEADER)
    assert _snappy(encoded) == data


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (XERIAL_HEADER + b"\x00\x00", "truncated xerial block length"),
        (XERIAL_HEADER + struct.pack(">i", 50) + ABC, "xerial block of 50 bytes"),
        (XERIAL_HEADER + struct.pack(">i", -1), "xerial block of -1 bytes"),
        (XERIAL_HEADER + struct.pack(">i", -1) + b"x", "xerial block of -1 bytes"),
        (XERIAL_HEADER + struct.pack(">i", 0), "bad length preamble"),  # an empty block
        (b"\x0a\x08abc\x09\x03", "snappy: .+"),  # preamble says 10, the block makes 9
        (b"\xff\xff\xff\xff\xff\xff", "bad length preamble"),  # preamble varint too long
        # the preamble is a uint32: 5 varint bytes at most, although this one ends at 6
        (b"\x85\x80\x80\x80\x80\x00\x10hello", "bad length preamble"),
        (b"", "bad length preamble"),
    ],
    ids=[
        "xerial-truncated-block-length",
        "xerial-block-past-the-data",
        "xerial-block-of-minus-1",
        "xerial-block-of-minus-1-then-data",
        "xerial-empty-block",
        "preamble-over-the-block",
        "preamble-too-long",
        "preamble-of-6-bytes",
        "empty",
    ],
)
def test_malformed_snappy_is_invalid(payload: bytes, problem: str) -> None:
    with pytest.raises(InvalidBatch, match=rf"^cannot decode snappy payload: {problem}$"):
        _snappy(payload)


class _CountingCramjam:
    """cramjam, counting the snappy blocks it is asked to decompress."""

    DecompressionError = cramjam.DecompressionError

    def __init__(self) -> None:
        self.blocks = 0
        self.snappy = types.SimpleNamespace(decompress_raw=self._decompress_raw)

    def _decompress_raw(self, data: bytes) -> bytes:
        self.blocks += 1
        return bytes(cramjam.snappy.decompress_raw(data))


def test_snappy_lengths_are_checked_before_decompressing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counting = _CountingCramjam()
    monkeypatch.setattr(records, "_cramjam", counting)
    with pytest.raises(
        DecompressionLimitExceeded, match=r"^snappy payload expands beyond 8 bytes$"
    ):
        _snappy(ABC, limit=8)
    assert counting.blocks == 0
    block = b"\x05\x10hello"
    framed = XERIAL_HEADER + (struct.pack(">i", len(block)) + block) * 3
    assert _snappy(framed, limit=15) == b"hello" * 3
    assert counting.blocks == 3
    with pytest.raises(
        DecompressionLimitExceeded, match=r"^snappy payload expands beyond 14 bytes$"
    ):
        _snappy(framed, limit=14)  # the third block's preamble is over what is left
    assert counting.blocks == 5


# --- without the streaming libraries ---


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_cramjam_fallback_is_bounded_too(codec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_zstandard", None)
    monkeypatch.setattr(records, "_lz4_frame", None)
    decoded = list(iter_records(normal(codec, ITEMS), max_decompressed_bytes=4 * MiB))
    assert [(r.key, r.value) for r in decoded] == ITEMS
    with pytest.raises(DecompressionLimitExceeded):
        list(iter_records(bomb(codec, 32 * MiB), max_decompressed_bytes=MiB))
    with pytest.raises(InvalidBatch, match="cannot decode"):
        list(iter_records(compressed_batch(codec, b"not compressed at all", 1)))


@pytest.mark.parametrize("codec", ["snappy-raw", "snappy-xerial", "lz4", "zstd"])
def test_no_codec_library_is_a_clean_invalid_batch(
    codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("_cramjam", "_zstandard", "_lz4_frame"):
        monkeypatch.setattr(records, name, None)
    batch = normal(codec, [(b"k", b"v")])
    with pytest.raises(CodecUnavailable, match="cannot decode"):
        list(iter_records(batch))
    log = MemoryLog()
    log.append(read_header(batch), batch)
    assert log.offset_for_timestamp(500) == (0, 1000)  # batch granularity


# --- peak memory, measured in a child process ---

_CHILD = textwrap.dedent(
    """
    import gc, json, resource, sys
    from minibroker.protocol import records
    from tests.protocol.test_decompression import bomb
    codec, size, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    batch = bomb(codec, size)
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        for _ in records.iter_records(batch, max_decompressed_bytes=limit):
            pass
        outcome = "decoded"
    except records.InvalidBatch as exc:
        outcome = type(exc).__name__
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"outcome": outcome, "grew_kib": after - before}))
    """
)


def measure(codec: str, size: int, limit: int) -> dict[str, object]:
    """Decode a `size`-byte bomb under `limit` in a fresh interpreter: outcome, peak growth."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, codec, str(size), str(limit)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("codec", CODECS)
def test_peak_memory_stays_bounded(codec: str) -> None:
    result = measure(codec, 256 * MiB, 4 * MiB)
    assert result["outcome"] == "DecompressionLimitExceeded"
    grew_kib = result["grew_kib"]
    assert isinstance(grew_kib, int)
    assert grew_kib < 48 * 1024, f"{codec}: peak RSS grew by {grew_kib} KiB"


# --- ListOffsets over a bomb ---


def _cluster(limit: int) -> tuple[ClusterState, Dispatcher]:
    cluster = ClusterState(BrokerConfig(max_decompressed_batch_bytes=limit))
    cluster.add_node(Node(node_id=0, host="127.0.0.1", port=9092))
    cluster.topics.create("bombs", 2)
    return cluster, Dispatcher(cluster, node_id=0)


def _list_offsets(
    dispatcher: Dispatcher, wanted: list[tuple[str, int, int]], version: int = 7
) -> list[tuple[str, int, int, int, int]]:
    """ListOffsets for (topic, partition, timestamp) entries, in order; one topic entry
    per request entry so that duplicates keep their order."""
    topics = tuple(
        make(
            2,
            version,
            "ListOffsetsTopic",
            name=name,
            partitions=(
                make(
                    2,
                    version,
                    "ListOffsetsPartition",
                    partition_index=partition,
                    current_leader_epoch=-1,
                    timestamp=timestamp,
                ),
            ),
        )
        for name, partition, timestamp in wanted
    )
    request = make_request(2, version, replica_id=-1, isolation_level=0, topics=topics)
    return _answer(dispatcher, encode(2, version, request, correlation_id=5), version)


def _answer(
    dispatcher: Dispatcher, frame: bytes, version: int
) -> list[tuple[str, int, int, int, int]]:
    reply = dispatcher.dispatch(frame[4:])
    assert isinstance(reply, bytes)
    _, response = messages.decode_response(reply[4:], 2, version)
    return [
        (topic.name, p.partition_index, p.error_code, p.offset, p.timestamp)
        for topic in response.topics
        for p in topic.partitions
    ]


def test_list_offsets_over_a_bomb_answers_at_batch_granularity() -> None:
    cluster, dispatcher = _cluster(MiB)
    log = cluster.topics.get("bombs").partitions[0].log  # type: ignore[union-attr]
    first = build_batch([(None, b"a"), (None, b"b")], timestamp_ms=500)
    log.append(read_header(first), first)
    batch = bomb("zstd", 64 * MiB, max_timestamp=5000)
    log.append(read_header(batch), batch)
    last = 2 + read_header(batch).last_offset_delta
    assert _list_offsets(dispatcher, [("bombs", 0, 2000)]) == [
        ("bombs", 0, ErrorCode.none, 2, 5000)
    ]
    assert _list_offsets(dispatcher, [("bombs", 0, -3)]) == [
        ("bombs", 0, ErrorCode.none, last, 5000)
    ]
    # Before the bomb, and inside it where the record is found before the limit:
    # record granularity.
    assert _list_offsets(dispatcher, [("bombs", 0, 501)]) == [("bombs", 0, ErrorCode.none, 2, 1000)]
    assert _list_offsets(dispatcher, [("bombs", 0, 400)]) == [("bombs", 0, ErrorCode.none, 0, 500)]


def test_list_offsets_naming_a_partition_twice_is_invalid_request() -> None:
    """Kafka (ListOffsetsRequest.duplicatePartitions) answers every entry of a partition
    named more than once with INVALID_REQUEST, and looks none of them up."""
    _, dispatcher = _cluster(MiB)
    wanted = [("bombs", 0, 2000)] * 10 + [("bombs", 1, -1), ("nope", 0, -1), ("nope", 0, -2)]
    invalid = ("bombs", 0, ErrorCode.invalid_request, -1, -1)
    assert _list_offsets(dispatcher, wanted) == [invalid] * 10 + [
        ("bombs", 1, ErrorCode.none, 0, -1),
        ("nope", 0, ErrorCode.invalid_request, -1, -1),
        ("nope", 0, ErrorCode.invalid_request, -1, -1),
    ]


def test_list_offsets_with_null_arrays_does_not_fail() -> None:
    """Null arrays where kio can produce them (the decoder in front may refuse them
    first, as Kafka does): the handler answers them as empty."""
    cluster, _ = _cluster(MiB)
    ctx = RequestContext(cluster, 0, messages.RequestHeader(2, 1, 5, "abc"))
    null_topics = make_request(2, 1, replica_id=-1, topics=None)
    assert list_offsets.handle(ctx, null_topics).topics == ()
    topic = make(2, 1, "ListOffsetsTopic", name="bombs", partitions=None)
    response = list_offsets.handle(ctx, make_request(2, 1, replica_id=-1, topics=(topic,)))
    assert [(t.name, t.partitions) for t in response.topics] == [("bombs", ())]


CRAMJAM_CODECS = {3: "lz4", 4: "zstd"}


def _cramjam_payload(codec: int, data: bytes) -> bytes:
    library = cramjam.lz4 if codec == 3 else cramjam.zstd
    return bytes(library.compress(data))


@pytest.mark.parametrize("codec", sorted(CRAMJAM_CODECS))
@pytest.mark.parametrize("size", [1, records.DECOMPRESS_STEP + 5, MiB, 3 * MiB + 17])
def test_cramjam_fallback_yields_exactly_the_limit_in_steps(codec: int, size: int) -> None:
    """Up to the limit itself is accepted (past 1 MiB the buffer grows), in pieces of
    DECOMPRESS_STEP bytes; one byte more than the limit is refused, saying which."""
    data = bytes(range(251)) * (size // 251) + bytes(size % 251)
    payload = _cramjam_payload(codec, data)
    pieces = list(records._cramjam_bounded(codec, payload, size))
    assert b"".join(pieces) == data
    assert all(len(piece) == records.DECOMPRESS_STEP for piece in pieces[:-1])
    assert 0 < len(pieces[-1]) <= records.DECOMPRESS_STEP
    name = CRAMJAM_CODECS[codec]
    with pytest.raises(
        DecompressionLimitExceeded, match=rf"^{name} payload expands beyond {size - 1} bytes$"
    ):
        list(records._cramjam_bounded(codec, payload, size - 1))


@pytest.mark.parametrize(("codec", "library"), [(3, "lz4"), (4, "zstandard")])
def test_without_cramjam_the_missing_library_is_named(
    codec: int, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records, "_cramjam", None)
    name = CRAMJAM_CODECS[codec]
    with pytest.raises(
        CodecUnavailable, match=rf"^cannot decode {name} batches: install {library}$"
    ):
        list(records._cramjam_bounded(codec, b"", 100))


class _SpyingCramjam:
    """cramjam, noting the size of every buffer it is asked to decompress into."""

    DecompressionError = cramjam.DecompressionError

    def __init__(self) -> None:
        self.buffers: list[int] = []
        self.zstd = types.SimpleNamespace(decompress_into=self._into(cramjam.zstd))
        self.lz4 = types.SimpleNamespace(decompress_into=self._into(cramjam.lz4))

    def _into(self, library: types.ModuleType) -> Callable[[bytes, bytearray], int]:
        def decompress_into(data: bytes, buffer: bytearray) -> int:
            self.buffers.append(len(buffer))
            return int(library.decompress_into(data, buffer))

        return decompress_into


@pytest.mark.parametrize("codec", sorted(CRAMJAM_CODECS))
def test_the_cramjam_buffer_grows_fourfold_under_a_large_limit(
    codec: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2 MiB payload under the default 64 MiB limit is tried in 1 MiB, then 4 MiB: the
    buffer grows with the payload, not straight to the limit."""
    data = bytes(range(251)) * (2 * MiB // 251)
    payload = _cramjam_payload(codec, data)
    spy = _SpyingCramjam()
    monkeypatch.setattr(records, "_cramjam", spy)
    pieces = records._cramjam_bounded(codec, payload, records.MAX_DECOMPRESSED_BYTES)
    assert b"".join(pieces) == data
    assert spy.buffers == [MiB, 4 * MiB]


# --- lz4 and zstd frames at their edges ---


def test_an_lz4_frame_without_its_end_mark_yields_what_it_holds() -> None:
    """The end mark is 4 zero bytes after the last block: a frame cut before it ends
    where its blocks end (the records tell whether anything is missing)."""
    data = bytes(range(40))
    frame = lz4.frame.compress(data)
    assert frame.endswith(bytes(4))
    assert b"".join(records.decompress_stream(3, frame[:-4], 1000)) == data


def test_a_zstd_frame_with_the_usual_8_mib_window_decodes_under_a_small_limit() -> None:
    """zstd's high levels write frames with an 8 MiB window whatever their size: the
    decoder's window cap is never below that."""
    compressor = zstandard.ZstdCompressor(level=19, write_content_size=False).compressobj()
    data = bytes(range(256)) * 400
    payload = compressor.compress(data) + compressor.flush()
    assert zstandard.get_frame_parameters(payload).window_size == 8 * MiB
    assert b"".join(records.decompress_stream(4, payload, MiB)) == data


def test_a_zstd_window_over_8_mib_and_over_the_limit_is_refused_before_decoding() -> None:
    """The window is memory the decoder allocates up front: a frame asking for more than
    both 8 MiB and the limit is refused at once, not decoded until the limit stops it."""
    size = 8 * MiB + MiB // 2
    payload = zstandard.ZstdCompressor(level=20).compress(bytes(size))
    assert zstandard.get_frame_parameters(payload).window_size == size  # single segment
    pieces = records.decompress_stream(4, payload, MiB)
    with pytest.raises(InvalidBatch, match=r"^cannot decode zstd payload: ") as raised:
        next(pieces)
    assert not isinstance(raised.value, DecompressionLimitExceeded)
    # under a limit that covers it, the same frame decodes
    assert sum(len(piece) for piece in records.decompress_stream(4, payload, 16 * MiB)) == size


def test_a_limit_over_2_gib_still_decodes_zstd() -> None:
    """The window cap stops at zstd's largest (2 GiB) whatever the limit."""
    decoded = list(iter_records(normal("zstd", [(b"k", b"v")]), max_decompressed_bytes=3 << 30))
    assert [(r.key, r.value) for r in decoded] == [(b"k", b"v")]


def test_zstd_frames_are_read_across_so_a_limit_counts_the_whole_stream() -> None:
    """A payload of several zstd frames is one stream, read DECOMPRESS_STEP bytes at a
    time: a small first frame does not come out on its own before the next one is read
    past the limit."""
    first = _record_head(60) + bytes(61)
    second = _record_head(2 * MiB, offset_delta=1) + bytes(2 * MiB + 1)
    payload = zstandard.compress(first) + zstandard.compress(second)
    decoded = iter_records(compressed_batch("zstd", payload, 2), max_decompressed_bytes=200)
    with pytest.raises(DecompressionLimitExceeded):
        next(decoded)


def test_a_record_ending_where_a_piece_ends_comes_out_before_the_next_piece() -> None:
    """Records are read as far as the pieces so far go: a record that ends exactly at the
    end of the first piece is yielded before the second piece (here past the limit) is
    decompressed."""
    step = records.DECOMPRESS_STEP
    first = _record_head(step - 21) + bytes(step - 20)
    assert len(first) == step - 10
    second = _record_head(3, offset_delta=1) + bytes(4)
    assert len(second) == 10
    third = _record_head(600_000, offset_delta=2) + bytes(600_001)
    batch = compressed_batch("gzip", _compress("gzip", [first, second, third]), 3)
    offsets = []
    with pytest.raises(DecompressionLimitExceeded):
        for record in iter_records(batch, max_decompressed_bytes=step + 100):
            offsets.append(record.offset)
    assert offsets == [0, 1]
