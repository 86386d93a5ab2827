"""The connection's framing over buffered reads (``Connection.get_buffer``/``buffer_updated``),
driven as a loop drives it: whatever the read sizes, every frame reaches the dispatcher whole,
in order, writable, and is never overwritten by later reads; bad sizes close the connection."""

from __future__ import annotations

import random
from typing import Any

import pytest

from floodmark.broker.server import Connection
from floodmark.wire.frames import READ_BUFFER_BYTES


class Transport:
    """The little of a transport the framing touches."""

    def __init__(self) -> None:
        self.aborted = False
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def abort(self) -> None:
        self.aborted = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def writelines(self, parts: Any) -> None:
        pass


def connection(max_request_bytes: int = 4 << 20) -> tuple[Connection, list[memoryview]]:
    frames: list[memoryview] = []

    def dispatch(frame: memoryview | bytes, _conn: Connection) -> None:
        assert isinstance(frame, memoryview)
        frames.append(frame)

    conn = Connection(dispatch, max_request_bytes, lambda _c: None)
    conn.connection_made(Transport())  # type: ignore[arg-type]
    return conn, frames


def feed(conn: Connection, stream: bytes, reads: list[int]) -> None:
    """Feed ``stream`` as a loop would: each read fills at most the buffer handed out and at
    most the next read size."""
    pos = 0
    sizes = iter(reads)
    while pos < len(stream) and not conn.closed:
        buf = conn.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), next(sizes, len(stream)), len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        pos += n
        conn.buffer_updated(n)


def framed(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def bodies(rng: random.Random, count: int) -> list[bytes]:
    sizes = [8, 9, 100, 4090, READ_BUFFER_BYTES - 4, READ_BUFFER_BYTES, 200_000, 1_000_000]
    return [rng.randbytes(rng.choice(sizes) if rng.random() < 0.5 else rng.randint(8, 3000))
            for _ in range(count)]


@pytest.mark.parametrize("seed", range(12))
def test_frames_arrive_whole_in_order_and_stay_intact(seed: int) -> None:
    rng = random.Random(seed)
    sent = bodies(rng, 40)
    reads = [rng.choice([1, 3, 4, 5, 17, 1000, 16_384, 65_536, 262_144, 2_000_000])
             for _ in range(20_000)]
    conn, got = connection()
    feed(conn, b"".join(framed(b) for b in sent), reads)
    assert not conn.closed
    assert [bytes(f) for f in got] == sent  # checked after every read: none was overwritten
    assert all(not f.readonly for f in got)  # storage stamps offsets in place


def test_a_frame_larger_than_the_read_buffer_is_read_into_its_own() -> None:
    conn, got = connection()
    body = bytes(range(256)) * 4000  # 1,024,000 bytes
    stream = framed(b"small-01") + framed(body) + framed(b"small-02")
    handed_out = []
    pos = 0
    while pos < len(stream):
        buf = conn.get_buffer(65_536)
        handed_out.append(len(buf))
        n = min(len(buf), 65_536 * 4, len(stream) - pos)  # a read fills at most what is free
        buf[:n] = stream[pos : pos + n]
        pos += n
        conn.buffer_updated(n)
    assert [bytes(f) for f in got] == [b"small-01", body, b"small-02"]
    # Once the size prefix is known, the rest of the large frame is read straight into it.
    assert max(handed_out) > READ_BUFFER_BYTES


def test_a_read_ending_inside_a_size_prefix() -> None:
    conn, got = connection()
    feed(conn, framed(b"abcdefgh") + framed(b"ijklmnop"), [2, 2, 1, 7, 3, 100])
    assert [bytes(f) for f in got] == [b"abcdefgh", b"ijklmnop"]


@pytest.mark.parametrize("size", [0, 7, -1, 5_000_001])
def test_a_size_outside_the_limits_closes_the_connection(size: int) -> None:
    conn, got = connection(max_request_bytes=5_000_000)
    feed(conn, framed(b"goodgood") + size.to_bytes(4, "big", signed=True) + b"x" * 64, [1000])
    assert conn.closed
    assert conn.transport is not None and conn.transport.aborted  # type: ignore[attr-defined]
    assert [bytes(f) for f in got] == [b"goodgood"]  # the frame before it was served


def test_a_tls_client_hello_on_a_plaintext_listener_closes(caplog: pytest.LogCaptureFixture
                                                            ) -> None:
    conn, got = connection()
    feed(conn, bytes.fromhex("160301020001") + b"\x00" * 100, [1000])
    assert conn.closed and got == []
    assert "configured for SSL" in caplog.text


def test_nothing_is_cut_after_the_connection_closed() -> None:
    frames: list[bytes] = []

    def dispatch(frame: memoryview | bytes, c: Connection) -> None:
        frames.append(bytes(frame))
        c.abort()

    conn = Connection(dispatch, 1 << 20, lambda _c: None)
    conn.connection_made(Transport())  # type: ignore[arg-type]
    feed(conn, framed(b"first---") + framed(b"second--"), [1000])
    assert frames == [b"first---"]
