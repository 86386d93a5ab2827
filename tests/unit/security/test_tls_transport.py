"""floodmark's TLS transport on its network threads, over real sockets and real TLS (loopback):
frames arrive whole and in order and answers go back; a paused reader stops the thread within
the read-ahead bound and a client that does not read pauses the writer, both resuming, even
when the client drains the socket while the thread reads (the write stall's race); a refused
size closes with one call; either side closes cleanly; stopping the threads ends their
connections; a failed handshake is one log line and makes no protocol."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import socket
import ssl
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from tests.tls_pki import Pki, make_pki

from floodmark.security import tls_transport
from floodmark.security.tls import ServerTls, ssl_settings
from floodmark.security.tls_server import ThreadedTlsServer

SIOCOUTQ = 0x5411  # Linux: bytes in a socket's send queue (unsent or not yet acknowledged)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


class Recorder(asyncio.BaseProtocol):
    """The protocol side: records what the transport hands over; sizes above ``limit`` are
    refused; ``echo`` answers each frame with its own bytes."""

    def __init__(self, limit: int = 8 << 20, echo: bool = False) -> None:
        self.limit, self.echo = limit, echo
        self.frames: list[bytes] = []
        self.refused: list[str] = []
        self.events: list[str] = []
        self.transport: Any = None
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.events.append("lost")
        if not self.lost.done():
            self.lost.set_result(exc)

    def pause_writing(self) -> None:
        self.events.append("pause_writing")

    def resume_writing(self) -> None:
        self.events.append("resume_writing")

    def eof_received(self) -> bool | None:
        self.events.append("eof")
        return None

    def frame_size_problem(self, size: int) -> str | None:
        return None if size <= self.limit else f"request size {size} above {self.limit}"

    def frame_refused(self, problem: str) -> None:
        self.refused.append(problem)
        self.transport.abort()

    def frame_received(self, frame: memoryview) -> None:
        self.frames.append(bytes(frame))
        if self.echo:
            self.transport.writelines([struct.pack(">i", len(frame)), bytes(frame)])


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


class Client:
    """A blocking TLS client in its own thread's calls."""

    def __init__(self, port: int, pki: Pki) -> None:
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        raw = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")

    def read_exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)


async def until(pred: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def serve(pki: Pki, body: Callable[[ThreadedTlsServer, list[Recorder]], Awaitable[None]],
          **recorder: Any) -> None:
    async def main() -> None:
        tls = ServerTls(ssl_settings({"ssl.keystore.location": str(pki.broker.keystore)}.get))
        made: list[Recorder] = []

        def factory() -> Recorder:
            made.append(Recorder(**recorder))
            return made[-1]

        server = await ThreadedTlsServer.start_threaded("127.0.0.1", 0, factory, tls, "SSL", 2)
        try:
            await body(server, made)
        finally:
            server.close()

    asyncio.run(main())


def in_thread(fn: Callable[[], object]) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_frames_arrive_whole_and_in_order_and_answers_go_back(pki: Pki) -> None:
    bodies = [bytes([i % 251]) * size for i, size in
              enumerate([8, 100, 1000, 16_000, 70_000, 1_000_000, 9, 3000, 250_000] * 3)]
    answers: list[bytes] = []

    async def body(server: ThreadedTlsServer, made: list[Recorder]) -> None:
        port = server.sockets[0].getsockname()[1]

        def client() -> None:
            c = Client(port, pki)
            c.sock.sendall(b"".join(framed(b) for b in bodies))
            for _ in bodies:
                size = struct.unpack(">i", c.read_exactly(4))[0]
                answers.append(c.read_exactly(size))
            c.sock.close()

        t = in_thread(client)
        await until(lambda: len(answers) == len(bodies) or not t.is_alive(), "the answers")
        await until(lambda: bool(made) and made[0].lost.done(), "the client's close")
        assert made[0].frames == bodies
        assert made[0].events[-2:] == ["eof", "lost"]

    serve(pki, body, echo=True)
    assert answers == bodies


def test_a_paused_reader_stops_the_thread_within_the_read_ahead(pki: Pki) -> None:
    frame = framed(b"x" * 100_000)
    count = 300  # 30 MB: far more than the socket buffers and the read-ahead hold

    async def body(server: ThreadedTlsServer, made: list[Recorder]) -> None:
        port = server.sockets[0].getsockname()[1]
        sent = [0]
        clients: list[Client] = []

        def client() -> None:
            # Kept open until the end: closed with the broker's session tickets unread, its
            # socket would send a reset, and the broker would lose what it had not read yet.
            clients.append(Client(port, pki))
            for _ in range(count):
                clients[0].sock.sendall(frame)
                sent[0] += 1

        t = in_thread(client)
        await until(lambda: bool(made) and made[0].transport is not None, "the connection")
        rec = made[0]
        rec.transport.pause_reading()
        before = len(rec.frames)
        # The client stalls: nothing is taken while paused but what the thread had read.
        stalled_at = -1
        while stalled_at != sent[0]:
            stalled_at = sent[0]
            await asyncio.sleep(0.5)
        assert t.is_alive() and sent[0] < count
        held = rec.transport._read_total - rec.transport._delivered_total
        assert 0 <= held <= tls_transport.READ_AHEAD_BYTES + tls_transport.READ_BUDGET_BYTES
        assert len(rec.frames) - before <= 1
        rec.transport.resume_reading()
        await until(lambda: len(rec.frames) == count, "every frame after the resume")
        assert all(f == frame[4:] for f in rec.frames)
        clients[0].sock.close()

    serve(pki, body)


def test_a_client_that_does_not_read_pauses_the_writer(pki: Pki) -> None:
    size = 32 << 20  # more than the socket buffers of both ends hold

    async def body(server: ThreadedTlsServer, made: list[Recorder]) -> None:
        port = server.sockets[0].getsockname()[1]
        c = await asyncio.to_thread(Client, port, pki)
        await until(lambda: bool(made) and made[0].transport is not None, "the connection")
        rec = made[0]
        payload = bytes(range(256)) * (size // 256)
        rec.transport.writelines([payload])
        assert rec.events == ["pause_writing"]
        # The client reads nothing: the thread stops encrypting once the socket is full, so
        # what it holds as ciphertext stays bounded and the rest waits as plaintext.
        await asyncio.sleep(0.5)
        assert rec.transport.get_write_buffer_size() > size // 2
        assert len(rec.transport._cipher) <= 2
        got = await asyncio.to_thread(c.read_exactly, size)  # the client reads
        assert got == payload
        await until(lambda: "resume_writing" in rec.events, "resume_writing")
        c.sock.close()

    serve(pki, body)


def test_a_socket_drained_while_the_thread_reads_does_not_stall_the_writer(
        pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race behind the write stall, made certain: the write loop stops on a full socket,
    then, while the thread reads, the client drains the socket, so the send after the read
    takes all the ciphertext. The plaintext still queued must be encrypted then: WRITE is
    watched only while ciphertext waits, and the client sends nothing that would wake the
    thread."""
    size = 32 << 20
    gate = threading.Event()  # the race was set up (once)
    drained = threading.Event()  # the socket was empty within the bound
    read = tls_transport.TlsTransport._t_read

    def read_then_wait_for_the_client(transport: Any, mask: int) -> None:
        read(transport, mask)
        if gate.is_set() or not transport._cipher or transport._out_current is None:
            return
        gate.set()  # the socket is full and plaintext waits: let the client drain it all
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            queued = fcntl.ioctl(transport.fd, SIOCOUTQ, b"\0\0\0\0")
            if struct.unpack("i", queued)[0] == 0:
                drained.set()
                return
            time.sleep(0.001)

    monkeypatch.setattr(tls_transport.TlsTransport, "_t_read", read_then_wait_for_the_client)

    async def body(server: ThreadedTlsServer, made: list[Recorder]) -> None:
        port = server.sockets[0].getsockname()[1]
        c = await asyncio.to_thread(Client, port, pki)
        c.sock.settimeout(10)  # a stall ends the read after 10 s of nothing
        await until(lambda: bool(made) and made[0].transport is not None, "the connection")
        rec = made[0]
        payload = bytes(range(256)) * (size // 256)
        got = bytearray()

        def client() -> None:
            with contextlib.suppress(TimeoutError):  # a stall: got stays short
                while len(got) < size:
                    chunk = c.sock.recv(1 << 20)
                    if not chunk:
                        return
                    got.extend(chunk)

        t = in_thread(client)
        rec.transport.writelines([payload])
        await until(lambda: not t.is_alive(), "the client's read", timeout_s=60.0)
        assert gate.is_set() and drained.is_set()
        assert len(got) == size and got == payload
        await until(lambda: "resume_writing" in rec.events, "resume_writing")
        c.sock.close()

    serve(pki, body)


def test_a_refused_size_is_one_call_and_nothing_after_it_is_delivered(pki: Pki) -> None:
    async def body(server: ThreadedTlsServer, made: list[Recorder]) -> None:
        port = server.sockets[0].getsockname()[1]
        c = await asyncio.to_thread(Client, port, pki)
        c.sock.sendall(framed(b"ok" * 10) + framed(b"z" * 5000) + framed(b"after" * 2))
        await until(lambda: bool(made) and made[0].lost.done(), "the close")
        assert made[0].frames == [b"ok" * 10]
        assert made[0].refused == ["request size 5000 above 1000"]
        assert await asyncio.to_thread(c.read_exactly, 1) == b""  # closed

    serve(pki, body, limit=1000)


def test_closing_from_the_broker_sends_what_is_queued_first(pki: Pki) -> None:
    async def body(server: ThreadedTlsServer, made: list[Recorder]) -> None:
        port = server.sockets[0].getsockname()[1]
        c = await asyncio.to_thread(Client, port, pki)
        await until(lambda: bool(made) and made[0].transport is not None, "the connection")
        payload = b"q" * 300_000
        made[0].transport.writelines([payload])
        made[0].transport.close()
        assert await asyncio.to_thread(c.read_exactly, len(payload) + 1) == payload
        await until(lambda: made[0].lost.done(), "connection_lost")

    serve(pki, body)


def test_stopping_the_threads_ends_their_connections(pki: Pki) -> None:
    async def body(server: ThreadedTlsServer, made: list[Recorder]) -> None:
        port = server.sockets[0].getsockname()[1]
        clients = [await asyncio.to_thread(Client, port, pki) for _ in range(3)]
        await until(lambda: len(made) == 3 and all(r.transport for r in made), "3 connections")
        threads = [t for t in threading.enumerate() if "network-thread" in t.name]
        assert threads
        server.close()
        await until(lambda: all(r.lost.done() for r in made), "every connection_lost")
        assert not any(t.is_alive() for t in threads)
        for c in clients:
            assert await asyncio.to_thread(c.read_exactly, 1) == b""

    serve(pki, body)


def test_a_failed_handshake_is_one_line_and_makes_no_protocol(
        pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    async def body(server: ThreadedTlsServer, made: list[Recorder]) -> None:
        port = server.sockets[0].getsockname()[1]
        with caplog.at_level(logging.WARNING):
            raw = socket.create_connection(("127.0.0.1", port), timeout=20)
            raw.sendall(framed(b"\x00\x12\x00\x00" + b"\x00" * 20))  # a Kafka request
            assert await asyncio.to_thread(raw.recv, 100) in (b"",)
            raw.close()
            await until(lambda: any("TLS handshake failed" in r.getMessage()
                                    for r in caplog.records), "the log line")
        lines = [r.getMessage() for r in caplog.records if "handshake" in r.getMessage()]
        assert len(lines) == 1 and "not TLS" in lines[0], lines
        assert made == []

    serve(pki, body)

