"""FrameDecoder, fed whole, one byte at a time, with trailing data, and at its limits."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    FrameError,
    FrameReceiver,
    encode_frame,
)

BODIES = [b"", b"a", b"hello kafka", bytes(range(256)) * 3]


def test_whole_stream_in_one_feed() -> None:
    decoder = FrameDecoder()
    stream = b"".join(encode_frame(body) for body in BODIES)
    assert decoder.feed(stream) == BODIES
    assert decoder.buffered == 0


def test_one_byte_at_a_time() -> None:
    decoder = FrameDecoder()
    stream = b"".join(encode_frame(body) for body in BODIES)
    frames: list[bytes] = []
    for i in range(len(stream)):
        frames += decoder.feed(stream[i : i + 1])
    assert frames == BODIES
    assert decoder.buffered == 0


def test_trailing_partial_frame_is_kept_for_the_next_feed() -> None:
    decoder = FrameDecoder()
    first, second = encode_frame(b"first"), encode_frame(b"second frame")
    assert decoder.feed(first + second[:6]) == [b"first"]
    assert decoder.buffered == 2  # the size prefix is consumed, two body bytes wait
    assert decoder.feed(second[6:]) == [b"second frame"]
    assert decoder.buffered == 0


def test_trailing_partial_size_prefix() -> None:
    decoder = FrameDecoder()
    first, second = encode_frame(b"x"), encode_frame(b"yz")
    assert decoder.feed(first + second[:3]) == [b"x"]
    assert decoder.feed(second[3:]) == [b"yz"]


@given(
    bodies=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=10),
)
@settings(max_examples=150, deadline=None)
def test_any_split_of_the_stream_gives_the_same_frames(
    bodies: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(encode_frame(body) for body in bodies)
    points = sorted({0, len(stream), *(c for c in cuts if c <= len(stream))})
    decoder = FrameDecoder()
    frames: list[bytes] = []
    for start, end in itertools.pairwise(points):
        frames += decoder.feed(stream[start:end])
    assert frames == bodies
    assert decoder.buffered == 0


def test_default_limit_is_100_mib() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 100 * 1024 * 1024
    decoder = FrameDecoder()
    assert decoder.max_frame_bytes == DEFAULT_MAX_FRAME_BYTES
    # Exactly the limit is accepted (it waits for the body)...
    assert decoder.feed(struct.pack(">i", DEFAULT_MAX_FRAME_BYTES)) == []
    # ...one more byte is refused from the size prefix alone, before any body arrives.
    with pytest.raises(FrameError, match="exceeds the limit"):
        FrameDecoder().feed(struct.pack(">i", DEFAULT_MAX_FRAME_BYTES + 1))


def test_configured_limit() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    assert decoder.feed(encode_frame(b"0123456789")) == [b"0123456789"]
    with pytest.raises(FrameError):
        decoder.feed(encode_frame(b"0123456789a"))


def test_limit_checked_after_earlier_frames_in_the_same_feed() -> None:
    decoder = FrameDecoder(max_frame_bytes=4)
    with pytest.raises(FrameError):
        decoder.feed(encode_frame(b"ok") + struct.pack(">i", 5))


@pytest.mark.parametrize("size", [-1, -(2**31), -100])
def test_negative_size_raises(size: int) -> None:
    with pytest.raises(FrameError, match="negative"):
        FrameDecoder().feed(struct.pack(">i", size) + b"abcd")


def test_negative_size_one_byte_at_a_time() -> None:
    decoder = FrameDecoder()
    raw = struct.pack(">i", -5)
    for byte in raw[:3]:
        assert decoder.feed(bytes([byte])) == []
    with pytest.raises(FrameError):
        decoder.feed(raw[3:])


@pytest.mark.parametrize("limit", [0, -1])
def test_limit_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_bytes=limit)


def test_empty_feed_is_harmless() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(encode_frame(b"z")) == [b"z"]


# --- FrameReceiver: the transport reads into the buffers it hands out ---


def _feed_receiver(receiver: FrameReceiver, stream: bytes, step: int) -> list[bytes]:
    frames: list[bytes] = []
    position = 0
    while position < len(stream):
        target = receiver.buffer()
        chunk = stream[position : position + min(step, len(target))]
        target[: len(chunk)] = chunk
        frames.extend(bytes(f) for f in receiver.received(len(chunk)))
        position += len(chunk)
    return frames


@pytest.mark.parametrize("step", [1, 3, 4, 5, 1000, 64 * 1024, 10**9])
def test_receiver_cuts_small_and_large_frames_at_any_read_size(step: int) -> None:
    bodies = [b"a", b"", b"x" * 300, b"y" * 200_000, b"z" * 70_000, b"q" * 5]
    stream = b"".join(encode_frame(body) for body in bodies)
    receiver = FrameReceiver(scratch_bytes=64 * 1024)
    assert _feed_receiver(receiver, stream, step) == bodies


def test_receiver_keeps_a_partial_next_frame() -> None:
    receiver = FrameReceiver(scratch_bytes=1024)
    stream = encode_frame(b"first") + encode_frame(b"second")[:6]
    assert _feed_receiver(receiver, stream, 10**6) == [b"first"]
    rest = encode_frame(b"second")[6:]
    assert _feed_receiver(receiver, rest, 10**6) == [b"second"]


def test_receiver_hands_large_frames_back_read_only() -> None:
    receiver = FrameReceiver(scratch_bytes=128)
    target = receiver.buffer()
    frame = encode_frame(b"b" * 1000)
    target[:128] = frame[:128]
    assert receiver.received(128) == []
    target = receiver.buffer()
    target[: len(frame) - 128] = frame[128:]
    (body,) = receiver.received(len(frame) - 128)
    assert isinstance(body, memoryview) and body.readonly
    assert bytes(body) == b"b" * 1000


@pytest.mark.parametrize("size", [-1, 101])
def test_receiver_rejects_sizes_outside_the_limit(size: int) -> None:
    receiver = FrameReceiver(max_frame_bytes=100)
    target = receiver.buffer()
    target[:4] = struct.pack(">i", size)
    with pytest.raises(FrameError):
        receiver.received(4)


# --- FrameReceiver: memory follows the bytes that arrive ---


def test_a_declared_size_reserves_nothing_by_itself() -> None:
    receiver = FrameReceiver(scratch_bytes=1024, first_large_bytes=4096)
    target = receiver.buffer()
    announced = struct.pack(">i", 100 * 1024 * 1024) + b"0123456789"
    target[: len(announced)] = announced
    assert receiver.received(len(announced)) == []
    assert receiver.partial
    assert receiver.held <= 1024 + 4096


def test_a_large_frame_buffer_grows_as_its_bytes_arrive() -> None:
    receiver = FrameReceiver(scratch_bytes=1024, first_large_bytes=4096)
    body = bytes(range(256)) * 1024  # 256 KiB
    stream = encode_frame(body)
    held: list[int] = []
    frames: list[bytes] = []
    position = 0
    while position < len(stream):
        target = receiver.buffer()
        chunk = stream[position : position + min(8192, len(target))]
        target[: len(chunk)] = chunk
        frames.extend(bytes(f) for f in receiver.received(len(chunk)))
        position += len(chunk)
        held.append(receiver.held)
    assert frames == [body]
    # Never more than twice what had arrived (plus the scratch buffer) at any point.
    arrived = 0
    for step, holding in enumerate(held):
        arrived = min(len(stream), (step + 1) * 8192)
        assert holding <= 1024 + max(4096, 2 * arrived)
    assert not receiver.partial


def test_scratch_grows_under_bulk_reads_and_shrinks_when_idle() -> None:
    receiver = FrameReceiver(scratch_bytes=1024, max_scratch_bytes=16 * 1024)
    small = encode_frame(b"r" * 100)
    # A long pipelined stream: every read fills all the space it is given.
    assert _feed_receiver(receiver, small * 2000, 10**9) == [b"r" * 100] * 2000
    assert receiver.held > 1024
    assert receiver.held <= 16 * 1024
    receiver.shrink()
    assert receiver.held == 1024
    assert _feed_receiver(receiver, small, 10**6) == [b"r" * 100]


def test_shrink_keeps_a_partial_frame() -> None:
    receiver = FrameReceiver(scratch_bytes=64, max_scratch_bytes=1024)
    frame = encode_frame(b"p" * 40)
    assert _feed_receiver(receiver, frame[:20], 10**6) == []
    receiver.shrink()
    assert _feed_receiver(receiver, frame[20:], 10**6) == [b"p" * 40]


def test_shrink_after_growth_keeps_a_partial_frame() -> None:
    """A grown scratch buffer is not given back while it holds part of a frame."""
    receiver = FrameReceiver(scratch_bytes=1024, max_scratch_bytes=16 * 1024)
    small = encode_frame(b"r" * 100)
    assert _feed_receiver(receiver, small * 2000, 10**9) == [b"r" * 100] * 2000
    assert receiver.held > 1024
    frame = encode_frame(b"p" * 300)
    assert _feed_receiver(receiver, frame[:150], 10**6) == []
    receiver.shrink()
    assert receiver.held > 1024
    assert _feed_receiver(receiver, frame[150:], 10**6) == [b"p" * 300]


def test_a_limit_of_one_byte_is_allowed() -> None:
    decoder = FrameDecoder(max_frame_bytes=1)
    assert decoder.feed(encode_frame(b"x")) == [b"x"]
    with pytest.raises(FrameError):
        decoder.feed(encode_frame(b"xy"))


def test_a_non_positive_limit_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match=r"^max_frame_bytes must be positive$"):
        FrameDecoder(max_frame_bytes=0)


def test_a_fed_bytearray_is_copied_before_the_caller_reuses_it() -> None:
    """A transport reads into one buffer again and again: a frame split across reads
    must keep the bytes it was fed, not what the buffer holds later."""
    decoder = FrameDecoder()
    stream = encode_frame(b"first-half|second-half")
    buffer = bytearray(stream[:12])
    assert decoder.feed(buffer) == []
    buffer[:] = b"#" * 12
    assert decoder.feed(memoryview(bytearray(stream[12:]))) == [b"first-half|second-half"]
