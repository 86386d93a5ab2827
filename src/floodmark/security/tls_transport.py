"""floodmark's own TLS transport: one TLS connection whose handshake, decryption, framing and
encryption run on a network thread (``network_threads.NetworkThread``), not on the event loop.

The network thread owns the ``ssl.SSLObject`` (over two MemoryBIOs, fed from and drained
into the non-blocking socket) and is the only thread that ever calls into it, so the one
``SSL`` object is never used from two threads at once. ``_ssl`` releases the GIL inside
``SSL_read``/``SSL_write``, so AES-GCM, the kernel's copies and the page faults of fresh frame
buffers run beside the loop.

Reading: the thread decrypts straight into the buffers of a ``wire.frames.FrameReader`` (a large
request into a buffer of exactly its size, small ones cut out of a read buffer), asks the
protocol whether each size may be read (``frame_size_problem``: settings only, safe on the
thread) and hands whole frames to the loop, which calls the protocol's ``frame_received`` for
each (one ``call_soon_threadsafe`` for all the frames that arrive before the loop runs). So the
loop never touches a TLS byte. The thread stops reading while the loop holds
``READ_AHEAD_BYTES`` of frames it has not taken, or while reading is paused (a muted channel, a
full send buffer, too many pending answers): a slow or throttled client never makes the broker
buffer without bound. A refused size is handed to the loop too (``frame_refused``: one log
line, the connection closed) and nothing more is read.

Writing: ``writelines`` queues the parts and wakes the thread, which encrypts and sends them
(small parts joined into one TLS record, large ones written whole: OpenSSL cuts them into 16 KiB
records in one call). A step of the thread ends only when ciphertext waits for a full socket
(then WRITE is watched), everything queued is sent, or OpenSSL waits for the peer: every send,
the one after reading too, is followed by more encryption while plaintext is queued, since the
socket is not watched for WRITE while no ciphertext waits. The write buffer size is what was
queued and not yet encrypted; above ``WRITE_HIGH_BYTES`` the protocol is paused
(``pause_writing``) until it drains below ``WRITE_LOW_BYTES``.

Closing: ``abort`` drops what is queued and closes the socket (``connection_lost`` comes at
once, on the loop); ``close`` (and the peer's end of stream, unless ``eof_received`` keeps the
connection) sends what is queued, then close_notify, then closes. A read or write error closes
the socket and reports the error to ``connection_lost``.

Each counter and flag is written by one side only (the GIL makes each read and write of it
whole), and a side that stops for want of the other's progress sets a flag, then tests again,
so that a wake-up is never lost: the thread writes ``_read_total`` (bytes of frames handed
over), ``_sent_total`` (bytes encrypted and sent) and ``_read_blocked``; the loop writes
``_delivered_total``, ``_queued_total``, ``_paused``, ``_write_paused``, ``_open`` and
``_closing``. ``_deliver_posted`` (a delivery is scheduled) is set by either and cleared by the
loop before it delivers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import selectors
import socket
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from floodmark.security.tls import TlsRefused
from floodmark.wire import BufferPool, FrameReader

log = logging.getLogger(__name__)

RECEIVE_BYTES = 256 * 1024
"""Ciphertext taken from the socket in one ``recv`` (into OpenSSL's incoming MemoryBIO)."""
SEND_BYTES = 256 * 1024
"""Plaintext encrypted in one ``SSL_write``, and about the ciphertext that may wait for the
socket before more is encrypted."""
READ_BUDGET_BYTES = 1024 * 1024
"""What the thread reads from one connection before it looks at its others."""
READ_AHEAD_BYTES = 2 * 1024 * 1024
"""Bytes of frames the loop has not taken yet, above which the thread stops reading."""
WRITE_HIGH_BYTES = 256 * 1024
WRITE_LOW_BYTES = 64 * 1024
"""The write buffer's high and low water marks (``pause_writing``/``resume_writing``)."""
JOIN_BYTES = 16 * 1024
"""Parts smaller than this are joined with their neighbours into one TLS record."""

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE

_EOF = memoryview(b"")  # marks the peer's end of stream in the inbound queue


class FrameProtocol(Protocol):
    """What the transport needs of its protocol (``broker.server.Connection``)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...

    def pause_writing(self) -> None: ...

    def resume_writing(self) -> None: ...

    def eof_received(self) -> bool | None: ...

    def frame_size_problem(self, size: int) -> str | None:
        """(thread) Why a frame of this size may not be read; None: it may."""

    def frame_refused(self, problem: str) -> None:
        """(loop) A frame's size was refused: nothing more is read."""

    def frame_received(self, frame: memoryview) -> None:
        """(loop) One whole request frame, without its size prefix."""


class NetworkThread(Protocol):
    """What a transport needs of its network thread (``network_threads.NetworkThread``)."""

    pool: BufferPool
    """The read buffers of the thread's frame readers."""
    receive_view: memoryview
    """The thread's buffer for ciphertext on its way from a socket into a MemoryBIO (which
    copies it at once, so one buffer serves all the thread's connections)."""

    def kick(self, transport: TlsTransport) -> None:
        """(loop) Look at this connection again: it has something to write, may read again,
        or is closing."""

    def forget(self, transport: TlsTransport) -> None:
        """(loop) The connection is lost."""

    def post(self, callback: Callable[[], object]) -> None:
        """(thread) Run ``callback`` on the loop."""

    def watch(self, transport: TlsTransport, events: int) -> None:
        """(thread) Watch the connection's socket for ``events`` (0: not at all)."""

    def again(self, transport: TlsTransport) -> None:
        """(thread) Step this connection again after the others, whatever its socket says."""


class TlsTransport(asyncio.Transport):
    """One TLS connection (see the module's text). The handshake runs on the thread; when it
    is done, ``_made`` (on the loop) builds the protocol, and from then on the thread reads."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: NetworkThread,
                 sock: socket.socket, context: ssl.SSLContext,
                 protocol_factory: Callable[[], asyncio.BaseProtocol], where: str,
                 listener: str, handshake_done: asyncio.Future[None],
                 handshake_timeout_s: float) -> None:
        super().__init__({"peername": sock.getpeername(), "sockname": sock.getsockname(),
                          "socket": sock, "sslcontext": context})
        self._loop = loop
        self._thread = thread
        self._raw = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._factory = protocol_factory
        self.where = where  # HOST:PORT of the peer, for the log
        self.listener = listener
        self._handshake_done = handshake_done
        self.handshake_timeout_s = handshake_timeout_s
        self._protocol: FrameProtocol | None = None
        # Loop-written.
        self._open = False  # the protocol is made: the thread may read
        self._paused = False
        self._closing = False  # close() or abort() called, or the connection is lost
        self._aborting = False
        self._lost = False
        self._write_paused = False
        self._delivered_total = 0
        self._queued_total = 0
        self._deliver_posted = False
        # Thread-written.
        self._read_total = 0
        self._sent_total = 0
        self._read_blocked = False
        # The thread appends to inbound and pops outbound, the loop the reverse.
        self._inbound: deque[memoryview] = deque()
        self._outbound: deque[bytes | bytearray | memoryview] = deque()
        # Thread-only.
        self.fd = sock.fileno()
        self.handshaking = True
        self.handshake_deadline_s = 0.0
        self._received = 0
        self._raw_eof = False  # the socket's end of stream was read
        self._cipher: deque[memoryview] = deque()  # ciphertext waiting for the socket
        self._out_current: bytes | bytearray | memoryview | None = None
        self._reader = FrameReader(self._t_frame_cut, self._t_check_size, thread.pool)
        self._size_problem: Callable[[int], str | None] = lambda _size: None
        self._refused: str | None = None
        self._cut_bytes = 0
        self._eof_read = False
        self.registered = 0  # the events the thread's selector watches for this socket
        self.gone = False  # the socket is closed

    # -- the loop's side -------------------------------------------------------------------
    def _made(self) -> None:
        """The handshake is done (posted by the thread): build the protocol, then let the
        thread read."""
        if not self._handshake_done.done():
            self._handshake_done.set_result(None)
        if self._closing:
            return
        protocol: Any = self._factory()
        self._protocol = protocol
        self._size_problem = protocol.frame_size_problem
        protocol.connection_made(self)
        self._open = True
        if not self._closing:
            self._thread.kick(self)

    def _handshake_failed(self) -> None:
        """The handshake failed (the thread logged why and closed the socket)."""
        if self._lost:
            return
        self._closing = self._lost = True
        if not self._handshake_done.done():
            self._handshake_done.set_result(None)
        self._thread.forget(self)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":  # read only while the thread does not use it (_made)
            return self._tls
        return super().get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._closing

    def is_reading(self) -> bool:
        return not self._paused and not self._closing

    def pause_reading(self) -> None:
        self._paused = True  # the thread stops at its next read

    def resume_reading(self) -> None:
        if not self._paused:
            return
        self._paused = False
        if self._inbound:
            self._post_deliver_here()
        if self._read_blocked:
            self._thread.kick(self)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol  # type: ignore[assignment]

    def get_protocol(self) -> asyncio.BaseProtocol:
        assert self._protocol is not None
        return self._protocol  # type: ignore[return-value]

    def get_write_buffer_size(self) -> int:
        return self._queued_total - self._sent_total

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return WRITE_LOW_BYTES, WRITE_HIGH_BYTES

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writelines([data])

    def writelines(self, list_of_data: Any) -> None:
        if self._closing:
            return
        size = 0
        for part in list_of_data:
            size += len(part)
        self._outbound.extend(list_of_data)
        self._queued_total += size
        self._thread.kick(self)
        if not self._write_paused and self.get_write_buffer_size() > WRITE_HIGH_BYTES:
            self._write_paused = True
            if self._protocol is not None:
                self._protocol.pause_writing()
            self._resume_writing_if_drained()  # the thread may have sent it all meanwhile

    def _resume_writing_if_drained(self) -> None:
        if self._write_paused and self.get_write_buffer_size() <= WRITE_LOW_BYTES:
            self._write_paused = False
            if self._protocol is not None and not self._lost:
                self._protocol.resume_writing()

    def can_write_eof(self) -> bool:
        return False

    def write_eof(self) -> None:
        raise NotImplementedError("TLS has no half-close")

    def close(self) -> None:
        """Send what is queued, then close_notify, then close."""
        if self._closing:
            return
        self._closing = True
        self._inbound.clear()
        self._thread.kick(self)

    def abort(self) -> None:
        """Close now; what is queued is dropped."""
        if self._aborting or self._lost:
            return
        self._closing = self._aborting = True
        self._inbound.clear()
        self._outbound.clear()
        self._thread.kick(self)
        self._loop.call_soon(self._connection_lost, None)

    def _post_deliver_here(self) -> None:
        if not self._deliver_posted:
            self._deliver_posted = True
            self._loop.call_soon(self._deliver)

    def _deliver(self) -> None:
        """Hand the frames the thread cut to the protocol, while reading is not paused."""
        self._deliver_posted = False
        inbound = self._inbound
        protocol = self._protocol
        if protocol is None:
            return
        while inbound and not self._paused and not self._closing:
            frame = inbound.popleft()
            if frame is _EOF:
                keep_open = protocol.eof_received()
                if not keep_open:
                    self.close()
                return
            self._delivered_total += 4 + len(frame)
            protocol.frame_received(frame)
        if self._read_blocked and not self._closing:
            self._thread.kick(self)

    def _refuse(self, problem: str) -> None:
        if self._protocol is not None and not self._closing:
            self._protocol.frame_refused(problem)

    def _connection_lost(self, exc: BaseException | None) -> None:
        if self._lost:
            return
        self._closing = self._lost = True
        self._inbound.clear()
        self._thread.forget(self)
        if self._protocol is not None:
            self._protocol.connection_lost(exc if isinstance(exc, Exception) else None)

    # -- the network thread's side ---------------------------------------------------------
    def t_step(self, mask: int) -> None:
        """Do what the socket allows (``mask``: the events it is ready for; 0 when woken by
        the loop): the handshake, writes, reads, a close."""
        if self.gone:
            return
        if self._aborting:
            self.t_close(None)
            return
        if self.handshaking:
            if mask & READ and not self._t_receive():
                return
            self._t_handshake()
        else:
            if not self._t_flush():
                return
            if self._t_may_read():
                self._t_read(mask)
            if self.gone:
                return
        # Not a bare send: if it empties the ciphertext (the peer read meanwhile), the
        # plaintext still queued must be encrypted now, as WRITE is watched only while
        # ciphertext waits (_t_events): a bare send here was the lost wake-up of the write
        # stall.
        if not self._t_flush():
            return
        if (self._closing and not self.handshaking and not self._cipher
                and self._out_current is None and not self._outbound):
            self._t_shutdown()
            return
        if not self.gone:
            self._thread.watch(self, self._t_events())

    def _t_flush(self) -> bool:
        """Send the ciphertext and encrypt more, until the socket is full (ciphertext waits:
        WRITE is watched), everything queued is sent, or OpenSSL waits for the peer (a TLS 1.2
        renegotiation). During the handshake, only send. False when the connection closed."""
        while True:
            if self._cipher and not self._t_send():
                return False  # closed on an error
            if (self.handshaking or self._cipher
                    or (self._out_current is None and not self._outbound)):
                return not self.gone  # the socket is full, or all is sent
            if not self._t_encrypt():
                return not self.gone  # a renegotiation waits for the peer, or closed

    def _t_events(self) -> int:
        events = WRITE if self._cipher else 0
        if not self._raw_eof and (self.handshaking or self._t_may_read()):
            events |= READ
        return events

    def _t_read_allowed(self) -> bool:
        return (self._open and not self._paused and not self._closing and not self._eof_read
                and self._refused is None
                and self._read_total - self._delivered_total < READ_AHEAD_BYTES)

    def _t_may_read(self) -> bool:
        if self._t_read_allowed():
            self._read_blocked = False
            return True
        self._read_blocked = True
        # Tested again: the loop may have delivered, or resumed, between the test and the flag
        # (it kicks the thread only when it sees the flag).
        if self._t_read_allowed():
            self._read_blocked = False
            return True
        return False

    def _t_receive(self) -> bool:
        """Move what the socket holds (up to ``RECEIVE_BYTES``) into OpenSSL's incoming BIO;
        False when the connection closed on an error. Returns True at once when nothing is
        there."""
        self._received = 0
        if self._raw_eof:
            return True
        try:
            n = self._raw.recv_into(self._thread.receive_view)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError as exc:
            self.t_close(exc)
            return False
        if n == 0:
            self._raw_eof = True
            self._incoming.write_eof()
        else:
            self._incoming.write(self._thread.receive_view[:n])
        self._received = n
        return True

    def _t_handshake(self) -> None:
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        except (OSError, ValueError, EOFError) as exc:
            self._t_send()  # the alert saying why, if the socket takes it
            self.t_handshake_failed(exc)
            return
        else:
            self.handshaking = False
            self._thread.post(self._made)
        self._t_collect_output()

    def t_handshake_failed(self, exc: BaseException) -> None:
        log.warning("closing %s on listener %s: TLS handshake failed: %s", self.where,
                    self.listener, TlsRefused.describe(exc))
        self._t_close_socket()
        self._thread.post(self._handshake_failed)

    def _t_check_size(self, size: int) -> bool:
        problem = self._size_problem(size)
        if problem is None:
            return True
        self._refused = problem
        return False

    def _t_frame_cut(self, frame: memoryview) -> bool:
        self._inbound.append(frame)
        self._cut_bytes += 4 + len(frame)
        return True

    def _t_read(self, mask: int) -> None:
        """Decrypt into the frame reader what OpenSSL holds, receiving more from the socket
        while it has some, up to ``READ_BUDGET_BYTES`` or the read-ahead limit.

        One ``SSL_read`` answers one TLS record, and clients write small ones (librdkafka: a
        record per buffer segment, 2.2 KiB on average for 1 KiB messages), so the inner loop
        is kept short: the reader's buffer is filled record after record, and the frames are
        cut once it is full or OpenSSL wants more."""
        reader = self._reader
        read = self._tls.read
        error: BaseException | None = None
        eof = False
        self._cut_bytes = 0
        got = 0
        receive = bool(mask & READ)
        while got < READ_BUDGET_BYTES:
            buffer = reader.get_buffer()
            size = len(buffer)
            filled = 0
            starved = False  # OpenSSL holds no whole record any more
            while filled < size:
                try:
                    # With a buffer, read() answers the count (typeshed says bytes).
                    n: int = read(size - filled,  # type: ignore[assignment]
                                  buffer[filled:] if filled else buffer)
                except ssl.SSLWantReadError:
                    starved = True
                    break
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    n = 0
                except (OSError, ValueError) as exc:
                    error = exc
                    break
                if n == 0:
                    eof = True
                    break
                filled += n
            if filled:
                got += filled
                reader.buffer_updated(filled)
                if self._refused is not None:
                    break
                if (self._read_total + self._cut_bytes - self._delivered_total
                        >= READ_AHEAD_BYTES):
                    break
            if eof or error is not None:
                break
            if starved:
                if not receive or self._raw_eof:
                    break
                if not self._t_receive():
                    return
                if self._received == 0 and not self._raw_eof:
                    break  # the socket is empty
        else:  # the budget is spent: come back to what OpenSSL still holds after the others
            self._thread.again(self)
        if eof:
            self._eof_read = True
            self._inbound.append(_EOF)
        if self._cut_bytes or eof:
            self._read_total += self._cut_bytes
            if not self._deliver_posted:
                self._deliver_posted = True
                self._thread.post(self._deliver)
        self._t_collect_output()  # what reading made OpenSSL say (a KeyUpdate answer, alerts)
        refused = self._refused
        if refused is not None:  # after the frames before it
            self._thread.post(lambda: self._refuse(refused))
        elif error is not None:
            self.t_close(error)

    def _t_encrypt(self) -> bool:
        """Encrypt queued parts into OpenSSL's outgoing BIO while less than two pieces of
        ``SEND_BYTES`` of ciphertext wait for the socket (small parts joined into one TLS
        record). False when nothing could be encrypted."""
        tls = self._tls
        out = self._outbound
        progress = False
        while len(self._cipher) < 2:
            data = self._out_current
            if data is None:
                if not out:
                    break
                data = out.popleft()
                if len(data) < JOIN_BYTES and out and len(out[0]) < JOIN_BYTES:
                    joined = bytearray(data)
                    while out and len(out[0]) < JOIN_BYTES and len(joined) < JOIN_BYTES:
                        joined += out.popleft()
                    data = joined
            piece = data if len(data) <= SEND_BYTES else memoryview(data)[:SEND_BYTES]
            try:
                tls.write(piece)
            except ssl.SSLWantReadError:  # a renegotiation wants the peer first (TLS 1.2)
                self._out_current = data
                break
            except (OSError, ValueError) as exc:
                self.t_close(exc)
                return False
            progress = True
            self._sent_total += len(piece)
            self._out_current = memoryview(data)[len(piece) :] if piece is not data else None
            if self._out_current is not None and len(self._out_current) == 0:
                self._out_current = None
            self._t_collect_output()
        if self._write_paused and self._queued_total - self._sent_total <= WRITE_LOW_BYTES:
            self._thread.post(self._resume_writing_if_drained)
        return progress

    def _t_collect_output(self) -> None:
        if self._outgoing.pending:
            self._cipher.append(memoryview(self._outgoing.read()))

    def _t_send(self) -> bool:
        """Send the ciphertext waiting for the socket; False when the connection closed on an
        error."""
        cipher = self._cipher
        raw = self._raw
        while cipher:
            data = cipher[0]
            try:
                n = raw.send(data)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                self.t_close(exc)
                return False
            if n == len(data):
                cipher.popleft()
            else:
                cipher[0] = data[n:]
        return True

    def _t_shutdown(self) -> None:
        """Everything queued is sent: close_notify (best effort: the peer's is not awaited),
        then close."""
        with contextlib.suppress(OSError, ValueError):  # no close_notify from the peer yet
            self._tls.unwrap()
        self._t_collect_output()
        self._t_send()
        self.t_close(None)

    def t_close(self, exc: BaseException | None) -> None:
        """Close the socket and tell the loop (once; abort() already did)."""
        if self.gone:
            return
        self._t_close_socket()
        if self.handshaking:
            self._thread.post(self._handshake_failed)
        else:
            self._thread.post(lambda: self._connection_lost(exc))

    def _t_close_socket(self) -> None:
        self.gone = True
        self._thread.watch(self, 0)
        self._raw.close()
