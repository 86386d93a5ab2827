"""A byte range of a segment file, handed out by ``Log.read`` in lazy mode so that a server can
send it with ``os.sendfile`` instead of copying it through Python.

Lifetime. The slice owns a *duplicate* of the segment's handle (``os.dup`` on real files), so
its descriptor stays valid however long the send waits: retention or truncation may delete the
segment, or the log may be closed, meanwhile. Deleting only unlinks the name; the file's bytes
live on until the last descriptor is closed (Kafka gets the same effect by deleting segment files
asynchronously, after a delay).

What a descriptor cannot protect against is the *bytes changing*: storage never overwrites, but
a truncation of the active segment followed by new appends can put different batches at the same
positions. Every truncation bumps the log's ``truncation_generation``; ``is_current()`` compares
it with the value captured at read time, and ``read`` raises ``StaleSliceError`` when it moved or
when the file has become shorter than the slice. A sender that finds a stale slice must not send
the range (the response framing promised ``size`` bytes): it closes the connection, the client
retries the fetch (what Kafka does when a file shrinks under a pending send).

``close()`` releases the descriptor; a slice that is dropped without it is closed when garbage
collected (CPython: as soon as the last reference goes).
"""

from __future__ import annotations

from collections.abc import Callable

from floodmark.errors import FloodmarkError
from floodmark.storage.fs import FileHandle


class StaleSliceError(FloodmarkError):
    """The slice's bytes may have changed (truncation) or are gone (file shrank)."""


class FileSlice:
    __slots__ = ("_generation", "_generation_now", "_handle", "path", "position", "size")

    def __init__(
        self,
        handle: FileHandle,
        position: int,
        size: int,
        generation: int,
        generation_now: Callable[[], int],
    ) -> None:
        self._handle: FileHandle | None = handle
        self.path = handle.path
        self.position = position
        self.size = size
        self._generation = generation
        self._generation_now = generation_now

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileSlice({self.path}, position={self.position}, size={self.size})"

    def fileno(self) -> int | None:
        """The OS file descriptor to ``os.sendfile`` from (None: in-memory file, or closed)."""
        return self._handle.fileno() if self._handle is not None else None

    def is_current(self) -> bool:
        """No truncation happened since the read: the range still holds the same batches."""
        return self._handle is not None and self._generation_now() == self._generation

    def read(self, skip: int = 0) -> bytes:
        """The slice's bytes from ``skip`` on (e.g. what a partial sendfile did not send)."""
        if not self.is_current():
            raise StaleSliceError(f"{self!r}: the log was truncated since it was read")
        assert self._handle is not None
        want = self.size - skip
        data = self._handle.read_at(self.position + skip, want)
        if len(data) != want:
            raise StaleSliceError(f"{self!r}: file ends {want - len(data)} bytes early")
        return data

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __del__(self) -> None:
        self.close()


__all__ = ["FileSlice", "StaleSliceError"]
