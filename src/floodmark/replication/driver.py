"""The one interpreter of the core's decisions: effects and follower actions, applied to a log.

``Partition`` decides and returns values; something has to carry them out against the storage
and the outside world. That something used to be written three times (the single broker, the
cluster broker and the simulator) and the copies had drifted: one called ``after_truncate`` after
a truncation and another did not, one checked the epoch cache before assigning an epoch. Now the
broker and the simulator both hold a ``ReplicaDriver`` and give it a small set of ports — what
only they can do (wake waiting fetches, answer a produce, send AlterPartition, keep a mirror) —
and every rule about *applying* a decision lives here, sans-I/O like the core.

The order is the core's: effects in the order returned; a truncation cuts the log, forgets the
producer state the log lost (``Partition.producers`` is rebuilt from what remains: a truncated
sequence is no longer a duplicate, a truncated marker leaves its transaction open again), and
then lets the core keep HW ≤ LEO (``after_truncate``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from floodmark.errors import ErrorCode, KafkaError
from floodmark.records import iter_batches
from floodmark.replication import lease
from floodmark.replication.election import AlterPartitionRequest, PartitionRegistration
from floodmark.replication.epochs import EpochEndOffset
from floodmark.replication.partition import (
    AssignEpoch,
    CheckpointHighWatermark,
    Effect,
    EpochQuery,
    FetchDecision,
    FetchResponse,
    FlushLog,
    FollowerAction,
    FollowerActionKind,
    FollowerFetch,
    HighWatermarkChanged,
    LogView,
    Partition,
    PartitionConfig,
    ProposeIsr,
    TruncateTo,
    WakeFollowerFetches,
)
from floodmark.replication.producer_state import AbortedTxn
from floodmark.replication.purgatory import CompleteProduce, FollowerFetchPurgatory, Parked
from floodmark.replication.schedule import PeriodicWork

Records = bytes | bytearray | memoryview
ReadBatches = Callable[[int, int], Records]
"""Whole batches of ``[from, upto)`` from the leader's log, as many as the runner's fetch size
allows (it may raise ``KafkaError``)."""


def follower_fetch_response(decision: FetchDecision, fetch: FollowerFetch,
                            records: Records) -> FetchResponse:
    """The answer to a follower fetch, from the leader's decision and the records read. An
    error answers no high watermark (-1, as Kafka), the log's bounds still (out of range)."""
    ok = decision.error is ErrorCode.NONE
    return FetchResponse(decision.error, fetch.current_leader_epoch,
                         decision.high_watermark if ok else -1,
                         decision.log_start_offset, decision.log_end_offset, decision.diverging,
                         has_records=bool(records), fetch_offset=fetch.fetch_offset)


@dataclass(frozen=True, slots=True)
class FollowerFetchAnswer:
    decision: FetchDecision
    response: FetchResponse
    records: Records

    @property
    def complete(self) -> bool:
        """Answer now (an error, a diverging epoch, records); else the fetch may wait for the
        leader's next append (long poll), and is then asked again (``answer_follower_fetch``)."""
        return (self.response.error is not ErrorCode.NONE
                or self.response.diverging is not None or bool(self.records))


class ParkedFollowerFetch(Protocol):
    """What the driver needs of a parked follower fetch: the fetch (the runner's value also
    says where to send the answer)."""

    @property
    def fetch(self) -> FollowerFetch: ...


F = TypeVar("F", bound=ParkedFollowerFetch)


class ReplicaLog(LogView, Protocol):
    """What the driver needs of ``floodmark.storage.Log``: the core's view plus the writes."""

    def assign_epoch(self, epoch: int, start_offset: int, *, durable: bool = True) -> None: ...
    def truncate_to(self, offset: int) -> None: ...
    def truncate_fully_and_start_at(self, offset: int) -> None: ...
    def maybe_increment_log_start_offset(self, offset: int, high_watermark: int) -> bool: ...
    def apply_retention(self, now_ms: int, high_watermark: int) -> int: ...
    def append_as_follower(self, records: bytes | bytearray | memoryview, now_ms: int) -> object: ...
    def iter_whole_batches(self) -> Iterable[Any]:
        """Every batch of the log, each a ``BatchHeader`` over a buffer holding the whole batch
        (the producer state decodes the transaction markers)."""
    def append_aborted_transactions(self, entries: Sequence[AbortedTxn]) -> None: ...
    def restore_aborted_transactions(self, entries: Sequence[AbortedTxn]) -> None: ...


class EpochCheckpointWrites(Protocol):
    """A batch of leader-epoch checkpoint writes many partitions share (the broker's
    ``storage.epoch_checkpoints.EpochCheckpointBatch``): ``on_durable`` runs once ``log``'s
    checkpoint is on disk."""

    def add(self, log: Any, on_durable: Callable[[int], None]) -> None: ...


class ReplicaPorts(Protocol):
    """What only the shell can do with a decision."""

    def high_watermark_changed(self, old: int, new: int) -> None:
        """Wake whatever waits on the HW (parked fetches, the step tables)."""

    def complete_produce(self, done: CompleteProduce) -> None:
        """Answer a produce the purgatory released."""

    def propose_isr(self, request: AlterPartitionRequest) -> None:
        """Send AlterPartition to the controller (and resend it while ``is_proposal_pending``)."""

    def wake_follower_fetches(self) -> None:
        """Ask the core again for the follower fetches parked on this partition, after the
        current step (``ReplicaDriver.answer_parked_follower_fetches`` over the runner's
        ``FollowerFetchPurgatory``; the broker re-runs each waiting request's partitions
        through ``answer_follower_fetch``): they may have records now, or an error."""

    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None:
        """The log was cut from ``before`` to ``after`` (``fully``: emptied, starting there)."""

    def follower_appended(self, records: bytes | bytearray | memoryview) -> None:
        """Records fetched from the leader are in the log."""

    def flush_log(self) -> None:
        """The flush check is due: apply the log's flush policy (the simulator: the OS writes
        the page cache back) and record the recovery point."""

    def checkpoint_high_watermark(self, high_watermark: int) -> None:
        """The HW checkpoint is due (a broker gathers its partitions' into one write)."""


@dataclass(eq=False, slots=True)
class ReplicaDriver:
    partition: Partition
    log: ReplicaLog
    ports: ReplicaPorts

    @classmethod
    def open(cls, config: PartitionConfig, log: ReplicaLog, ports: ReplicaPorts, *,
             checkpointed_high_watermark: int, now_ms: int,
             first_due: Mapping[PeriodicWork, int] | None = None) -> ReplicaDriver:
        """A replica at process start, the one way every runner opens one: the core with the
        HW checkpoint clamped to the recovered log, the producer table and the
        aborted-transaction index rebuilt from the log (``load_producer_state``), the periodic
        work's timers armed from ``now_ms``. Its role comes with the first metadata."""
        partition = Partition(config)
        partition.high_watermark = Partition.clamp_high_watermark(checkpointed_high_watermark,
                                                                  log)
        driver = cls(partition, log, ports)
        driver.load_producer_state()
        partition.start_timers(now_ms, first_due)
        return driver

    def apply(self, effects: Iterable[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, CompleteProduce):
                self.ports.complete_produce(effect)
            elif isinstance(effect, HighWatermarkChanged):
                self.ports.high_watermark_changed(effect.old, effect.new)
            elif isinstance(effect, AssignEpoch):
                # Idempotent: a leader re-elected at an epoch the cache already has writes nothing.
                if self.log.epoch_cache.latest_epoch < effect.epoch:
                    self.log.assign_epoch(effect.epoch, effect.start_offset)
            elif isinstance(effect, TruncateTo):
                self.truncate_to(effect.offset, effect.reason)
            elif isinstance(effect, ProposeIsr):
                self.ports.propose_isr(effect.request)
            elif isinstance(effect, WakeFollowerFetches):
                self.ports.wake_follower_fetches()
            elif isinstance(effect, FlushLog):
                self.ports.flush_log()
            elif isinstance(effect, CheckpointHighWatermark):
                self.ports.checkpoint_high_watermark(effect.high_watermark)
            else:  # pragma: no cover - the Effect union is closed
                raise TypeError(f"unknown effect {effect!r}")

    # -- the controller's word: metadata, AlterPartition answers --------------------------------
    def apply_metadata(self, registration: PartitionRegistration, now_ms: int, *,
                       broker_epochs: Mapping[int, int] | None = None,
                       ineligible: frozenset[int] = frozenset(),
                       epoch_writes: EpochCheckpointWrites | None = None) -> None:
        """The partition's registration from metadata decides the role
        (``Partition.apply_metadata``), carried out. With ``epoch_writes``, becoming leader
        puts the epoch checkpoint into that batch: the epoch is recorded at once, made durable
        by the batch, and until then the leader accepts no write
        (``Partition.epoch_start_pending``); the other effects run in order around it."""
        effects = self.partition.apply_metadata(self.log, registration, now_ms,
                                                broker_epochs=broker_epochs,
                                                ineligible=ineligible)
        if epoch_writes is None:
            self.apply(effects)
            return
        before: list[Effect] = []  # carried out in order: the ones before each AssignEpoch first
        for effect in effects:
            if isinstance(effect, AssignEpoch):
                self.apply(before)
                before = []
                self._assign_epoch_in_batch(effect, epoch_writes)
            else:
                before.append(effect)
        self.apply(before)

    def _assign_epoch_in_batch(self, effect: AssignEpoch,
                               epoch_writes: EpochCheckpointWrites) -> None:
        """``apply``'s ``AssignEpoch`` (the same idempotence), its durable write deferred to
        ``epoch_writes``. In a batch the file is written even when the cache has the epoch
        already: an earlier batch may still be writing it."""
        if self.log.epoch_cache.latest_epoch < effect.epoch:
            self.log.assign_epoch(effect.epoch, effect.start_offset, durable=False)
        self.partition.epoch_start_pending(effect.epoch)
        epoch_writes.add(self.log, functools.partial(self.partition.epoch_start_durable,
                                                     effect.epoch))

    def on_alter_partition_response(self, request: AlterPartitionRequest, error: ErrorCode,
                                    registration: PartitionRegistration | None,
                                    now_ms: int) -> None:
        """The controller's answer to this leader's ISR proposal: committed, reverted or kept
        pending (``Partition.handle_alter_partition_response``), carried out. A runner resends
        a proposal while ``Partition.is_proposal_pending`` says it is still open."""
        self.apply(self.partition.handle_alter_partition_response(
            self.log, request, error, registration, now_ms))

    def answer_epoch_query(self, query: EpochQuery) -> tuple[ErrorCode, EpochEndOffset]:
        """OffsetsForLeaderEpoch at this replica (``Partition.handle_epoch_query``)."""
        return self.partition.handle_epoch_query(self.log, query)

    # -- the core's timers: the runner calls ``tick`` when ``next_deadline_ms`` is due ----------
    def next_deadline_ms(self) -> int | None:
        return self.partition.next_deadline_ms()

    def tick(self, now_ms: int) -> None:
        """The periodic work due at ``now_ms`` (``Partition.tick``), carried out."""
        self.apply(self.partition.tick(self.log, now_ms))

    def load_producer_state(self) -> None:
        """At open (the log recovered, the HW loaded): rebuild the producer table from the
        log's batches, and make the segments' aborted-transaction indexes hold exactly the
        aborts found (recovery may have cut a torn tail, or an index write may not have reached
        the disk before a crash). Idempotence and open transactions survive restarts."""
        aborted = self.partition.producers.rebuild(self.log.iter_whole_batches(),
                                                   self.partition.high_watermark)
        self.partition.producers.on_log_start_offset(self.log.log_start_offset)
        self.log.restore_aborted_transactions(aborted)

    def truncate_to(self, offset: int, reason: str) -> None:
        before = self.log.log_end_offset
        self.log.truncate_to(offset)  # the segments' aborted-transaction entries with it
        self.partition.producers.rebuild(self.log.iter_whole_batches(),
                                         self.partition.high_watermark)
        self.ports.log_truncated(before, self.log.log_end_offset, reason, fully=False)
        self.apply(self.partition.after_truncate(self.log))

    def truncate_fully_and_start_at(self, offset: int, reason: str) -> None:
        before = self.log.log_end_offset
        self.log.truncate_fully_and_start_at(offset)
        self.partition.producers.clear()
        self.partition.producers.on_log_start_offset(self.log.log_start_offset)
        self.ports.log_truncated(before, self.log.log_end_offset, reason, fully=True)
        self.apply(self.partition.after_truncate(self.log))

    # -- the log start offset: every move of it goes through here, so the LSO follows ----------
    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords on the leader, or a follower following its leader's log start: never
        past the HW (storage refuses: OFFSET_OUT_OF_RANGE). True if it moved."""
        moved = self.log.maybe_increment_log_start_offset(offset, self.partition.high_watermark)
        if moved:
            self.partition.producers.on_log_start_offset(self.log.log_start_offset)
        return moved

    def apply_retention(self, now_ms: int) -> int:
        """retention.ms / retention.bytes / the log start offset: whole segments below the HW
        go (storage's rule); returns how many."""
        deleted = self.log.apply_retention(now_ms, self.partition.high_watermark)
        if deleted:
            self.partition.producers.on_log_start_offset(self.log.log_start_offset)
        return deleted

    # -- leader: the controller session's lease -------------------------------------------------
    def check_lease(self, now_ms: int, *, in_doubt: bool, session_timeout_ms: int) -> bool:
        """``replication.lease``: does this leader step down for clients now? If so, the
        produce waiting in its purgatory is answered NOT_LEADER_OR_FOLLOWER at once, not when
        its timeout runs out (the client retries at the leader the controller elected). The
        runner calls this on its lease timer (the broker's ``_lease_checks``, the simulator's
        heartbeat tick); ``in_doubt``: ``ControllerSession.leadership_in_doubt``."""
        down = lease.steps_down(self.partition, now_ms, in_doubt=in_doubt,
                                session_timeout_ms=session_timeout_ms)
        if down:
            self.apply(self.partition.fail_waiting_produces())
        return down

    # -- leader: a follower's fetch -------------------------------------------------------------
    def answer_follower_fetch(self, fetch: FollowerFetch, now_ms: int,
                              read: ReadBatches) -> FollowerFetchAnswer:
        """Ask the core (fencing, divergence, the follower's progress, ISR, HW), apply what it
        decided, and read what it allows. A parked fetch is asked again the same way."""
        decision = self.partition.handle_follower_fetch(self.log, fetch, now_ms)
        if decision.effects:
            self.apply(decision.effects)
        records: Records = b""
        if decision.has_data:
            try:
                records = read(decision.read_from, decision.read_upto)
            except KafkaError as exc:
                decision = FetchDecision(exc.code, decision.leader_epoch,
                                         decision.high_watermark, decision.log_start_offset,
                                         decision.log_end_offset)
        return FollowerFetchAnswer(decision, follower_fetch_response(decision, fetch, records),
                                   records)

    def record_idle_follower_fetch(self, fetch: FollowerFetch, now_ms: int) -> bool:
        """The idle round's fetch, the short way (``Partition.record_idle_follower_fetch``):
        True when ``fetch`` was one and is recorded (nothing to apply, nothing to read: its
        answer is the partition's HW and log start); False when nothing was done, and
        ``answer_follower_fetch`` answers it."""
        return self.partition.record_idle_follower_fetch(self.log, fetch, now_ms)

    def answer_parked_follower_fetches(
        self, parked: FollowerFetchPurgatory[F], now_ms: int, read: ReadBatches,
        send: Callable[[F, FollowerFetchAnswer], None], *,
        which: Callable[[F], bool] | None = None, force: bool = False, due_only: bool = False,
    ) -> int:
        """The parked follower fetches ``which`` selects (all by default), each asked again in
        its turn (``answer_follower_fetch``, as when it arrived): one the core now has an
        answer for, one whose wait is over, and with ``force`` every one asked, leaves the
        purgatory and its answer is sent (``send``, before the next one is asked); the others
        stay parked. The runner calls this after a step in which the core said
        ``WakeFollowerFetches`` (a produce's own answer goes first), when a wait runs out, or
        to release fetches by hand (a scenario). ``due_only``: only those whose wait is over
        are asked (a wait timer). Returns how many were answered."""
        answered_count = 0

        def selected(p: Parked[F]) -> bool:
            return ((which is None or which(p.request))
                    and (not due_only or now_ms >= p.deadline_ms))

        def answered(p: Parked[F]) -> bool:
            nonlocal answered_count
            answer = self.answer_follower_fetch(p.request.fetch, now_ms, read)
            if not (answer.complete or force or now_ms >= p.deadline_ms):
                return False
            send(p.request, answer)
            answered_count += 1
            return True

        parked.release(selected, answered)
        return answered_count

    # -- follower ------------------------------------------------------------------------------
    def on_fetch_response(self, response: FetchResponse,
                          records: bytes | bytearray | memoryview, now_ms: int) -> FollowerAction:
        """Carry out what a fetch answer means; the action tells the shell when to fetch next
        (RETRY with ``backoff``, STOP until new metadata, IGNORE a stale answer)."""
        action = self.partition.on_fetch_response(self.log, response)
        kind = action.kind
        if kind is FollowerActionKind.APPEND:
            if records:
                self.log.append_as_follower(records, now_ms)
                # The same producer-state rule as the leader's: transactions open and close
                # here too, so a follower has the leader's LSO and aborted-transaction index.
                aborted = self.partition.producers.record_batches(
                    h for _p, h in iter_batches(records, validate=False))
                if aborted:
                    self.log.append_aborted_transactions(aborted)
                self.ports.follower_appended(records)
            self.apply(self.partition.after_follower_append(self.log, response))
            # The leader's log start offset (DeleteRecords, retention) is followed up to this
            # replica's own HW, as Kafka's fetcher does.
            if response.log_start_offset > self.log.log_start_offset:
                self.maybe_increment_log_start_offset(
                    min(response.log_start_offset, self.partition.high_watermark))
        elif kind is FollowerActionKind.TRUNCATE:
            self.truncate_to(action.offset, action.reason)
        elif kind is FollowerActionKind.TRUNCATE_FULLY:
            self.truncate_fully_and_start_at(action.offset, action.reason)
        return action

    def on_epoch_answer(self, request_leader_epoch: int, error: ErrorCode,
                        answer: EpochEndOffset) -> FollowerAction:
        """Epoch-offset mode: the OffsetsForLeaderEpoch answer decides the cut."""
        action = self.partition.on_epoch_answer(self.log, request_leader_epoch, error, answer)
        if action.kind is FollowerActionKind.TRUNCATE:
            self.truncate_to(action.offset, f"OffsetsForLeaderEpoch answer {answer.end_offset}")
        return action
