"""A TLS listener's accept loop, for the broker's Kafka listeners and the controller's RPC alike.

Sockets are accepted here and handed to the event loop (``connect_accepted_socket``) with the
listener's *current* context (``ServerTls.context``: a rotated key or trust store is used by the
next connection), so not a byte is read outside TLS; a failed handshake (plaintext bytes, an
untrusted, expired or missing client certificate, a peer silent past the handshake timeout) is
one log line naming the peer and the reason, and closes that connection only. At most
``MAX_HANDSHAKES`` handshakes run at once; further connections wait in the accept backlog.

``TlsServer`` runs TLS on the event loop (the loop's own TLS transport: the controller's RPC).
``ThreadedTlsServer`` (the broker's Kafka listeners) hands each accepted socket to one of its
network threads (``network_threads``), which do the handshake and all encryption and decryption
of that connection, off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

from floodmark.security.network_threads import NetworkThreads
from floodmark.security.tls import ServerTls, TlsRefused

log = logging.getLogger(__name__)


class TlsServer:
    """A TLS listener: an accept loop that hands each socket to the event loop with the
    listener's current context and logs a failed handshake in one line. ``sockets`` and
    ``close`` as ``asyncio.Server`` has them."""

    MAX_HANDSHAKES = 256
    """Handshakes in progress at once; more connections wait in the accept backlog."""

    def __init__(self, sock: socket.socket, factory: Callable[[], asyncio.BaseProtocol],
                 tls: ServerTls, name: str) -> None:
        self.sockets = [sock]
        self._factory, self._tls, self._name = factory, tls, name
        self._handshakes: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(self.MAX_HANDSHAKES)
        self._accepting = asyncio.create_task(self._accept_loop())

    @classmethod
    async def start(cls, host: str, port: int, factory: Callable[[], asyncio.BaseProtocol],
                    tls: ServerTls, name: str) -> TlsServer:
        return cls(await _listening_socket(host, port), factory, tls, name)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        listening = self.sockets[0]
        while True:
            await self._slots.acquire()
            try:
                sock, peer = await loop.sock_accept(listening)
            except OSError as exc:  # EMFILE and the like: say so, back off, go on
                self._slots.release()
                log.warning("listener %s: accept failed: %s", self._name, exc)
                await asyncio.sleep(0.1)
                continue
            except BaseException:
                self._slots.release()
                raise
            task = asyncio.create_task(self._handshake(sock, peer))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, sock: socket.socket, peer: object) -> None:
        loop = asyncio.get_running_loop()
        where = _where(peer)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.connect_accepted_socket(
                self._factory, sock, ssl=self._tls.context(),
                ssl_handshake_timeout=self._tls.handshake_timeout_s)
        except (OSError, TimeoutError, ValueError, EOFError) as exc:
            log.warning("closing %s on listener %s: TLS handshake failed: %s", where,
                        self._name, TlsRefused.describe(exc))
            sock.close()
        finally:
            self._slots.release()

    def close(self) -> None:
        self._accepting.cancel()
        for task in list(self._handshakes):
            task.cancel()
        for sock in self.sockets:
            sock.close()


async def _listening_socket(host: str, port: int) -> socket.socket:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _where(peer: object) -> str:
    return (f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2
            else str(peer))


class ThreadedTlsServer(TlsServer):
    """A TLS listener whose connections' TLS runs on ``network_threads`` network threads
    (Kafka's ``num.network.threads``); ``close`` also ends the threads and so every connection
    they hold."""

    def __init__(self, sock: socket.socket, factory: Callable[[], asyncio.BaseProtocol],
                 tls: ServerTls, name: str, network_threads: int = 1) -> None:
        self._threads = NetworkThreads(network_threads, name)
        super().__init__(sock, factory, tls, name)

    @classmethod
    async def start_threaded(cls, host: str, port: int,
                             factory: Callable[[], asyncio.BaseProtocol], tls: ServerTls,
                             name: str, network_threads: int) -> ThreadedTlsServer:
        return cls(await _listening_socket(host, port), factory, tls, name, network_threads)

    async def _handshake(self, sock: socket.socket, peer: object) -> None:
        where = _where(peer)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            await self._threads.start_connection(sock, self._tls.context(), self._factory,
                                                 where, self._name,
                                                 self._tls.handshake_timeout_s)
        except OSError as exc:  # the peer left before it was handed over
            log.warning("closing %s on listener %s: TLS handshake failed: %s", where,
                        self._name, TlsRefused.describe(exc))
            sock.close()
        finally:
            self._slots.release()

    def close(self) -> None:
        super().close()
        self._threads.stop()
