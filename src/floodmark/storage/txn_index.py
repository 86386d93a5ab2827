"""One segment's aborted transactions index, ``<base>.txnindex`` (Kafka's ``TransactionIndex``).

Entries of 34 bytes, big-endian, in the order the abort markers were written::

    version i16 (0)   producer id i64   first offset i64   last offset i64   last stable offset i64

``last offset`` is the abort marker's offset, so an entry lives in the segment that holds its
marker. ``last stable offset`` is the LSO right after the abort (see
``replication.producer_state.AbortedTxn``): a search for the aborts overlapping a fetched range
stops at the first entry whose LSO is at or past the range's end, since every transaction that
began below that LSO was complete, and indexed, before it.

The file exists only for segments with aborts (as in Kafka). Entries are kept in memory once
read. What the producer state finds in the log is the truth: at open, ``Log`` makes the files
agree with it (``restore``), which covers a torn tail and an entry lost in a crash. A rebuild
must never replace a right index with a wrong one, so where the file and the rebuild differ,
each differing entry is checked against the log (:func:`entry_mismatch`), only entries the log
bears out are kept, and the file as it was is kept beside it as evidence
(``<base>.txnindex.before-rebuild``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from floodmark.records import BatchHeader, ControlType, CorruptRecordError, control_type_of
from floodmark.replication import AbortedTxn
from floodmark.storage.fs import FileHandle, FileSystem

TXN_INDEX_SUFFIX = ".txnindex"
EVIDENCE_SUFFIX = ".before-rebuild"
"""Appended to a ``.txnindex`` path: the file as it was before a rebuild that changed it."""
TXN_INDEX_EVIDENCE_SUFFIX = TXN_INDEX_SUFFIX + EVIDENCE_SUFFIX
TXN_INDEX_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_BYTES = _ENTRY.size
assert ENTRY_BYTES == 34


def encode_entries(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(TXN_INDEX_VERSION, e.producer_id, e.first_offset, e.last_offset,
                                e.last_stable_offset) for e in entries)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The whole entries of a file's bytes; a torn last entry or an unknown version ends it."""
    out: list[AbortedTxn] = []
    for position in range(0, len(data) - ENTRY_BYTES + 1, ENTRY_BYTES):
        version, pid, first, last, stable = _ENTRY.unpack_from(data, position)
        if version != TXN_INDEX_VERSION:
            break
        out.append(AbortedTxn(pid, first, last, stable))
    return out


def entry_mismatch(entry: AbortedTxn, batches: Iterable[BatchHeader]) -> str | None:
    """Why ``entry`` is not an aborted transaction of the log, or None if the log bears it out.
    ``batches``: the log's whole batches overlapping [first_offset, last_offset], in order.

    The rule, checked without the producer state (an independent witness of the rebuild): the
    batch at ``last_offset`` is an ABORT marker of the producer; the batch at ``first_offset``
    is that producer's transactional batch (or the marker itself: an abort with nothing
    written); no other marker of the producer lies between them (an entry reaching back over
    an earlier, completed transaction would hide it from read_committed consumers)."""
    pid = entry.producer_id
    first_seen = False
    for header in batches:
        if header.last_offset < entry.first_offset:
            continue
        if not first_seen:
            first_seen = True
            if header.base_offset != entry.first_offset or header.producer_id != pid or not (
                    header.is_transactional):
                return (f"no transactional batch of producer {pid} starts at offset "
                        f"{entry.first_offset}")
        if header.producer_id != pid or not header.is_control:
            if header.base_offset > entry.last_offset:
                break
            continue
        try:
            kind = control_type_of(header)
        except CorruptRecordError as exc:
            return f"the marker at offset {header.base_offset} cannot be read: {exc}"
        if header.base_offset < entry.last_offset:
            return (f"producer {pid} completed a transaction at offset {header.base_offset}, "
                    f"inside [{entry.first_offset}, {entry.last_offset}]")
        if header.base_offset == entry.last_offset and kind == ControlType.ABORT:
            return None
        break
    return f"no ABORT marker of producer {pid} at offset {entry.last_offset}"


class TxnIndex:
    """The aborted transactions of one segment (entries in marker order)."""

    __slots__ = ("_entries", "_fs", "_handle", "dirty", "path")

    def __init__(self, fs: FileSystem, path: str) -> None:
        self._fs = fs
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self._handle: FileHandle | None = None
        self.dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            data = self._fs.read_file(self.path) if self._fs.exists(self.path) else b""
            self._entries = decode_entries(data)
            if len(data) != len(self._entries) * ENTRY_BYTES:
                self._rewrite(self._entries)  # cut a torn tail
        return self._entries

    def _file(self) -> FileHandle:
        if self._handle is None:
            self._handle = self._fs.open(self.path)
        return self._handle

    def append(self, entries: Sequence[AbortedTxn]) -> bool:
        """Write ``entries`` after the last; True if that created the file (its directory
        then needs an fsync too). The file's existence is asked once, not once per abort."""
        current = self.entries
        if current and entries and entries[0].last_offset <= current[-1].last_offset:
            raise ValueError(f"{self.path}: abort at {entries[0].last_offset} is not after "
                             f"the last one indexed ({current[-1].last_offset})")
        created = self._handle is None and not self._fs.exists(self.path)
        self._file().write(encode_entries(entries))
        current.extend(entries)
        self.dirty = True
        return created

    def truncate_to(self, offset: int) -> None:
        """Forget the aborts whose marker is at or after ``offset`` (the log was cut there)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self._rewrite(kept)

    def restore(self, entries: Sequence[AbortedTxn]) -> bool:
        """Make the index hold exactly ``entries``; True if it had to change."""
        if list(entries) == self.entries:
            return False
        self._rewrite(list(entries))
        return True

    @property
    def evidence_path(self) -> str:
        return self.path + EVIDENCE_SUFFIX

    def keep_evidence(self) -> bool:
        """Copy the file as it is now to :attr:`evidence_path` (replacing an older copy), before
        a rebuild changes it; False if there is no file."""
        if not self._fs.exists(self.path):
            return False
        data = self._fs.read_file(self.path)
        handle = self._fs.open(self.evidence_path)
        try:
            handle.truncate(0)
            handle.write(data)
            handle.fsync()
        finally:
            handle.close()
        return True

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        self._entries = entries
        if not entries and not self._fs.exists(self.path):
            return
        handle = self._file()
        handle.truncate(0)
        if entries:
            handle.write(encode_entries(entries))
        self.dirty = True

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The aborts overlapping [fetch_offset, upper_bound_offset), and whether the search is
        complete (an entry's LSO reached the bound: later segments cannot add any)."""
        found: list[AbortedTxn] = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def sync(self) -> None:
        if self.dirty and self._handle is not None:
            self._handle.fsync()
        self.dirty = False

    def take_sync_handle(self) -> FileHandle | None:
        if not self.dirty or self._handle is None:
            self.dirty = False
            return None
        self.dirty = False
        return self._handle.duplicate()

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def delete(self) -> None:
        self.release()
        self._entries = []
        self.dirty = False
        if self._fs.exists(self.path):
            self._fs.remove(self.path)
