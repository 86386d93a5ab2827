"""Fetch record bytes sent straight from segment files with ``os.sendfile``.

The Fetch handler asks storage for *lazy* reads (``Log.read(..., lazy_min_bytes=...)``) when
the connection can take them: the response parts then hold ``FileSlice`` objects in place of
record bytes, in a ``SendfileParts`` list. ``send_parts`` writes such a response in order:

- ordinary parts (headers, small records) go through the transport as usual;
- a slice is sent with ``os.sendfile(socket fd, segment fd, position, size)`` only while the
  transport's own send buffer is empty (so nothing queued by the transport can be overtaken);
  uvloop has no ``loop.sendfile``, so this is done on the socket's descriptor directly, and
  stops at the first EAGAIN;
- whatever ``sendfile`` could not send now (a full socket buffer, a non-empty transport buffer)
  is read with ``pread`` and handed to the transport: the copying path, for the remainder only.

Response framing is unchanged: sizes were computed from ``len(slice)`` when the response was
encoded, and exactly that many bytes are sent. A slice whose log was truncated since the read
(``StaleSliceError``), or whose file ended early, cannot keep that promise: ``send_parts`` then
returns False and the caller closes the connection (the client reconnects and fetches again).

Only plain TCP connections qualify (``sendfile_fd``); anything else keeps the copying path.
``FLOODMARK_SENDFILE=0`` in the environment turns the feature off (for A/B measurements).
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from floodmark.storage.file_slice import FileSlice, StaleSliceError

log = logging.getLogger(__name__)

SENDFILE_ENABLED = hasattr(os, "sendfile") and os.environ.get("FLOODMARK_SENDFILE", "1") != "0"
# Reads below this size are copied: one pread is cheaper than dup + sendfile + close.
LAZY_MIN_BYTES = 16 * 1024
_MAX_CHUNK = 1 << 30


class SendfileStats:
    """Record bytes of lazily read fetches: sent by ``sendfile`` vs copied (remainders)."""

    sendfile_bytes = 0
    copied_bytes = 0

    @classmethod
    def describe(cls) -> str:
        return (f"fetch record bytes sent by sendfile={cls.sendfile_bytes}, "
                f"copied after a partial sendfile={cls.copied_bytes}")


class SendfileParts(list[Any]):
    """Response parts that may contain ``FileSlice`` objects (written by ``send_parts``)."""

    __slots__ = ()

    def close_slices(self) -> None:
        for part in self:
            if isinstance(part, FileSlice):
                part.close()


def sendfile_fd(transport: Any) -> int | None:
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


def _sendfile_now(sock_fd: int, part: FileSlice) -> int:
    """Bytes of ``part`` sent now (stops at EAGAIN or at an early end of file)."""
    in_fd = part.fileno()
    if in_fd is None or not part.is_current():
        return 0
    sent = 0
    while sent < part.size:
        try:
            n = os.sendfile(sock_fd, in_fd, part.position + sent, min(part.size - sent, _MAX_CHUNK))
        except (BlockingIOError, InterruptedError):
            break
        if n == 0:
            break  # end of file: the slice is stale; read() below reports it
        sent += n
    return sent


def send_parts(transport: Any, sock_fd: int, parts: SendfileParts) -> bool:
    """Write a response whose parts may hold file slices; False if a slice could not be sent
    as promised (the caller must close the connection). Closes every slice."""
    try:
        queued: list[Any] = []
        for part in parts:
            if not isinstance(part, FileSlice):
                queued.append(part)
                continue
            if queued:
                transport.writelines(queued)
                queued = []
            sent = _sendfile_now(sock_fd, part) if transport.get_write_buffer_size() == 0 else 0
            SendfileStats.sendfile_bytes += sent
            if sent < part.size:
                queued.append(part.read(sent))  # the copying path, for the rest only
                SendfileStats.copied_bytes += part.size - sent
            part.close()
        if queued:
            transport.writelines(queued)
        return True
    except StaleSliceError as exc:
        log.warning("closing connection: fetch response cannot be completed: %s", exc)
        return False
    except OSError as exc:  # the peer went away mid-send (EPIPE, ECONNRESET)
        log.info("closing connection: sendfile failed: %s", exc)
        return False
    finally:
        parts.close_slices()
