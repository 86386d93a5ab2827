"""The transaction coordinator (KIP-98), sans-I/O: every decision about a transactional id.

The driver (``driver.TxnDriver``, under the broker and the simulator) hands it requests and
what happened to the effects it asked for; it answers with effects, in order:

* ``WriteTxnLog``: append the new state of a transactional id to its ``__transaction_state``
  partition with acks=all, then call :meth:`TxnCoordinator.on_log_written` with the outcome. The
  state in memory changes only when the write succeeded: the log leads, memory follows, so a new
  coordinator that replays the log knows everything a client was told.
* ``SendMarkers``: write a COMMIT or ABORT marker for (producer id, epoch) to every partition of
  the transaction, through each partition's leader (WriteTxnMarkers), retrying until every one
  answered; then :meth:`on_markers_written`.
* ``Reply``: answer the request ``request_id`` (the driver keeps the requests waiting).

One write at a time per transactional id (Kafka's ``pendingState``): a request that arrives while
one is in flight is answered CONCURRENT_TRANSACTIONS, and the client retries.

A commit, step by step (Kafka's two-phase commit through the log)::

    EndTxn(commit) -> WriteTxnLog(PrepareCommit) -> Reply(NONE) to the producer
                   -> SendMarkers(COMMIT) -> WriteTxnLog(CompleteCommit)

Once PrepareCommit is in the log the transaction *is* committed: a coordinator that takes over
(:meth:`load`) sends the COMMIT markers again and completes it; a PrepareAbort likewise aborts.
An Ongoing transaction that a new coordinator finds is aborted when its timeout passes.

Fencing: InitProducerId for a transactional id bumps its producer epoch (answers say
PRODUCER_FENCED; the handlers turn it into INVALID_PRODUCER_EPOCH for versions before KIP-588). If the old producer's
transaction is still Ongoing it is aborted first with the bumped epoch (PrepareEpochFence, in
memory only, then PrepareAbort): its markers carry the new epoch, so partition leaders refuse the
zombie's later writes, and the coordinator answers its requests PRODUCER_FENCED.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from floodmark.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from floodmark.errors import ErrorCode
from floodmark.replication.transactions.state import (
    MAX_PRODUCER_EPOCH,
    TV_2,
    TxnMetadata,
    TxnPartition,
    TxnState,
)

_S = TxnState


@dataclass(frozen=True, slots=True)
class WriteTxnLog:
    txn_partition: int
    metadata: TxnMetadata


@dataclass(frozen=True, slots=True)
class SendMarkers:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TxnPartition]
    coordinator_epoch: int
    txn_partition: int


@dataclass(frozen=True, slots=True)
class Reply:
    request_id: int
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


TxnEffect = WriteTxnLog | SendMarkers | Reply


@dataclass(slots=True)
class _Entry:
    metadata: TxnMetadata
    txn_partition: int
    pending: TxnMetadata | None = None  # written now; memory moves to it when the write succeeds
    waiter: int | None = None  # the request answered when that write ends
    complete_failed: bool = False  # markers written, the Complete record not yet: retried


# How a failed ``__transaction_state`` append reaches the client (Kafka's
# TransactionStateManager): the coordinator is moving or the log cannot take writes now.
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


# A partition leader's answer to WriteTxnMarkers that means "not now, ask again" (Kafka's marker
# handler retries these); any other error is reported and the partition is left alone. The one
# driver (``driver.TxnDriver``) retries by this list.
RETRIABLE_MARKER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.FENCED_LEADER_EPOCH,
})

def write_error(error: ErrorCode) -> ErrorCode:
    """What a client is told when its state could not be written."""
    return _WRITE_ERRORS.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)


class TxnCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions this broker leads.

    ``allocate_producer_id`` is the one port: a new producer id (the controller hands them out).
    ``max_timeout_ms`` is ``transaction.max.timeout.ms``; ``expiration_ms``
    ``transactional.id.expiration.ms``: an id without a transaction that long is removed (Dead,
    written as a tombstone).
    """

    def __init__(self, *, max_timeout_ms: int, allocate_producer_id: Callable[[], int],
                 expiration_ms: int = 604_800_000) -> None:
        self.max_timeout_ms = max_timeout_ms
        self.expiration_ms = expiration_ms
        self._allocate = allocate_producer_id
        self._entries: dict[str, _Entry] = {}
        self._loaded: dict[int, int] = {}  # txn partition -> coordinator epoch (its leader epoch)

    # -- ownership --------------------------------------------------------------------------------
    def loaded(self) -> Mapping[int, int]:
        """txn partition -> coordinator epoch, for every partition this coordinator serves."""
        return self._loaded

    def load(self, txn_partition: int, coordinator_epoch: int,
             transactions: Mapping[str, TxnMetadata], now_ms: int) -> list[TxnEffect]:
        """This broker now leads ``txn_partition`` (leader epoch ``coordinator_epoch``): take over
        the transactions its log holds, and finish the commits and aborts that were under way."""
        out = self.unload(txn_partition)
        self._loaded[txn_partition] = coordinator_epoch
        for txn_id, m in transactions.items():
            self._entries[txn_id] = _Entry(m, txn_partition)
            if m.state.is_prepare:
                out.append(self._markers(txn_id))
        return out

    def unload(self, txn_partition: int) -> list[TxnEffect]:
        """This broker no longer leads ``txn_partition``: forget its transactions; requests
        waiting on a write there are told NOT_COORDINATOR (the client finds the new one)."""
        self._loaded.pop(txn_partition, None)
        out: list[TxnEffect] = []
        for txn_id, e in list(self._entries.items()):
            if e.txn_partition == txn_partition:
                if e.waiter is not None:
                    out.append(Reply(e.waiter, ErrorCode.NOT_COORDINATOR))
                del self._entries[txn_id]
        return out

    def _check_loaded(self, txn_partition: int) -> ErrorCode:
        return ErrorCode.NONE if txn_partition in self._loaded else ErrorCode.NOT_COORDINATOR

    # -- InitProducerId ---------------------------------------------------------------------------
    def init_producer_id(self, request_id: int, txn_partition: int, transactional_id: str,
                         txn_timeout_ms: int, now_ms: int, *, expected_producer_id: int = -1,
                         expected_epoch: int = NO_PRODUCER_EPOCH) -> list[TxnEffect]:
        def answer(error: ErrorCode, pid: int = -1, epoch: int = -1) -> list[TxnEffect]:
            return [Reply(request_id, error, pid, epoch)]

        if not transactional_id:
            return answer(ErrorCode.INVALID_REQUEST)
        if not 0 < txn_timeout_ms <= self.max_timeout_ms:
            return answer(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if (err := self._check_loaded(txn_partition)) is not ErrorCode.NONE:
            return answer(err)
        entry = self._entries.get(transactional_id)
        if entry is None:
            # A new transactional id: a fresh producer id; its epoch 0 comes with the write.
            entry = _Entry(TxnMetadata(transactional_id, self._allocate(), NO_PRODUCER_EPOCH,
                                       txn_timeout_ms, _S.EMPTY, frozenset(), -1, now_ms),
                           txn_partition)
            self._entries[transactional_id] = entry
        if entry.pending is not None:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        m = entry.metadata
        if expected_producer_id >= 0:
            # KIP-360: a producer that knows its id asks for a bump of its own epoch.
            if expected_producer_id != m.producer_id or expected_epoch not in (
                    m.producer_epoch, m.last_producer_epoch):
                return answer(ErrorCode.PRODUCER_FENCED)
            if (expected_epoch == m.last_producer_epoch != m.producer_epoch
                    and m.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)):
                # The bump it asked for happened (its answer was lost): the same answer.
                return answer(ErrorCode.NONE, m.producer_id, m.producer_epoch)
        if m.state.is_prepare or m.state in (_S.DEAD, _S.PREPARE_EPOCH_FENCE):
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if m.state is _S.ONGOING:
            # Fence the old producer and abort its transaction under the new epoch; this
            # producer retries (CONCURRENT_TRANSACTIONS) and gets its epoch once it is done.
            effects = self._fence_and_abort(entry, now_ms)
            return [*effects, Reply(request_id, ErrorCode.CONCURRENT_TRANSACTIONS)]
        if m.producer_epoch + 1 > 32766:  # exhausted: a new producer id, epoch 0 (Kafka)
            pid, epoch, last = self._allocate(), 0, NO_PRODUCER_EPOCH
        else:
            pid, epoch, last = m.producer_id, m.producer_epoch + 1, m.producer_epoch
        target = m.transit(_S.EMPTY, now_ms, producer_id=pid, producer_epoch=epoch,
                           last_producer_epoch=last, txn_timeout_ms=txn_timeout_ms,
                           partitions=frozenset(), txn_start_timestamp_ms=-1)
        return self._write(entry, target, request_id)

    def _fence_and_abort(self, entry: _Entry, now_ms: int) -> list[TxnEffect]:
        m = entry.metadata
        epoch = m.producer_epoch + 1 if m.producer_epoch + 1 <= 32766 else m.producer_epoch
        # Version 0 from here: the fenced producer's next EndTxn (one epoch behind) must be
        # told PRODUCER_FENCED, not taken for a retry of a transaction version 2 bump.
        fence = m.transit(_S.PREPARE_EPOCH_FENCE, now_ms, producer_epoch=epoch,
                          last_producer_epoch=m.producer_epoch, client_transaction_version=0)
        return self._write(entry, fence.transit(_S.PREPARE_ABORT, now_ms), None)

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------------
    def _check_producer(self, txn_partition: int, transactional_id: str, producer_id: int,
                        producer_epoch: int, *, to_change: bool = False
                        ) -> tuple[ErrorCode, _Entry | None]:
        """The producer's own transactional id, at its current epoch, on a loaded partition:
        its entry, or why not. ``to_change``: a request that writes the transaction
        (AddPartitionsToTxn, EndTxn) also needs no write of it in flight
        (CONCURRENT_TRANSACTIONS: the client retries)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        if (err := self._check_loaded(txn_partition)) is not ErrorCode.NONE:
            return err, None
        entry = self._entries.get(transactional_id)
        if entry is None or entry.metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if entry.metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if to_change and entry.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, entry

    def add_partitions(self, request_id: int, txn_partition: int, transactional_id: str,
                       producer_id: int, producer_epoch: int, partitions: Iterable[TxnPartition],
                       now_ms: int) -> list[TxnEffect]:
        err, entry = self._check_producer(txn_partition, transactional_id, producer_id,
                                          producer_epoch, to_change=True)
        if entry is None:
            return [Reply(request_id, err)]
        m = entry.metadata
        wanted = frozenset(partitions)
        if m.state.is_prepare:
            return [Reply(request_id, ErrorCode.CONCURRENT_TRANSACTIONS)]
        if m.state not in (_S.EMPTY, _S.ONGOING, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            return [Reply(request_id, ErrorCode.INVALID_TXN_STATE)]
        if m.state is _S.ONGOING and wanted <= m.partitions:
            return [Reply(request_id, ErrorCode.NONE)]  # nothing new: no write
        start_ms = m.txn_start_timestamp_ms if m.state is _S.ONGOING else now_ms
        target = m.transit(_S.ONGOING, now_ms, partitions=m.partitions | wanted,
                           txn_start_timestamp_ms=start_ms)
        return self._write(entry, target, request_id)

    def verify_partitions(self, txn_partition: int, transactional_id: str, producer_id: int,
                          producer_epoch: int, partitions: Iterable[TxnPartition]
                          ) -> dict[TxnPartition, ErrorCode]:
        """KIP-890 ``verifyOnly``: is each partition in the producer's ongoing transaction?"""
        err, entry = self._check_producer(txn_partition, transactional_id, producer_id,
                                          producer_epoch)
        if entry is None:
            return dict.fromkeys(partitions, err)
        m = entry.metadata
        return {tp: ErrorCode.NONE if m.state is _S.ONGOING and tp in m.partitions
                else ErrorCode.INVALID_TXN_STATE for tp in partitions}

    # -- EndTxn -----------------------------------------------------------------------------------
    def end_txn(self, request_id: int, txn_partition: int, transactional_id: str,
                producer_id: int, producer_epoch: int, committed: bool,
                now_ms: int, *, transaction_version: int = 0) -> list[TxnEffect]:
        """EndTxn. ``transaction_version`` 2 (EndTxn v5, KIP-890 part 2): the epoch is bumped as
        the transaction ends (its markers carry the new one, so a late write of the old epoch
        is fenced at every partition), the answer names the new (producer id, epoch), and an
        abort with no transaction open is allowed (it only bumps the epoch)."""
        tv2 = transaction_version >= TV_2
        if not transactional_id:
            return [Reply(request_id, ErrorCode.INVALID_REQUEST)]
        if (err := self._check_loaded(txn_partition)) is not ErrorCode.NONE:
            return [Reply(request_id, err)]
        entry = self._entries.get(transactional_id)
        if entry is None or entry.metadata.producer_epoch == NO_PRODUCER_EPOCH:
            return [Reply(request_id, ErrorCode.INVALID_PRODUCER_ID_MAPPING)]
        m = entry.metadata
        state = m.state
        v2 = m.bumps_epoch_per_transaction
        # A retry of a transaction version 2 EndTxn carries the epoch before its bump (or, when
        # the bump handed out a new producer id, the old id at the last usable epoch).
        retry_of_bump = v2 and producer_id == m.producer_id and producer_epoch + 1 == (
            m.producer_epoch)
        retry_of_overflow = (v2 and producer_id == m.previous_producer_id != m.producer_id
                             and producer_epoch == MAX_PRODUCER_EPOCH - 1
                             and m.producer_epoch == 0)
        if producer_id != m.producer_id and not retry_of_overflow:
            return [Reply(request_id, ErrorCode.INVALID_PRODUCER_ID_MAPPING)]
        same_epoch = producer_epoch == m.producer_epoch
        if not tv2:
            # An EndTxn below v5 goes Kafka's transaction version 1 way (``endTransactionWithTV1``)
            # whatever version wrote the transaction: the epoch must be the current one. A retry
            # of a bump is an EndTxn v5's alone; one below v5 at the epoch before the bump is
            # fenced (Kafka 4.1.1, differential scenario end_txn_v0_retries_a_v2_bump).
            valid = same_epoch
        elif v2 and state.is_prepare:
            valid = retry_of_bump or same_epoch
        elif v2 and state.is_complete:
            valid = retry_of_bump or retry_of_overflow or same_epoch
        else:
            valid = same_epoch
        if not valid:
            return [Reply(request_id, ErrorCode.PRODUCER_FENCED)]
        if entry.pending is not None or state.is_prepare:
            # A write in flight, or the markers of the transaction that ended still being
            # written (Kafka's pending Complete* transition from PrepareCommit/PrepareAbort):
            # whatever this EndTxn asks, commit or abort, the client is told to try again.
            # Kafka 4.1.1 answers so too: a transaction version 2 producer that commits and at
            # once begins and aborts the next transaction (librdkafka's 0098 test 2) has its
            # abort answered CONCURRENT_TRANSACTIONS until the commit's markers are written.
            return [Reply(request_id, ErrorCode.CONCURRENT_TRANSACTIONS)]
        same = _S.COMPLETE_COMMIT if committed else _S.COMPLETE_ABORT
        preparing = _S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT
        if state is _S.ONGOING:
            return self._write(entry, self._prepare(m, preparing, tv2, now_ms), request_id)
        if state is same and (retry_of_bump or retry_of_overflow or not tv2):
            # a retry of an EndTxn that was done: the same answer (below v5: at the current
            # epoch, whatever version wrote the transaction, as Kafka's TV1 path)
            pid, epoch = m.client_producer()
            return [Reply(request_id, ErrorCode.NONE, pid, epoch)]
        if (tv2 and not committed and same_epoch
                and state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)):
            # KIP-890 part 2: the client cannot know whether a Produce it gave up on added a
            # partition, so it may abort with nothing open: nothing to mark, the epoch bumped.
            return self._write(entry, self._prepare(m, _S.PREPARE_ABORT, tv2, now_ms,
                                                    partitions=frozenset()), request_id)
        return [Reply(request_id, ErrorCode.INVALID_TXN_STATE)]

    def _prepare(self, m: TxnMetadata, preparing: TxnState, tv2: bool, now_ms: int,
                 **changes: object) -> TxnMetadata:
        """PrepareCommit/PrepareAbort; under transaction version 2 with the epoch bumped (a new
        producer id put aside once the epoch is exhausted: the markers use the last epoch)."""
        if not tv2:
            return m.transit(preparing, now_ms, client_transaction_version=0, **changes)
        next_pid = self._allocate() if m.epoch_exhausted else NO_PRODUCER_ID
        start_ms = m.txn_start_timestamp_ms if m.state is _S.ONGOING else now_ms
        return m.transit(preparing, now_ms, producer_epoch=m.producer_epoch + 1,
                         last_producer_epoch=m.producer_epoch, next_producer_id=next_pid,
                         client_transaction_version=TV_2, txn_start_timestamp_ms=start_ms,
                         **changes)

    # -- what the driver reports ------------------------------------------------------------------
    def _write(self, entry: _Entry, target: TxnMetadata, waiter: int | None) -> list[TxnEffect]:
        assert entry.pending is None, entry
        entry.pending = target
        entry.waiter = waiter
        return [WriteTxnLog(entry.txn_partition, target)]

    def _markers(self, transactional_id: str) -> SendMarkers:
        e = self._entries[transactional_id]
        m = e.metadata
        return SendMarkers(transactional_id, m.producer_id, m.producer_epoch,
                           m.state is _S.PREPARE_COMMIT, m.partitions,
                           self._loaded[e.txn_partition], e.txn_partition)

    def on_log_written(self, transactional_id: str, error: ErrorCode,
                       now_ms: int) -> list[TxnEffect]:
        """The write of this id's pending state ended with ``error`` (NONE: it is committed)."""
        entry = self._entries.get(transactional_id)
        if entry is None or entry.pending is None:
            return []  # unloaded meanwhile: the new coordinator has the log
        target, waiter = entry.pending, entry.waiter
        entry.pending = entry.waiter = None
        out: list[TxnEffect] = []
        if error is not ErrorCode.NONE:
            if target.state.is_complete:
                entry.complete_failed = True  # retried by ``tick``
            if waiter is not None:
                out.append(Reply(waiter, write_error(error)))
            return out
        if target.state is _S.DEAD:
            del self._entries[transactional_id]  # the tombstone is written: the id is gone
            return out
        entry.metadata = target
        entry.complete_failed = False
        if waiter is not None:
            out.append(Reply(waiter, ErrorCode.NONE, *target.client_producer()))
        if target.state.is_prepare:
            out.append(self._markers(transactional_id))
        return out

    def on_markers_written(self, transactional_id: str, producer_epoch: int,
                           now_ms: int) -> list[TxnEffect]:
        """Every partition of the transaction has its marker: write CompleteCommit/Abort."""
        entry = self._entries.get(transactional_id)
        if entry is None or entry.pending is not None:
            return []
        m = entry.metadata
        if not m.state.is_prepare or m.producer_epoch != producer_epoch:
            return []
        done = _S.COMPLETE_COMMIT if m.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        if m.next_producer_id != NO_PRODUCER_ID:
            # The bump exhausted the epoch: the producer id put aside takes over, at epoch 0.
            complete = m.transit(done, now_ms, partitions=frozenset(),
                                 producer_id=m.next_producer_id, producer_epoch=0,
                                 previous_producer_id=m.producer_id,
                                 next_producer_id=NO_PRODUCER_ID,
                                 last_producer_epoch=NO_PRODUCER_EPOCH)
        else:
            complete = m.transit(done, now_ms, partitions=frozenset())
        return self._write(entry, complete, None)

    def tick(self, now_ms: int) -> list[TxnEffect]:
        """Periodic work: abort transactions whose ``transaction.timeout.ms`` has passed (the
        producer is fenced: its epoch is bumped), retry Complete records that failed, remove
        ids idle past ``transactional.id.expiration.ms``."""
        out: list[TxnEffect] = []
        for txn_id, e in self._entries.items():
            if e.pending is not None:
                continue
            m = e.metadata
            if m.state is _S.ONGOING and m.txn_start_timestamp_ms + m.txn_timeout_ms <= now_ms:
                out.extend(self._fence_and_abort(e, now_ms))
            elif e.complete_failed and m.state.is_prepare:
                out.extend(self.on_markers_written(txn_id, m.producer_epoch, now_ms))
            elif (m.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
                  and m.producer_epoch != NO_PRODUCER_EPOCH
                  and m.txn_last_update_timestamp_ms + self.expiration_ms <= now_ms):
                out.extend(self._write(e, m.transit(_S.DEAD, now_ms), None))
        return out

    # -- DescribeTransactions / ListTransactions --------------------------------------------------
    def describe(self, txn_partition: int, transactional_id: str
                 ) -> tuple[ErrorCode, TxnMetadata | None]:
        if (err := self._check_loaded(txn_partition)) is not ErrorCode.NONE:
            return err, None
        entry = self._entries.get(transactional_id)
        if entry is None or entry.metadata.producer_epoch == NO_PRODUCER_EPOCH:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, entry.metadata

    def transactions(self) -> list[TxnMetadata]:
        """Every transactional id this coordinator serves (that has been written)."""
        return [e.metadata for e in self._entries.values()
                if e.metadata.producer_epoch != NO_PRODUCER_EPOCH]


@dataclass(slots=True)
class ListFilter:
    """ListTransactions' filters (empty: everything)."""

    states: frozenset[TxnState] = field(default_factory=frozenset)
    producer_ids: frozenset[int] = field(default_factory=frozenset)
    min_duration_ms: int = -1
    # v2 (KIP-1152): the whole transactional id must match (Java's ``Matcher.matches``)
    transactional_id_pattern: re.Pattern[str] | None = None

    def matches(self, m: TxnMetadata, now_ms: int) -> bool:
        if self.states and m.state not in self.states:
            return False
        if (self.transactional_id_pattern is not None
                and self.transactional_id_pattern.fullmatch(m.transactional_id) is None):
            return False
        if self.producer_ids and m.producer_id not in self.producer_ids:
            return False
        if self.min_duration_ms >= 0:
            return (m.state is _S.ONGOING
                    and now_ms - m.txn_start_timestamp_ms >= self.min_duration_ms)
        return True
