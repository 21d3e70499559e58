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
