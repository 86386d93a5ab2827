"""One log segment: ``<base>.log`` (raw batches), ``<base>.index`` and ``<base>.timeindex``, and
``<base>.txnindex`` when the segment holds abort markers (``storage.txn_index``).

Offset index entries: (relative offset u32, position u32), 8 bytes, relative offset of the *first*
offset of an indexed batch, one entry whenever more than ``index.interval.bytes`` were appended
since the last one. Time index entries: (timestamp i64, relative offset u32), 12 bytes, the largest
timestamp seen so far in the segment and the last offset of the batch that carried it; appended at
index points when the maximum grew, and once more when the segment stops being active.

Indexes live in memory (two lists each) and are mirrored to their files by appending; a file that
fails the sanity check on open is rebuilt from the segment.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator

from floodmark.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    CorruptRecordError,
    validate_batch_at,
)
from floodmark.storage.fs import FileHandle, FileSystem
from floodmark.storage.txn_index import TXN_INDEX_SUFFIX, TxnIndex

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
OFFSET_INDEX_ENTRY_BYTES = _OFFSET_ENTRY.size  # segment.index.bytes counts these (8 B)
TIME_INDEX_ENTRY_BYTES = _TIME_ENTRY.size  # and these (12 B)
# baseOffset, batchLength, then (skipping epoch, magic, crc, attributes) lastOffsetDelta.
_SCAN_PREFIX = struct.Struct(">qi11xi")
SCAN_CHUNK_BYTES = 64 * 1024
MAX_RELATIVE_OFFSET = 2**31 - 1
LOG_SUFFIX = ".log"
INDEX_SUFFIXES = (".index", ".timeindex")


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class LazyFile:
    """A file opened on first use and closable when idle, so that inactive segments do not
    hold index file descriptors (3 per segment would exhaust fds on logs with many segments)."""

    __slots__ = ("_fs", "_handle", "dirty", "path")

    def __init__(self, fs: FileSystem, path: str) -> None:
        self._fs = fs
        self.path = path
        self._handle: FileHandle | None = None
        self.dirty = False  # written or truncated since the last sync

    def write(self, data: bytes) -> None:
        self.handle.write(data)
        self.dirty = True

    def truncate(self, size: int) -> None:
        self.handle.truncate(size)
        self.dirty = True

    def size(self) -> int:
        return self.handle.size()

    def read_at(self, position: int, size: int) -> bytes:
        return self.handle.read_at(position, size)

    def sync(self) -> None:
        if self.dirty:
            self.handle.fsync()
            self.dirty = False

    def take_sync_handle(self) -> FileHandle | None:
        """For a deferred fsync: a duplicate handle if there are unsynced writes (and mark them
        as being synced), else None."""
        if not self.dirty:
            return None
        self.dirty = False
        return self.handle.duplicate()

    @property
    def handle(self) -> FileHandle:
        if self._handle is None:
            self._handle = self._fs.open(self.path)
        return self._handle

    @property
    def is_open(self) -> bool:
        return self._handle is not None

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _make_file_equal(file: LazyFile, data: bytes) -> bool:
    """Make ``file`` hold exactly ``data`` with the fewest writes: keep the common prefix,
    truncate the rest, append the difference. Returns True if the file changed (it is then
    marked dirty, i.e. needs an fsync); an identical file is left untouched."""
    size = file.size()
    current = file.read_at(0, size) if size else b""
    if current == data:
        return False
    common = 0
    limit = min(len(current), len(data))
    block = 4096
    while common + block <= limit and current[common : common + block] == data[common : common + block]:
        common += block
    while common < limit and current[common] == data[common]:
        common += 1
    if size > common:
        file.truncate(common)
    if len(data) > common:
        file.write(data[common:])
    return True


class OffsetIndex:
    """Offset index entries in memory, mirrored to the file by appending. While ``detached``
    (during recovery) changes stay in memory; ``attach`` then makes the file match, writing
    only if it differs."""

    __slots__ = ("base_offset", "detached", "file", "positions", "relative_offsets")

    def __init__(self, file: LazyFile, base_offset: int) -> None:
        self.file = file
        self.base_offset = base_offset
        self.relative_offsets: list[int] = []
        self.positions: list[int] = []
        self.detached = False

    def attach(self) -> bool:
        """End a detached period: bring the file in line with memory. True if it was written."""
        self.detached = False
        data = b"".join(
            _OFFSET_ENTRY.pack(rel, pos)
            for rel, pos in zip(self.relative_offsets, self.positions, strict=True)
        )
        return _make_file_equal(self.file, data)

    def load(self, segment_size: int) -> bool:
        """Read the file; False (and empty) if it fails the sanity check."""
        size = self.file.size()
        if size % _OFFSET_ENTRY.size:
            self.clear_memory()
            return False
        data = self.file.read_at(0, size)
        offsets: list[int] = []
        positions: list[int] = []
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            if (offsets and (rel <= offsets[-1] or pos <= positions[-1])) or pos >= segment_size:
                self.clear_memory()
                return False
            offsets.append(rel)
            positions.append(pos)
        self.relative_offsets, self.positions = offsets, positions
        return True

    def clear_memory(self) -> None:
        self.relative_offsets = []
        self.positions = []

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        self.relative_offsets.append(rel)
        self.positions.append(position)
        if not self.detached:
            self.file.write(_OFFSET_ENTRY.pack(rel, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before ``offset``, else (base, 0)."""
        i = bisect.bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[i], self.positions[i]

    def position_at_or_after(self, offset: int) -> int | None:
        """Position of the first indexed batch whose base offset is >= ``offset`` (None if no
        entry is): every batch ending at or before ``offset`` lies before that position."""
        i = bisect.bisect_left(self.relative_offsets, offset - self.base_offset)
        return self.positions[i] if i < len(self.positions) else None

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or beyond ``position`` (file and memory)."""
        keep = bisect.bisect_left(self.positions, position)
        if keep < len(self.positions):
            del self.relative_offsets[keep:]
            del self.positions[keep:]
            if not self.detached:
                self.file.truncate(keep * _OFFSET_ENTRY.size)

    def reset(self) -> None:
        self.clear_memory()
        if not self.detached:
            self.file.truncate(0)

    def __len__(self) -> int:
        return len(self.positions)


class TimeIndex:
    """Time index entries in memory, mirrored to the file (``detached``/``attach`` as in
    ``OffsetIndex``)."""

    __slots__ = ("base_offset", "detached", "file", "relative_offsets", "timestamps")

    def __init__(self, file: LazyFile, base_offset: int) -> None:
        self.file = file
        self.base_offset = base_offset
        self.timestamps: list[int] = []
        self.relative_offsets: list[int] = []
        self.detached = False

    def attach(self) -> bool:
        self.detached = False
        data = b"".join(
            _TIME_ENTRY.pack(ts, rel)
            for ts, rel in zip(self.timestamps, self.relative_offsets, strict=True)
        )
        return _make_file_equal(self.file, data)

    def load(self) -> bool:
        size = self.file.size()
        if size % _TIME_ENTRY.size:
            self.clear_memory()
            return False
        data = self.file.read_at(0, size)
        timestamps: list[int] = []
        offsets: list[int] = []
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if timestamps and (ts <= timestamps[-1] or rel < offsets[-1]):
                self.clear_memory()
                return False
            timestamps.append(ts)
            offsets.append(rel)
        self.timestamps, self.relative_offsets = timestamps, offsets
        return True

    def clear_memory(self) -> None:
        self.timestamps = []
        self.relative_offsets = []

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else NO_TIMESTAMP

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if timestamp > self.last_timestamp:
            rel = offset - self.base_offset
            self.timestamps.append(timestamp)
            self.relative_offsets.append(rel)
            if not self.detached:
                self.file.write(_TIME_ENTRY.pack(timestamp, rel))

    def lookup_below(self, timestamp: int) -> int:
        """An offset at or before the first record with timestamp >= ``timestamp``: the offset of
        the last entry whose (running maximum) timestamp is < ``timestamp``, else the base."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self.relative_offsets[i]

    def truncate_to_offset(self, offset: int) -> None:
        rel = offset - self.base_offset
        keep = bisect.bisect_left(self.relative_offsets, rel)
        if keep < len(self.relative_offsets):
            del self.timestamps[keep:]
            del self.relative_offsets[keep:]
            if not self.detached:
                self.file.truncate(keep * _TIME_ENTRY.size)

    def reset(self) -> None:
        self.clear_memory()
        if not self.detached:
            self.file.truncate(0)

    def __len__(self) -> int:
        return len(self.timestamps)


def scan_batches(
    handle: FileHandle,
    start_position: int = 0,
    end_position: int | None = None,
    *,
    validate: bool,
    chunk_bytes: int = SCAN_CHUNK_BYTES,
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (file position, header) of consecutive *whole* batches in a segment file: each
    header views a buffer that holds its entire batch, wherever the batch falls relative to the
    read chunks, so its records (a transaction marker, say) can be decoded. A batch longer than
    ``chunk_bytes`` is read in one piece.

    With ``validate`` each batch is fully checked (CRC etc.); without it only the framing is (for
    data validated on append or recovery). Either way a CorruptRecordError carrying the *file*
    position is raised at the first bad batch or at one that runs past ``end_position``.
    Callers that need only the header fields use :func:`scan_headers`, which reads less.
    """
    end = handle.size() if end_position is None else end_position
    position = start_position
    chunk = b""
    chunk_start = position
    chunk_bytes = max(chunk_bytes, HEADER_SIZE)
    while position < end:
        rel = position - chunk_start
        if rel < 0 or rel + HEADER_SIZE > len(chunk):
            chunk_start = position
            chunk = handle.read_at(position, min(chunk_bytes, end - position))
            rel = 0
        if len(chunk) - rel < LOG_OVERHEAD or (len(chunk) - rel < HEADER_SIZE and not validate):
            raise CorruptRecordError(
                f"truncated record batch at position {position}: {len(chunk) - rel} bytes left "
                f"(segment {handle.path})",
                position,
            )
        size = LOG_OVERHEAD + int.from_bytes(chunk[rel + 8 : rel + 12], "big", signed=True)
        try:
            if size >= HEADER_SIZE and rel + size > len(chunk) and position + size <= end:
                # The batch runs past this chunk: read it whole, with what follows it.
                chunk_start = position
                chunk = handle.read_at(position, min(max(size, chunk_bytes), end - position))
                rel = 0
            if validate:
                header = validate_batch_at(
                    memoryview(chunk)[: min(len(chunk), end - chunk_start)], rel
                )
            elif size < HEADER_SIZE:
                raise CorruptRecordError(
                    f"record batch at position {position} has batchLength {size - LOG_OVERHEAD}",
                    position,
                )
            elif position + size > end:
                raise CorruptRecordError(
                    f"truncated record batch at position {position}: {size} bytes long, "
                    f"{end - position} left",
                    position,
                )
            else:
                header = BatchHeader(chunk, rel)
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"{exc} (segment {handle.path}, file position {position})", position
            ) from exc
        yield position, header
        position += size


def scan_headers(
    handle: FileHandle,
    start_position: int = 0,
    end_position: int | None = None,
    *,
    chunk_bytes: int = SCAN_CHUNK_BYTES,
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (file position, header) of consecutive batches, reading only what the headers need
    (offsets, timestamps, sizes, producer fields) for lookups over data validated on append or
    recovery. Each header views a copy of its 61 header bytes and nothing more, so decoding
    its records fails every time rather than whenever the batch happens to fit in a chunk:
    whatever needs a batch's contents uses :func:`scan_batches`."""
    end = handle.size() if end_position is None else end_position
    position = start_position
    chunk = b""
    chunk_start = position
    chunk_bytes = max(chunk_bytes, HEADER_SIZE)
    while position < end:
        rel = position - chunk_start
        if rel < 0 or rel + HEADER_SIZE > len(chunk):
            chunk_start = position
            chunk = handle.read_at(position, min(chunk_bytes, end - position))
            rel = 0
        if len(chunk) - rel < HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated record batch header at position {position}: {len(chunk) - rel} "
                f"bytes left (segment {handle.path})",
                position,
            )
        header = BatchHeader(chunk[rel : rel + HEADER_SIZE])
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"record batch at position {position} has batchLength {header.batch_length} "
                f"(segment {handle.path})",
                position,
            )
        yield position, header
        position += header.size


class Segment:
    """A segment's files and the in-memory facts the log needs about it."""

    __slots__ = (
        "base_offset",
        "bytes_since_last_index_entry",
        "dir_path",
        "dirty",
        "index",
        "index_files_existed",
        "log",
        "max_timestamp",
        "offset_of_max_timestamp",
        "roll_base_ms",
        "time_index",
        "txn_index",
    )

    def __init__(self, fs: FileSystem, dir_path: str, base_offset: int, *,
                 names: frozenset[str] | None = None) -> None:
        """``names``: the directory's files, when the caller has just listed it (recovery):
        whether the index files exist is read from it instead of asked of the disk."""
        self.dir_path = dir_path
        self.base_offset = base_offset
        stem = segment_file_name(base_offset, "")
        self.log = fs.open(f"{dir_path}/{stem}.log")
        index_path = f"{dir_path}/{stem}.index"
        time_index_path = f"{dir_path}/{stem}.timeindex"
        if names is None:
            self.index_files_existed = fs.exists(index_path) and fs.exists(time_index_path)
        else:
            self.index_files_existed = (f"{stem}.index" in names
                                        and f"{stem}.timeindex" in names)
        self.index = OffsetIndex(LazyFile(fs, index_path), base_offset)
        self.time_index = TimeIndex(LazyFile(fs, time_index_path), base_offset)
        self.txn_index = TxnIndex(fs, f"{dir_path}/{stem}{TXN_INDEX_SUFFIX}")
        self.bytes_since_last_index_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.roll_base_ms: int | None = None
        self.dirty = False

    @classmethod
    def create(cls, fs: FileSystem, dir_path: str, base_offset: int) -> Segment:
        """A new, empty segment (any files of that name are emptied)."""
        segment = cls(fs, dir_path, base_offset)
        segment.log.truncate(0)
        segment.index.reset()
        segment.time_index.reset()
        segment.txn_index.delete()
        segment.dirty = True
        return segment

    @property
    def path(self) -> str:
        return self.log.path

    @property
    def size(self) -> int:
        return self.log.size()

    def file_paths(self) -> list[str]:
        return [self.log.path, self.index.file.path, self.time_index.file.path,
                self.txn_index.path, self.txn_index.evidence_path]

    def delete(self, fs: FileSystem) -> None:
        """Close the segment and remove its files."""
        self.close()
        for path in self.file_paths():
            if fs.exists(path):
                fs.remove(path)

    # -- appends ------------------------------------------------------------------------------
    def note_batch(
        self,
        base_offset: int,
        last_offset: int,
        max_timestamp: int,
        size: int,
        position: int,
        index_interval_bytes: int,
    ) -> None:
        """Index bookkeeping for a batch written (or found) at ``position``."""
        if self.bytes_since_last_index_entry > index_interval_bytes:
            self.index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.roll_base_ms is None and max_timestamp >= 0:
            self.roll_base_ms = max_timestamp

    def note_header(self, header: BatchHeader, position: int, index_interval_bytes: int) -> None:
        self.note_batch(
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
            header.size,
            position,
            index_interval_bytes,
        )

    def detach_indexes(self) -> None:
        """Recovery: index changes stay in memory until ``attach_indexes``."""
        self.index.detached = True
        self.time_index.detached = True

    def attach_indexes(self) -> bool:
        """Write the index files only where they differ from memory; True if any was written
        (the segment then needs a flush)."""
        changed = self.index.attach()
        changed = self.time_index.attach() or changed
        if changed:
            self.dirty = True
        return changed

    def on_become_inactive(self) -> None:
        if self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.dirty = True  # the final entry must reach the disk with the next flush

    def read_at(self, position: int, size: int) -> bytes:
        return self.log.read_at(position, size)

    def flush(self) -> None:
        self.log.fsync()
        self.index.file.sync()
        self.time_index.file.sync()
        self.txn_index.sync()
        self.dirty = False

    def take_sync_handles(self) -> list[FileHandle]:
        """Duplicate handles of the files with unsynced writes, for a deferred fsync; the
        segment counts as clean afterwards (the caller must run the fsyncs)."""
        handles = [self.log.duplicate()]
        for file in (self.index.file, self.time_index.file, self.txn_index):
            handle = file.take_sync_handle()
            if handle is not None:
                handles.append(handle)
        self.dirty = False
        return handles

    def close(self) -> None:
        self.log.close()
        self.release_index_files()

    def release_index_files(self) -> None:
        """Close the index files; they are reopened on demand (also to fsync pending writes)."""
        self.index.file.release()
        self.time_index.file.release()
        self.txn_index.release()

    def load_indexes(self) -> bool:
        """Load the index files of a closed segment; False if they are missing or fail the
        sanity check (then they are to be rebuilt)."""
        size = self.size
        ok = self.index_files_existed and self.index.load(size) and self.time_index.load()
        if ok and size > 0 and len(self.time_index) == 0:
            ok = False  # a closed, non-empty segment always has its final time index entry
        if ok:
            self.max_timestamp = self.time_index.last_timestamp
            if self.time_index.relative_offsets:
                self.offset_of_max_timestamp = (
                    self.base_offset + self.time_index.relative_offsets[-1]
                )
            self.roll_base_ms = (
                self.time_index.timestamps[0] if self.time_index.timestamps else None
            )
        return ok

    # -- lookups ------------------------------------------------------------------------------
    def next_offset(self, chunk_bytes: int = SCAN_CHUNK_BYTES) -> int:
        """Next offset after the segment's last batch (its base offset when empty)."""
        _, start = self.index.lookup(2**63 - 1)
        next_offset = self.base_offset
        for _, header in scan_headers(self.log, start, chunk_bytes=chunk_bytes):
            next_offset = header.next_offset
        return next_offset

    def find_batch(self, offset: int, scan_bytes: int = 4096) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= ``offset``.

        Scans forward from the index entry at or below ``offset``, reading ``scan_bytes`` at a
        time (about one index interval is enough to reach the batch) and unpacking only the
        offset/length/lastOffsetDelta prefix of each header on the way.
        """
        _, position = self.index.lookup(offset)
        end = self.log.size()
        chunk_bytes = max(scan_bytes, HEADER_SIZE)
        while position < end:
            chunk = self.log.read_at(position, min(chunk_bytes, end - position))
            rel = 0
            limit = len(chunk) - HEADER_SIZE
            while rel <= limit:
                base, length, delta = _SCAN_PREFIX.unpack_from(chunk, rel)
                if base + delta >= offset:  # a header-only view (see scan_headers)
                    return position + rel, BatchHeader(chunk[rel : rel + HEADER_SIZE])
                if length < HEADER_SIZE - LOG_OVERHEAD:
                    raise CorruptRecordError(
                        f"record batch at position {position + rel} has batchLength {length} "
                        f"(segment {self.log.path})",
                        position + rel,
                    )
                rel += LOG_OVERHEAD + length
            if rel == 0 and len(chunk) < HEADER_SIZE:
                raise CorruptRecordError(
                    f"truncated record batch header at position {position} (segment {self.log.path})",
                    position,
                )
            position += rel
        return None

    def recompute_max_timestamp(self, chunk_bytes: int = SCAN_CHUNK_BYTES) -> None:
        """After a truncation: the time index's last entry holds the maximum timestamp up to
        the last offset-index entry (both were truncated consistently); scan from there."""
        time_index = self.time_index
        self.max_timestamp = time_index.last_timestamp
        self.offset_of_max_timestamp = self.base_offset + (
            time_index.relative_offsets[-1] if time_index.relative_offsets else 0
        )
        self.bytes_since_last_index_entry = 0
        start = self.index.positions[-1] if self.index.positions else 0
        for _, header in scan_headers(self.log, start, chunk_bytes=chunk_bytes):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            self.bytes_since_last_index_entry += header.size
        if self.size == 0:
            self.roll_base_ms = None

    def rebuild_indexes(self, index_interval_bytes: int, *, from_position: int = 0,
                        chunk_bytes: int = SCAN_CHUNK_BYTES) -> None:
        """Recreate index entries from ``from_position`` by scanning (headers only)."""
        if from_position == 0:
            self.index.reset()
            self.time_index.reset()
            self.max_timestamp = NO_TIMESTAMP
            self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0
        for position, header in scan_headers(self.log, from_position, chunk_bytes=chunk_bytes):
            self.note_header(header, position, index_interval_bytes)

    def __repr__(self) -> str:
        return f"Segment(base_offset={self.base_offset}, size={self.size})"


__all__ = [
    "INDEX_SUFFIXES",
    "LOG_SUFFIX",
    "MAX_RELATIVE_OFFSET",
    "OffsetIndex",
    "Segment",
    "TimeIndex",
    "scan_batches",
    "scan_headers",
    "segment_file_name",
]
