"""Cutting Kafka's size-prefixed frames out of a byte stream, with each byte copied at most once.

The reader hands out the buffer the next read goes into (``get_buffer``) and is told how much
arrived (``buffer_updated``), as ``asyncio.BufferedProtocol`` is. A frame larger than what is
left of the current read buffer gets a ``bytearray`` of exactly its size once its size prefix is
known, and the rest of it is read into that without another copy; small frames are cut out of a
read buffer that is never written twice. Either way a frame is a writable ``memoryview`` that
later reads never overwrite (storage stamps offsets in place).

Whoever reads the socket drives it: the broker's event loop for a plaintext connection
(``broker.server.Connection``), a network thread for a TLS one (``security.tls_transport``),
which then hands whole frames to the loop.
"""

from __future__ import annotations

import struct
import sys
from collections import deque
from collections.abc import Callable

READ_BUFFER_BYTES = 64 * 1024
"""A read buffer for small frames, whatever size the loop suggests (uvloop: 64 KiB for TCP, up
to 256 KiB of ciphertext under TLS). The head of a large frame lands here and is copied into the
frame's own buffer, so a larger read buffer copies more: 64 KiB against the hint cost 1.41-1.64
against 1.89-2.00 CPU s/GB on TLS with 1 MB frames (benchmarks/server_reads.py), and the same on
1 KiB frames."""
MIN_READ_BYTES = 4 * 1024
"""Below this much room a read buffer is replaced (its unread tail copied) rather than offered."""
POOL_BUFFERS = 64
"""Read buffers a ``BufferPool`` keeps for reuse (4 MiB)."""
_LOOK_AHEAD = 4  # retired buffers a pool looks at for a free one
_SIZE = struct.Struct(">i").unpack_from

OnFrame = Callable[[memoryview], bool]
"""Takes one whole frame (without its size prefix); False: cut no more (the connection closed)."""
CheckSize = Callable[[int], bool]
"""Whether a frame of this size may be read; False: cut no more (the reader refused it)."""


class BufferPool:
    """Read buffers for the frame readers of one thread (the event loop's, or one network
    thread's), reused once no frame cut from them is alive any more. A frame is a view of its
    buffer and holds a reference to it, so a buffer that only the pool refers to is free:
    nobody can read it again. Reuse spares the allocator's fresh pages (their faults and
    zeroing: a quarter of a network thread's time on 1 KiB frames before). Not thread-safe:
    one pool per thread."""

    __slots__ = ("_keep", "_retired")

    def __init__(self, keep: int = POOL_BUFFERS) -> None:
        self._keep = keep
        self._retired: deque[bytearray] = deque()

    def take(self) -> bytearray:
        """A free buffer of ``READ_BUFFER_BYTES`` (old contents: it is written before read)."""
        retired = self._retired
        for i in range(min(_LOOK_AHEAD, len(retired))):
            if sys.getrefcount(retired[i]) == 2:  # the pool's reference and the argument
                buffer = retired[i]
                del retired[i]
                return buffer
        return bytearray(READ_BUFFER_BYTES)

    def give_back(self, buffer: bytearray) -> None:
        """A buffer its reader replaced (frames cut from it may still be alive)."""
        self._retired.append(buffer)
        if len(self._retired) > self._keep:
            self._retired.popleft()  # left to its frames and the allocator


class FrameReader:
    """A connection's framing state (see the module's text)."""

    __slots__ = ("_buffer", "_buffer_end", "_buffer_start", "_buffer_view", "_check_size",
                 "_filled", "_frame", "_frame_view", "_on_frame", "_pool")

    def __init__(self, on_frame: OnFrame, check_size: CheckSize, pool: BufferPool) -> None:
        self._on_frame = on_frame
        self._check_size = check_size
        # Small frames are cut out of a read buffer: bytes [start, end) are read but not yet
        # framed; bytes before start were handed out (never written again), after end are free.
        self._buffer: bytearray | None = None
        self._buffer_view = memoryview(b"")
        self._buffer_start = 0
        self._buffer_end = 0
        self._frame: bytearray | None = None  # a frame read into its own buffer, if any
        self._frame_view = memoryview(b"")
        self._filled = 0
        self._pool = pool

    def get_buffer(self) -> memoryview:
        """Where the next bytes go: the rest of a frame being filled, else the free tail of the
        read buffer (a new buffer when little room is left; its unread bytes, a partial size
        prefix or small frame, are copied over)."""
        if self._frame is not None:
            return self._frame_view[self._filled :]
        buffer = self._buffer
        if buffer is None or len(buffer) - self._buffer_end < MIN_READ_BYTES:
            unread = self._buffer_end - self._buffer_start
            fresh = (self._pool.take() if unread + MIN_READ_BYTES <= READ_BUFFER_BYTES
                     else bytearray(unread + MIN_READ_BYTES))
            fresh[:unread] = self._buffer_view[self._buffer_start : self._buffer_end]
            self._retire(buffer)
            self._buffer = fresh
            self._buffer_view = memoryview(fresh)
            self._buffer_start, self._buffer_end = 0, unread
        return self._buffer_view[self._buffer_end :]

    def _retire(self, buffer: bytearray | None) -> None:
        if buffer is not None and len(buffer) == READ_BUFFER_BYTES:
            self._pool.give_back(buffer)

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` arrived in the buffer ``get_buffer`` gave: hand out every frame now
        whole."""
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == len(self._frame):
                self._frame = None
                self._on_frame(self._frame_view)
            return
        buffer = self._buffer
        if buffer is None:  # pragma: no cover - get_buffer always precedes
            return
        view = self._buffer_view
        start = self._buffer_start
        end = self._buffer_end = self._buffer_end + nbytes
        while end - start >= 4:
            size = _SIZE(buffer, start)[0]
            if not self._check_size(size):
                return
            if end - start - 4 >= size:
                start += 4 + size
                self._buffer_start = start
                if not self._on_frame(view[start - size : start]):
                    return
                continue
            if start + 4 + size > len(buffer):  # does not fit: a buffer of its own
                frame = bytearray(size)
                have = end - start - 4
                frame[:have] = view[start + 4 : end]
                self._frame, self._frame_view, self._filled = frame, memoryview(frame), have
                start = end
            break
        self._buffer_start = start
        if start == end:  # all handed out: the buffer lives on only in those frames
            self._retire(buffer)
            self._buffer, self._buffer_view = None, memoryview(b"")
            self._buffer_start = self._buffer_end = 0
