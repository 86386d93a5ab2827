"""The file-system seam: every byte storage writes or reads goes through a ``FileSystem``.

``RealFileSystem`` uses os-level calls (``os.write``/``os.pread``/``os.fsync``) and exposes real
file descriptors so a server can ``os.sendfile`` from a segment. ``MemoryFileSystem`` is the
simulator's disk: each file keeps its *durable* bytes and the bytes written since the last fsync
(a "page cache"); directory entries (creates, renames, removes) become durable only when their
parent directory is fsynced. ``crash(lose_unsynced=True)`` models power loss: everything not
fsynced is thrown away (optionally keeping a random torn prefix of each file's unsynced tail);
``crash(lose_unsynced=False)`` models a process kill: the page cache survives.

Paths are plain ``str``; all writes are appends (storage never overwrites in the middle of a
file: the only edits are append, truncate and whole-file replacement by rename).
"""

from __future__ import annotations

import errno
import os
import posixpath
import random
from typing import Protocol


class FileHandle(Protocol):
    """An open file: appends at the end, reads at any position."""

    @property
    def path(self) -> str: ...

    def write(self, data: bytes | bytearray | memoryview) -> int: ...

    def read_at(self, position: int, size: int) -> bytes: ...

    def size(self) -> int: ...

    def fsync(self) -> None: ...

    def truncate(self, size: int) -> None: ...

    def close(self) -> None: ...

    def fileno(self) -> int | None:
        """A real OS file descriptor (for ``os.sendfile``), or None for in-memory files."""
        ...

    def duplicate(self) -> FileHandle:
        """An independent handle on the same file (``os.dup``), e.g. to fsync it on another
        thread while the original may be closed."""
        ...


class FileSystem(Protocol):
    def open(self, path: str, *, create: bool = True) -> FileHandle:
        """Open for reading and appending; creates the file (unless ``create`` is False)."""
        ...

    def read_file(self, path: str) -> bytes: ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def size(self, path: str) -> int: ...

    def listdir(self, path: str) -> list[str]: ...

    def mkdirs(self, path: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def rmtree(self, path: str) -> None: ...

    def rename(self, source: str, destination: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...


# ---------------------------------------------------------------------------------------------
# Real files
# ---------------------------------------------------------------------------------------------
class FlushTicket:
    """fsyncs captured by ``Log.begin_flush`` (duplicated handles, so the log may go on
    meanwhile); ``run`` may execute on any thread."""

    __slots__ = ("directory", "done", "error", "fs", "generation", "handles", "target_offset")

    def __init__(
        self,
        fs: FileSystem,
        handles: list[FileHandle],
        directory: str | None,
        target_offset: int,
        generation: int,
    ) -> None:
        self.fs = fs
        self.handles = handles
        self.directory = directory
        self.target_offset = target_offset
        self.generation = generation
        self.done = False
        self.error: OSError | None = None

    def run(self) -> None:
        """fsync every captured file (and the directory), then close the duplicates. Never
        raises: a failure is recorded and reported by ``Log.complete_flush``."""
        try:
            for handle in self.handles:
                handle.fsync()
            if self.directory is not None:
                self.fs.fsync_dir(self.directory)
            self.done = True
        except OSError as exc:
            self.error = exc
        finally:
            for handle in self.handles:
                handle.close()


class RealFileHandle:
    __slots__ = ("_fd", "_path", "_size")

    def __init__(self, path: str, fd: int) -> None:
        self._path = path
        self._fd = fd
        self._size = os.fstat(fd).st_size

    @property
    def path(self) -> str:
        return self._path

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        total = len(view)
        written = os.pwrite(self._fd, view, self._size)
        while written < total:  # short writes are legal; finish them
            written += os.pwrite(self._fd, view[written:], self._size + written)
        self._size += total
        return total

    def read_at(self, position: int, size: int) -> bytes:
        if size <= 0:
            return b""
        return os.pread(self._fd, size, position)

    def size(self) -> int:
        return self._size

    def fsync(self) -> None:
        os.fsync(self._fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self._size = size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def fileno(self) -> int | None:
        return self._fd

    def duplicate(self) -> RealFileHandle:
        return RealFileHandle(self._path, os.dup(self._fd))


class RealFileSystem:
    """The operating system's files."""

    def open(self, path: str, *, create: bool = True) -> RealFileHandle:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        fd = os.open(path, flags, 0o644)
        return RealFileHandle(path, fd)

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rmtree(self, path: str) -> None:
        for name in os.listdir(path):
            child = os.path.join(path, name)
            if os.path.isdir(child) and not os.path.islink(child):
                self.rmtree(child)
            else:
                os.remove(child)
        os.rmdir(path)

    def rename(self, source: str, destination: str) -> None:
        os.replace(source, destination)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------------------------
# In-memory files with a page cache
# ---------------------------------------------------------------------------------------------
class _Inode:
    """File contents. ``data`` is what reads see. The durable image is ``data[:synced_len]``
    while only appends happened since the last fsync; a truncate below ``synced_len`` first
    materialises the durable bytes into ``durable`` (rare, so appends stay O(1))."""

    __slots__ = ("data", "durable", "synced_len")

    def __init__(self) -> None:
        self.data = bytearray()
        self.synced_len = 0
        self.durable: bytes | None = None

    def sync(self) -> None:
        self.synced_len = len(self.data)
        self.durable = None

    def durable_bytes(self) -> bytes:
        return self.durable if self.durable is not None else bytes(self.data[: self.synced_len])

    def dirty(self) -> bool:
        return self.durable is not None or self.synced_len != len(self.data)

    def crash(self, rng: random.Random | None) -> None:
        if self.durable is not None:
            self.data = bytearray(self.durable)
        else:
            keep = self.synced_len
            if rng is not None and len(self.data) > keep:
                # A torn tail: a random prefix of the unsynced appends reached the disk.
                keep += rng.randint(0, len(self.data) - keep)
            del self.data[keep:]
        self.sync()


def _norm(path: str) -> str:
    return posixpath.normpath(path)


def _not_found(path: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


_DIR = None  # marker value for directories in the namespace maps


class _Faults:
    """Fault knobs shared by a MemoryFileSystem and its handles."""

    __slots__ = ("dir_fsyncs", "file_fsyncs", "fsync_failures")

    def __init__(self) -> None:
        self.fsync_failures = 0
        self.file_fsyncs = 0  # fsync calls on file handles (failed ones included)
        self.dir_fsyncs = 0


class MemoryFileHandle:
    __slots__ = ("_closed", "_faults", "_inode", "_path")

    def __init__(self, path: str, inode: _Inode, faults: _Faults | None = None) -> None:
        self._path = path
        self._inode = inode
        self._closed = False
        self._faults = faults if faults is not None else _Faults()

    @property
    def path(self) -> str:
        return self._path

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._closed:
            raise ValueError(f"write to closed file {self._path}")
        self._inode.data += data
        return len(data)

    def read_at(self, position: int, size: int) -> bytes:
        return bytes(self._inode.data[position : position + size])

    def size(self) -> int:
        return len(self._inode.data)

    def fsync(self) -> None:
        self._faults.file_fsyncs += 1
        if self._faults.fsync_failures > 0:
            self._faults.fsync_failures -= 1
            raise OSError(errno.EIO, os.strerror(errno.EIO), self._path)
        self._inode.sync()

    def truncate(self, size: int) -> None:
        inode = self._inode
        if size < inode.synced_len and inode.durable is None:
            inode.durable = bytes(inode.data[: inode.synced_len])
        if size < len(inode.data):
            del inode.data[size:]
        else:
            inode.data += bytes(size - len(inode.data))

    def close(self) -> None:
        self._closed = True

    def fileno(self) -> int | None:
        return None

    def duplicate(self) -> MemoryFileHandle:
        return MemoryFileHandle(self._path, self._inode, self._faults)


class MemoryFileSystem:
    """A deterministic in-memory disk that can lose what was not fsynced.

    Namespace: ``_names`` maps a path to an inode (file) or ``None`` (directory); ``_durable``
    is the namespace as of the last fsync of each parent directory. ``crash`` restores the
    durable namespace and each surviving file's durable bytes. The root "/" always exists.
    """

    def __init__(self) -> None:
        self._names: dict[str, _Inode | None] = {"/": _DIR}
        self._durable: dict[str, _Inode | None] = {"/": _DIR}
        self.crash_count = 0
        self._faults = _Faults()

    @property
    def fsync_count(self) -> int:
        """Every fsync so far: of files (through any handle) and of directories."""
        return self._faults.file_fsyncs + self._faults.dir_fsyncs

    @property
    def file_fsync_count(self) -> int:
        return self._faults.file_fsyncs

    @property
    def dir_fsync_count(self) -> int:
        return self._faults.dir_fsyncs

    def fail_next_fsyncs(self, count: int) -> None:
        """The next ``count`` file fsyncs raise EIO and make nothing durable (a failing disk)."""
        self._faults.fsync_failures = count

    # -- namespace helpers --------------------------------------------------------------------
    def _parent_must_exist(self, path: str) -> None:
        parent = posixpath.dirname(path)
        if parent and parent not in self._names:
            raise _not_found(parent)
        if parent and self._names[parent] is not _DIR:
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent)

    def _file(self, path: str) -> _Inode:
        inode = self._names.get(path, _DIR)
        if inode is None:
            if path in self._names:
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            raise _not_found(path)
        return inode

    # -- FileSystem ---------------------------------------------------------------------------
    def open(self, path: str, *, create: bool = True) -> MemoryFileHandle:
        path = _norm(path)
        if path not in self._names:
            if not create:
                raise _not_found(path)
            self._parent_must_exist(path)
            self._names[path] = _Inode()
        return MemoryFileHandle(path, self._file(path), self._faults)

    def read_file(self, path: str) -> bytes:
        return bytes(self._file(_norm(path)).data)

    def exists(self, path: str) -> bool:
        return _norm(path) in self._names

    def is_dir(self, path: str) -> bool:
        path = _norm(path)
        return path in self._names and self._names[path] is _DIR

    def size(self, path: str) -> int:
        return len(self._file(_norm(path)).data)

    def listdir(self, path: str) -> list[str]:
        path = _norm(path)
        if not self.is_dir(path):
            raise _not_found(path)
        return sorted(
            posixpath.basename(name)
            for name in self._names
            if name != path and posixpath.dirname(name) == path
        )

    def mkdirs(self, path: str) -> None:
        path = _norm(path)
        missing: list[str] = []
        current = path
        while current not in self._names:
            missing.append(current)
            current = posixpath.dirname(current)
        if self._names[current] is not _DIR:
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), current)
        for name in reversed(missing):
            self._names[name] = _DIR

    def remove(self, path: str) -> None:
        path = _norm(path)
        self._file(path)
        del self._names[path]

    def rmtree(self, path: str) -> None:
        path = _norm(path)
        if path not in self._names:
            raise _not_found(path)
        prefix = path + "/"
        for name in [n for n in self._names if n == path or n.startswith(prefix)]:
            del self._names[name]

    def rename(self, source: str, destination: str) -> None:
        source, destination = _norm(source), _norm(destination)
        inode = self._file(source)
        self._parent_must_exist(destination)
        del self._names[source]
        self._names[destination] = inode

    def fsync_dir(self, path: str) -> None:
        """Make the entries directly under ``path`` (creates, renames, removes) durable."""
        path = _norm(path)
        if not self.is_dir(path):
            raise _not_found(path)
        self._faults.dir_fsyncs += 1
        for name in [n for n in self._durable if n != path and posixpath.dirname(n) == path]:
            if name not in self._names:
                self._drop_durable_subtree(name)
        for name, inode in self._names.items():
            if name != path and posixpath.dirname(name) == path:
                self._durable[name] = inode
        # A directory entry is only meaningful if its own parents are durable; we model
        # mkdirs of parents as durable once any descendant directory is fsynced.
        current = path
        while current not in self._durable:
            self._durable[current] = _DIR
            current = posixpath.dirname(current)

    def _drop_durable_subtree(self, name: str) -> None:
        prefix = name + "/"
        for other in [n for n in self._durable if n == name or n.startswith(prefix)]:
            del self._durable[other]

    # -- faults -------------------------------------------------------------------------------
    def crash(self, lose_unsynced: bool, *, rng: random.Random | None = None) -> None:
        """Simulate a crash. ``lose_unsynced=False``: process kill, the page cache survives (no
        change). ``True``: power loss; unsynced file bytes and unsynced directory entries vanish.
        With ``rng``, each file keeps a random prefix of its unsynced appended bytes (torn write).
        Open handles must not be used afterwards (reopen files)."""
        self.crash_count += 1
        if not lose_unsynced:
            return
        survivors: dict[str, _Inode | None] = {}
        seen: set[int] = set()
        for name in sorted(self._durable):
            inode = self._durable[name]
            parent = posixpath.dirname(name)
            if name != "/" and parent not in survivors:
                continue  # its directory did not survive
            survivors[name] = inode
            if inode is not None and id(inode) not in seen:
                seen.add(id(inode))
                inode.crash(rng)
        self._names = dict(survivors)
        self._durable = dict(survivors)

    def corrupt(self, path: str, position: int, data: bytes) -> None:
        """Overwrite bytes in place, durable and cached alike (bit rot, for tests)."""
        inode = self._file(_norm(path))
        inode.data[position : position + len(data)] = data
        if inode.durable is not None:
            durable = bytearray(inode.durable)
            durable[position : position + len(data)] = data[: max(0, len(durable) - position)]
            inode.durable = bytes(durable)

    def unsynced_bytes(self, path: str) -> int:
        inode = self._file(_norm(path))
        return len(inode.data) - inode.synced_len if inode.durable is None else -1

    def durable_bytes(self, path: str) -> bytes:
        return self._file(_norm(path)).durable_bytes()

    def snapshot(self) -> dict[str, bytes | None]:
        """Current contents of every path (None for directories); for tests and the simulator."""
        return {
            name: (bytes(inode.data) if inode is not None else None)
            for name, inode in sorted(self._names.items())
        }
