"""The leader's produce path for one partition: checks, idempotence, append, the purgatory.

One place for the rule the broker and the simulator both run (``broker/handlers/data.py`` and
``sim/partition/broker.py`` call :func:`produce_as_leader`; only the log underneath differs: real files or
the simulator's ``MemoryFileSystem``).

The rule that matters most here (KAFKA's ``DelayedProduce``): **every** acks=all answer waits
until the high watermark covers the batch, the retry of a batch already in the log included.
An idempotent producer retries a batch with the same (producer id, epoch, sequence) when a request
times out; if the first attempt was appended but not yet replicated, the retry is a duplicate. It
is answered with the original offsets, and for acks=all it is parked exactly like the original:
answered NONE only once ``high_watermark > last_offset``, REQUEST_TIMED_OUT when its own timeout
passes first, NOT_LEADER_OR_FOLLOWER if leadership is lost meanwhile. Answering it at once
acknowledges a write that may still be truncated away (a leader cut off from its followers and
the controller while clients still reach it: issue 8 measured thousands of acknowledged writes
lost that way). ``unsafe_ack_duplicates_before_commit`` brings that old behaviour back, for the
simulator and the fault tests to prove they catch it; nothing else may turn it on.

Errors answered before anything is appended: INVALID_REQUIRED_ACKS, NOT_LEADER_OR_FOLLOWER,
CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD (an idempotent request must hold exactly one
batch per partition, as Kafka requires of Produce v3+), INVALID_RECORD again for a control batch
(only the leader writes markers) or a transactional batch without a producer id, INVALID_RECORD
for a keyless record in a compacted topic, INVALID_TIMESTAMP for a CreateTime record outside
KIP-937's bounds (``replication/log_validator.py``, which also re-compresses batches into the
topic's compression.type just before the append); then a retry of
a batch already in the log is recognised (above); then NOT_ENOUGH_REPLICAS (acks=all with the
committed ISR below min.insync.replicas); then the sequence checks
(OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE for a plain batch inside
an open transaction) and whatever the log refuses.

**A retry of a batch already in the log is never answered NOT_ENOUGH_REPLICAS** (issue 13,
finding 6). Kafka checks min.insync.replicas first, before the producer state, so a retry that
reaches a new leader whose ISR is below min ISR hears NOT_ENOUGH_REPLICAS: "nothing appended",
which clients take as *not persisted* (librdkafka's ``MsgNotPersisted``), although the first
attempt is in the log. librdkafka then feels free to resend the record under a bumped producer
epoch (its epoch bump renumbers every unacknowledged record, on every partition), and the broker
cannot recognise that resend: the chaos run found the record in every replica twice. floodmark
answers a recognised duplicate as it would have answered the original still waiting:

* below the high watermark (committed): NONE with the original offsets, at once;
* acks=all, not committed, whatever the ISR size: parked like the original, so NONE once the HW
  passes it (the ISR grew back), else REQUEST_TIMED_OUT or NOT_LEADER_OR_FOLLOWER, and
  NOT_ENOUGH_REPLICAS_AFTER_APPEND in the race the purgatory names. Every one of those is
  "possibly persisted" to librdkafka, the Java producer and kafka-python alike, and retriable.
  Parking rather than answering NOT_ENOUGH_REPLICAS_AFTER_APPEND at once also keeps the retry in
  flight: librdkafka drains every in-flight request before it bumps its epoch, so a retry that
  is answered NONE when the ISR grows back is never renumbered;
* acks=1: NONE at once (the leader has it), as before.

Transactional batches, with ``verify_transactions`` (``transaction.partition.verification
.enable``, or a Produce v12 whose leader adds the partition itself): a batch whose producer has
no transaction open here at its epoch is appended only with the verification guard the
partition's producer state still holds for it (``replication.txn_verification``: the caller
asked the coordinator first); else INVALID_TXN_STATE, nothing appended, so a late batch of an
ended transaction never opens one that no marker closes. Without it they are accepted as Kafka
accepts them without KIP-890.

:func:`write_marker_as_leader` is the second way in: the commit/abort marker the transaction
coordinator asks for (WriteTxnMarkers). It is appended as a control batch and answered like
acks=all (once the HW passes it): the coordinator must never hear "written" about a marker a
failover can still truncate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from floodmark.constants import ACKS_ALL, ACKS_LEADER, ACKS_NONE
from floodmark.errors import ErrorCode, KafkaError
from floodmark.records import (
    ControlType,
    CorruptRecordError,
    EndTxnMarker,
    build_marker_batch,
    decode_batch,
    iter_batches,
)
from floodmark.replication.log_validator import (
    TIMESTAMP_ERROR_MESSAGE,
    TargetCompression,
    TimestampBounds,
    out_of_range_timestamps,
    recompress,
)
from floodmark.replication.partition import Effect, LogView, Partition
from floodmark.replication.producer_state import (
    AbortedTxn,
    BatchMeta,
    VerificationGuard,
    batch_metas,
)
from floodmark.replication.purgatory import CompleteProduce
from floodmark.replication.txn_verification import NOT_VERIFIED_MESSAGE

LOG_OVERHEAD_BYTES = 12  # base offset + batch length, outside Kafka's max.message.bytes


class AppendedRange(Protocol):
    """What the log reports about an append (``floodmark.storage.log.AppendInfo`` fits)."""

    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def log_append_time_ms(self) -> int: ...


class LeaderLog(LogView, Protocol):
    """The one write the produce path performs, plus the facts the core reads."""

    def append_as_leader(
        self, records: bytes | memoryview, leader_epoch: int, now_ms: int
    ) -> AppendedRange: ...

    def append_aborted_transactions(self, entries: Sequence[AbortedTxn]) -> None: ...


@dataclass(frozen=True, slots=True)
class ProduceSettings:
    max_message_bytes: int = 1_048_588
    unsafe_ack_duplicates_before_commit: bool = False
    """UNSAFE (loses acknowledged writes): answer the retry of a batch already in the log at once,
    without waiting for the high watermark. Exists only so the proof can show it catches it."""
    compacted: bool = False
    """cleanup.policy has ``compact``: every record needs a key (else INVALID_RECORD)."""
    kafka_aborted_batch_duplicates: bool = False
    """Kafka's rule (loses a committed record with librdkafka, docs/wire.md): a batch of an
    aborted transaction still answers a new batch with its epoch and sequences as a duplicate.
    Exists only so the proof can show it catches it."""
    timestamps: TimestampBounds | None = None
    """KIP-937's bounds on CreateTime records (None: not checked, as for a LogAppendTime
    topic, whose records get the leader's clock)."""
    compression: TargetCompression | None = None
    """The topic's compression.type when it is not ``producer``: batches in another codec are
    re-compressed before the append (replication/log_validator.py)."""


@dataclass(slots=True)
class LeaderProduce:
    """The outcome of one partition's part of a produce request.

    ``answer`` is the final answer when it is known now; otherwise (acks=all parked) the caller
    answers when a ``CompleteProduce`` for ``produce_id`` comes out of the core's effects (from
    these ``effects`` or later ones). ``effects`` must be applied by the caller, in order.
    """

    produce_id: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    error_message: str | None = None
    duplicate: bool = False
    appended: bool = False
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    """KIP-467 (Produce v8+): (index of the record in its batch, message) of refused records."""
    answer: ErrorCode | None = None
    effects: list[Effect] = field(default_factory=list)

    @property
    def parked(self) -> bool:
        return self.answer is None


def _refuse(produce_id: int, error: ErrorCode, message: str | None = None) -> LeaderProduce:
    return LeaderProduce(produce_id, answer=error, error_message=message)


def produce_as_leader(
    core: Partition,
    log: LeaderLog,
    records: bytes | memoryview | None,
    *,
    acks: int,
    produce_id: int,
    now_ms: int,
    timeout_ms: int,
    settings: ProduceSettings = ProduceSettings(),
    leadership_in_doubt: bool = False,
    stepped_down: bool = False,
    verify_transactions: bool = False,
    verification_guard: VerificationGuard | None = None,
) -> LeaderProduce:
    """Check, deduplicate, append and park one partition's records as its leader.

    ``verify_transactions`` (KIP-890 part 1): a transactional batch that would open its
    producer's transaction here needs ``verification_guard``, the guard the coordinator's
    answer was asked under and the producer state still holds (see the module docstring).

    ``leadership_in_doubt``: this broker's controller session lapsed and its metadata has not
    caught up since (``replication/controller_session.py``); another leader may hold the sequences
    this one lacks, so a sequence gap is answered NOT_LEADER_OR_FOLLOWER, not
    OUT_OF_ORDER_SEQUENCE_NUMBER (fatal to an idempotent producer).

    ``stepped_down``: beyond doubt, nothing says this broker still leads
    (``replication.lease.steps_down``): every produce is NOT_LEADER_OR_FOLLOWER, before anything
    is read or appended, so the client finds the leader the controller elected."""
    if stepped_down:
        return _refuse(produce_id, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                       "this broker's controller session lapsed: another broker may lead "
                       "this partition now")
    if acks not in (ACKS_ALL, ACKS_NONE, ACKS_LEADER):
        return _refuse(produce_id, ErrorCode.INVALID_REQUIRED_ACKS)
    # NOT_ENOUGH_REPLICAS waits until the retry of a batch in the log has been recognised: it
    # says "not persisted", which is a lie about such a batch (see the module docstring).
    replication = core.check_produce(acks)
    if replication not in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS):
        return _refuse(produce_id, replication)
    if not records:
        return _refuse(produce_id, ErrorCode.CORRUPT_MESSAGE, "no records")
    if len(records) > settings.max_message_bytes + LOG_OVERHEAD_BYTES:
        return _refuse(produce_id, ErrorCode.MESSAGE_TOO_LARGE)
    metas = batch_metas(records)
    if metas is None:
        return _refuse(produce_id, ErrorCode.CORRUPT_MESSAGE,
                       "not a sequence of magic v2 record batches")
    if any(m.is_control for m in metas):
        return _refuse(produce_id, ErrorCode.INVALID_RECORD,
                       "a client cannot append control batches")
    if any(m.is_transactional and m.producer_id < 0 for m in metas):
        return _refuse(produce_id, ErrorCode.INVALID_RECORD,
                       "a transactional batch needs a producer id")
    if settings.compacted:
        refused = _keyless_records(records)
        if refused is None:
            return _refuse(produce_id, ErrorCode.CORRUPT_MESSAGE, "undecodable record batch")
        if refused:
            message = ("Compacted topic cannot accept message without key in topic partition "
                       f"{core.config.topic}-{core.config.partition}.")
            out = _refuse(produce_id, ErrorCode.INVALID_RECORD, message)
            out.record_errors = [(index, message) for index in refused]
            return out
    if settings.timestamps is not None:
        bad_timestamps = out_of_range_timestamps(records, settings.timestamps, now_ms)
        if bad_timestamps is None:
            return _refuse(produce_id, ErrorCode.CORRUPT_MESSAGE, "undecodable record batch")
        if bad_timestamps:
            out = _refuse(produce_id, ErrorCode.INVALID_TIMESTAMP, TIMESTAMP_ERROR_MESSAGE)
            out.record_errors = [(index, message) for index, message in bad_timestamps]
            return out
    producers = core.producers
    idempotent = [m for m in metas if m.producer_id >= 0]
    if idempotent and len(metas) != 1:
        return _refuse(produce_id, ErrorCode.INVALID_RECORD,
                       "an idempotent produce carries exactly one batch per partition")
    checks = [producers.check(meta, settings.kafka_aborted_batch_duplicates)
              for meta in idempotent]
    for check in checks:
        if check.error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER and check.duplicate_of is not None:
            return _duplicate(core, log, produce_id, check.duplicate_of.first_offset,
                              check.duplicate_of.last_offset, acks, now_ms, timeout_ms, settings)
    if replication is not ErrorCode.NONE:
        return _refuse(produce_id, replication)  # NOT_ENOUGH_REPLICAS: nothing of it is in the log
    for check in checks:
        if check.error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and leadership_in_doubt:
            return _refuse(produce_id, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                           "sequence gap while this broker's controller session is in doubt: "
                           "another broker may lead this partition now")
        if check.error is not ErrorCode.NONE:
            return _refuse(produce_id, check.error)
    if verify_transactions:
        for meta in idempotent:
            if meta.is_transactional and not producers.verified(meta, verification_guard):
                return _refuse(produce_id, ErrorCode.INVALID_TXN_STATE, NOT_VERIFIED_MESSAGE)
    if settings.compression is not None:
        try:
            records = recompress(records, settings.compression)
        except CorruptRecordError as exc:
            return _refuse(produce_id, ErrorCode.CORRUPT_MESSAGE, str(exc))
    try:
        info = log.append_as_leader(records, core.leader_epoch, now_ms)
    except KafkaError as exc:
        return _refuse(produce_id, exc.code, exc.message or None)
    first = info.first_offset
    for meta in metas:
        if info.log_append_time_ms >= 0:  # LogAppendTime: the broker's time is the batch's
            meta = replace(meta, max_timestamp=info.log_append_time_ms)
        producers.record(meta, first)
        first += meta.last_offset_delta + 1
    effects = core.on_leader_append(log, produce_id, acks, info.first_offset, info.last_offset,
                                    now_ms, timeout_ms)
    out = LeaderProduce(produce_id, info.first_offset,
                        info.log_append_time_ms if info.log_append_time_ms >= 0 else -1,
                        appended=True)
    return _settle(out, acks, effects)


def write_marker_as_leader(
    core: Partition,
    log: LeaderLog,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    coordinator_epoch: int,
    *,
    produce_id: int,
    now_ms: int,
    timeout_ms: int,
) -> LeaderProduce:
    """Append one commit or abort marker as this partition's leader (WriteTxnMarkers).

    NOT_LEADER_OR_FOLLOWER / NOT_ENOUGH_REPLICAS as for an acks=all produce, then the marker's
    fencing (INVALID_PRODUCER_EPOCH for an older producer epoch, TRANSACTION_COORDINATOR_FENCED
    for an older coordinator epoch). An abort writes its ``.txnindex`` entry. Parked like
    acks=all: answered when the HW passes the marker."""
    error = core.check_produce(ACKS_ALL)
    if error is not ErrorCode.NONE:
        return _refuse(produce_id, error)
    producers = core.producers
    error = producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
    if error is not ErrorCode.NONE:
        return _refuse(produce_id, error)
    marker = EndTxnMarker(ControlType.COMMIT if committed else ControlType.ABORT,
                          coordinator_epoch)
    batch = build_marker_batch(producer_id, producer_epoch, marker, timestamp_ms=now_ms)
    try:
        info = log.append_as_leader(batch, core.leader_epoch, now_ms)
    except KafkaError as exc:
        return _refuse(produce_id, exc.code, exc.message or None)
    meta = BatchMeta(producer_id, producer_epoch, -1, 1, 0, True, True, marker, now_ms)
    aborted = producers.record(meta, info.first_offset)
    if aborted is not None:
        log.append_aborted_transactions([aborted])
    effects = core.on_leader_append(log, produce_id, ACKS_ALL, info.first_offset,
                                    info.last_offset, now_ms, timeout_ms)
    out = LeaderProduce(produce_id, info.first_offset, appended=True)
    return _settle(out, ACKS_ALL, effects)


def _keyless_records(records: bytes | memoryview) -> list[int] | None:
    """Indexes (within their batch, as KIP-467 counts) of the records without a key; None if a
    batch cannot be decoded."""
    refused: list[int] = []
    try:
        for position, _header in iter_batches(records, validate=False):
            for index, record in enumerate(decode_batch(records, position, validate=False)[1]):
                if record.key is None:
                    refused.append(index)
    except CorruptRecordError:
        return None
    return refused


def _duplicate(core: Partition, log: LeaderLog, produce_id: int, first_offset: int,
               last_offset: int, acks: int, now_ms: int, timeout_ms: int,
               settings: ProduceSettings) -> LeaderProduce:
    """A retry of a batch still in the log: the original offsets, after the same wait as the
    original's, whatever the ISR size (never NOT_ENOUGH_REPLICAS: see the module docstring).
    Committed already (below the HW): answered at once."""
    out = LeaderProduce(produce_id, first_offset, duplicate=True)
    if settings.unsafe_ack_duplicates_before_commit or last_offset < core.high_watermark:
        out.answer = ErrorCode.NONE
        return out
    effects = core.on_leader_append(log, produce_id, acks, first_offset, last_offset, now_ms,
                                    timeout_ms)
    return _settle(out, acks, effects)


def _settle(out: LeaderProduce, acks: int, effects: list[Effect]) -> LeaderProduce:
    """Take this produce's own completion out of the effects (acks=1 and an acks=all whose HW is
    already there complete at once); leave everything else for the caller to apply."""
    rest: list[Effect] = []
    for effect in effects:
        if isinstance(effect, CompleteProduce) and effect.produce_id == out.produce_id:
            out.answer = effect.error
        else:
            rest.append(effect)
    out.effects = rest
    if acks == ACKS_NONE:
        out.answer = ErrorCode.NONE  # nobody is told anything (acks=0 has no response)
    return out
