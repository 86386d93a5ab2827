"""Fetch record bytes sent straight from segment files with ``os.sendfile``.

The Fetch handler asks storage for *lazy* reads (``Log.read(..., lazy_min_bytes=...)``) when
the connection can take them: the response parts then hold ``FileSlice`` objects in place of
record bytes, in a ``SendfileParts`` list, and the connection hands them to its
``SendfileWriter``:

- ordinary parts (headers, small records) go through the transport as usual;
- a slice is sent with ``os.sendfile(socket fd, segment fd, position, size)`` only while the
  transport's own send buffer is empty (so nothing queued by the transport can be overtaken);
  uvloop has no ``loop.sendfile``, so this is done on the socket's descriptor directly;
- when the socket is full the writer waits until it is writable again and continues, later
  responses queue behind; nothing is copied through Python on this path.

Response framing is unchanged: sizes were computed from ``len(slice)`` when the response was
encoded, and exactly that many bytes are sent. A slice whose log was truncated since the read
(``StaleSliceError``), or whose file ended early, cannot keep that promise: the connection is
closed instead (the client reconnects and fetches again), as Kafka does when a file shrinks
under a pending send.

Only plain TCP connections qualify (``sendfile_fd``); anything else keeps the copying path.
``FLOODMARK_SENDFILE=0`` in the environment turns the feature off (for A/B measurements).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Iterable

from floodmark.storage import FileSlice, StaleSliceError

log = logging.getLogger(__name__)

SENDFILE_ENABLED = hasattr(os, "sendfile") and os.environ.get("FLOODMARK_SENDFILE", "1") != "0"
# Reads below this size are copied: one pread is cheaper than dup + sendfile + close.
LAZY_MIN_BYTES = 16 * 1024
_MAX_CHUNK = 1 << 30


class SendfileStats:
    """Record bytes of fetches sent by ``sendfile`` (this process)."""

    sendfile_bytes = 0

    @classmethod
    def describe(cls) -> str:
        return f"fetch record bytes sent by sendfile={cls.sendfile_bytes}"


Part = bytes | memoryview | FileSlice


class SendfileParts(list[Part]):
    """Response parts that may contain ``FileSlice`` objects (written by ``send_parts``)."""

    __slots__ = ()

    def close_slices(self) -> None:
        for part in self:
            if isinstance(part, FileSlice):
                part.close()


def sendfile_fd(transport: asyncio.BaseTransport) -> int | None:
    """The socket descriptor to ``sendfile`` into, or None when the connection does not allow
    it (feature off, not a TCP stream socket, e.g. TLS or a Unix socket in the future)."""
    if not SENDFILE_ENABLED:
        return None
    sock = transport.get_extra_info("socket")
    if sock is None or transport.get_extra_info("sslcontext") is not None:
        return None
    try:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
            return None
        fd = int(sock.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    return fd if fd >= 0 else None


class SendfileWriter:
    """Writes one connection's responses when they contain file slices, in order.

    Ordinary parts go through the transport. A slice is sent with ``os.sendfile`` on the socket
    descriptor, only while the transport's own buffer is empty (nothing queued by the transport
    can be overtaken). When the socket is full (EAGAIN) or the transport still holds bytes, the
    writer waits for the socket to become writable (``loop.add_writer`` on a duplicate of the
    socket descriptor: uvloop refuses watchers on a transport's own descriptor) and continues
    where it stopped; responses written meanwhile queue behind (``busy``). So large fetches are
    sent from the page cache without a copy in the broker however slowly the client reads.

    A stale slice (truncated log) or a failed send calls ``on_failure`` (the connection is
    closed: the response cannot be completed as framed). ``on_state_change`` is called when
    ``busy`` changes (the connection stops reading while a send is pending).
    """

    __slots__ = ("_loop", "_on_failure", "_on_state_change", "_queue", "_sent", "_sock_fd",
                 "_transport", "_watch_fd", "closed")

    def __init__(self, transport: asyncio.WriteTransport, sock_fd: int,
                 on_failure: Callable[[], None],
                 on_state_change: Callable[[], None]) -> None:
        self._transport = transport
        self._sock_fd = sock_fd
        self._on_failure = on_failure
        self._on_state_change = on_state_change
        self._loop = asyncio.get_running_loop()
        self._queue: deque[Part] = deque()
        self._sent = 0  # bytes of the slice at the head of the queue already sent
        self._watch_fd: int | None = None
        self.closed = False

    @property
    def busy(self) -> bool:
        """Parts are waiting for the socket: later responses must queue behind them."""
        return bool(self._queue)

    def write(self, parts: Iterable[Part]) -> None:
        if self.closed:
            for part in parts:
                if isinstance(part, FileSlice):
                    part.close()
            return
        self._queue.extend(parts)
        if self._watch_fd is None:
            self._pump()

    def _pump(self) -> None:
        queue = self._queue
        transport = self._transport
        try:
            while queue:
                head = queue[0]
                if not isinstance(head, FileSlice):
                    batch: list[bytes | memoryview] = []
                    while queue:
                        part = queue[0]
                        if isinstance(part, FileSlice):
                            break
                        batch.append(part)
                        queue.popleft()
                    transport.writelines(batch)
                    continue
                if transport.get_write_buffer_size() > 0:
                    self._wait()  # until the transport has flushed what precedes the slice
                    return
                if not head.is_current():
                    raise StaleSliceError(f"{head!r}: the log was truncated since it was read")
                if not self._send_slice(head):
                    self._wait()  # the socket is full
                    return
                queue.popleft()
                head.close()
                self._sent = 0
        except StaleSliceError as exc:
            log.warning("closing connection: fetch response cannot be completed: %s", exc)
            self._fail()
            return
        except OSError as exc:  # the peer went away (EPIPE, ECONNRESET) or the fd is gone
            log.info("closing connection: sendfile failed: %s", exc)
            self._fail()
            return
        self._stop_waiting()

    def _send_slice(self, part: FileSlice) -> bool:
        """Send what the socket takes now; True when the whole slice is out."""
        in_fd = part.fileno()
        if in_fd is None:
            raise StaleSliceError(f"{part!r}: closed")
        while self._sent < part.size:
            try:
                n = os.sendfile(self._sock_fd, in_fd, part.position + self._sent,
                                min(part.size - self._sent, _MAX_CHUNK))
            except (BlockingIOError, InterruptedError):
                return False
            if n == 0:
                raise StaleSliceError(f"{part!r}: file ends {part.size - self._sent} bytes early")
            self._sent += n
            SendfileStats.sendfile_bytes += n
        return True

    def _wait(self) -> None:
        if self._watch_fd is None:
            self._watch_fd = os.dup(self._sock_fd)
            self._loop.add_writer(self._watch_fd, self._pump)
            self._on_state_change()

    def _stop_waiting(self) -> None:
        if self._watch_fd is not None:
            self._loop.remove_writer(self._watch_fd)
            os.close(self._watch_fd)
            self._watch_fd = None
            self._on_state_change()

    def _fail(self) -> None:
        self.close()
        self._on_failure()

    def close(self) -> None:
        """Stop sending; release every slice still queued (the connection is going away)."""
        self.closed = True
        if self._watch_fd is not None:
            self._loop.remove_writer(self._watch_fd)
            os.close(self._watch_fd)
            self._watch_fd = None
        while self._queue:
            part = self._queue.popleft()
            if isinstance(part, FileSlice):
                part.close()
