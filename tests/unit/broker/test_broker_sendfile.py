"""Fetch responses with file slices sent by ``os.sendfile`` over a real uvloop TCP transport:
bytes on the wire identical to the copying path, also when the socket fills up mid-slice and
responses queue behind, nothing copied through Python, and a stale slice (truncated log) fails
the connection instead of sending wrong bytes."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from floodmark.broker.sendfile import SendfileParts, SendfileStats, SendfileWriter, sendfile_fd
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


class Outcome:
    def __init__(self) -> None:
        self.failed = False
        self.went_busy = False


def serve_once(responses: Callable[[], list[list[Any]]], read_delay_s: float = 0.0,
               sndbuf: int | None = None) -> tuple[bytes, Outcome]:
    """One connection: the server writes every response through a SendfileWriter and closes
    when the writer is idle (or failed); returns what the client received."""
    outcome = Outcome()

    class Server(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            t: Any = transport
            if sndbuf is not None:
                t.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
            fd = sendfile_fd(t)
            assert fd is not None  # plain TCP on uvloop qualifies

            def on_failure() -> None:
                outcome.failed = True
                t.abort()

            def on_state_change() -> None:
                if writer.busy:
                    outcome.went_busy = True
                elif not writer.closed:
                    t.close()

            writer = SendfileWriter(t, fd, on_failure, on_state_change)
            for parts in responses():
                writer.write(parts)  # queues behind a busy one, like Connection.write
            if not writer.busy and not writer.closed:
                t.close()

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, _writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
        await asyncio.sleep(read_delay_s)
        chunks = []
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(1 << 20), 10)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        server.close()
        return b"".join(chunks)

    return uvloop.run(main()), outcome


@pytest.mark.parametrize("read_delay_s,sndbuf", [(0.0, None), (0.3, 65536)])
def test_sendfile_responses_are_byte_identical(tmp_path: Path, read_delay_s: float,
                                               sndbuf: int | None) -> None:
    """Three ~4.8 MB responses and a small plain one in between: more than the socket holds,
    so the writer waits for writability mid-slice and later responses queue behind."""
    log = make_log(tmp_path, batches=300)
    plain = [b"\0\0\0\x05", b"hello"]
    expected_one = b"".join(bytes(p) for p in response(log, lazy=False))
    assert len(expected_one) > 4_000_000
    expected = expected_one + b"".join(plain) + expected_one * 2
    before = SendfileStats.sendfile_bytes

    def responses() -> list[list[Any]]:
        return [SendfileParts(response(log, lazy=True)), plain,
                SendfileParts(response(log, lazy=True)), SendfileParts(response(log, lazy=True))]

    got, outcome = serve_once(responses, read_delay_s, sndbuf)
    assert not outcome.failed
    assert outcome.went_busy  # the socket filled up: the writer had to wait
    assert got == expected
    # Every record byte went out by sendfile: none was copied through Python.
    assert SendfileStats.sendfile_bytes - before == 3 * log.read(0, 1 << 30).size


def test_headers_go_through_the_transport_records_by_sendfile(tmp_path: Path) -> None:
    log = make_log(tmp_path, batches=20)
    parts = SendfileParts(response(log, lazy=True))
    slices = [p for p in parts if not isinstance(p, (bytes, memoryview))]
    assert len(slices) == 1 and len(slices[0]) == log.read(0, 1 << 30).size
    got, outcome = serve_once(lambda: [parts])
    assert not outcome.failed
    assert got == b"".join(bytes(p) for p in response(log, lazy=False))
    assert slices[0].fileno() is None  # closed once sent


def test_stale_slice_fails_the_connection(tmp_path: Path) -> None:
    log = make_log(tmp_path, batches=20)
    parts = SendfileParts(response(log, lazy=True))
    log.truncate_to(3)
    log.append_as_leader(simple_batch([b"x" * 5000] * 20), leader_epoch=2, now_ms=9_000)
    got, outcome = serve_once(lambda: [parts])
    assert outcome.failed
    assert len(got) < sum(len(p) for p in parts)  # the response was never completed
    assert all(p.fileno() is None for p in parts if hasattr(p, "fileno"))  # slices closed


def test_sendfile_can_be_switched_off() -> None:
    import subprocess
    import sys

    code = ("import floodmark.broker.sendfile as s; print(s.SENDFILE_ENABLED)")
    env = dict(os.environ, FLOODMARK_SENDFILE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "False"
