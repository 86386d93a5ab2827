"""One replica of one partition: the sans-I/O state machine the broker and the simulator drive.

The core never owns log bytes. The caller passes a read-only ``LogView`` (anything with
``log_start_offset``, ``log_end_offset`` and ``epoch_cache`` — ``floodmark.storage.Log`` fits),
performs the I/O, and tells the core what happened. Every decision comes back as a value (the
values are defined in ``replication.effects``):

* ``Effect`` values, to be applied in order by the caller: ``AssignEpoch`` (write (epoch, LEO) to
  the epoch cache durably before accepting writes), ``TruncateTo``, ``HighWatermarkChanged``,
  ``CompleteProduce`` (answer a produce), ``ProposeIsr`` (send AlterPartition to the controller).
* ``FetchDecision`` for a follower fetch on the leader (error / diverging epoch / what to read
  and the HW *snapshot taken before* the follower's LEO was recorded, Kafka's KAFKA-7104 rule).
* ``FollowerAction`` for a fetch response on a follower (append, truncate, back off, stop).

Driving it, leader side::

    error = p.check_produce(acks)                   # NOT_LEADER / NOT_ENOUGH_REPLICAS / NONE
    info = log.append_as_leader(batches, p.leader_epoch, now_ms)
    effects = p.on_leader_append(log, produce_id, acks, info.first_offset, info.last_offset,
                                 now_ms, timeout_ms)
    decision = p.handle_follower_fetch(log, fetch, now_ms)   # then read and answer:
    #   ReplicaDriver.answer_follower_fetch does both, for a new fetch and a parked one alike
    effects = p.tick(log, now_ms)       # at p.next_deadline_ms(): ISR shrink, produce
                                        # timeouts, FlushLog, CheckpointHighWatermark
    effects = p.handle_alter_partition_response(log, proposal, error, registration, now_ms)

Follower side::

    effects = p.apply_metadata(log, registration, now_ms)     # may return TruncateTo (HW mode)
    request = p.next_fetch(log)           # FollowerFetch, or EpochQuery in epoch-offset mode
    action = p.on_fetch_response(log, response)      # truncate / append / backoff / stop
    p.after_truncate(log); effects = p.after_follower_append(log, response)

A consumer's read is decided by ``replication.reads`` (fencing, range, the bound by isolation).
An append, or the loss of leadership, returns ``WakeFollowerFetches``: the runner asks the core
again for the follower fetches parked on the partition.

The role is an explicit type: ``LeaderState`` or ``FollowerState`` (``None`` before any metadata).
Min-ISR semantics are strict (Kafka 3.7+): the leader HW is frozen while the committed ISR is
smaller than min(min.insync.replicas, replication factor); see ``isr.leader_high_watermark``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from floodmark.constants import ACKS_ALL, ACKS_LEADER, ACKS_NONE, NO_LEADER
from floodmark.errors import ErrorCode
from floodmark.replication import fencing
from floodmark.replication import isr as isr_rules
from floodmark.replication.effects import (
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
    NextFetch,
    ProposeIsr,
    TruncateTo,
    WakeFollowerFetches,
)
from floodmark.replication.election import (
    AlterPartitionRequest,
    LeaderRecoveryState,
    PartitionRegistration,
)
from floodmark.replication.epochs import UNDEFINED_EPOCH, EpochCache, EpochEndOffset
from floodmark.replication.isr import (
    CommittedIsr,
    IsrState,
    PendingExpandIsr,
    PendingShrinkIsr,
    ReplicaState,
)
from floodmark.replication.modes import DEFAULT_TRUNCATION, Truncation
from floodmark.replication.producer_state import ProducerStateTable
from floodmark.replication.purgatory import CompleteProduce, DelayedProduce, ProducePurgatory
from floodmark.replication.schedule import PeriodicWork, Schedule
from floodmark.replication.truncation import (
    FetchValidation,
    leader_end_offset_for,
    truncation_on_become_follower,
    truncation_point,
    validate_fetch,
)

# The exchanged values live in replication.effects; importers of the core may name them here.
__all__ = [
    "ACKS_ALL",
    "ACKS_LEADER",
    "ACKS_NONE",
    "AssignEpoch",
    "CheckpointHighWatermark",
    "Effect",
    "EpochQuery",
    "FetchDecision",
    "FetchPhase",
    "FetchResponse",
    "FlushLog",
    "FollowerAction",
    "FollowerActionKind",
    "FollowerFetch",
    "FollowerState",
    "HighWatermarkChanged",
    "LeaderState",
    "LogView",
    "NextFetch",
    "Partition",
    "PartitionConfig",
    "ProposeIsr",
    "TruncateTo",
    "WakeFollowerFetches",
]

logger = logging.getLogger("floodmark.replication")


class LogView(Protocol):
    """The log facts the core reads. It never writes through this."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def epoch_cache(self) -> EpochCache: ...


@dataclass(frozen=True, slots=True)
class PartitionConfig:
    topic: str
    partition: int
    broker_id: int
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    truncation: Truncation = DEFAULT_TRUNCATION
    flush_check_interval_ms: int | None = None
    """How often the runner applies the log's flush policy (``FlushLog``); None: never."""
    checkpoint_interval_ms: int | None = None
    """How often the HW is checkpointed (``CheckpointHighWatermark``); None: never."""

    def schedule(self) -> Schedule:
        """The periodic work of a replica with this config (``replication.schedule``): the ISR
        check every ``replica.lag.time.max.ms`` / 2 (Kafka's isr-expiration task), the flush
        check and the HW checkpoint where an interval is given."""
        intervals = {PeriodicWork.ISR_CHECK: max(1, self.replica_lag_time_max_ms // 2)}
        if self.flush_check_interval_ms is not None:
            intervals[PeriodicWork.FLUSH] = self.flush_check_interval_ms
        if self.checkpoint_interval_ms is not None:
            intervals[PeriodicWork.CHECKPOINT] = self.checkpoint_interval_ms
        return Schedule(intervals)


# -- role states -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderState:
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr_state: IsrState
    leader_epoch_start_offset: int  # LESO: the LEO when this epoch began (KAFKA-7128)
    recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    # False while the runner writes this epoch's (epoch, start offset) checkpoint in a batch
    # with other partitions' (``epoch_start_pending``): no record of the epoch is appended
    # before it is durable (``check_produce``). True when ``AssignEpoch`` was applied at once.
    epoch_start_durable: bool = True


class FetchPhase(enum.Enum):
    TRUNCATING = "truncating"  # epoch-offset mode: ask OffsetsForLeaderEpoch first
    FETCHING = "fetching"
    FENCED = "fenced"  # FENCED_LEADER_EPOCH with our own epoch: wait for new metadata


@dataclass(frozen=True, slots=True)
class FollowerState:
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    phase: FetchPhase


@dataclass(slots=True)
class Partition:
    """One replica's replication state. Mutable; each method documents what it returns."""

    config: PartitionConfig
    high_watermark: int = 0
    role: LeaderState | FollowerState | None = None
    replica_states: dict[int, ReplicaState] = field(default_factory=dict)
    purgatory: ProducePurgatory = field(default_factory=ProducePurgatory)
    broker_epochs: dict[int, int] = field(default_factory=dict)  # registered, from metadata
    ineligible: frozenset[int] = frozenset()  # fenced / shutting down, from metadata
    local_broker_epoch: int = -1
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)
    """Idempotence and open transactions, rebuilt from the log; the LSO is read from it."""
    schedule: Schedule | None = field(default=None, init=False)
    """The periodic work's timers (``next_deadline_ms`` / ``tick``), armed by ``start_timers``
    (a replica the model checker builds for one step has none)."""

    # -- views -------------------------------------------------------------------------------
    @property
    def last_stable_offset(self) -> int:
        """The LSO: min(HW, first offset of the oldest transaction still open or whose marker
        is not yet below the HW). A read_committed consumer reads below it, never at or past
        it. Leader and follower compute it alike, from the batches each appended."""
        first = self.producers.first_unstable_offset(self.high_watermark)
        return self.high_watermark if first is None else min(self.high_watermark, first)

    @property
    def is_leader(self) -> bool:
        return isinstance(self.role, LeaderState)

    @property
    def leader_epoch(self) -> int:
        return self.role.leader_epoch if self.role is not None else UNDEFINED_EPOCH

    @property
    def partition_epoch(self) -> int:
        return self.role.partition_epoch if self.role is not None else -1

    @property
    def leader_id(self) -> int:
        if isinstance(self.role, LeaderState):
            return self.config.broker_id
        if isinstance(self.role, FollowerState):
            return self.role.leader_id
        return NO_LEADER

    @property
    def isr(self) -> tuple[int, ...]:
        return self.role.isr_state.isr if isinstance(self.role, LeaderState) else ()

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.role.isr_state.maximal_isr if isinstance(self.role, LeaderState) else ()

    @property
    def offsets_available(self) -> bool:
        """KIP-207: a new leader's HW is the one it had as a follower (one fetch late, §1) until
        its followers' fetches move it; while that HW is below the offset where this epoch
        began, a consumer may already have seen a higher HW from the previous leader, so the
        latest offset is not answered (OFFSET_NOT_AVAILABLE, retriable) rather than answered
        lower than before. Followers' and tools' reads of the log end are not affected."""
        return not (isinstance(self.role, LeaderState)
                    and self.high_watermark < self.role.leader_epoch_start_offset)

    def remote_log_end_offsets(self) -> dict[int, int]:
        """Leader only: the follower LEOs it has learned (-1 = unknown), by replica id."""
        if not isinstance(self.role, LeaderState):
            return {}
        out: dict[int, int] = {}
        for replica_id in self.role.replicas:
            if replica_id == self.config.broker_id:
                continue
            state = self.replica_states.get(replica_id)
            out[replica_id] = state.log_end_offset if state else isr_rules.UNKNOWN_OFFSET
        return out

    def _log(self, message: str, *args: object) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "[%s-%d broker=%d epoch=%d] " + message,
                self.config.topic,
                self.config.partition,
                self.config.broker_id,
                self.leader_epoch,
                *args,
            )

    def _effective_min_isr(self, replicas: tuple[int, ...]) -> int:
        return max(1, min(self.config.min_insync_replicas, len(replicas)))

    def effective_min_isr(self) -> int:
        """min.insync.replicas as this replica applies it: at most its replication factor."""
        return self._effective_min_isr(self.role.replicas if self.role is not None else ())

    def _eligible(self, replica_id: int) -> bool:
        return replica_id not in self.ineligible

    # -- startup -----------------------------------------------------------------------------
    @staticmethod
    def clamp_high_watermark(checkpointed: int, log: LogView) -> int:
        """HW from the checkpoint, clamped to [log start, LEO] (it may be stale; never trusted)."""
        return max(log.log_start_offset, min(checkpointed, log.log_end_offset))

    # -- metadata ----------------------------------------------------------------------------
    def apply_metadata(
        self,
        log: LogView,
        registration: PartitionRegistration,
        now_ms: int,
        *,
        broker_epochs: Mapping[int, int] | None = None,
        ineligible: frozenset[int] | None = None,
    ) -> list[Effect]:
        """Apply the controller's partition record (``makeLeader``/``makeFollower``).

        Ignored when its partition epoch is older than ours. A new leader epoch with us as leader
        makes us leader (LESO := LEO, AssignEpoch in leader-epoch mode, follower state reset);
        with someone else as leader makes us a follower that re-validates its log against the
        leader, even when the leader is unchanged (KAFKA-7164).
        """
        if broker_epochs is not None:
            self.broker_epochs = dict(broker_epochs)
        if ineligible is not None:
            self.ineligible = ineligible
        if registration.partition_epoch < self.partition_epoch:
            self._log("ignoring stale metadata partition_epoch=%d", registration.partition_epoch)
            return []
        me = self.config.broker_id
        if registration.leader == me:
            if (
                isinstance(self.role, LeaderState)
                and self.role.leader_epoch == registration.leader_epoch
            ):
                if registration.partition_epoch == self.role.partition_epoch:
                    # Same record again (e.g. our own AlterPartition result): keep any pending
                    # proposal, but eligibility may have changed.
                    return self._maybe_increment_hw(log, now_ms)
                return self._update_leader_isr(log, registration, now_ms)
            return self._make_leader(log, registration, now_ms)
        if registration.leader_epoch < self.leader_epoch:
            return []
        if (
            isinstance(self.role, FollowerState)
            and self.role.leader_epoch == registration.leader_epoch
            and self.role.leader_id == registration.leader
        ):
            self.role = replace(
                self.role,
                partition_epoch=registration.partition_epoch,
                replicas=registration.replicas,
            )
            return []
        return self._make_follower(log, registration)

    def _make_leader(
        self, log: LogView, registration: PartitionRegistration, now_ms: int
    ) -> list[Effect]:
        # A new leader epoch is a new leadership, even for the leader of the previous one: a
        # follower's log end learned in an earlier epoch may be gone (it followed another
        # leader meanwhile and truncated, while this broker missed the changes between), so the
        # HW waits for each follower's first fetch in this epoch. Kafka keeps them when the
        # leader stays leader (``resetReplicaState``); the model checker found the loss of an
        # acknowledged write that causes (tests/sim/test_reelected_leader.py).
        is_new_leader = True
        leo = log.log_end_offset
        effects: list[Effect] = []
        if self.config.truncation.records_epoch_on_election:
            effects.append(AssignEpoch(registration.leader_epoch, leo))
        isr_members = set(registration.isr)
        states: dict[int, ReplicaState] = {}
        for replica_id in registration.replicas:
            if replica_id == self.config.broker_id:
                continue
            old = self.replica_states.get(replica_id, ReplicaState(replica_id))
            states[replica_id] = isr_rules.reset_for_leadership(
                old, now_ms=now_ms, in_isr=replica_id in isr_members, is_new_leader=is_new_leader
            )
        self.replica_states = states
        self.role = LeaderState(
            leader_epoch=registration.leader_epoch,
            partition_epoch=registration.partition_epoch,
            replicas=registration.replicas,
            isr_state=CommittedIsr(registration.isr),
            leader_epoch_start_offset=leo,
            recovery_state=registration.leader_recovery_state,
        )
        self._log(
            "became leader at LEO %d, HW %d, ISR %s", leo, self.high_watermark, registration.isr
        )
        effects.extend(self._maybe_increment_hw(log, now_ms))
        return effects

    def epoch_start_pending(self, leader_epoch: int) -> None:
        """The runner applies this leadership's ``AssignEpoch`` in a batch of durable writes
        (many partitions at once, off the event loop): until ``epoch_start_durable`` no record
        is appended (``check_produce``: NOT_LEADER_OR_FOLLOWER), so none of this epoch can be
        acknowledged, and follower fetches and OffsetsForLeaderEpoch get UNKNOWN_LEADER_EPOCH
        (retriable): a follower holding records of an epoch this leader never saw would be
        told to truncate by the new entry (KAFKA-7415), and must not be before it is on disk."""
        role = self.role
        if isinstance(role, LeaderState) and role.leader_epoch == leader_epoch:
            self.role = replace(role, epoch_start_durable=False)

    def epoch_start_durable(self, leader_epoch: int, now_ms: int) -> None:
        """The checkpoint holding ``leader_epoch``'s start is durable: writes are accepted, and
        the in-sync followers, which could not fetch meanwhile, count as caught up now (as at
        the start of a leadership). A stale call (another epoch or role since) changes
        nothing."""
        role = self.role
        if not (isinstance(role, LeaderState) and role.leader_epoch == leader_epoch
                and not role.epoch_start_durable):
            return
        self.role = replace(role, epoch_start_durable=True)
        for replica_id in role.isr_state.isr:
            state = self.replica_states.get(replica_id)
            if state is not None:
                self.replica_states[replica_id] = replace(
                    state, last_caught_up_time_ms=max(state.last_caught_up_time_ms, now_ms))
        self._log("epoch start durable: accepting writes")

    def _update_leader_isr(
        self, log: LogView, registration: PartitionRegistration, now_ms: int
    ) -> list[Effect]:
        assert isinstance(self.role, LeaderState)
        self.role = replace(
            self.role,
            partition_epoch=registration.partition_epoch,
            replicas=registration.replicas,
            isr_state=CommittedIsr(registration.isr),
        )
        return self._maybe_increment_hw(log, now_ms)

    def _make_follower(self, log: LogView, registration: PartitionRegistration) -> list[Effect]:
        effects: list[Effect] = list(self.purgatory.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        if self.is_leader:
            effects.append(WakeFollowerFetches())
        self.replica_states = {}
        mode = self.config.truncation
        cut = truncation_on_become_follower(mode, log.log_end_offset, self.high_watermark)
        if cut is not None:
            effects.append(
                TruncateTo(cut, "high-watermark rule: truncate to own HW on becoming follower")
            )
        phase = FetchPhase.FETCHING
        if mode is Truncation.EPOCH_OFFSET and log.log_end_offset > log.log_start_offset:
            phase = FetchPhase.TRUNCATING
        self.role = FollowerState(
            leader_id=registration.leader,
            leader_epoch=registration.leader_epoch,
            partition_epoch=registration.partition_epoch,
            replicas=registration.replicas,
            phase=phase,
        )
        self._log("became follower of %d", registration.leader)
        return effects

    # -- timers: the periodic work (``replication.schedule``) ----------------------------------
    def start_timers(self, now_ms: int,
                     first_due: Mapping[PeriodicWork, int] | None = None) -> None:
        """Arm the periodic work from ``now_ms`` (at open; the timers do not survive a restart,
        as no process's do)."""
        self.schedule = self.config.schedule()
        self.schedule.start(now_ms, first_due)

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` has work next: a periodic task, or the first parked produce's timeout.
        None: nothing, until an input arrives (and the runner asks again after each input)."""
        periodic = None if self.schedule is None else self.schedule.next_deadline_ms()
        return min((d for d in (periodic, self.purgatory.next_deadline_ms()) if d is not None),
                   default=None)

    def tick(self, log: LogView, now_ms: int) -> list[Effect]:
        """Do the work due at ``now_ms`` (call it at ``next_deadline_ms()`` or later): answer
        the parked produces whose timeout passed (REQUEST_TIMED_OUT), propose an ISR shrink for
        replicas lagging more than ``replica.lag.time.max.ms``, and say when the log's flush
        check and the HW checkpoint are due."""
        effects = self.expire_produces(now_ms)
        for work in () if self.schedule is None else self.schedule.take_due(now_ms):
            if work is PeriodicWork.ISR_CHECK:
                effects.extend(self.maybe_shrink_isr(log, now_ms))
            elif work is PeriodicWork.FLUSH:
                effects.append(FlushLog())
            else:
                effects.append(CheckpointHighWatermark(self.high_watermark))
        return effects

    # -- leader: produce ---------------------------------------------------------------------
    def check_produce(self, acks: int) -> ErrorCode:
        """Before appending: not leader, or acks=all with the ISR below min ISR (nothing appended).
        The produce path answers NOT_ENOUGH_REPLICAS only to a batch that is not already in the
        log (``produce.produce_as_leader``: a retry of one is answered as its original)."""
        if not isinstance(self.role, LeaderState) or not self.role.epoch_start_durable:
            # (Leader of an epoch whose start is not durable yet: not a leader for writes.)
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if acks == ACKS_ALL and len(self.role.isr_state.isr) < self._effective_min_isr(
            self.role.replicas
        ):
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def on_leader_append(
        self,
        log: LogView,
        produce_id: int,
        acks: int,
        base_offset: int,
        last_offset: int,
        now_ms: int,
        timeout_ms: int,
    ) -> list[Effect]:
        """The caller appended [base_offset, last_offset] as leader. acks=1 completes now, acks=0
        never, acks=all parks until the HW passes ``last_offset``. The follower fetches parked
        here are asked again (``WakeFollowerFetches``, last)."""
        effects = self._maybe_increment_hw(log, now_ms)
        if acks == ACKS_LEADER:
            effects.append(CompleteProduce(produce_id, ErrorCode.NONE, base_offset))
        elif acks == ACKS_ALL:
            self.purgatory.add(
                DelayedProduce(produce_id, base_offset, last_offset + 1, now_ms + timeout_ms)
            )
            effects.extend(self._try_complete_produces())
        effects.append(WakeFollowerFetches())
        return effects

    def expire_produces(self, now_ms: int) -> list[Effect]:
        return list(self.purgatory.expire(now_ms))

    def fail_waiting_produces(self) -> list[Effect]:
        """Answer every produce waiting for the HW NOT_LEADER_OR_FOLLOWER, the role unchanged
        (``replication.lease``: a leader that stepped down for clients). Nothing was
        acknowledged; an idempotent client retries the same sequences where it finds the
        leader, which answers a batch it already holds as a duplicate."""
        return list(self.purgatory.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER))

    def _try_complete_produces(self) -> list[Effect]:
        if not isinstance(self.role, LeaderState) or not len(self.purgatory):
            return []
        return list(
            self.purgatory.try_complete(
                self.high_watermark,
                len(self.role.isr_state.maximal_isr),
                self._effective_min_isr(self.role.replicas),
            )
        )

    def _maybe_increment_hw(self, log: LogView, now_ms: int) -> list[Effect]:
        role = self.role
        if not isinstance(role, LeaderState):
            return []
        new_hw = isr_rules.leader_high_watermark(
            current_high_watermark=self.high_watermark,
            leader_id=self.config.broker_id,
            leader_log_end_offset=log.log_end_offset,
            replicas=role.replicas,
            isr_state=role.isr_state,
            replica_states=self.replica_states,
            effective_min_isr=self._effective_min_isr(role.replicas),
            now_ms=now_ms,
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
            eligible=self._eligible,
        )
        if new_hw <= self.high_watermark:
            return []
        old = self.high_watermark
        self.high_watermark = new_hw
        self.producers.on_high_watermark(new_hw)
        self._log("HW %d -> %d", old, new_hw)
        effects: list[Effect] = [HighWatermarkChanged(old, new_hw)]
        effects.extend(self._try_complete_produces())
        return effects

    # -- leader: follower fetch --------------------------------------------------------------
    def handle_follower_fetch(
        self, log: LogView, fetch: FollowerFetch, now_ms: int
    ) -> FetchDecision:
        """Fence, check divergence (leader-epoch mode), record the follower's LEO, maybe expand
        the ISR and advance the HW. The decision's HW is the pre-update snapshot. The idle
        fetch takes the short way (``record_idle_follower_fetch``), to the same end."""
        if self.record_idle_follower_fetch(log, fetch, now_ms):
            leo = log.log_end_offset
            return FetchDecision(ErrorCode.NONE, self.leader_epoch, self.high_watermark,
                                 log.log_start_offset, leo, read_from=leo, read_upto=leo)
        return self._handle_follower_fetch(log, fetch, now_ms)

    def record_idle_follower_fetch(self, log: LogView, fetch: FollowerFetch,
                                   now_ms: int) -> bool:
        """The idle round's fetch (a fetch session asks every partition on every Fetch): a
        member of the ISR fetching at the leader's LEO, with the HW there too and its log start
        as last recorded. If ``fetch`` is one, it is recorded as ``handle_follower_fetch``
        records it (the follower's LEO, fetch time and last-caught-up time: what keeps it in
        the ISR) and True says the answer is the partition's HW and log start, no records, no
        effects; else nothing is recorded (False). Nothing else can follow from such a fetch:
        it passes the same fencing and the same divergence check, a member cannot be added to
        the ISR (``can_expand_isr``), a HW at the leader's LEO cannot advance
        (``leader_high_watermark`` never passes the LEO; Kafka skips the HW step too when the
        follower's LEO did not move, ``updateFollowerFetchState``).
        tests/unit/replication/test_idle_follower_fetch.py holds it to the full path."""
        role = self.role
        if not isinstance(role, LeaderState) or not role.epoch_start_durable:
            return False
        replica_id = fetch.replica_id
        state = self.replica_states.get(replica_id)
        leo = log.log_end_offset
        if (state is None or fetch.fetch_offset != leo or self.high_watermark < leo
                or fetch.log_start_offset != state.log_start_offset
                or replica_id not in role.isr_state.isr):
            return False
        if fencing.check_replica_fetch(
            role.leader_epoch,
            fetch.current_leader_epoch,
            is_leader=True,
            replica_id=replica_id,
            replicas=role.replicas,
            request_broker_epoch=fetch.broker_epoch,
            registered_broker_epoch=self.broker_epochs.get(replica_id, -1),
        ) is not ErrorCode.NONE:
            return False
        if validate_fetch(self.config.truncation, log.epoch_cache, log.log_start_offset, leo,
                          leo, fetch.last_fetched_epoch).result is not FetchValidation.OK:
            return False
        self.replica_states[replica_id] = isr_rules.update_fetch_state(
            state,
            fetch_offset=leo,
            follower_log_start_offset=fetch.log_start_offset,
            fetch_time_ms=now_ms,
            leader_log_end_offset_at_read=leo,
            broker_epoch=fetch.broker_epoch,
        )
        return True

    def _handle_follower_fetch(
        self, log: LogView, fetch: FollowerFetch, now_ms: int
    ) -> FetchDecision:
        """``handle_follower_fetch``, the whole way."""
        role = self.role
        replica_id = fetch.replica_id
        error = fencing.check_replica_fetch(
            role.leader_epoch if role is not None else UNDEFINED_EPOCH,
            fetch.current_leader_epoch,
            is_leader=isinstance(role, LeaderState),
            replica_id=replica_id,
            replicas=role.replicas if role is not None else (),
            request_broker_epoch=fetch.broker_epoch,
            registered_broker_epoch=self.broker_epochs.get(replica_id, -1),
        )
        if error is not ErrorCode.NONE:
            return FetchDecision(error, self.leader_epoch)
        assert isinstance(role, LeaderState)  # check_replica_fetch answered NOT_LEADER otherwise
        if not role.epoch_start_durable:
            # Not leader of this epoch on disk yet (``epoch_start_pending``): no divergence
            # answer may rest on the new entry; the follower retries after its backoff.
            return FetchDecision(ErrorCode.UNKNOWN_LEADER_EPOCH, role.leader_epoch)
        hw_snapshot = self.high_watermark
        leo = log.log_end_offset
        log_start = log.log_start_offset
        check = validate_fetch(
            self.config.truncation,
            log.epoch_cache,
            log_start,
            leo,
            fetch.fetch_offset,
            fetch.last_fetched_epoch,
        )
        if check.result is FetchValidation.DIVERGING:
            return FetchDecision(
                ErrorCode.NONE,
                role.leader_epoch,
                hw_snapshot,
                log_start,
                leo,
                diverging=check.diverging,
            )
        if check.result is FetchValidation.OFFSET_OUT_OF_RANGE:
            return FetchDecision(
                ErrorCode.OFFSET_OUT_OF_RANGE, role.leader_epoch, hw_snapshot, log_start, leo
            )
        old = self.replica_states.get(replica_id)
        self.replica_states[replica_id] = isr_rules.update_fetch_state(
            old if old is not None else ReplicaState(replica_id),
            fetch_offset=fetch.fetch_offset,
            follower_log_start_offset=fetch.log_start_offset,
            fetch_time_ms=now_ms,
            leader_log_end_offset_at_read=leo,
            broker_epoch=fetch.broker_epoch,
        )
        effects = self._maybe_expand_isr(replica_id, log)
        effects.extend(self._maybe_increment_hw(log, now_ms))
        return FetchDecision(
            ErrorCode.NONE,
            role.leader_epoch,
            hw_snapshot,
            log_start,
            leo,
            read_from=fetch.fetch_offset,
            read_upto=leo,
            effects=tuple(effects),
        )

    def handle_epoch_query(
        self, log: LogView, query: EpochQuery
    ) -> tuple[ErrorCode, EpochEndOffset]:
        """OffsetsForLeaderEpoch on the leader: fenced, leader-only, answer per protocol mode."""
        error = fencing.check_epoch_query(
            self.leader_epoch, query.current_leader_epoch, query.leader_epoch,
            is_leader=self.is_leader
        )
        if error is ErrorCode.NONE and isinstance(self.role, LeaderState) \
                and not self.role.epoch_start_durable:
            error = ErrorCode.UNKNOWN_LEADER_EPOCH  # as a follower's fetch, above
        if error is not ErrorCode.NONE:
            return error, EpochEndOffset(UNDEFINED_EPOCH, -1)
        answer = leader_end_offset_for(
            self.config.truncation, log.epoch_cache, query.leader_epoch, log.log_end_offset
        )
        return ErrorCode.NONE, answer

    # -- leader: ISR changes -----------------------------------------------------------------
    def _proposal(self, role: LeaderState, new_isr: tuple[int, ...]) -> ProposeIsr:
        epochs = tuple(
            self.local_broker_epoch
            if r == self.config.broker_id
            else self.replica_states.get(r, ReplicaState(r)).broker_epoch
            for r in new_isr
        )
        return ProposeIsr(
            AlterPartitionRequest(
                broker_id=self.config.broker_id,
                broker_epoch=self.local_broker_epoch,
                leader_epoch=role.leader_epoch,
                partition_epoch=role.partition_epoch,
                new_isr=new_isr,
                new_isr_broker_epochs=epochs,
                leader_recovered=role.recovery_state is LeaderRecoveryState.RECOVERING,
            )
        )

    def _maybe_expand_isr(self, replica_id: int, log: LogView) -> list[Effect]:
        role = self.role
        if not isinstance(role, LeaderState):
            return []
        state = self.replica_states[replica_id]
        # After an unclean election (RECOVERING, KIP-704) there is nothing to recover locally
        # (no transactions), so the first ISR proposal reports RECOVERED (see ``_proposal``).
        if not isr_rules.can_expand_isr(
            role.isr_state,
            state,
            high_watermark=self.high_watermark,
            leader_epoch_start_offset=role.leader_epoch_start_offset,
            eligible=self._eligible(replica_id)
            and (
                state.broker_epoch == -1
                or state.broker_epoch == self.broker_epochs.get(replica_id, -1)
            ),
        ):
            return []
        committed = role.isr_state
        assert isinstance(committed, CommittedIsr)
        pending = PendingExpandIsr(committed.isr, replica_id, committed)
        self.role = replace(role, isr_state=pending)
        self._log("proposing ISR expand +%d (LEO %d)", replica_id, state.log_end_offset)
        return [self._proposal(role, tuple(r for r in role.replicas if r in pending.maximal_isr))]

    def maybe_shrink_isr(self, log: LogView, now_ms: int) -> list[Effect]:
        """Periodic check (every replica.lag.time.max.ms / 2): propose removing lagging members;
        the HW does not move until the controller commits the shrink."""
        role = self.role
        if not isinstance(role, LeaderState) or not role.epoch_start_durable:
            return []  # (its followers cannot fetch before its epoch start is durable)
        lagging = isr_rules.out_of_sync_replicas(
            role.isr_state,
            leader_id=self.config.broker_id,
            leader_log_end_offset=log.log_end_offset,
            replica_states=self.replica_states,
            now_ms=now_ms,
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
        )
        if not lagging:
            return []
        committed = role.isr_state
        assert isinstance(committed, CommittedIsr)
        pending = PendingShrinkIsr(committed.isr, lagging, committed)
        self.role = replace(role, isr_state=pending)
        self._log("proposing ISR shrink -%s", lagging)
        return [self._proposal(role, pending.proposed_isr)]

    def is_proposal_pending(self, request: AlterPartitionRequest) -> bool:
        """Is this AlterPartition proposal still the one waiting for the controller? (Resend it
        after a timeout only then: a newer proposal, new metadata or a lost leadership made it
        moot.)"""
        role = self.role
        return (
            isinstance(role, LeaderState)
            and role.isr_state.is_inflight
            and role.leader_epoch == request.leader_epoch
            and set(isr_rules.proposed_isr(role.isr_state)) == set(request.new_isr)
        )

    def handle_alter_partition_response(
        self,
        log: LogView,
        proposal: AlterPartitionRequest,
        error: ErrorCode,
        registration: PartitionRegistration | None,
        now_ms: int,
    ) -> list[Effect]:
        """Commit, revert or keep pending (``Partition.handleAlterPartition*``)."""
        role = self.role
        if not self.is_proposal_pending(proposal) or not isinstance(role, LeaderState):
            return []  # our state moved on meanwhile
        if error is ErrorCode.NONE and registration is not None:
            if (
                registration.leader_epoch != role.leader_epoch
                or registration.partition_epoch < role.partition_epoch
            ):
                return []
            self.role = replace(
                role,
                isr_state=CommittedIsr(registration.isr),
                partition_epoch=registration.partition_epoch,
                recovery_state=registration.leader_recovery_state,
            )
            self._log(
                "ISR committed %s partition_epoch=%d",
                registration.isr,
                registration.partition_epoch,
            )
            return self._maybe_increment_hw(log, now_ms)
        if error is ErrorCode.INELIGIBLE_REPLICA:  # the controller guarantees it was not applied
            state = role.isr_state
            assert not isinstance(state, CommittedIsr)
            self.role = replace(role, isr_state=state.last_committed)
            self._log("ISR proposal rejected (%s), reverted", error.name)
            return []
        # FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...: stay pending until metadata arrives.
        self._log("ISR proposal failed (%s), pending until new metadata", error.name)
        return []

    # -- follower ----------------------------------------------------------------------------
    def next_fetch(self, log: LogView) -> FollowerFetch | EpochQuery | None:
        """The next request a follower sends to its leader (None when not fetching)."""
        role = self.role
        if (
            not isinstance(role, FollowerState)
            or role.phase is FetchPhase.FENCED
            or role.leader_id == NO_LEADER
        ):
            return None
        if role.phase is FetchPhase.TRUNCATING:
            return EpochQuery(
                self.config.broker_id, role.leader_epoch, log.epoch_cache.latest_epoch
            )
        last_fetched = (
            log.epoch_cache.latest_epoch
            if self.config.truncation is Truncation.LEADER_EPOCH
            else UNDEFINED_EPOCH
        )
        return FollowerFetch(
            replica_id=self.config.broker_id,
            fetch_offset=log.log_end_offset,
            last_fetched_epoch=last_fetched,
            current_leader_epoch=role.leader_epoch,
            log_start_offset=log.log_start_offset,
            broker_epoch=self.local_broker_epoch,
        )

    def on_epoch_answer(
        self, log: LogView, request_leader_epoch: int, error: ErrorCode, answer: EpochEndOffset
    ) -> FollowerAction:
        """Epoch-offset mode: the leader's OffsetsForLeaderEpoch answer decides the cut."""
        role = self.role
        if not isinstance(role, FollowerState) or role.leader_epoch != request_leader_epoch:
            return FollowerAction(FollowerActionKind.IGNORE)
        if error is not ErrorCode.NONE:
            return self._on_fetch_error(role, error)
        point = truncation_point(
            self.config.truncation, log.epoch_cache, log.log_end_offset, self.high_watermark, answer
        )
        if point.final:
            self.role = replace(role, phase=FetchPhase.FETCHING)
        return FollowerAction(FollowerActionKind.TRUNCATE, point.offset, reason="epoch answer")

    def on_fetch_response(self, log: LogView, response: FetchResponse) -> FollowerAction:
        """Decide what a fetch response means for this follower."""
        role = self.role
        if (
            not isinstance(role, FollowerState)
            or role.leader_epoch != response.request_leader_epoch
        ):
            return FollowerAction(FollowerActionKind.IGNORE, reason="stale leader epoch")
        if response.fetch_offset >= 0 and response.fetch_offset != log.log_end_offset:
            return FollowerAction(FollowerActionKind.IGNORE, reason="the log moved")
        if response.error is ErrorCode.OFFSET_OUT_OF_RANGE:
            return self._on_out_of_range(log, response)
        if response.error is not ErrorCode.NONE:
            return self._on_fetch_error(role, response.error)
        if response.diverging is not None:
            point = truncation_point(
                self.config.truncation,
                log.epoch_cache,
                log.log_end_offset,
                self.high_watermark,
                response.diverging,
            )
            return FollowerAction(
                FollowerActionKind.TRUNCATE,
                point.offset,
                reason=f"diverging epoch {response.diverging.epoch}@{response.diverging.end_offset}"
                + ("" if point.final else " (intermediate)"),
            )
        return FollowerAction(FollowerActionKind.APPEND)

    def _on_fetch_error(self, role: FollowerState, error: ErrorCode) -> FollowerAction:
        if error is ErrorCode.FENCED_LEADER_EPOCH:
            self.role = replace(role, phase=FetchPhase.FENCED)
            return FollowerAction(FollowerActionKind.STOP, reason=error.name)
        return FollowerAction(FollowerActionKind.RETRY, backoff=True, reason=error.name)

    def _on_out_of_range(self, log: LogView, response: FetchResponse) -> FollowerAction:
        """``fetchOffsetAndTruncate``: cut to a shorter leader log, or jump to its log start."""
        if response.log_end_offset >= 0 and response.log_end_offset < log.log_end_offset:
            return FollowerAction(
                FollowerActionKind.TRUNCATE, response.log_end_offset, reason="leader log shorter"
            )
        if response.log_start_offset > log.log_end_offset:
            return FollowerAction(
                FollowerActionKind.TRUNCATE_FULLY,
                response.log_start_offset,
                reason="behind log start",
            )
        return FollowerAction(FollowerActionKind.RETRY, backoff=True, reason="out of range")

    def after_truncate(self, log: LogView) -> list[Effect]:
        """The log was truncated: keep HW <= LEO (a follower HW may go backwards)."""
        if self.high_watermark > log.log_end_offset:
            old = self.high_watermark
            self.high_watermark = log.log_end_offset
            self.producers.on_high_watermark(self.high_watermark)
            return [HighWatermarkChanged(old, self.high_watermark)]
        return []

    def after_follower_append(self, log: LogView, response: FetchResponse) -> list[Effect]:
        """Follower HW = max(log start, min(leader HW, own LEO)); no monotonicity."""
        new_hw = max(log.log_start_offset, min(response.high_watermark, log.log_end_offset))
        if new_hw != self.high_watermark:
            old = self.high_watermark
            self.high_watermark = new_hw
            self.producers.on_high_watermark(new_hw)
            return [HighWatermarkChanged(old, new_hw)]
        return []

    def resign(self) -> list[Effect]:
        """Stop replicating (broker shutting down or partition removed)."""
        effects: list[Effect] = list(self.purgatory.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        if self.is_leader:
            effects.append(WakeFollowerFetches())
        self.role = None
        self.replica_states = {}
        return effects
