"""Length-prefixed frames: every Kafka request and response is an int32 size and a body.

The decoder is fed bytes as they arrive and hands back whole frames. A size that is
negative or above the limit cannot be recovered from (the stream position is lost), so
it raises and the connection must be closed.
"""

from __future__ import annotations

import struct

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The stream is broken; the only safe reaction is to close the connection."""


class FrameDecoder:
    """Cuts frames out of received chunks, copying each frame body exactly once.

    A frame that spans chunks is kept as views of those chunks until its last byte
    arrives, then joined; a frame inside one chunk is sliced straight out of it.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._prefix = bytearray()  # a size prefix split across chunks
        self._parts: list[memoryview] = []  # the received part of an incomplete body
        self._parts_size = 0
        self._expected: int | None = None  # body size once the prefix is read

    @property
    def buffered(self) -> int:
        return len(self._prefix) + self._parts_size

    def _check(self, size: int) -> int:
        if size < 0:
            raise FrameError(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise FrameError(f"frame of {size} bytes exceeds the limit of {self.max_frame_bytes}")
        return size

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every frame body now complete, in order."""
        if not isinstance(data, bytes):
            data = bytes(data)  # pending views must not see the caller's later writes
        view = memoryview(data)
        available = len(data)
        position = 0
        frames: list[bytes] = []
        while True:
            if self._expected is None:
                if self._prefix or available - position < 4:
                    take = min(4 - len(self._prefix), available - position)
                    self._prefix += view[position : position + take]
                    position += take
                    if len(self._prefix) < 4:
                        return frames
                    (size,) = _SIZE.unpack(self._prefix)
                    self._prefix.clear()
                else:
                    (size,) = _SIZE.unpack_from(data, position)
                    position += 4
                self._expected = self._check(size)
            missing = self._expected - self._parts_size
            if available - position < missing:
                if position < available:
                    self._parts.append(view[position:])
                    self._parts_size += available - position
                return frames
            if self._parts:
                self._parts.append(view[position : position + missing])
                frames.append(b"".join(self._parts))
                self._parts.clear()
                self._parts_size = 0
            else:
                frames.append(bytes(view[position : position + missing]))
            position += missing
            self._expected = None


def encode_frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


class FrameReceiver:
    """Receive-side buffers for a transport that reads into memory it is handed.

    Small frames are cut out of one reusable scratch buffer. A frame too large for what
    is left of it gets a buffer of its own, and the transport reads the rest of that frame
    straight into it, so a large produce request is copied from the socket only once.
    Sans-IO: `buffer()` says where the next bytes go, `received(n)` returns whole frames.
    """

    def __init__(
        self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, scratch_bytes: int = 256 * 1024
    ) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._scratch = bytearray(scratch_bytes)
        self._start = 0  # first unparsed byte in scratch
        self._end = 0  # end of received bytes in scratch
        self._large: bytearray | None = None
        self._large_filled = 0

    def buffer(self) -> memoryview:
        if self._large is not None:
            return memoryview(self._large)[self._large_filled :]
        if self._end == len(self._scratch):
            self._compact()
        return memoryview(self._scratch)[self._end :]

    def _compact(self) -> None:
        pending = self._end - self._start
        self._scratch[:pending] = self._scratch[self._start : self._end]
        self._start, self._end = 0, pending

    def received(self, count: int) -> list[bytes | memoryview]:
        """Account for `count` bytes written into `buffer()`; return completed frames.

        A frame received into its own buffer comes back as a read-only view of it.
        """
        frames: list[bytes | memoryview] = []
        if self._large is not None:
            self._large_filled += count
            if self._large_filled < len(self._large):
                return frames
            frames.append(memoryview(self._large).toreadonly())
            self._large = None
            return frames
        self._end += count
        scratch = self._scratch
        while self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(scratch, self._start)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self.max_frame_bytes:
                raise FrameError(
                    f"frame of {size} bytes exceeds the limit of {self.max_frame_bytes}"
                )
            body_start = self._start + 4
            have = self._end - body_start
            if have >= size:
                frames.append(bytes(scratch[body_start : body_start + size]))
                self._start = body_start + size
                continue
            if size > len(scratch) - body_start:
                # Does not fit: give the frame its own buffer and read the rest into it.
                large = bytearray(size)
                large[:have] = scratch[body_start : self._end]
                self._large, self._large_filled = large, have
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0
        return frames
