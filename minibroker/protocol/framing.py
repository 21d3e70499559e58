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
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._expected: int | None = None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every frame body now complete, in order."""
        buffer = self._buffer
        # With nothing pending, frames are cut straight out of `data`: each body is
        # copied once, and only an incomplete tail is kept back.
        source: bytes | bytearray = data
        if buffer:
            buffer += data
            source = buffer
        frames: list[bytes] = []
        position = 0
        available = len(source)
        expected = self._expected
        with memoryview(source) as view:
            while True:
                if expected is None:
                    if available - position < 4:
                        break
                    (size,) = _SIZE.unpack_from(source, position)
                    if size < 0:
                        raise FrameError(f"negative frame size {size}")
                    if size > self.max_frame_bytes:
                        raise FrameError(
                            f"frame of {size} bytes exceeds the limit of {self.max_frame_bytes}"
                        )
                    expected = size
                    position += 4
                if available - position < expected:
                    break
                frames.append(bytes(view[position : position + expected]))
                position += expected
                expected = None
            if source is not buffer and position < available:
                buffer += view[position:]
        self._expected = expected
        if source is buffer:
            del buffer[:position]
        return frames


def encode_frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body
