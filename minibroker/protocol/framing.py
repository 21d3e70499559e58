"""Length-prefixed frames: every Kafka request and response is an int32 size and a body.

FrameReceiver hands a transport the memory to read into and gives back whole frames. A
size that is negative or above the limit cannot be recovered from (the stream position is
lost), so it raises and the connection must be closed.
"""

from __future__ import annotations

import mmap
import struct
import sys

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The stream is broken; the only safe reaction is to close the connection."""


def encode_frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


_ZEROS = memoryview(bytes(1024 * 1024))
# A large frame's pages are made resident ahead of its bytes, up to as many again as have
# arrived (at least POPULATE_STEP): one madvise(MADV_POPULATE_WRITE) call for many pages
# costs a quarter less than a page fault per page (Linux 5.14+; elsewhere pages fault in
# one by one as the bytes land).
POPULATE_STEP = 64 * 1024
_MADV_POPULATE_WRITE = 23
_can_populate = sys.platform.startswith("linux")


class FrameReceiver:
    """Receive-side buffers for a transport that reads into memory it is handed.

    Memory follows the bytes that arrive, never the size a frame declares: a 4-byte
    prefix announcing 100 MiB makes nothing resident by itself.
    - Small frames are cut out of a scratch buffer that starts at `scratch_bytes`, doubles
      (up to `max_scratch_bytes`) only while reads fill it, and `shrink()` returns it to
      its first size when the connection is idle. They are copied out as bytes.
    - A frame too large for the scratch buffer gets memory of its own: an anonymous
      mapping of the size it declares, whose pages become resident only as its bytes
      arrive (and ahead of them by at most as many again, or POPULATE_STEP). The socket
      reads straight into it, and it is handed back as a read-only view that the frame's
      consumer may keep (a stored record batch is a view of the request it came in): its
      bytes are written once, by the read.
    Sans-IO: `buffer()` says where the next bytes go, `received(n)` returns whole frames,
    `held` is the memory held now and `partial` whether part of a frame is waiting.
    """

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        scratch_bytes: int = 16 * 1024,
        *,
        max_scratch_bytes: int = 64 * 1024,
    ) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        if scratch_bytes < 8:
            raise ValueError("scratch_bytes must be at least 8")
        self.max_frame_bytes = max_frame_bytes
        self._initial_scratch = scratch_bytes
        self._max_scratch = max(scratch_bytes, max_scratch_bytes)
        self._scratch = bytearray(scratch_bytes)
        self._start = 0  # first unparsed byte in scratch
        self._end = 0  # end of received bytes in scratch
        self._filled_scratch = False  # the last read filled all the space it was given
        self._large: mmap.mmap | bytearray | None = None
        self._large_size = 0  # the size the large frame declared
        self._large_filled = 0
        self._populated = 0  # bytes of the large frame's mapping made resident ahead

    @property
    def held(self) -> int:
        """Bytes of receive memory held now: the scratch buffer, and the resident pages of
        a large frame's mapping."""
        large = self._large
        own = 0
        if isinstance(large, bytearray):
            own = len(large)
        elif large is not None:
            own = _pages(max(self._large_filled, self._populated))
        return len(self._scratch) + own

    @property
    def pending(self) -> int:
        """Bytes received and not yet handed out as frames."""
        if self._large is not None:
            return self._large_filled
        return self._end - self._start

    @property
    def partial(self) -> bool:
        """Whether part of a frame has arrived and the rest has not."""
        return self._large is not None or self._end > self._start

    def shrink(self) -> None:
        """Give back scratch memory beyond the first size, if no bytes are pending."""
        if not self.partial and len(self._scratch) > self._initial_scratch:
            self._scratch = bytearray(self._initial_scratch)
            self._start = self._end = 0

    def buffer(self) -> memoryview:
        large = self._large
        if large is not None:
            filled = self._large_filled
            if filled >= self._populated:
                end = _pages(min(self._large_size, filled + max(filled, POPULATE_STEP)))
                _populate(large, self._populated, end)
                self._populated = end
            return memoryview(large)[filled:]
        scratch = self._scratch
        if self._filled_scratch and len(scratch) < self._max_scratch:
            self._filled_scratch = False
            self._compact()
            scratch = self._scratch = _grown(scratch, min(self._max_scratch, 2 * len(scratch)))
        elif self._end == len(scratch):
            self._compact()
        return memoryview(scratch)[self._end :]

    def _compact(self) -> None:
        pending = self._end - self._start
        if self._start:
            self._scratch[:pending] = self._scratch[self._start : self._end]
        self._start, self._end = 0, pending

    def received(self, count: int) -> list[bytes | memoryview]:
        """Account for `count` bytes written into `buffer()`; return completed frames.

        A frame received into its own buffer comes back as a read-only view of it.
        """
        frames: list[bytes | memoryview] = []
        if self._large is not None:
            self._large_filled += count
            if self._large_filled < self._large_size:
                return frames
            frames.append(memoryview(self._large).toreadonly())
            self._large = None
            return frames
        scratch = self._scratch
        self._filled_scratch = self._end + count == len(scratch)
        self._end += count
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
                with memoryview(scratch) as view:
                    frames.append(bytes(view[body_start : body_start + size]))
                self._start = body_start + size
                continue
            if size + 4 > len(scratch):
                # Does not fit: give the frame its own memory and read the rest into it.
                large = _frame_memory(size)
                with memoryview(scratch) as view:
                    large[:have] = view[body_start : self._end]
                self._large, self._large_size, self._large_filled = large, size, have
                # a heap buffer is resident whole: nothing to populate
                self._populated = (
                    size if isinstance(large, bytearray) else have // mmap.PAGESIZE * mmap.PAGESIZE
                )
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0
        return frames


def _frame_memory(size: int) -> mmap.mmap | bytearray:
    """An anonymous private mapping of `size` bytes: nothing is resident until written.
    Where the kernel refuses another mapping (vm.max_map_count, after many retained
    frames with holes between them), a buffer on the heap, all of it resident."""
    try:
        if hasattr(mmap, "MAP_PRIVATE"):
            return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        return mmap.mmap(-1, size)  # pragma: no cover - Windows: demand-zero pages too
    except OSError:
        pass
    try:
        return bytearray(size)
    except MemoryError as exc:  # this connection cannot go on; the others can
        raise FrameError(f"no memory for a frame of {size} bytes") from exc


def _pages(size: int) -> int:
    """`size` rounded up to whole pages."""
    return -(-size // mmap.PAGESIZE) * mmap.PAGESIZE


def _populate(memory: mmap.mmap | bytearray, start: int, end: int) -> None:
    """Make [start, end) of the mapping resident in one call, where the kernel can."""
    global _can_populate
    if _can_populate and end > start and not isinstance(memory, bytearray):
        try:
            memory.madvise(_MADV_POPULATE_WRITE, start, end - start)
        except OSError:  # a kernel before 5.14: pages fault in as bytes land
            _can_populate = False


def _grown(buffer: bytearray, size: int) -> bytearray:
    """`buffer` extended to `size` bytes: in place when no view of it is alive, else as a
    copy."""
    try:
        extra = size - len(buffer)
        while extra > 0:
            step = min(extra, len(_ZEROS))
            buffer += _ZEROS[:step]
            extra -= step
        return buffer
    except BufferError:
        copy = bytearray(size)
        copy[: len(buffer)] = buffer
        return copy
