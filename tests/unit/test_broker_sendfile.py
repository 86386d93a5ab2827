"""Fetch responses with file slices sent by ``os.sendfile`` over a real uvloop TCP transport:
bytes on the wire identical to the copying path, including when the socket buffer fills up
mid-slice, and a stale slice (truncated log) closes the connection instead of sending wrong bytes.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from floodmark.broker.sendfile import SendfileParts, send_parts, sendfile_fd
from floodmark.records import simple_batch
from floodmark.storage import Log, LogConfig, RealFileSystem
from floodmark.wire.hot import FetchPartitionResult, encode_fetch_response


def make_log(tmp_path: Path, batches: int, record_bytes: int = 1000) -> Log:
    log = Log.open(str(tmp_path / "t-0"), LogConfig(), fs=RealFileSystem(), now_ms=0)
    for i in range(batches):
        values = [bytes([65 + (i + j) % 26]) * record_bytes for j in range(16)]
        log.append_as_leader(simple_batch(values, timestamp_ms=1_000 + i), leader_epoch=1,
                             now_ms=1_000 + i)
    return log


def response(log: Log, lazy: bool, max_bytes: int = 1 << 30) -> list[Any]:
    info = log.read(0, max_bytes, lazy_min_bytes=1 if lazy else None)
    records = info.file_slice if lazy else info.records
    topics = [("t", [FetchPartitionResult(0, 0, 5, 5, 0, records),
                     FetchPartitionResult(1, 0, 0, 0, 0, b"")])]
    return encode_fetch_response(12, 7, topics)


def serve_once(write: Callable[[asyncio.Transport], None], read_delay_s: float = 0.0,
               sndbuf: int | None = None) -> bytes:
    """One connection: the server calls ``write(transport)``; returns the bytes the client
    received until the server closed."""

    class Server(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            t: Any = transport
            if sndbuf is not None:
                t.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
            write(t)
            t.close()

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, _writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
        await asyncio.sleep(read_delay_s)
        chunks = []
        while True:
            chunk = await asyncio.wait_for(reader.read(1 << 20), 10)
            if not chunk:
                break
            chunks.append(chunk)
        server.close()
        return b"".join(chunks)

    return uvloop.run(main())


@pytest.mark.parametrize("read_delay_s,sndbuf", [(0.0, None), (0.2, 4096)])
def test_sendfile_response_is_byte_identical(tmp_path: Path, read_delay_s: float,
                                             sndbuf: int | None) -> None:
    log = make_log(tmp_path, batches=300)  # ~4.8 MB: more than a socket buffer holds
    expected = b"".join(bytes(p) for p in response(log, lazy=False))
    assert len(expected) > 4_000_000
    results: list[bool] = []

    def write(transport: asyncio.Transport) -> None:
        fd = sendfile_fd(transport)
        assert fd is not None  # plain TCP on uvloop qualifies
        parts = SendfileParts(response(log, lazy=True))
        results.append(send_parts(transport, fd, parts))

    got = serve_once(write, read_delay_s, sndbuf)
    assert results == [True]
    assert got == expected


def test_sendfile_actually_skips_the_copy(tmp_path: Path) -> None:
    """With an empty transport buffer the slice goes out by sendfile: the transport is handed
    only the small header parts (not the records)."""
    log = make_log(tmp_path, batches=20)
    handed: list[int] = []

    def write(transport: asyncio.Transport) -> None:
        class Spy:
            def writelines(self, parts: list[bytes]) -> None:
                handed.append(sum(len(p) for p in parts))
                transport.writelines(parts)

            def get_write_buffer_size(self) -> int:
                return transport.get_write_buffer_size()

        fd = sendfile_fd(transport)
        assert fd is not None
        assert send_parts(Spy(), fd, SendfileParts(response(log, lazy=True)))

    got = serve_once(write)
    expected = b"".join(bytes(p) for p in response(log, lazy=False))
    assert got == expected
    assert sum(handed) < 200  # headers only; ~320 KB of records went by sendfile


def test_stale_slice_is_refused(tmp_path: Path) -> None:
    log = make_log(tmp_path, batches=20)
    parts = SendfileParts(response(log, lazy=True))
    log.truncate_to(3)
    log.append_as_leader(simple_batch([b"x" * 5000] * 20), leader_epoch=2, now_ms=9_000)
    results: list[bool] = []

    def write(transport: asyncio.Transport) -> None:
        fd = sendfile_fd(transport)
        assert fd is not None
        results.append(send_parts(transport, fd, parts))

    serve_once(write)
    assert results == [False]
    assert all(p.fileno() is None for p in parts if hasattr(p, "fileno"))  # slices closed


def test_sendfile_can_be_switched_off() -> None:
    import subprocess
    import sys

    code = ("import floodmark.broker.sendfile as s; print(s.SENDFILE_ENABLED)")
    env = dict(os.environ, FLOODMARK_SENDFILE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "False"
