"""Copying a partition directory to another log directory while the log keeps changing
(AlterReplicaLogDirs: the ``-future`` copy, KIP-113).

``sync_copy`` makes a destination directory hold what the source holds now. It is called
several times: first on a worker thread while the partition serves (most bytes), last on the
event loop after a flush, where no append can interleave (only what changed since). A file is
copied again when its size or modification time changed since the previous round, or when the
caller says it may have changed in place (an active segment's index). A ``.log`` file is
append-only between truncations, so while the log's truncation generation stays the same only
its new tail is copied.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

COPY_CHUNK_BYTES = 1 << 20


@dataclass
class CopyState:
    """What the destination holds after the previous round: per file (size, mtime_ns) of the
    source as it was stat'ed before that round copied it."""

    seen: dict[str, tuple[int, int]] = field(default_factory=dict)
    truncation_generation: int | None = None
    copied_bytes: int = 0  # bytes written to the destination so far, every round


def sync_copy(source: str, destination: str, state: CopyState, *,
              truncation_generation: int, always: frozenset[str] = frozenset()) -> int:
    """One round (see the module docstring); returns the bytes copied in it. ``always``: file
    names copied whatever their stat says. Files gone from the source are removed from the
    destination."""
    os.makedirs(destination, exist_ok=True)
    append_only = state.truncation_generation == truncation_generation
    state.truncation_generation = truncation_generation
    names = set()
    copied = 0
    for entry in os.scandir(source):
        if not entry.is_file(follow_symlinks=False):
            continue
        name = entry.name
        try:
            st = entry.stat(follow_symlinks=False)
            stamp = (st.st_size, st.st_mtime_ns)
            names.add(name)
            if state.seen.get(name) == stamp and name not in always:
                continue
            target = os.path.join(destination, name)
            if append_only and name.endswith(".log") and name in state.seen:
                copied += _copy_tail(entry.path, target)
            else:
                copied += _copy_whole(entry.path, target)
        except FileNotFoundError:  # deleted meanwhile (retention, a roll's swap)
            names.discard(name)
            continue
        state.seen[name] = stamp
    for name in set(state.seen) - names:
        del state.seen[name]
        target = os.path.join(destination, name)
        if os.path.exists(target):
            os.remove(target)
    state.copied_bytes += copied
    return copied


def _copy_whole(source: str, target: str) -> int:
    shutil.copyfile(source, target)
    return os.path.getsize(target)


def _copy_tail(source: str, target: str) -> int:
    """Append what ``source`` has beyond ``target``'s length (``source`` only grew)."""
    have = os.path.getsize(target) if os.path.exists(target) else 0
    if have > os.path.getsize(source):
        return _copy_whole(source, target)
    copied = 0
    with open(source, "rb") as src, open(target, "ab") as dst:
        src.seek(have)
        while chunk := src.read(COPY_CHUNK_BYTES):
            dst.write(chunk)
            copied += len(chunk)
    return copied


def fsync_tree(path: str) -> None:
    """Every file of a (flat) directory and the directory itself made durable."""
    for entry in os.scandir(path):
        if entry.is_file(follow_symlinks=False):
            fd = os.open(entry.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fsync_directory(path)


def fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def directory_bytes(path: str) -> int:
    try:
        return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())
    except OSError:
        return 0
