"""The network shell: one asyncio protocol per client connection.

Framing (4-byte size + request), one dispatch per frame, and responses written strictly in request
order (wire-compat.md P3) even when a later request finishes first (a long-polling Fetch or a
JoinGroup waiting for the rebalance). A frame that cannot be decoded, an unknown API key or an
unsupported version closes this connection only (what Kafka does); every other client keeps going.

One server per listener (``security.listeners``): each accepted ``Connection`` knows its listener
name and security protocol. A TLS listener (SSL, SASL_SSL) is a ``ThreadedTlsServer``: it
accepts sockets itself and hands each one, with the listener's *current* ``ssl.SSLContext``
(``ServerTls.context``, which reloads changed key and trust stores), to one of its
``num.network.threads`` network threads (``security.network_threads``), which does the
handshake and all of that connection's decryption, framing and encryption
(``security.tls_transport``) and hands whole frames to the loop (``frame_received``). So a
rotated certificate is served to new connections without a restart, not a byte is read outside
TLS, and the event loop never touches a TLS byte; a failed handshake (plaintext bytes, an
untrusted, expired or missing client certificate, a silent peer) is one log line and closes that
connection only. TLS connections never use sendfile.

A plaintext connection's reads are buffered (``asyncio.BufferedProtocol``): the loop reads
straight into a buffer this connection hands out (``get_buffer``), and ``wire.frames``
cuts the frames (each byte copied at most once, a large frame read into a buffer of exactly its
size); a TLS connection's network thread drives the same ``FrameReader``. Either way a handler
gets a writable view, so storage stamps offsets in place. The size of each frame is checked
before it is read (``frame_size_problem``: ``socket.request.max.bytes``, or
``sasl.server.max.receive.size`` before SASL authentication), by whichever thread reads.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from floodmark.broker.boundary import Encoded
from floodmark.broker.sendfile import SendfileParts, SendfileWriter, sendfile_fd
from floodmark.security import (
    ANONYMOUS,
    Endpoint,
    KafkaPrincipal,
    SaslSession,
    SecurityProtocol,
    ServerTls,
    ThreadedTlsServer,
    TlsRefused,
)
from floodmark.wire import BufferPool, FrameReader, ProtocolError

log = logging.getLogger(__name__)

# A dispatcher turns one request frame into: encoded response parts, None (no response, e.g.
# acks=0), or an awaitable of either. It raises ProtocolError to close the connection.
Dispatch = Callable[[memoryview | bytes, "Connection"],
                    "Encoded | Awaitable[Encoded | None] | None"]


CLOSE_GRACE_S = 10.0  # Connection.close(): how long what is written may take to be sent


class Connection(asyncio.BufferedProtocol):
    __slots__ = (
        "_closing",
        "_dispatch",
        "_frames",
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
        pool: BufferPool | None = None,
    ) -> None:
        """``pool``: the read buffers of the loop's connections on this listener (one per
        loop; a pool is not thread-safe)."""
        self._dispatch = dispatch
        self._max_request_bytes = max_request_bytes
        self._on_close = on_close
        # Reads by the loop (a TLS connection's are cut by its network thread).
        self._frames = FrameReader(self._frame_cut, self._check_size,
                                   pool if pool is not None else BufferPool())
        self._write_paused = False  # the transport's send buffer is above its high-water mark
        self._reading_paused = False
        self._muted = False  # throttled by a quota (KIP-219): nothing is read until _unmute
        self._unmute: asyncio.TimerHandle | None = None
        self._pending: deque[Encoded | asyncio.Future[Encoded | None] | None] = deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._closing = False  # close() called: the answers already due are sent, then it closes
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
        """Where the loop puts the next bytes (``wire.frames.FrameReader``)."""
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if not self.closed:
            self._frames.buffer_updated(nbytes)

    def _frame_cut(self, frame: memoryview) -> bool:
        self._on_frame(frame)
        return not self.closed

    def _check_size(self, size: int) -> bool:
        problem = self.frame_size_problem(size)
        if problem is None:
            return True
        self.frame_refused(problem)
        return False

    # -- what a network thread's TLS transport calls (``security.tls_transport``): it cuts the
    # frames itself and hands them over whole.
    def frame_size_problem(self, size: int) -> str | None:
        """Why a frame of ``size`` bytes may not be read (None: it may). Reads settings only,
        so a network thread may call it."""
        if self._tls is None and size >> 16 in _TLS_RECORD_PREFIXES:
            return (f"a TLS handshake on {self.security_protocol} listener "
                    f"{self.listener_name} (the client is configured for SSL)")
        limit = self._max_request_bytes
        sasl = self.sasl
        if sasl is not None:  # before SASL authentication: sasl.server.max.receive.size
            limit = sasl.max_frame_bytes(limit)
        if size < 8 or size > limit:
            name = ("socket.request.max.bytes" if limit == self._max_request_bytes
                    else "sasl.server.max.receive.size")
            return f"request size {size} outside [8, {name}={limit}]"
        return None

    def frame_refused(self, problem: str) -> None:
        log.warning("closing %s: %s", self.peer, problem)
        self.abort()

    def frame_received(self, frame: memoryview) -> None:
        if not self.closed and not self._closing:
            self._on_frame(frame)

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
        if self._closing and not pending:
            self._close_transport()
            return
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

    def close(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """Close once the answers to the requests already read are written and sent (an
        authentication failure's answer must reach the client, also when its handler has not
        finished or a TLS connection's network thread has not sent it yet); requests arriving
        meanwhile are dropped. If that takes longer than ``grace_s`` (a client that does not
        read, a handler that does not finish), the connection is dropped."""
        if self.closed or self._closing or self.transport is None:
            return
        self._closing = True
        asyncio.get_running_loop().call_later(grace_s, self.transport.abort)
        if not self._pending:
            self._close_transport()

    def _close_transport(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            if self._sender is not None:
                self._sender.close()
            self.transport.close()


# A TLS ClientHello starts with a handshake record: content type 22, version 3.x. Read as a
# request's size prefix those bytes are 0x1603xxxx, far above any request size.
_TLS_RECORD_PREFIXES = frozenset({0x1603})


async def start_listener(
    host: str, port: int, dispatch: Dispatch, max_request_bytes: int,
    on_open: Callable[[Connection], None], on_close: Callable[[Connection], None],
    listener: Endpoint | None = None, tls: ServerTls | None = None, network_threads: int = 1,
) -> asyncio.Server | ThreadedTlsServer:
    loop = asyncio.get_running_loop()
    pool = BufferPool()

    def factory() -> Connection:
        conn = Connection(dispatch, max_request_bytes, on_close, listener, tls, pool)
        on_open(conn)
        return conn

    if tls is not None:
        return await ThreadedTlsServer.start_threaded(
            host, port, factory, tls, listener.name if listener is not None else "SSL",
            network_threads)
    return await loop.create_server(factory, host, port, reuse_address=True, backlog=1024)
