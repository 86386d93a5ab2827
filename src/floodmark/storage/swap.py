"""Replacing closed segments by a cleaned file, crash-safely (Kafka's ``.cleaned`` / ``.swap``).

The cleaner writes and fsyncs ``<base>.log.cleaned`` (``write_cleaned_file``); ``install`` renames
it ``<base>.log.swap`` and fsyncs the directory. From then on the swap is decided: if the process
dies, the next open completes it (``complete_swaps``): the swap file replaces every segment whose
base offset lies in its offset range, and its own index files are rebuilt. Offsets are untouched:
the batches keep theirs. A ``.cleaned`` file found at open was not complete, and is removed with
the other leftovers.
"""

from __future__ import annotations

import contextlib
import logging

from floodmark.errors import FloodmarkError
from floodmark.records import CorruptRecordError
from floodmark.storage.fs import FileSystem
from floodmark.storage.segment import (
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    Segment,
    scan_headers,
    segment_file_name,
)
from floodmark.storage.txn_index import TXN_INDEX_SUFFIX

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


class SwapError(FloodmarkError):
    """``install`` failed. ``started``: the swap file was already in place, so the log is half
    swapped (it must go offline; the next open completes the swap); otherwise nothing changed."""

    def __init__(self, base_offset: int, cause: OSError, *, started: bool) -> None:
        super().__init__(f"swapping in cleaned segment {base_offset}: {cause}")
        self.cause = cause
        self.started = started


def cleaned_file_path(dir_path: str, base_offset: int) -> str:
    return f"{dir_path}/{segment_file_name(base_offset, LOG_SUFFIX)}{CLEANED_SUFFIX}"


def write_cleaned_file(fs: FileSystem, dir_path: str, base_offset: int,
                       data: bytes | bytearray) -> str:
    """Write and fsync ``<base>.log.cleaned``; returns its path. Touches no state of the log,
    so it may run on a worker thread. A partial file is removed on error."""
    path = cleaned_file_path(dir_path, base_offset)
    try:
        if fs.exists(path):
            fs.remove(path)
        handle = fs.open(path)
        try:
            handle.write(data)
            handle.fsync()
        finally:
            handle.close()
    except OSError:
        discard_cleaned_file(fs, path)
        raise
    return path


def discard_cleaned_file(fs: FileSystem, path: str) -> None:
    with contextlib.suppress(OSError):
        if fs.exists(path):
            fs.remove(path)


def install(fs: FileSystem, dir_path: str, group: list[Segment], cleaned_path: str,
            index_interval_bytes: int) -> Segment:
    """Put the fsynced ``cleaned_path`` in place of ``group`` (consecutive closed segments, the
    file named for the first one's base offset): ``.swap`` and a directory fsync, then the
    group's files go and the swap file is renamed over ``<base>.log``. Returns the replacement
    segment, its indexes rebuilt from the new data. Raises ``SwapError``."""
    first = group[0]
    log_path = first.log.path
    swap_path = log_path + SWAP_SUFFIX
    try:
        fs.rename(cleaned_path, swap_path)
        fs.fsync_dir(dir_path)
    except OSError as exc:
        # Nothing was replaced yet: drop the file, the old segments stay.
        for path in (cleaned_path, swap_path):
            discard_cleaned_file(fs, path)
        raise SwapError(first.base_offset, exc, started=False) from exc
    try:
        for segment in group[1:]:
            segment.delete(fs)
        first.close()
        for path in (first.index.file.path, first.time_index.file.path):
            if fs.exists(path):
                fs.remove(path)
        fs.rename(swap_path, log_path)
        fs.fsync_dir(dir_path)
    except OSError as exc:
        raise SwapError(first.base_offset, exc, started=True) from exc
    replacement = Segment(fs, dir_path, first.base_offset)
    replacement.rebuild_indexes(index_interval_bytes)
    replacement.on_become_inactive()
    replacement.flush()
    replacement.release_index_files()
    return replacement


def complete_swaps(fs: FileSystem, dir_path: str, context: str,
                   names: list[str] | None = None) -> bool:
    """At open: finish a replacement ``install`` made durable but did not complete. A
    ``<base>.log.swap`` is a whole, fsynced cleaned segment, so it replaces ``<base>.log``; its
    index files are removed, to be rebuilt. True if anything was renamed or removed.
    ``names``: the directory's listing, when the caller has just read it."""
    changed = False
    for name in fs.listdir(dir_path) if names is None else names:
        if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        stem = name[: -len(LOG_SUFFIX + SWAP_SUFFIX)]
        if not stem.isdigit() or len(stem) != 20:
            continue
        swap_path = f"{dir_path}/{name}"
        base = int(stem)
        end = base + 1
        handle = fs.open(swap_path, create=False)
        try:
            for _position, header in scan_headers(handle, 0):
                end = header.next_offset
        except CorruptRecordError:
            pass  # it was fsynced whole; at worst fewer old segments are replaced
        finally:
            handle.close()
        # The swap file replaces every segment whose base offset lies in its range (the
        # segments it was merged from), and its own base's index files (rebuilt).
        for other in fs.listdir(dir_path):
            other_stem, dot, suffix = other.partition(".")
            if not (dot and other_stem.isdigit() and len(other_stem) == 20):
                continue
            other_base = int(other_stem)
            in_range = base < other_base < end and "." + suffix in (LOG_SUFFIX, *INDEX_SUFFIXES,
                                                                     TXN_INDEX_SUFFIX)
            own_index = other_base == base and "." + suffix in INDEX_SUFFIXES
            if in_range or own_index:
                fs.remove(f"{dir_path}/{other}")
        fs.rename(swap_path, f"{dir_path}/{stem}{LOG_SUFFIX}")
        logger.warning("%s recovery: completed the interrupted swap of cleaned segment %s",
                       context, stem)
        changed = True
    return changed
