"""Record batches: split and validate, CRC32C, offset rewrite, the small record codec."""

from __future__ import annotations

import gzip
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol import records
from minibroker.protocol.records import (
    CRC_START,
    HEADER_SIZE,
    CorruptBatch,
    InvalidBatch,
    UnsupportedMagic,
    build_batch,
    iter_records,
    read_header,
    split_batches,
)

optional_bytes = st.none() | st.binary(max_size=64)
record_lists = st.lists(st.tuples(optional_bytes, optional_bytes), min_size=1, max_size=20)
header_lists = st.lists(st.tuples(st.text(max_size=10), st.binary(max_size=10)), max_size=3)


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, records.crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


def _gzip_batch(plain: bytes) -> bytes:
    """The same records, gzip-compressed, with a correct CRC."""
    header = bytearray(plain[:HEADER_SIZE])
    payload = gzip.compress(plain[HEADER_SIZE:])
    struct.pack_into(">h", header, 21, 1)
    struct.pack_into(">i", header, 8, HEADER_SIZE - 12 + len(payload))
    return _recrc(header + payload)


@given(
    items=record_lists,
    headers=header_lists,
    base_offset=st.integers(0, 2**40),
    timestamp=st.integers(0, 2**45),
)
@settings(max_examples=150, deadline=None)
def test_build_then_iter_round_trip(
    items: list[tuple[bytes | None, bytes | None]],
    headers: list[tuple[str, bytes]],
    base_offset: int,
    timestamp: int,
) -> None:
    batch = build_batch(items, base_offset=base_offset, timestamp_ms=timestamp, headers=headers)
    [(header, raw)] = split_batches(batch)
    assert raw == batch
    assert header.base_offset == base_offset
    assert header.record_count == len(items)
    assert header.last_offset_delta == len(items) - 1
    assert header.total_size == len(batch)
    decoded = list(iter_records(batch))
    assert [(r.key, r.value) for r in decoded] == items
    assert [r.offset for r in decoded] == [base_offset + i for i in range(len(items))]
    assert {r.timestamp for r in decoded} == {timestamp}
    assert all(r.headers == tuple(headers) for r in decoded)


header_values = st.none() | st.binary(max_size=10)
encoded_records = st.lists(
    st.tuples(
        st.integers(0, 1000),  # offset gap after the previous record
        st.integers(-(2**40), 2**40),  # timestamp delta
        optional_bytes,
        optional_bytes,
        st.lists(st.tuples(st.text(max_size=10), header_values), max_size=3),
    ),
    max_size=20,
)


@given(
    items=encoded_records,
    base_offset=st.integers(0, 2**40),
    base_timestamp=st.integers(0, 2**45),
    extra_delta=st.integers(0, 50),
    attributes=st.sampled_from([0, records.TRANSACTIONAL_FLAG, records.COMPRESSION_MASK]),
    producer=st.tuples(
        st.integers(-1, 2**62), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)
    ),
    leader_epoch=st.integers(-1, 2**31 - 1),
)
@settings(max_examples=150, deadline=None)
def test_encode_then_iter_round_trip(
    items: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    base_offset: int,
    base_timestamp: int,
    extra_delta: int,
    attributes: int,
    producer: tuple[int, int, int],
    leader_epoch: int,
) -> None:
    """A batch encoded from header fields and records (offsets with gaps, timestamps on
    either side of the base, null header values) decodes to the same records under a
    valid CRC, with every header field as given and the compression bits cleared."""
    written, offset = [], base_offset
    for gap, delta, key, value, headers in items:
        offset += gap
        written.append(records.Record(offset, base_timestamp + delta, key, value, tuple(headers)))
    last_offset_delta = offset - base_offset + extra_delta
    max_timestamp = max((r.timestamp for r in written), default=base_timestamp)
    producer_id, producer_epoch, base_sequence = producer
    batch = records.encode_batch(
        written,
        base_offset=base_offset,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=leader_epoch,
    )
    [(header, raw)] = split_batches(batch)  # framing and CRC checked
    assert raw == batch
    assert (
        header.base_offset,
        header.partition_leader_epoch,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.record_count,
        header.total_size,
    ) == (
        base_offset,
        leader_epoch,
        attributes & ~records.COMPRESSION_MASK,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(written),
        len(batch),
    )
    assert list(iter_records(batch)) == written


def test_encoding_the_decoded_records_gives_the_batch_back() -> None:
    batch = build_batch(
        [(b"k", b"v"), (None, b"x"), (b"t", None)],
        base_offset=7,
        timestamp_ms=1000,
        producer_id=3,
        producer_epoch=2,
        base_sequence=40,
        headers=[("h", b"1")],
    )
    header = read_header(batch)
    again = records.encode_batch(
        list(iter_records(batch)),
        base_offset=7,
        last_offset_delta=2,
        base_timestamp=1000,
        max_timestamp=1000,
        producer_id=3,
        producer_epoch=2,
        base_sequence=40,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    assert again == batch


@given(items=record_lists)
@settings(max_examples=30, deadline=None)
def test_gzip_batch_decodes_like_the_plain_one(
    items: list[tuple[bytes | None, bytes | None]],
) -> None:
    plain = build_batch(items, base_offset=3)
    compressed = _gzip_batch(plain)
    [(header, _)] = split_batches(compressed)
    assert header.compression == 1
    assert list(iter_records(compressed)) == list(iter_records(plain))


def test_split_several_batches() -> None:
    first = build_batch([(b"k", b"v")], producer_id=7, producer_epoch=1, base_sequence=0)
    second = build_batch([(None, b"a"), (None, b"b")], base_offset=1)
    split = split_batches(first + second)
    assert [raw for _, raw in split] == [first, second]
    assert split[0][0].producer_id == 7
    assert split[0][0].producer_epoch == 1
    assert split[1][0].record_count == 2
    assert split_batches(b"") == []


@given(data=st.data())
@settings(max_examples=100, deadline=None)
def test_any_flip_under_the_crc_is_corrupt(data: st.DataObject) -> None:
    batch = bytearray(build_batch([(b"key", b"value"), (None, b"x" * 30)]))
    position = data.draw(st.integers(CRC_START, len(batch) - 1))
    bit = data.draw(st.integers(0, 7))
    batch[position] ^= 1 << bit
    with pytest.raises(CorruptBatch):
        split_batches(bytes(batch))


def test_wrong_stored_crc_is_corrupt() -> None:
    batch = bytearray(build_batch([(b"k", b"v")]))
    batch[17] ^= 0xFF
    with pytest.raises(CorruptBatch, match="CRC"):
        split_batches(bytes(batch))


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    batch = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">q", batch, 0, 123456)
    struct.pack_into(">i", batch, 12, 9)
    [(header, _)] = split_batches(bytes(batch))
    assert header.base_offset == 123456
    assert header.partition_leader_epoch == 9


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_other_magic_is_unsupported(magic: int) -> None:
    batch = bytearray(build_batch([(b"k", b"v")]))
    batch[16] = magic
    with pytest.raises(UnsupportedMagic):
        split_batches(bytes(batch))


def test_legacy_message_set_is_unsupported() -> None:
    # A magic-1 message set entry: offset, size, crc, magic 1, attributes, timestamp, key, value.
    message = struct.pack(">bbqi", 1, 0, 0, -1) + struct.pack(">i", 1) + b"v"
    entry = struct.pack(">qi", 0, 4 + len(message)) + struct.pack(">I", 0) + message
    with pytest.raises(UnsupportedMagic):
        split_batches(entry)


@given(data=st.data())
@settings(max_examples=100, deadline=None)
def test_truncated_batch_is_invalid(data: st.DataObject) -> None:
    batch = build_batch([(b"key", b"value")] * 3)
    cut = data.draw(st.integers(1, len(batch) - 1))
    with pytest.raises(InvalidBatch):
        split_batches(batch[:cut])


def test_truncated_second_batch_is_invalid() -> None:
    batch = build_batch([(b"k", b"v")])
    with pytest.raises(InvalidBatch):
        split_batches(batch + batch[:40])


@pytest.mark.parametrize("length", [0, 10, 48, -1])
def test_batch_length_below_the_header_is_invalid(length: int) -> None:
    batch = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">i", batch, 8, length)
    with pytest.raises(InvalidBatch):
        split_batches(bytes(batch))


def test_batch_length_beyond_the_data_is_invalid() -> None:
    batch = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">i", batch, 8, 2**31 - 1)
    with pytest.raises(InvalidBatch, match="does not match"):
        split_batches(bytes(batch))


def test_negative_record_count_is_invalid() -> None:
    batch = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">i", batch, 57, -3)
    with pytest.raises(InvalidBatch):
        split_batches(_recrc(batch))


def test_read_header_needs_61_bytes() -> None:
    with pytest.raises(InvalidBatch):
        read_header(b"\x00" * 60)


@given(offset=st.integers(0, 2**62), epoch=st.integers(-1, 2**31 - 1))
@settings(max_examples=50, deadline=None)
def test_base_offset_rewrite_keeps_the_crc(offset: int, epoch: int) -> None:
    batch = build_batch([(b"a", b"1"), (b"b", b"2")], base_offset=0)
    rewritten = records.with_base_offset(batch, offset, epoch)
    assert len(rewritten) == len(batch)
    [(header, _)] = split_batches(rewritten)
    assert (header.base_offset, header.partition_leader_epoch) == (offset, epoch)
    assert header.crc == read_header(batch).crc
    assert [r.offset for r in iter_records(rewritten)] == [offset, offset + 1]
    assert rewritten[8:12] == batch[8:12] and rewritten[16:] == batch[16:]


def test_log_append_time_rewrite_has_a_valid_crc() -> None:
    batch = build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=1000)
    stamped = records.with_log_append_time(batch, 40, 555_000)
    [(header, _)] = split_batches(stamped)  # raises if the CRC were stale
    assert header.base_offset == 40
    assert header.attributes & records.TIMESTAMP_TYPE_FLAG
    assert header.max_timestamp == 555_000
    assert [r.timestamp for r in iter_records(stamped)] == [555_000, 555_000]


def test_last_sequence_wraps() -> None:
    batch = build_batch(
        [(None, b"x")] * 3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2
    )
    assert read_header(batch).last_sequence == 0
    assert read_header(build_batch([(None, b"x")])).last_sequence == records.NO_SEQUENCE


@given(
    payload=st.binary(max_size=200),
    count=st.one_of(st.integers(0, 50), st.just(2**31 - 1)),
    codec=st.sampled_from([0, 1, 2, 3, 4]),
)
@settings(max_examples=500, deadline=None)
def test_garbage_records_under_a_valid_crc_raise_invalid_batch(
    payload: bytes, count: int, codec: int
) -> None:
    """A batch whose CRC matches but whose records are garbage: decode fails cleanly."""
    header = bytearray(build_batch([(None, b"")])[:HEADER_SIZE])
    struct.pack_into(">h", header, 21, codec)
    struct.pack_into(">i", header, 23, max(count - 1, 0))
    struct.pack_into(">i", header, 57, count)
    struct.pack_into(">i", header, 8, HEADER_SIZE - 12 + len(payload))
    batch = _recrc(header + payload)
    try:
        decoded = list(iter_records(batch))
    except InvalidBatch:
        return
    assert len(decoded) == count


def test_record_length_past_the_payload_is_invalid() -> None:
    batch = bytearray(build_batch([(b"key", b"value")]))
    batch[HEADER_SIZE] = 0x7E  # record length varint 63, longer than the payload
    with pytest.raises(InvalidBatch):
        list(iter_records(_recrc(batch)))


@pytest.mark.parametrize("codec", [2, 3, 4])
def test_codecs_without_a_decoder_raise_invalid_batch(codec: int) -> None:
    batch = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">h", batch, 21, codec)
    with pytest.raises(InvalidBatch, match="cannot decode"):
        list(iter_records(_recrc(batch)))


# --- split_batches at its edges -------------------------------------------------------

_RECORD_COUNT_AT = 57  # recordCount, the last int32 of the batch header


def _with_record_count(batch: bytes, count: int) -> bytes:
    """The batch with recordCount set to `count` and its CRC32C made right again."""
    out = bytearray(batch)
    struct.pack_into(">i", out, _RECORD_COUNT_AT, count)
    struct.pack_into(">I", out, 17, records.crc32c(memoryview(out)[records.CRC_START :]))
    return bytes(out)


def test_seventeen_bytes_are_enough_to_read_the_magic_and_sixteen_are_not() -> None:
    """baseOffset, batchLength, partitionLeaderEpoch and magic: 17 bytes tell the format."""
    old_format = bytes(16) + b"\x01"
    with pytest.raises(
        records.UnsupportedMagic, match=r"^message format magic 1 is not supported$"
    ):
        records.split_batches(old_format)
    with pytest.raises(records.InvalidBatch, match=r"^truncated record batch$"):
        records.split_batches(old_format[:16])


def test_a_truncated_batch_after_a_whole_one_is_refused() -> None:
    batch = records.build_batch([(b"k", b"v")], timestamp_ms=1000)
    with pytest.raises(records.InvalidBatch, match=r"^truncated record batch$"):
        records.split_batches(batch + batch[:10])


def test_a_batch_of_no_records_is_well_formed_and_a_negative_count_is_not() -> None:
    batch = records.build_batch([(b"k", b"v")], timestamp_ms=1000)
    empty = _with_record_count(batch, 0)
    [(header, data)] = records.split_batches(empty)
    assert (header.record_count, data) == (0, empty)
    with pytest.raises(records.InvalidBatch, match=r"^negative record count or offset delta$"):
        records.split_batches(_with_record_count(batch, -1))


def test_build_batch_stamps_time_zero_unless_told() -> None:
    batch = records.build_batch([(None, b"v")])
    header = records.read_header(batch)
    assert (header.base_timestamp, header.max_timestamp) == (0, 0)
    assert [r.timestamp for r in records.iter_records(batch)] == [0]
