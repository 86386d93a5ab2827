"""The network shell: one asyncio protocol per client connection.

Framing (4-byte size + request), one dispatch per frame, and responses written strictly in request
order (wire-compat.md P3) even when a later request finishes first (a long-polling Fetch or a
JoinGroup waiting for the rebalance). A frame that cannot be decoded, an unknown API key or an
unsupported version closes this connection only (what Kafka does); every other client keeps going.

One server per listener (``security.listeners``): each accepted ``Connection`` knows its listener
name and security protocol. A TLS listener (SSL, SASL_SSL) accepts sockets itself
(``serve_tls``) and hands each one to the loop with the listener's *current* ``ssl.SSLContext``
(``ServerTls.context``, which reloads changed key and trust stores), so a rotated certificate is
served to new connections without a restart, and not a byte is read outside TLS; a failed
handshake (plaintext bytes, an untrusted, expired or missing client certificate, a silent peer)
is one log line and closes that connection only. TLS connections never use sendfile.

Reads are buffered (``asyncio.BufferedProtocol``): the loop reads, or on a TLS listener decrypts,
straight into a buffer this connection hands out (``get_buffer``). A frame larger than what is
left of the current read buffer gets a ``bytearray`` of exactly its size once its size prefix
is known, and the rest of it is read (decrypted) into that without another copy; small frames
are cut out of a read buffer that is never written twice. Either way a handler gets a writable
view, so storage stamps offsets in place. With a plain ``Protocol`` every TLS record became a
new ``bytes`` object, joined into another, then copied into the frame (issue 21's profile).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable

from floodmark.broker.boundary import Encoded
from floodmark.broker.sendfile import SendfileParts, SendfileWriter, sendfile_fd
from floodmark.security.listeners import Endpoint, SecurityProtocol
from floodmark.security.principal import ANONYMOUS, KafkaPrincipal
from floodmark.security.sasl.session import SaslSession
from floodmark.security.tls import ServerTls, TlsRefused
from floodmark.security.tls_server import TlsServer
from floodmark.wire.errors import ProtocolError

log = logging.getLogger(__name__)

# A dispatcher turns one request frame into: encoded response parts, None (no response, e.g.
# acks=0), or an awaitable of either. It raises ProtocolError to close the connection.
Dispatch = Callable[[memoryview | bytes, "Connection"],
                    "Encoded | Awaitable[Encoded | None] | None"]


# A read buffer for small frames: what the loop may fill in one read, whatever size it suggests
# (uvloop: 64 KiB for TCP, the ciphertext pending, up to 256 KiB, under TLS). The head of a large
# frame lands here and is copied into the frame's own buffer, so a larger read buffer copies
# more: 64 KiB against the hint cost 1.41-1.64 against 1.89-2.00 CPU s/GB on TLS with 1 MB
# frames (benchmarks/server_reads.py), and the same on 1 KiB frames.
READ_BUFFER_BYTES = 64 * 1024
# Below this much room a read buffer is replaced (its unread tail copied) rather than offered.
MIN_READ_BYTES = 4 * 1024
_SIZE = struct.Struct(">i").unpack_from


class Connection(asyncio.BufferedProtocol):
    __slots__ = (
        "_buffer",
        "_buffer_end",
        "_buffer_start",
        "_buffer_view",
        "_dispatch",
        "_filled",
        "_frame",
        "_frame_view",
        "_max_request_bytes",
        "_muted",
        "_on_close",
        "_pending",
        "_reading_paused",
        "_sender",
        "_tls",
        "_unmute",
        "_write_paused",
        "client_host",
        "closed",
        "listener_name",
        "peer",
        "principal",
        "sasl",
        "security_protocol",
        "sendfile_fd",
        "transport",
    )

    def __init__(
        self, dispatch: Dispatch, max_request_bytes: int, on_close: Callable[[Connection], None],
        listener: Endpoint | None = None, tls: ServerTls | None = None,
    ) -> None:
        self._dispatch = dispatch
        self._max_request_bytes = max_request_bytes
        self._on_close = on_close
        # Small frames are cut out of a read buffer: bytes [start, end) are read but not yet
        # framed; bytes before start were handed out (never written again), after end are free.
        self._buffer: bytearray | None = None
        self._buffer_view = memoryview(b"")
        self._buffer_start = 0
        self._buffer_end = 0
        self._frame: bytearray | None = None  # a frame read into its own buffer, if any
        self._frame_view = memoryview(b"")
        self._filled = 0
        self._write_paused = False  # the transport's send buffer is above its high-water mark
        self._reading_paused = False
        self._muted = False  # throttled by a quota (KIP-219): nothing is read until _unmute
        self._unmute: asyncio.TimerHandle | None = None
        self._pending: deque[Encoded | asyncio.Future[Encoded | None] | None] = deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.peer: str = "?"
        self.client_host: str = "?"  # the peer's address without the port (ACL host matching)
        # Who is on this connection: ANONYMOUS until TLS/SASL authentication says otherwise.
        self.principal: KafkaPrincipal = ANONYMOUS
        self.listener_name = listener.name if listener is not None else "PLAINTEXT"
        self.security_protocol = (listener.security_protocol.value if listener is not None
                                  else SecurityProtocol.PLAINTEXT.value)
        self._tls = tls  # a TLS listener's: the handshake comes before any request
        # A SASL listener's authenticator (set by the broker when the connection opens): until
        # it succeeds, requests are few and small (``SaslSession.admits``).
        self.sasl: SaslSession | None = None
        self.sendfile_fd: int | None = None  # set when Fetch may send records with sendfile
        self._sender: SendfileWriter | None = None  # writes responses holding file slices

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = str(peer[0]) if peer else "?"
        if self._tls is not None:  # accepted by serve_tls: the handshake is done
            self.sendfile_fd = None  # the kernel cannot encrypt: records go through TLS
            try:
                self.principal = self._tls.principal_of(transport.get_extra_info("ssl_object"))
            except TlsRefused as exc:
                log.warning("closing %s on listener %s: %s", self.peer, self.listener_name, exc)
                self.abort()
            return
        self.sendfile_fd = sendfile_fd(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._sender is not None:
            self._sender.close()
        if self._unmute is not None:
            self._unmute.cancel()
        for item in self._pending:
            if isinstance(item, asyncio.Future) and not item.done():
                item.cancel()
        self._pending.clear()
        self._on_close(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the loop puts the next bytes: the rest of a frame being filled, else the free
        tail of the read buffer (a new buffer when little room is left; its unread bytes, a
        partial size prefix or small frame, are copied over)."""
        if self._frame is not None:
            return self._frame_view[self._filled :]
        buffer = self._buffer
        if buffer is None or len(buffer) - self._buffer_end < MIN_READ_BYTES:
            unread = self._buffer_view[self._buffer_start : self._buffer_end]
            buffer = bytearray(max(READ_BUFFER_BYTES, len(unread) + MIN_READ_BYTES))
            buffer[: len(unread)] = unread
            self._buffer = buffer
            self._buffer_view = memoryview(buffer)
            self._buffer_start, self._buffer_end = 0, len(unread)
        return self._buffer_view[self._buffer_end :]

    def buffer_updated(self, nbytes: int) -> None:
        """Cut the frames out of what was read; each byte is copied at most once (the part of
        a large frame that came in with the read before its size was known)."""
        if self.closed:
            return
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
                self._on_frame(view[start - size : start])
                if self.closed:
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
            self._buffer, self._buffer_view = None, memoryview(b"")
            self._buffer_start = self._buffer_end = 0

    def _check_size(self, size: int) -> bool:
        if self._tls is None and size >> 16 in _TLS_RECORD_PREFIXES:
            log.warning("closing %s: a TLS handshake on %s listener %s (the client is "
                        "configured for SSL)", self.peer, self.security_protocol,
                        self.listener_name)
            self.abort()
            return False
        limit = self._max_request_bytes
        if self.sasl is not None:  # before SASL authentication: sasl.server.max.receive.size
            limit = self.sasl.max_frame_bytes(limit)
        if size < 8 or size > limit:
            log.warning("closing %s: request size %d outside [8, %s=%d]", self.peer, size,
                        "socket.request.max.bytes" if limit == self._max_request_bytes
                        else "sasl.server.max.receive.size", limit)
            self.abort()
            return False
        return True

    # -- dispatch and ordered replies ----------------------------------------------------------
    def _on_frame(self, frame: memoryview | bytes) -> None:
        try:
            result = self._dispatch(frame, self)
        except ProtocolError as exc:
            log.warning("closing %s: %s", self.peer, exc)
            self.abort()
            return
        except Exception:
            # A bug in one handler must not take the broker down: drop this client only.
            log.exception("closing %s: request handler failed", self.peer)
            self.abort()
            return
        if result is None:
            return
        if isinstance(result, list):
            if self._pending:
                self._pending.append(result)
            else:
                self.write(result)
            return
        fut = asyncio.ensure_future(result)
        self._pending.append(fut)
        fut.add_done_callback(self._on_done)
        self._update_reading()

    # -- backpressure: a client that does not read its responses, or pipelines without bound,
    # stops being read from (Kafka mutes such a channel); memory per connection stays bounded.
    MAX_PENDING_RESPONSES = 128

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = (self._write_paused or self._muted
                        or len(self._pending) >= self.MAX_PENDING_RESPONSES
                        or (self._sender is not None and self._sender.busy))
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def mute_for(self, delay_ms: int) -> None:
        """A quota throttled this client (KIP-219): its answer carries the throttle time and
        goes out as usual; nothing more is read from it for ``delay_ms`` (Kafka mutes the
        channel). Requests already read still run; other connections are not touched."""
        if delay_ms <= 0 or self.closed or self.transport is None:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + delay_ms / 1000
        if self._unmute is not None:
            if self._unmute.when() >= until:
                return
            self._unmute.cancel()
        self._muted = True
        self._unmute = loop.call_at(until, self._end_mute)
        self._update_reading()

    def _end_mute(self) -> None:
        self._unmute = None
        self._muted = False
        self._update_reading()

    def _on_done(self, _fut: asyncio.Future[Encoded | None]) -> None:
        pending = self._pending
        while pending:
            head = pending[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    break
                pending.popleft()
                if head.cancelled():
                    continue
                exc = head.exception()
                if exc is not None:
                    if isinstance(exc, ProtocolError):
                        log.warning("closing %s: %s", self.peer, exc)
                    else:
                        log.error("closing %s: handler failed", self.peer, exc_info=exc)
                    self.abort()
                    return
                parts = head.result()
                if parts is not None:
                    self.write(parts)
            else:
                pending.popleft()
                if head is not None:
                    self.write(head)
        self._update_reading()

    def write(self, parts: Encoded) -> None:
        if self.transport is not None and not self.closed:
            sender = self._sender
            if sender is not None and sender.busy:
                sender.write(parts)  # behind a response still being sent from a file
                return
            if isinstance(parts, SendfileParts):
                if sender is None:
                    if self.sendfile_fd is None:
                        parts.close_slices()
                        self.abort()
                        return
                    sender = self._sender = SendfileWriter(
                        self.transport, self.sendfile_fd, self.abort, self._update_reading)
                sender.write(parts)
                return
            self.transport.writelines(parts)
        elif isinstance(parts, SendfileParts):
            parts.close_slices()

    def abort(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            if self._sender is not None:
                self._sender.close()
            self.transport.abort()


# A TLS ClientHello starts with a handshake record: content type 22, version 3.x. Read as a
# request's size prefix those bytes are 0x1603xxxx, far above any request size.
_TLS_RECORD_PREFIXES = frozenset({0x1603})


async def start_listener(
    host: str, port: int, dispatch: Dispatch, max_request_bytes: int,
    on_open: Callable[[Connection], None], on_close: Callable[[Connection], None],
    listener: Endpoint | None = None, tls: ServerTls | None = None,
) -> asyncio.Server | TlsServer:
    loop = asyncio.get_running_loop()

    def factory() -> Connection:
        conn = Connection(dispatch, max_request_bytes, on_close, listener, tls)
        on_open(conn)
        return conn

    if tls is not None:
        return await TlsServer.start(host, port, factory, tls,
                                     listener.name if listener is not None else "SSL")
    return await loop.create_server(factory, host, port, reuse_address=True, backlog=1024)
