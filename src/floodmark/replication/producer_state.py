"""Idempotent-producer state per partition: sequence checks and duplicate detection.

Kafka keeps, per producer id, its epoch and the metadata of its last five appended batches. A batch
whose (first, last) sequence matches one of those five is a retry of something already written:
answer success with the ORIGINAL base offset and append nothing. Otherwise the first sequence must
follow the last one written (mod 2^31), a new epoch must start at sequence 0, an older epoch is
fenced. The state is rebuilt from the log's batch headers on recovery.

Pure logic (no I/O): the leader's produce path (``replication.produce``) calls :meth:`check`
before appending and :meth:`record` after; a follower records what it replicates
(:meth:`record_batches`); after a truncation or at startup the table is rebuilt from the batch
headers that remain in the log (:meth:`rebuild`), so it never names a batch the log lost.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from floodmark.errors import ErrorCode

NO_PRODUCER_ID = -1
MAX_CACHED_BATCHES = 5
_SEQ_MOD = 2**31

_HEADER = struct.Struct(">qiibIhiqqqhii")  # v2 batch header, 61 bytes


@dataclass(frozen=True, slots=True)
class BatchMeta:
    """What the idempotence check needs from one v2 batch header."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    last_offset_delta: int
    is_transactional: bool

    @classmethod
    def from_header(cls, h: Any) -> BatchMeta:
        """From a ``floodmark.records.BatchHeader``."""
        return cls(h.producer_id, h.producer_epoch, h.base_sequence, h.records_count,
                   h.last_offset_delta, bool(h.attributes & 0x10))

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.last_offset_delta) % _SEQ_MOD


def batch_metas(records: bytes | memoryview) -> list[BatchMeta] | None:
    """Headers of the batches in a record set, or None if it is not a well-framed sequence of
    magic-2 batches (the CRC and the rest are validated by storage on append)."""
    out = []
    pos = 0
    end = len(records)
    while pos < end:
        if end - pos < _HEADER.size:
            return None
        (_base, length, _ple, magic, _crc, attrs, last_delta, _bts, _mts,
         pid, pepoch, base_seq, count) = _HEADER.unpack_from(records, pos)
        if magic != 2 or length < _HEADER.size - 12 or pos + 12 + length > end:
            return None
        out.append(BatchMeta(pid, pepoch, base_seq, count, last_delta, bool(attrs & 0x10)))
        pos += 12 + length
    return out or None


@dataclass(frozen=True, slots=True)
class CachedBatch:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_epoch: int
    batches: deque[CachedBatch] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    error: ErrorCode
    duplicate_of: CachedBatch | None = None


_OK = SequenceCheck(ErrorCode.NONE)


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def check(self, meta: BatchMeta) -> SequenceCheck:
        if meta.producer_id == NO_PRODUCER_ID:
            return _OK
        entry = self._producers.get(meta.producer_id)
        if entry is None:
            # Unknown producer: only a fresh sequence is acceptable (or its state was lost,
            # which a client handles like Kafka's UNKNOWN_PRODUCER_ID).
            if meta.base_sequence != 0:
                return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return _OK
        if meta.producer_epoch < entry.producer_epoch:
            return SequenceCheck(ErrorCode.INVALID_PRODUCER_EPOCH)
        if meta.producer_epoch > entry.producer_epoch:
            if meta.base_sequence != 0:
                return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return _OK
        for cached in entry.batches:
            if (cached.first_sequence == meta.base_sequence
                    and cached.last_sequence == meta.last_sequence):
                return SequenceCheck(ErrorCode.DUPLICATE_SEQUENCE_NUMBER, cached)
        expected = (entry.last_sequence + 1) % _SEQ_MOD
        if meta.base_sequence != expected:
            return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return _OK

    def record(self, meta: BatchMeta, first_offset: int) -> None:
        """Remember an appended batch (leader append or recovery scan)."""
        if meta.producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(meta.producer_id)
        if entry is None or meta.producer_epoch > entry.producer_epoch:
            entry = ProducerEntry(meta.producer_epoch)
            self._producers[meta.producer_id] = entry
        entry.batches.append(
            CachedBatch(meta.base_sequence, meta.last_sequence, first_offset,
                        first_offset + meta.last_offset_delta)
        )

    def record_batches(self, headers: Iterable[Any]) -> None:
        """Remember batches that already carry their offsets (follower append, log scan):
        ``floodmark.records.BatchHeader`` values."""
        for h in headers:
            if h.producer_id != NO_PRODUCER_ID:
                self.record(BatchMeta.from_header(h), h.base_offset)

    def rebuild(self, headers: Iterable[Any]) -> None:
        """Forget everything, then replay the batch headers of the log as it is now."""
        self._producers.clear()
        self.record_batches(headers)

    def clear(self) -> None:
        self._producers.clear()
