"""FrameReceiver: frames cut out of the bytes a transport reads into the buffers it is
handed, whole, one byte at a time, split anywhere, at its limits, and with memory that
follows the bytes that arrive rather than the sizes frames declare."""

from __future__ import annotations

import itertools
import mmap
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol import framing
from minibroker.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    POPULATE_STEP,
    FrameError,
    FrameReceiver,
    encode_frame,
)

BODIES = [b"", b"a", b"hello kafka", bytes(range(256)) * 3]


def _feed_receiver(
    receiver: FrameReceiver, stream: bytes, step: int, *, release: bool = False
) -> list[bytes]:
    frames: list[bytes] = []
    position = 0
    while position < len(stream):
        target = receiver.buffer()
        assert len(target) > 0, "no room offered: the frame could never complete"
        chunk = stream[position : position + min(step, len(target))]
        target[: len(chunk)] = chunk
        if release:
            target.release()
        frames.extend(bytes(f) for f in receiver.received(len(chunk)))
        position += len(chunk)
    return frames


def test_whole_stream_in_one_read() -> None:
    receiver = FrameReceiver()
    stream = b"".join(encode_frame(body) for body in BODIES)
    assert _feed_receiver(receiver, stream, 10**9) == BODIES
    assert (receiver.pending, receiver.partial) == (0, False)


def test_one_byte_at_a_time() -> None:
    receiver = FrameReceiver(scratch_bytes=64)
    stream = b"".join(encode_frame(body) for body in BODIES)
    assert _feed_receiver(receiver, stream, 1) == BODIES
    assert (receiver.pending, receiver.partial) == (0, False)


def test_trailing_partial_frame_is_kept_for_the_next_read() -> None:
    receiver = FrameReceiver()
    first, second = encode_frame(b"first"), encode_frame(b"second frame")
    assert _feed_receiver(receiver, first + second[:6], 10**9) == [b"first"]
    assert (receiver.pending, receiver.partial) == (6, True)
    assert _feed_receiver(receiver, second[6:], 10**9) == [b"second frame"]
    assert (receiver.pending, receiver.partial) == (0, False)


def test_trailing_partial_size_prefix() -> None:
    receiver = FrameReceiver()
    first, second = encode_frame(b"x"), encode_frame(b"yz")
    assert _feed_receiver(receiver, first + second[:3], 10**9) == [b"x"]
    assert receiver.partial
    assert _feed_receiver(receiver, second[3:], 10**9) == [b"yz"]


@given(
    bodies=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=10),
    scratch=st.sampled_from([8, 64, 16 * 1024]),
)
@settings(max_examples=150, deadline=None)
def test_any_split_of_the_stream_gives_the_same_frames(
    bodies: list[bytes], cuts: list[int], scratch: int
) -> None:
    stream = b"".join(encode_frame(body) for body in bodies)
    points = sorted({0, len(stream), *(c for c in cuts if c <= len(stream))})
    receiver = FrameReceiver(scratch_bytes=scratch)
    frames: list[bytes] = []
    for start, end in itertools.pairwise(points):
        frames += _feed_receiver(receiver, stream[start:end], 10**9)
    assert frames == bodies
    assert not receiver.partial


def test_default_limit_is_100_mib() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 100 * 1024 * 1024
    receiver = FrameReceiver()
    assert receiver.max_frame_bytes == DEFAULT_MAX_FRAME_BYTES
    # Exactly the limit is accepted (it waits for the body)...
    assert _feed_receiver(receiver, struct.pack(">i", DEFAULT_MAX_FRAME_BYTES), 10**9) == []
    # ...one more byte is refused from the size prefix alone, before any body arrives.
    with pytest.raises(FrameError, match="exceeds the limit"):
        _feed_receiver(FrameReceiver(), struct.pack(">i", DEFAULT_MAX_FRAME_BYTES + 1), 10**9)


@pytest.mark.parametrize("limit", [1, 10])
def test_a_frame_of_exactly_the_limit_passes_and_one_byte_more_does_not(limit: int) -> None:
    receiver = FrameReceiver(max_frame_bytes=limit)
    assert _feed_receiver(receiver, encode_frame(b"x" * limit), 10**9) == [b"x" * limit]
    with pytest.raises(
        FrameError, match=f"frame of {limit + 1} bytes exceeds the limit of {limit}"
    ):
        _feed_receiver(receiver, encode_frame(b"x" * (limit + 1)), 10**9)


def test_limit_checked_after_earlier_frames_in_the_same_read() -> None:
    receiver = FrameReceiver(max_frame_bytes=4)
    with pytest.raises(FrameError):
        _feed_receiver(receiver, encode_frame(b"ok") + struct.pack(">i", 5), 10**9)


@pytest.mark.parametrize("size", [-1, -(2**31), -100])
def test_negative_size_raises(size: int) -> None:
    with pytest.raises(FrameError, match=f"^negative frame size {size}$"):
        _feed_receiver(FrameReceiver(), struct.pack(">i", size) + b"abcd", 10**9)


def test_negative_size_one_byte_at_a_time() -> None:
    receiver = FrameReceiver()
    raw = struct.pack(">i", -5)
    assert _feed_receiver(receiver, raw[:3], 1) == []
    with pytest.raises(FrameError):
        _feed_receiver(receiver, raw[3:], 1)


@pytest.mark.parametrize("limit", [0, -1])
def test_a_non_positive_limit_is_refused_with_a_reason(limit: int) -> None:
    with pytest.raises(ValueError, match=r"^max_frame_bytes must be positive$"):
        FrameReceiver(max_frame_bytes=limit)


def test_a_scratch_buffer_below_8_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^scratch_bytes must be at least 8$"):
        FrameReceiver(scratch_bytes=7)
    assert FrameReceiver(scratch_bytes=8).held == 8


def test_an_empty_read_is_harmless() -> None:
    receiver = FrameReceiver()
    receiver.buffer()
    assert receiver.received(0) == []
    assert _feed_receiver(receiver, encode_frame(b"z"), 10**9) == [b"z"]


@pytest.mark.parametrize("step", [1, 3, 4, 5, 1000, 64 * 1024, 10**9])
def test_receiver_cuts_small_and_large_frames_at_any_read_size(step: int) -> None:
    # Frames past the 64 KiB scratch buffer take their own; at reads of a few bytes the
    # large ones are kept near that edge so the test stays quick.
    large = (200_000, 70_000) if step > 5 else (66_000, 65_600)
    bodies = [b"a", b"", b"x" * 300, b"y" * large[0], b"z" * large[1], b"q" * 5]
    stream = b"".join(encode_frame(body) for body in bodies)
    receiver = FrameReceiver(scratch_bytes=64 * 1024)
    assert _feed_receiver(receiver, stream, step) == bodies


def _feed_like_asyncio(receiver: FrameReceiver, stream: bytes, step: int) -> list[bytes]:
    """As asyncio's BufferedProtocol does: the view from buffer() is released before
    received()."""
    return _feed_receiver(receiver, stream, step, release=True)


@pytest.mark.parametrize("step", [1000, 4000, 8192])
def test_a_large_frame_takes_its_own_memory_and_the_next_frame_follows(step: int) -> None:
    bodies = [b"L" * 4097, b"s" * 4, b"M" * 20_000, b"t"]
    stream = b"".join(encode_frame(body) for body in bodies)
    receiver = FrameReceiver(scratch_bytes=1024, max_scratch_bytes=1024)
    assert _feed_like_asyncio(receiver, stream, step) == bodies
    assert not receiver.partial


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


def _resident_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def test_a_declared_size_reserves_nothing_by_itself() -> None:
    receivers = []
    before = _resident_kib()
    for _ in range(10):  # 1 GiB announced in all
        receiver = FrameReceiver(scratch_bytes=1024)
        target = receiver.buffer()
        announced = struct.pack(">i", 100 * 1024 * 1024) + b"0123456789"
        target[: len(announced)] = announced
        assert receiver.received(len(announced)) == []
        assert receiver.partial
        assert len(receiver.buffer()) == 100 * 1024 * 1024 - 10
        assert receiver.held <= 1024 + _pages(10 + POPULATE_STEP)
        receivers.append(receiver)
    assert _resident_kib() - before < 16 * 1024


def test_memory_held_by_a_large_frame_follows_its_bytes() -> None:
    receiver = FrameReceiver(scratch_bytes=1024)
    body = bytes(range(256)) * 1024  # 256 KiB
    stream = encode_frame(body)
    frames: list[bytes] = []
    position = 0
    while position < len(stream):
        target = receiver.buffer()
        chunk = stream[position : position + min(8192, len(target))]
        target[: len(chunk)] = chunk
        target.release()
        frames.extend(bytes(f) for f in receiver.received(len(chunk)))
        position += len(chunk)
        if not frames:
            # what arrived is resident, and at most as much again (or a step) ahead of it
            arrived = position - 4
            assert receiver.held >= 1024 + arrived
            assert receiver.held <= 1024 + _pages(max(2 * arrived, arrived + POPULATE_STEP))
    assert frames == [body]
    assert receiver.held == 1024
    assert not receiver.partial


def _pages(size: int) -> int:
    return -(-size // mmap.PAGESIZE) * mmap.PAGESIZE


def test_a_large_frame_is_kept_by_its_view_after_the_next_frames_arrive() -> None:
    """A consumer may keep the view of a large frame (a stored record batch): later
    frames never write over it."""
    receiver = FrameReceiver(scratch_bytes=64, max_scratch_bytes=64)
    first, second = b"A" * 5000, b"B" * 5000
    (kept,) = _receiver_frames(receiver, encode_frame(first))
    assert _feed_receiver(receiver, encode_frame(second) + encode_frame(b"c"), 100) == [
        second,
        b"c",
    ]
    assert bytes(kept) == first


def _receiver_frames(receiver: FrameReceiver, stream: bytes) -> list[bytes | memoryview]:
    frames: list[bytes | memoryview] = []
    position = 0
    while position < len(stream):
        target = receiver.buffer()
        chunk = stream[position : position + len(target)]
        target[: len(chunk)] = chunk
        target.release()
        frames.extend(receiver.received(len(chunk)))
        position += len(chunk)
    return frames


def _refuse(*args: object, **kwargs: object) -> None:
    raise OSError(12, "Cannot allocate memory")


def test_a_frame_the_kernel_cannot_map_is_read_into_the_heap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(framing.mmap, "mmap", _refuse)
    receiver = FrameReceiver(scratch_bytes=64)
    body = bytes(range(250)) * 4
    target = receiver.buffer()
    target[:40] = encode_frame(body)[:40]
    assert receiver.received(40) == []
    assert receiver.held == 64 + 1000  # all of it resident at once
    assert _feed_receiver(receiver, encode_frame(body)[40:] + encode_frame(b"n"), 300) == [
        body,
        b"n",
    ]


def test_no_memory_at_all_for_a_frame_closes_only_its_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_heap(size: int) -> bytearray:
        if size == 1000:
            raise MemoryError
        return bytearray(size)

    monkeypatch.setattr(framing.mmap, "mmap", _refuse)
    monkeypatch.setattr(framing, "bytearray", no_heap, raising=False)
    receiver = FrameReceiver(scratch_bytes=64)
    with pytest.raises(FrameError, match=r"^no memory for a frame of 1000 bytes$"):
        _feed_receiver(receiver, encode_frame(b"x" * 1000), 10**9)


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


@pytest.mark.parametrize("arrived", [0, 40, 59])
def test_a_frame_too_large_for_the_scratch_buffer_gets_its_own_of_its_declared_size(
    arrived: int,
) -> None:
    receiver = FrameReceiver(scratch_bytes=64)
    frame = encode_frame(bytes(range(250)) * 4)  # 1,000 bytes
    target = receiver.buffer()
    target[: 4 + arrived] = frame[: 4 + arrived]
    assert receiver.received(4 + arrived) == []
    assert len(receiver.buffer()) == 1000 - arrived
    assert receiver.pending == arrived
    assert _feed_receiver(receiver, frame[4 + arrived :], 10**9) == [frame[4:]]


def test_scratch_doubles_once_per_read_that_fills_it() -> None:
    """asyncio may ask for a buffer again without a read in between: that is no reason
    to grow again."""
    receiver = FrameReceiver(scratch_bytes=1024)
    first, second = encode_frame(b"f" * 1018), encode_frame(b"s" * 10)
    target = receiver.buffer()
    target[:1024] = first + second[:2]  # fills the scratch buffer, 2 bytes pending
    assert receiver.received(1024) == [b"f" * 1018]
    for _ in range(2):
        assert len(receiver.buffer()) == 2046
        assert receiver.held == 2048
    assert _feed_receiver(receiver, second[2:], 10**9) == [b"s" * 10]
    assert receiver.held == 2048


@pytest.mark.parametrize(
    ("size", "own_buffer"),
    [
        (59, False),
        (60, False),  # with its size prefix, exactly the scratch buffer
        (61, True),
        (62, True),
        (100, True),
    ],
)
def test_a_frame_gets_its_own_buffer_only_when_it_does_not_fit_the_scratch_buffer(
    size: int, own_buffer: bool
) -> None:
    receiver = FrameReceiver(scratch_bytes=64, max_scratch_bytes=64)
    stream = encode_frame(b"m" * size) + encode_frame(b"after")
    frames: list[bytes | memoryview] = []
    position = 0
    held: set[int] = set()
    while position < len(stream):
        target = receiver.buffer()
        assert len(target) > 0, "no room offered: the frame could never complete"
        chunk = stream[position : position + min(30, len(target))]
        target[: len(chunk)] = chunk
        frames.extend(receiver.received(len(chunk)))
        position += len(chunk)
        held.add(receiver.held)
    assert [bytes(f) for f in frames] == [b"m" * size, b"after"]
    # Its own buffer comes back as a read-only view; one cut out of scratch as bytes.
    assert isinstance(frames[0], memoryview) is own_buffer
    assert max(held) == (64 + _pages(size) if own_buffer else 64)


def test_once_every_frame_is_cut_out_the_whole_scratch_buffer_is_offered_again() -> None:
    receiver = FrameReceiver(scratch_bytes=64, max_scratch_bytes=64)
    for body in (b"x" * 5, b"y" * 20, b""):
        frame = encode_frame(body)
        target = receiver.buffer()
        assert len(target) == 64
        target[: len(frame)] = frame
        assert receiver.received(len(frame)) == [body]


def test_a_kernel_that_cannot_populate_ahead_still_gets_every_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(framing, "_can_populate", True)
    monkeypatch.setattr(framing, "_MADV_POPULATE_WRITE", 0x7FFF)  # advice it refuses
    body = bytes(range(256)) * 1000
    receiver = FrameReceiver(scratch_bytes=1024)
    assert _feed_receiver(receiver, encode_frame(body) + encode_frame(b"next"), 8192) == [
        body,
        b"next",
    ]
    assert framing._can_populate is False  # tried once, then left to page faults
