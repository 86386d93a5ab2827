"""UNSAFE, off by default: real files with a page cache of the process's own, so that killing
the process is a power cut.

``PageCacheFileSystem`` keeps every byte appended since a file's last fsync in process memory
(per path, shared by every handle and surviving ``close``, as the kernel's page cache does) and
writes it to the real file only on ``fsync``. Reads see the real bytes followed by the cached
ones. A SIGKILL of the process therefore loses exactly what was not fsynced — what a power loss
does to a machine whose kernel never wrote its dirty pages back — while the files on disk stay
real, so the process restarts from them and recovers (``floodmark chaos run --faults
power-loss``). It is the process-level twin of ``MemoryFileSystem.crash(lose_unsynced=True)``.

Simplifications, all on the side of keeping more than a real power cut would: directory entries
(creates, renames, removes) and truncations below the synced size reach the disk at once; a
torn tail is never produced. Broker setting: ``floodmark.unsafe.power.loss.page.cache=true``.
"""

from __future__ import annotations

import os
import threading

from floodmark.storage.fs import RealFileSystem


class _Cached:
    """The unsynced tail of one file: the real file holds ``[0, durable)``, ``pending`` what
    follows."""

    __slots__ = ("durable", "lock", "pending")

    def __init__(self, durable: int) -> None:
        self.durable = durable
        self.pending = bytearray()
        self.lock = threading.Lock()  # a flush may fsync on another thread


class PageCacheFileHandle:
    __slots__ = ("_cache", "_fd", "_path")

    def __init__(self, path: str, fd: int, cache: _Cached) -> None:
        self._path = path
        self._fd = fd
        self._cache = cache

    @property
    def path(self) -> str:
        return self._path

    def write(self, data: bytes | bytearray | memoryview) -> int:
        with self._cache.lock:
            self._cache.pending += data
        return len(data)

    def read_at(self, position: int, size: int) -> bytes:
        c = self._cache
        with c.lock:
            end = min(position + max(size, 0), c.durable + len(c.pending))
            if position >= end:
                return b""
            out = b""
            if position < c.durable:
                out = os.pread(self._fd, min(end, c.durable) - position, position)
            if end > c.durable:
                out += bytes(c.pending[max(position, c.durable) - c.durable:end - c.durable])
            return out

    def size(self) -> int:
        with self._cache.lock:
            return self._cache.durable + len(self._cache.pending)

    def fsync(self) -> None:
        c = self._cache
        with c.lock:
            view = memoryview(bytes(c.pending))
            written = 0
            while written < len(view):
                written += os.pwrite(self._fd, view[written:], c.durable + written)
            c.durable += len(view)
            c.pending.clear()
            os.fsync(self._fd)

    def truncate(self, size: int) -> None:
        c = self._cache
        with c.lock:
            if size >= c.durable:
                keep = size - c.durable
                if keep <= len(c.pending):
                    del c.pending[keep:]
                else:
                    c.pending += bytes(keep - len(c.pending))
            else:
                os.ftruncate(self._fd, size)
                c.durable = size
                c.pending.clear()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def fileno(self) -> int | None:
        return None  # the real file lacks the cached tail: no sendfile from it

    def duplicate(self) -> PageCacheFileHandle:
        return PageCacheFileHandle(self._path, os.dup(self._fd), self._cache)


class PageCacheFileSystem(RealFileSystem):
    """``RealFileSystem`` whose unsynced appends live in this process until fsync."""

    def __init__(self) -> None:
        self._cached: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    def _entry(self, path: str, fd: int) -> _Cached:
        key = os.path.abspath(path)
        with self._lock:
            entry = self._cached.get(key)
            if entry is None:
                entry = self._cached[key] = _Cached(os.fstat(fd).st_size)
            return entry

    def open(self, path: str, *, create: bool = True) -> PageCacheFileHandle:  # type: ignore[override]
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        fd = os.open(path, flags, 0o644)
        return PageCacheFileHandle(path, fd, self._entry(path, fd))

    def _pending(self, path: str) -> _Cached | None:
        with self._lock:
            return self._cached.get(os.path.abspath(path))

    def read_file(self, path: str) -> bytes:
        data = super().read_file(path)
        entry = self._pending(path)
        if entry is None:
            return data
        with entry.lock:
            return data[:entry.durable] + bytes(entry.pending)

    def size(self, path: str) -> int:
        entry = self._pending(path)
        if entry is None:
            return super().size(path)
        with entry.lock:
            return entry.durable + len(entry.pending)

    def remove(self, path: str) -> None:
        super().remove(path)
        with self._lock:
            self._cached.pop(os.path.abspath(path), None)

    def rmtree(self, path: str) -> None:
        super().rmtree(path)
        prefix = os.path.abspath(path) + os.sep
        with self._lock:
            for key in [k for k in self._cached if k.startswith(prefix)]:
                del self._cached[key]

    def rename(self, source: str, destination: str) -> None:
        super().rename(source, destination)
        with self._lock:
            entry = self._cached.pop(os.path.abspath(source), None)
            self._cached.pop(os.path.abspath(destination), None)
            if entry is not None:
                self._cached[os.path.abspath(destination)] = entry

    def unsynced_bytes(self) -> int:
        """Bytes a power cut would lose now."""
        with self._lock:
            entries = list(self._cached.values())
        return sum(len(e.pending) for e in entries)
