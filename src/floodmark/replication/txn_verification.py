"""KIP-890 part 1: a partition leader verifies a producer's transaction before its first
transactional batch opens it on the partition.

Without it (transaction versions 0 and 1, before KIP-890), a transactional batch that reaches
a leader after its transaction ended (a client's retry of a timed-out Produce, delayed in the
network while the application aborted) opens a transaction no coordinator knows of: no marker
ever closes it, and the last stable offset stays behind it for good (a *hanging transaction*:
every read_committed consumer stops there).

With ``transaction.partition.verification.enable`` (true by default, as in Kafka 3.6+), the
leader asks the transactional id's coordinator (AddPartitionsToTxn v4+ with ``verify_only``,
Kafka's batched broker-to-coordinator form) whether the partition is in the producer's
ongoing transaction, and appends only if it is. The question is asynchronous: the partition's
producer state hands out a guard when it is asked and forgets it when a marker of that
producer is written meanwhile (``producer_state.VerificationGuard``); the append checks it
(``produce.produce_as_leader``'s ``verify_transactions``).

This module owns the rules the broker and the simulator share, each called by both: which
partition's records need the question, and the guard it is asked under (:func:`begin`); what
the producer is answered when the coordinator says no or cannot say, the guard given up
(:func:`refuse`, Kafka's ``ReplicaManager`` and ``AddPartitionsToTxnManager`` mapping); and the
request-level rule before both: transactional records need a transactional id
(:func:`lacks_transactional_id`).
"""

from __future__ import annotations

from collections.abc import Iterable

from floodmark.errors import ErrorCode
from floodmark.records import TRANSACTIONAL_MASK
from floodmark.replication.partition import Partition
from floodmark.replication.producer_state import BatchMeta, VerificationGuard, batch_metas

# Where a v2 batch header keeps its magic byte and the low byte of its attributes (int16 at 21).
_MAGIC_AT = 16
_ATTRIBUTES_LOW_AT = 22

NOT_ADDED_MESSAGE = "Partition was not added to the transaction"
NOT_VERIFIED_MESSAGE = ("The transaction was not verified: its state changed at this partition "
                        "while the transaction coordinator was asked")

# Coordinator answers a producer's client may not retry correctly before KIP-890: answered
# NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh (Kafka's choice).
_RETRIABLE = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS,
})


def needs_verification(metas: list[BatchMeta] | None) -> tuple[int, int] | None:
    """(producer id, epoch) of a partition's records when they are transactional (Produce v3+
    carries one batch per partition and partition), else None. Whether the producer's
    transaction is open at the partition already is the producer state's to say
    (``ProducerStateTable.start_verification``)."""
    if not metas or not metas[0].is_transactional or metas[0].producer_id < 0:
        return None
    return metas[0].producer_id, metas[0].producer_epoch


def begin(core: Partition, records: bytes | memoryview | None,
          supports_epoch_bump: bool = False) -> VerificationGuard | None:
    """The leader's first step for one partition of a transactional Produce: the guard the
    coordinator is asked under, or None when there is no question to ask (not the leader, not
    transactional records, or the producer's transaction is open here already, verified when
    it began). ``supports_epoch_bump``: a transaction version 2 producer (Produce v12+). The
    caller asks the coordinator, then appends with the guard
    (``produce_as_leader``'s ``verification_guard``) or gives it up (:func:`refuse`,
    :func:`abandon`)."""
    if records is None or not core.is_leader:
        return None
    producer = needs_verification(batch_metas(records))
    if producer is None:
        return None
    return core.producers.start_verification(*producer, supports_epoch_bump)


def abandon(core: Partition, guard: VerificationGuard) -> None:
    """The verification ends without an append (the request refused, or no answer came)."""
    core.producers.end_verification(guard)


def refuse(core: Partition, guard: VerificationGuard,
           coordinator_error: ErrorCode) -> tuple[ErrorCode, str | None]:
    """The coordinator did not confirm the partition: the guard is given up and the producer
    is answered :func:`produce_refusal`."""
    abandon(core, guard)
    return produce_refusal(coordinator_error)


def lacks_transactional_id(transactional_id: str | None,
                           record_sets: Iterable[bytes | memoryview | None]) -> bool:
    """Does a Produce carry transactional records but name no transactional id? Kafka's
    ``KafkaApis.handleProduceRequest`` then refuses the whole request, every partition
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, authorizer or not: no coordinator could verify such
    a batch nor write the marker that ends its transaction. As Kafka's
    ``RequestUtils.hasTransactionalRecords``, only the first batch of each partition is looked
    at (a malformed record set is not transactional here; the append refuses it)."""
    if transactional_id is not None:
        return False
    return any(records is not None and len(records) > _ATTRIBUTES_LOW_AT
               and records[_MAGIC_AT] == 2
               and records[_ATTRIBUTES_LOW_AT] & TRANSACTIONAL_MASK
               for records in record_sets)


def produce_refusal(coordinator_error: ErrorCode) -> tuple[ErrorCode, str | None]:
    """What a Produce is answered for a partition the coordinator did not confirm:

    * not in the transaction (INVALID_TXN_STATE): INVALID_TXN_STATE, "Partition was not added
      to the transaction";
    * the coordinator busy, moving or unreachable: NOT_ENOUGH_REPLICAS (retriable), naming the
      underlying error;
    * PRODUCER_FENCED (a newer epoch): INVALID_PRODUCER_EPOCH, which every client knows
      (Kafka's ``AddPartitionsToTxnManager``); CLUSTER_AUTHORIZATION_FAILED (this broker may
      not ask): INVALID_TXN_STATE;
    * anything else (INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH, ...): as it is."""
    if coordinator_error is ErrorCode.INVALID_TXN_STATE:
        return ErrorCode.INVALID_TXN_STATE, NOT_ADDED_MESSAGE
    if coordinator_error in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS, (
            "Unable to verify the partition has been added to the transaction. Underlying "
            f"error: {coordinator_error.name}")
    if coordinator_error is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, None
    if coordinator_error is ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return ErrorCode.INVALID_TXN_STATE, None
    return coordinator_error, None
