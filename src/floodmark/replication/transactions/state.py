"""The state of one transactional id, as Kafka's ``TransactionMetadata`` keeps it.

Kafka's states and their numbers (the byte stored in ``__transaction_state``), and which state
each one may follow, as one table (``VALID_PREVIOUS``)::

    Empty              <- Empty, CompleteCommit, CompleteAbort          (InitProducerId)
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitionsToTxn)
    PrepareCommit      <- Ongoing                                       (EndTxn commit)
    PrepareAbort       <- Ongoing, PrepareEpochFence,                   (EndTxn abort, timeout,
                          Empty, CompleteCommit, CompleteAbort           a newer producer; from
                                                                         no transaction only with
                                                                         transaction.version 2)
    CompleteCommit     <- PrepareCommit                                 (every marker written)
    CompleteAbort      <- PrepareAbort                                  (every marker written)
    Dead               <- Empty, CompleteCommit, CompleteAbort          (transactional id expired)
    PrepareEpochFence  <- Ongoing                                       (in memory only: the
                                                                         epoch bump that fences
                                                                         the old producer before
                                                                         its transaction aborts)

A transition is a new ``TxnMetadata`` value (frozen); ``transit`` refuses one the table does not
allow, so no code path can skip a state.

Transaction version 2 (KIP-890 part 2, ``transaction.version`` 2; a client says it uses it by
sending EndTxn v5): every EndTxn bumps the producer epoch. ``client_transaction_version`` is the
version the last EndTxn came with (Kafka's ``clientTransactionVersion``); it decides how a retried
EndTxn is recognised (its epoch is one behind). When the bump would reach the last epoch, a new
producer id is handed out: the markers still go out under the old id at the last epoch, the new
id waits in ``next_producer_id`` and becomes the producer id (epoch 0) when the transaction
completes; the old one is kept as ``previous_producer_id`` so a retry of that EndTxn is known.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from floodmark.constants import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

MAX_PRODUCER_EPOCH = 32767
TxnPartition = tuple[str, int]

TV_2 = 2
"""``transaction.version`` 2: an epoch bump at every EndTxn, partitions and groups added to a
transaction by the brokers (KIP-890 part 2). Levels 0 and 1 keep the protocol of KIP-98."""


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` ids (the byte in a ``__transaction_state`` value)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (``PrepareCommit``)."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
          TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
          TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
          TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {v: k for k, v in _NAMES.items()}

_S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY,
                                 _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransition(AssertionError):
    """A transition the state table does not allow: a bug in the coordinator, never input."""


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """One transactional id's state; ``partitions`` are those of the current transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TxnPartition] = field(default_factory=frozenset)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    # The epoch before the last bump (a retried InitProducerId or EndTxn of that producer is
    # recognised, not fenced); in memory only, as Kafka's lastProducerEpoch.
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # Transaction version 2 (see the module's docstring); written to the log (value v1).
    client_transaction_version: int = 0
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID

    def __post_init__(self) -> None:
        assert self.producer_epoch <= MAX_PRODUCER_EPOCH, self
        assert self.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                              TxnState.PREPARE_EPOCH_FENCE) or not self.partitions, (
            f"{self.state.kafka_name} with partitions {sorted(self.partitions)}")

    def transit(self, state: TxnState, now_ms: int, **changes: object) -> TxnMetadata:
        """This metadata moved to ``state`` at ``now_ms`` (with ``changes``), if the table
        allows it."""
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"transactional id {self.transactional_id!r}: "
                                    f"{self.state.kafka_name} -> {state.kafka_name}")
        return replace(self, state=state, txn_last_update_timestamp_ms=now_ms,
                       **changes)  # type: ignore[arg-type]

    def epoch_bumped(self) -> tuple[int, int]:
        """(producer id, epoch) after one bump; the id stays while the epoch has room (Kafka
        hands out a new id when it would overflow; the coordinator does that, not this)."""
        return self.producer_id, self.producer_epoch + 1

    @property
    def bumps_epoch_per_transaction(self) -> bool:
        """Written by an EndTxn of transaction version 2 (KIP-890 part 2)."""
        return self.client_transaction_version >= TV_2

    def client_producer(self) -> tuple[int, int]:
        """The (producer id, epoch) a client is told: the next producer id at epoch 0 while one
        waits for the transaction to complete (an exhausted epoch), else the current pair."""
        if self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch

    @property
    def epoch_exhausted(self) -> bool:
        """One more bump would pass the last epoch a producer may have."""
        return self.producer_epoch >= MAX_PRODUCER_EPOCH - 1
