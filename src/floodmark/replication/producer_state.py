"""Idempotent-producer state per partition: sequence checks and duplicate detection.

Kafka keeps, per producer id, its epoch and the metadata of its last five appended batches. A batch
whose (first, last) sequence matches one of those five is a retry of something already written:
answer success with the ORIGINAL base offset and append nothing. Otherwise the first sequence must
follow the last one written (mod 2^31), a new epoch must start at sequence 0, an older epoch is
fenced. The state is rebuilt from the log's batch headers on recovery.

One deliberate difference from Kafka (``docs/wire.md``): a batch written before the producer's
last ABORT marker is never a duplicate. Kafka keeps the aborted batches in the duplicate window
when the epoch does not change, so a client that purges an unacknowledged batch on abort and
sends a *new* record with the same epoch and sequence in the next transaction (librdkafka does:
``rd_kafka_toppar_purge_queues`` advances ``epoch_base_msgid`` without an epoch bump) is told
its record is written at the aborted batch's offset, and the transaction commits without it.
floodmark answers such a batch OUT_OF_ORDER_SEQUENCE_NUMBER (its sequence is not the next one),
on which clients abort and bump the epoch (KIP-360); a well-behaved client never re-sends a
batch of an ended transaction, so it sees no difference.

Transactions (KIP-98), the partition's side: a producer's first transactional batch opens its
transaction at that batch's offset; a control batch (a commit or abort marker, written by the
leader for the transaction coordinator's WriteTxnMarkers) closes it. A completed transaction
stays *unstable* until the high watermark passes its marker (Kafka's ``unreplicatedTxns``): until
then a failover may lose the marker, and the transaction is open again on the new leader.
:meth:`ProducerStateTable.first_unstable_offset` is the first offset of the oldest transaction
that is open or not yet replicated; ``Partition.last_stable_offset`` bounds it by the HW. An
abort yields an ``AbortedTxn`` (producer id, first offset, last offset = the marker, and the
last stable offset right after it) for the segment's ``.txnindex``: read_committed consumers
use the list to drop aborted records. Leader and follower run the same :meth:`record` on every
batch they append, so both have the same open transactions and the same LSO rule.

KIP-890 part 1, the leader's verification guard (Kafka's ``VerificationStateEntry``): before
a producer's first transactional batch of a transaction reaches a partition, the leader asks
the transaction coordinator whether the partition is in that transaction
(``replication.txn_verification``). The question is asynchronous, so the table hands out a
:class:`VerificationGuard` when it is asked (:meth:`start_verification`) and forgets it when a
marker or a transactional batch of that producer is recorded: a transaction that ended while
the question was out (its marker written meanwhile) leaves the answer without a guard, and the
append is refused (:meth:`verified`) rather than opening a transaction nobody will end. A
transaction version 2 guard outlives a marker at its own epoch, which ends the transaction
before the one asked about (:meth:`_outlives`).

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

from floodmark.constants import NO_PRODUCER_ID
from floodmark.errors import ErrorCode
from floodmark.records import (
    CorruptRecordError,
    EndTxnMarker,
    read_end_txn_marker,
)

MAX_CACHED_BATCHES = 5
MAX_VERIFICATIONS = 10_000
"""Verifications a partition keeps open at once (one per producer); past it the oldest is
forgotten, and its answer, when it comes, finds no guard (the batch is refused, retriably for
the client's next attempt)."""
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
    is_control: bool = False
    marker: EndTxnMarker | None = None
    """A control batch's commit/abort marker (None: not a control batch, or one a client sent,
    which the produce path refuses without reading it)."""
    max_timestamp: int = -1
    """The batch's max timestamp (the producer's last timestamp, DescribeProducers)."""

    @classmethod
    def from_header(cls, h: Any) -> BatchMeta:
        """From a ``floodmark.records.BatchHeader`` of a batch in the log: a control batch's
        marker is decoded from the bytes the header views, which must be the whole batch. A
        marker that cannot be read is corruption (the batch was validated when appended) and
        raises CorruptRecordError naming its offset: never "not a marker", which would leave
        its transaction open and misplace the next abort."""
        is_control = bool(h.attributes & 0x20)
        marker = None
        if is_control:
            try:
                marker = read_end_txn_marker(h)
            except CorruptRecordError as exc:
                raise CorruptRecordError(
                    f"the transaction marker at offset {h.base_offset} (producer id "
                    f"{h.producer_id}, epoch {h.producer_epoch}) cannot be read: {exc}",
                    h.position) from exc
        return cls(h.producer_id, h.producer_epoch, h.base_sequence, h.records_count,
                   h.last_offset_delta, bool(h.attributes & 0x10), is_control, marker,
                   h.max_timestamp)

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.last_offset_delta) % _SEQ_MOD


def batch_metas(records: bytes | memoryview) -> list[BatchMeta] | None:
    """Headers of the batches in a record set a client sent, or None if it is not a
    well-framed sequence of magic-2 batches (the CRC and the rest are validated by storage on
    append). A client's control batch is flagged, not read: the produce path refuses it."""
    out = []
    pos = 0
    end = len(records)
    while pos < end:
        if end - pos < _HEADER.size:
            return None
        (_base, length, _ple, magic, _crc, attrs, last_delta, _bts, max_ts,
         pid, pepoch, base_seq, count) = _HEADER.unpack_from(records, pos)
        if magic != 2 or length < _HEADER.size - 12 or pos + 12 + length > end:
            return None
        out.append(BatchMeta(pid, pepoch, base_seq, count, last_delta, bool(attrs & 0x10),
                             bool(attrs & 0x20), max_timestamp=max_ts))
        pos += 12 + length
    return out or None


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry of a segment's aborted transactions index (Kafka's ``AbortedTxn``): the
    transaction of ``producer_id`` spanning [``first_offset``, ``last_offset``] (its abort
    marker), and the LSO right after the abort (the first offset of the oldest transaction still
    open then, else the marker's offset + 1) so that a search can stop early."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


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
    current_txn_first_offset: int = -1
    """The first offset of this producer's open transaction (-1: none open)."""
    coordinator_epoch: int = -1
    """The coordinator epoch of the last marker written for this producer."""
    last_timestamp: int = -1
    """The max timestamp of the producer's last batch or marker (DescribeProducers)."""
    last_abort_offset: int = -1
    """The offset of the last ABORT marker of this producer under this epoch (-1: none). A
    batch written before it belongs to an aborted transaction and is never answered as a
    duplicate again (see :meth:`ProducerStateTable.check`)."""

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


@dataclass(frozen=True, slots=True)
class VerificationGuard:
    """One verification of (producer id, epoch) at one partition: the append that follows the
    coordinator's answer must present the guard the table still holds (``token`` is unique
    within the table)."""

    producer_id: int
    producer_epoch: int
    token: int
    supports_epoch_bump: bool = False
    """Asked for a transaction version 2 producer (Produce v12+, the coordinator adds the
    partition): its transactions end with markers of the next epoch, so a marker at the guard's
    own epoch ends the transaction before this one, not this one (Kafka 4.1's
    ``VerificationStateEntry.supportsEpochBump``)."""


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    error: ErrorCode
    duplicate_of: CachedBatch | None = None


_OK = SequenceCheck(ErrorCode.NONE)


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self._open: dict[int, int] = {}
        """producer id -> first offset of its open transaction, in first-offset order (batches
        are recorded in log order, so insertion order is that order): the oldest is the first
        item, found in O(1) for the LSO and every abort, whatever the number of producers."""
        self._unreplicated: list[CompletedTxn] = []  # markers at or above the HW
        self._high_watermark = 0  # the last HW this table was told (see on_high_watermark)
        self._log_start_offset = 0  # the last one it was told (see on_log_start_offset)
        self._verifying: dict[int, VerificationGuard] = {}  # producer id -> its open question
        self._next_token = 0

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def active(self) -> list[tuple[int, ProducerEntry]]:
        """Every producer the partition remembers, by producer id (DescribeProducers)."""
        return sorted(self._producers.items())

    # -- checks before an append --------------------------------------------------------------
    def check(self, meta: BatchMeta, aborted_batches_are_duplicates: bool = False
              ) -> SequenceCheck:
        """A client's data batch: epoch fencing, duplicates, sequence order, and the
        transaction rule (a producer with an open transaction writes only transactional
        batches until its marker: INVALID_TXN_STATE).

        ``aborted_batches_are_duplicates``: Kafka's rule, under which a batch written before
        the producer's last ABORT marker still answers a retry (it loses a committed record
        with librdkafka; see the module's docstring). Only so the simulator can show it."""
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
            return self._check_txn_state(entry, meta)
        for cached in entry.batches:
            if (cached.first_sequence == meta.base_sequence
                    and cached.last_sequence == meta.last_sequence
                    and (aborted_batches_are_duplicates
                         or cached.first_offset > entry.last_abort_offset)):
                return SequenceCheck(ErrorCode.DUPLICATE_SEQUENCE_NUMBER, cached)
        expected = (entry.last_sequence + 1) % _SEQ_MOD
        if meta.base_sequence != expected:
            return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return self._check_txn_state(entry, meta)

    @staticmethod
    def _check_txn_state(entry: ProducerEntry, meta: BatchMeta) -> SequenceCheck:
        if entry.current_txn_first_offset >= 0 and not meta.is_transactional:
            return SequenceCheck(ErrorCode.INVALID_TXN_STATE)
        return _OK

    def check_marker(self, producer_id: int, producer_epoch: int,
                     coordinator_epoch: int) -> ErrorCode:
        """A marker from the transaction coordinator: an older producer epoch is fenced
        (INVALID_PRODUCER_EPOCH: the transaction was completed under a newer epoch), an older
        coordinator epoch too (TRANSACTION_COORDINATOR_FENCED: a newer coordinator owns it)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if producer_epoch < entry.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    # -- KIP-890 part 1: the verification guard ----------------------------------------------
    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Has this producer, at this epoch, a transaction open here (begun by a batch already
        verified, or written before verification existed)?"""
        entry = self._producers.get(producer_id)
        return (entry is not None and entry.current_txn_first_offset >= 0
                and entry.producer_epoch == producer_epoch)

    def start_verification(self, producer_id: int, producer_epoch: int,
                           supports_epoch_bump: bool = False) -> VerificationGuard | None:
        """A transactional batch of (producer id, epoch) is about to be verified with the
        coordinator: the guard its append must present. None: its transaction is open here
        already, nothing to verify. The guard of a question still out for the same epoch is
        shared (a client's retry while the first answer is pending). ``supports_epoch_bump``:
        the producer runs transaction version 2 (see :class:`VerificationGuard`)."""
        if self.in_transaction(producer_id, producer_epoch):
            return None
        held = self._verifying.get(producer_id)
        if held is not None and held.producer_epoch == producer_epoch:
            return held
        self._verifying.pop(producer_id, None)
        if len(self._verifying) >= MAX_VERIFICATIONS:
            del self._verifying[next(iter(self._verifying))]
        self._next_token += 1
        guard = VerificationGuard(producer_id, producer_epoch, self._next_token,
                                  supports_epoch_bump)
        self._verifying[producer_id] = guard
        return guard

    def end_verification(self, guard: VerificationGuard) -> None:
        """The coordinator refused (or could not answer): forget the guard if it is still
        this one."""
        if self._verifying.get(guard.producer_id) == guard:
            del self._verifying[guard.producer_id]

    def verified(self, meta: BatchMeta, guard: VerificationGuard | None) -> bool:
        """May this transactional batch be appended where verification is on? Yes if its
        producer's transaction is open here at its epoch, or it presents the guard the table
        still holds for it (no marker and no other verification came in between)."""
        if self.in_transaction(meta.producer_id, meta.producer_epoch):
            return True
        return (guard is not None and guard.producer_id == meta.producer_id
                and guard.producer_epoch == meta.producer_epoch
                and self._verifying.get(meta.producer_id) == guard)

    def _outlives(self, meta: BatchMeta) -> bool:
        """Does the producer's open question outlive this transactional batch? Only a
        transaction version 2 guard, across a marker at its own epoch: that marker ends the
        transaction before the one being verified (version 2 markers carry the bumped epoch,
        the next transaction's), as Kafka 4.1's ``UnifiedLog.updateProducers`` keeps the entry.
        Without it, a Produce that opens the next transaction right after a commit, verified
        while the commit's markers land, is refused INVALID_TXN_STATE (Kafka's Java producer
        then aborts the transaction: librdkafka's 0098 test 0 lost its first record)."""
        held = self._verifying.get(meta.producer_id)
        return (held is not None and held.supports_epoch_bump and meta.is_control
                and meta.producer_epoch == held.producer_epoch)

    # -- after an append ----------------------------------------------------------------------
    def record(self, meta: BatchMeta, first_offset: int) -> AbortedTxn | None:
        """Remember an appended batch (leader append, follower append or log scan). A marker
        closes the producer's transaction; an abort returns the index entry to write."""
        if meta.producer_id == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(meta.producer_id)
        if entry is None or meta.producer_epoch > entry.producer_epoch:
            # A new epoch resets the sequences, never an open transaction (the coordinator
            # aborts it with the bumped epoch).
            old = entry
            entry = ProducerEntry(meta.producer_epoch)
            if old is not None:
                entry.current_txn_first_offset = old.current_txn_first_offset
                entry.coordinator_epoch = old.coordinator_epoch
            self._producers[meta.producer_id] = entry
        if meta.is_transactional and not self._outlives(meta):
            # a marker, or the batch a verification was for
            self._verifying.pop(meta.producer_id, None)
        entry.last_timestamp = meta.max_timestamp
        if meta.is_control:
            return self._complete(meta, entry, first_offset)
        entry.batches.append(
            CachedBatch(meta.base_sequence, meta.last_sequence, first_offset,
                        first_offset + meta.last_offset_delta)
        )
        if meta.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self._open_transaction(meta.producer_id, first_offset)
        return None

    def _open_transaction(self, producer_id: int, first_offset: int) -> None:
        youngest = next(reversed(self._open.values()), -1)
        self._open[producer_id] = first_offset
        if first_offset < youngest:  # recorded out of log order: keep the dict sorted anyway
            self._open = dict(sorted(self._open.items(), key=lambda item: item[1]))

    def _oldest_open(self) -> int | None:
        return next(iter(self._open.values()), None)

    def _complete(self, meta: BatchMeta, entry: ProducerEntry,
                  marker_offset: int) -> AbortedTxn | None:
        marker = meta.marker
        if marker is None:
            raise ValueError(f"producer {meta.producer_id}: a control batch at offset "
                             f"{marker_offset} recorded without its marker")
        entry.coordinator_epoch = marker.coordinator_epoch
        first = entry.current_txn_first_offset
        if first < 0:
            first = marker_offset  # a marker with nothing open (a retried or empty one)
        entry.current_txn_first_offset = -1
        if not marker.committed:
            entry.last_abort_offset = marker_offset
        self._open.pop(meta.producer_id, None)
        if marker_offset >= self._high_watermark:
            self._unreplicated.append(
                CompletedTxn(meta.producer_id, first, marker_offset, not marker.committed))
        if marker.committed:
            return None
        oldest = self._oldest_open()
        stable = marker_offset + 1 if oldest is None else oldest
        return AbortedTxn(meta.producer_id, first, marker_offset, stable)

    def record_batches(self, headers: Iterable[Any]) -> list[AbortedTxn]:
        """Remember batches that already carry their offsets (follower append, log scan):
        ``floodmark.records.BatchHeader`` values. Returns the aborts among them."""
        aborted: list[AbortedTxn] = []
        for h in headers:
            if h.producer_id != NO_PRODUCER_ID:
                done = self.record(BatchMeta.from_header(h), h.base_offset)
                if done is not None:
                    aborted.append(done)
        return aborted

    def rebuild(self, headers: Iterable[Any], high_watermark: int = 0) -> list[AbortedTxn]:
        """Forget everything, then replay the batch headers of the log as it is now (whose HW
        is ``high_watermark``). Returns every abort in the log, in offset order: what the
        segments' transaction indexes must hold."""
        self.clear()
        self._high_watermark = high_watermark
        return self.record_batches(headers)

    def clear(self) -> None:
        """Forget the producers and transactions (not the log start offset: the log keeps
        its own across a truncation)."""
        self._producers.clear()
        self._open.clear()
        self._unreplicated.clear()
        self._verifying.clear()

    # -- the last stable offset ---------------------------------------------------------------
    def on_high_watermark(self, high_watermark: int) -> None:
        """The partition's HW is now ``high_watermark``: completed transactions whose marker is
        below it are stable for good."""
        self._high_watermark = high_watermark
        if self._unreplicated:
            self._unreplicated = [c for c in self._unreplicated
                                  if c.last_offset >= high_watermark]

    def on_log_start_offset(self, log_start_offset: int) -> None:
        """The log now starts at ``log_start_offset`` (DeleteRecords, retention, a follower
        following its leader's, a log emptied to start there). Completed transactions whose
        marker is below it are gone for good; an open transaction whose first batches were
        deleted stays open (its marker is still to come), but is unstable from the log start
        on: the LSO is never below the log start offset (Kafka: ProducerStateManager
        .onLogStartOffsetIncremented, and UnifiedLog.maybeIncrementFirstUnstableOffset's
        max(first unstable offset, log start offset))."""
        self._log_start_offset = log_start_offset
        if self._unreplicated:
            self._unreplicated = [c for c in self._unreplicated
                                  if c.last_offset >= log_start_offset]

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction that is open, or completed by a marker
        at or above ``high_watermark``, raised to the log start offset; None when there is
        none."""
        first = self._oldest_open()
        for done in self._unreplicated:
            if done.last_offset >= high_watermark and (first is None
                                                       or done.first_offset < first):
                first = done.first_offset
        return first if first is None else max(first, self._log_start_offset)

    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction."""
        return dict(self._open)
