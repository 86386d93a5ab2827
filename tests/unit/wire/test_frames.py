"""The read-buffer pool of the frame readers: a replaced buffer is reused only once no frame cut
from it is alive, and frames handed out are never overwritten by later reads (the framing itself
is driven through ``broker.server.Connection`` in tests/unit/broker/test_server.py)."""

from __future__ import annotations

from floodmark.wire.frames import READ_BUFFER_BYTES, BufferPool, FrameReader


def small_frames(count: int, size: int) -> bytes:
    return b"".join(size.to_bytes(4, "big") + bytes([i % 256]) * size for i in range(count))


def feed(reader: FrameReader, stream: bytes) -> None:
    pos = 0
    while pos < len(stream):
        buf = reader.get_buffer()
        n = min(len(buf), len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        pos += n
        reader.buffer_updated(n)


def test_a_buffer_comes_back_only_when_its_frames_are_gone() -> None:
    pool = BufferPool(keep=8)
    kept: list[memoryview] = []
    reader = FrameReader(lambda f: kept.append(f) or True, lambda _size: True, pool)
    stream = small_frames(200, 1000)  # about three read buffers
    feed(reader, stream)
    assert len(kept) == 200
    held = {id(f.obj) for f in kept}
    assert len(held) >= 3
    # While the frames live, the pool hands out new buffers, never one of theirs.
    fresh = pool.take()
    assert id(fresh) not in held and len(fresh) == READ_BUFFER_BYTES
    expected = [bytes([i % 256]) * 1000 for i in range(200)]
    assert [bytes(f) for f in kept] == expected
    kept.clear()  # the frames are gone: their buffers are free again
    assert id(pool.take()) in held


def test_frames_stay_intact_while_buffers_are_reused() -> None:
    pool = BufferPool(keep=4)
    alive: list[memoryview] = []
    count = [0]

    def on_frame(frame: memoryview) -> bool:
        count[0] += 1
        if count[0] % 50 == 0:  # keep one in fifty, drop the rest at once
            alive.append(frame)
        return True

    reader = FrameReader(on_frame, lambda _size: True, pool)
    for _ in range(20):
        feed(reader, small_frames(100, 3000))
    assert count[0] == 2000
    assert [bytes(f) for f in alive] == [bytes([49 % 256]) * 3000, bytes([99 % 256]) * 3000] * 20
