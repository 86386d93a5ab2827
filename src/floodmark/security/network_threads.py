"""A TLS listener's network threads (Kafka's ``num.network.threads``): each one runs a selector
over its connections and does their TLS handshakes, decryption and encryption
(``tls_transport.TlsTransport``), so the event loop only frames requests and runs handlers.

The loop talks to a thread through ``kick(transport)`` (look at this connection again: it has
something to write, may read again, or is closing), which wakes the thread's selector through an
eventfd (one write per wake-up, however many kicks come before the thread runs); the thread
talks to the loop with ``call_soon_threadsafe``. A connection belongs to one thread for its life
(the least loaded one when it is accepted). A failure inside one connection's step is logged
and closes that connection only; the thread goes on. ``stop`` ends the threads: each closes its
connections (their protocols see ``connection_lost``) and is joined.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable

from floodmark.security.tls_transport import RECEIVE_BYTES, TlsTransport
from floodmark.wire import BufferPool

log = logging.getLogger(__name__)

STOP_JOIN_S = 5.0


class NetworkThread:
    """One network thread: a selector over its connections' sockets and a wake-up eventfd."""

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str) -> None:
        self._loop = loop
        self._selector = selectors.DefaultSelector()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._selector.register(self._wake_fd, selectors.EVENT_READ, None)
        self._signalled = False  # the loop set it when it wrote the eventfd, the thread clears
        self._kicked: deque[TlsTransport] = deque()  # loop appends, thread pops
        self._stopping = False
        self._joined = False  # loop-only: the thread ended and the eventfd is closed
        self.load = 0  # loop-only: connections given to this thread and not yet lost
        # Thread-only.
        self.pool = BufferPool()
        self.receive_view = memoryview(bytearray(RECEIVE_BYTES))
        self._again: list[TlsTransport] = []
        self._transports: set[TlsTransport] = set()
        self._handshakes: set[TlsTransport] = set()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- the loop's side -------------------------------------------------------------------
    def add(self, transport: TlsTransport) -> None:
        self.load += 1
        self.kick(transport)

    def forget(self, _transport: TlsTransport) -> None:
        self.load -= 1

    def kick(self, transport: TlsTransport) -> None:
        self._kicked.append(transport)
        self._wake()

    def _wake(self) -> None:
        if not self._signalled and not self._joined:
            self._signalled = True
            os.eventfd_write(self._wake_fd, 1)

    def request_stop(self) -> None:
        self._stopping = True
        self._wake()

    def join(self, timeout_s: float) -> None:
        """Wait for the thread to end, then close its eventfd (here, on the loop: the only
        writer, so the number is never written once it may name another file)."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():  # pragma: no cover - a thread never blocks for long
            log.warning("network thread %s did not stop within %.0f s", self._thread.name,
                        timeout_s)
            return
        if not self._joined:
            self._joined = True
            os.close(self._wake_fd)

    # -- the thread's side -----------------------------------------------------------------
    def post(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the loop (dropped when the loop is closed: nobody listens)."""
        try:
            self._loop.call_soon_threadsafe(callback)
        except RuntimeError:
            return

    def watch(self, transport: TlsTransport, events: int) -> None:
        """Watch ``transport``'s socket for ``events`` (0: not at all)."""
        if events == transport.registered:
            return
        if transport.registered == 0:
            self._selector.register(transport.fd, events, transport)
        elif events == 0:
            self._selector.unregister(transport.fd)
        else:
            self._selector.modify(transport.fd, events, transport)
        transport.registered = events

    def again(self, transport: TlsTransport) -> None:
        """Step ``transport`` again after the others (it stopped with work left: its read
        budget was spent while OpenSSL still held bytes the socket will not signal)."""
        self._again.append(transport)

    def _run(self) -> None:
        selector = self._selector
        try:
            while not self._stopping:
                again = self._again
                if again:
                    self._again = []
                    for transport in again:
                        self._step(transport, 0)
                for key, mask in selector.select(0 if self._again else self._timeout_s()):
                    transport = key.data
                    if transport is None:
                        self._woken()
                    else:
                        self._step(transport, mask)
                if self._handshakes:
                    self._expire_handshakes()
        finally:
            for transport in list(self._transports):
                transport.t_close(None)
            self._transports.clear()
            selector.close()

    def _woken(self) -> None:
        with contextlib.suppress(BlockingIOError):  # only ever read after it was written
            os.eventfd_read(self._wake_fd)
        self._signalled = False  # before taking the kicks: a later kick writes again
        kicked = self._kicked
        while kicked:
            transport = kicked.popleft()
            if transport not in self._transports:
                if transport.gone:
                    continue
                self._transports.add(transport)
                self._handshakes.add(transport)
                transport.handshake_deadline_s = (time.monotonic()
                                                  + transport.handshake_timeout_s)
            self._step(transport, 0)

    def _step(self, transport: TlsTransport, mask: int) -> None:
        try:
            transport.t_step(mask)
        except Exception as exc:  # a bug in one connection must not stop the others
            log.exception("closing %s on listener %s: TLS transport failed", transport.where,
                          transport.listener)
            transport.t_close(exc)
        if transport.gone:
            self._transports.discard(transport)
            self._handshakes.discard(transport)

    def _timeout_s(self) -> float | None:
        if not self._handshakes:
            return None
        first = min(t.handshake_deadline_s for t in self._handshakes)
        return max(0.0, first - time.monotonic())

    def _expire_handshakes(self) -> None:
        now = time.monotonic()
        for transport in list(self._handshakes):
            if transport.gone or not transport.handshaking:
                self._handshakes.discard(transport)
            elif transport.handshake_deadline_s <= now:
                self._handshakes.discard(transport)
                self._transports.discard(transport)
                transport.t_handshake_failed(TimeoutError())


class NetworkThreads:
    """A listener's network threads; a new connection goes to the least loaded one."""

    def __init__(self, count: int, name: str) -> None:
        if count < 1:
            raise ValueError(f"num.network.threads={count}: at least 1")
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._threads = [NetworkThread(loop, f"{name}-network-thread-{i}")
                         for i in range(count)]

    def start_connection(self, sock: socket.socket, context: ssl.SSLContext,
                         factory: Callable[[], asyncio.BaseProtocol], where: str, listener: str,
                         handshake_timeout_s: float) -> asyncio.Future[None]:
        """Hand an accepted socket to a thread: it does the TLS handshake with ``context``,
        then the protocol is made on the loop. The future is done when the handshake is
        (either way)."""
        thread = min(self._threads, key=lambda t: t.load)
        done: asyncio.Future[None] = self._loop.create_future()
        transport = TlsTransport(self._loop, thread, sock, context, factory, where, listener,
                                 done, handshake_timeout_s)
        thread.add(transport)
        return done

    def stop(self) -> None:
        """End every thread (their connections are closed) and join them."""
        for thread in self._threads:
            thread.request_stop()
        for thread in self._threads:
            thread.join(STOP_JOIN_S)
