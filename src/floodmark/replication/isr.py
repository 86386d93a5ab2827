"""In-sync replica rules: the leader's view of each follower, shrink, expand, and the HW.

Pure functions over immutable values; ``partition.py`` calls them.

* ``ReplicaState`` is what the leader knows of one follower (``Replica.scala``): the LEO learned
  from the follower's last fetch offset (``UNKNOWN_OFFSET`` = -1 until the first fetch in this
  leadership), ``last_caught_up_time_ms`` and friends.
* The ISR itself is an explicit state, never a flag: ``CommittedIsr`` (what the controller
  accepted), ``PendingExpandIsr`` and ``PendingShrinkIsr`` (an AlterPartition proposal in flight).
  ``maximal_isr`` is the set the leader must wait for: the committed ISR plus a replica being added;
  during a shrink still the old ISR (a shrink must never advance the HW before the controller agrees).
* ``leader_high_watermark``: min LEO over the leader, the maximal ISR and caught-up eligible
  followers; *strict min ISR* (Kafka 3.7+, KAFKA-15583): the HW never advances while the committed
  ISR is smaller than ``min(min.insync.replicas, replication factor)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """The leader's record of one follower's fetch progress."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int = -1


def is_caught_up(
    state: ReplicaState, leader_log_end_offset: int, now_ms: int, replica_lag_time_max_ms: int
) -> bool:
    """At the leader's LEO now, or was at the leader's LEO within the lag time."""
    return (
        state.log_end_offset == leader_log_end_offset
        or now_ms - state.last_caught_up_time_ms <= replica_lag_time_max_ms
    )


def update_fetch_state(
    state: ReplicaState,
    *,
    fetch_offset: int,
    follower_log_start_offset: int,
    fetch_time_ms: int,
    leader_log_end_offset_at_read: int,
    broker_epoch: int,
) -> ReplicaState:
    """Kafka's ``updateFetchStateOrThrow`` (the broker-epoch check is done by fencing first).

    ``last_caught_up_time_ms`` becomes the latest time t such that the follower has since fetched
    up to the leader's LEO as of t: now, if this fetch reached the current LEO; the time of the
    previous fetch, if this one reached the LEO the leader had back then.
    """
    last_caught_up = state.last_caught_up_time_ms
    if fetch_offset >= leader_log_end_offset_at_read:
        last_caught_up = max(last_caught_up, fetch_time_ms)
    elif fetch_offset >= state.last_fetch_leader_log_end_offset:
        last_caught_up = max(last_caught_up, state.last_fetch_time_ms)
    return ReplicaState(
        replica_id=state.replica_id,
        log_end_offset=fetch_offset,
        log_start_offset=follower_log_start_offset,
        last_fetch_leader_log_end_offset=max(
            leader_log_end_offset_at_read, state.last_fetch_leader_log_end_offset
        ),
        last_fetch_time_ms=fetch_time_ms,
        last_caught_up_time_ms=last_caught_up,
        broker_epoch=broker_epoch,
    )


def reset_for_leadership(
    state: ReplicaState, *, now_ms: int, in_isr: bool, is_new_leader: bool
) -> ReplicaState:
    """``resetReplicaState`` on a new leader epoch: in-ISR followers count as caught up now; a
    brand-new leader also forgets every follower LEO (so its HW waits for one fetch from each)."""
    caught_up = now_ms if in_isr else 0
    if is_new_leader:
        return ReplicaState(replica_id=state.replica_id, last_caught_up_time_ms=caught_up)
    return replace(state, last_caught_up_time_ms=caught_up)


# -- the ISR as explicit states ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommittedIsr:
    """No ISR change in flight; ``isr`` is what the controller committed."""

    isr: tuple[int, ...]

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class PendingExpandIsr:
    """AlterPartition(ISR + ``adding``) in flight: ``adding`` already counts for HW and acks."""

    isr: tuple[int, ...]
    adding: int
    last_committed: CommittedIsr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return (*self.isr, self.adding)

    @property
    def is_inflight(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class PendingShrinkIsr:
    """AlterPartition(ISR - ``removing``) in flight: the old ISR still counts for HW and acks."""

    isr: tuple[int, ...]
    removing: tuple[int, ...]
    last_committed: CommittedIsr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return True

    @property
    def proposed_isr(self) -> tuple[int, ...]:
        return tuple(r for r in self.isr if r not in self.removing)


IsrState = CommittedIsr | PendingExpandIsr | PendingShrinkIsr


def proposed_isr(state: IsrState) -> tuple[int, ...]:
    """The ISR an in-flight proposal asks for (the committed ISR when nothing is in flight)."""
    if isinstance(state, PendingExpandIsr):
        return state.maximal_isr
    if isinstance(state, PendingShrinkIsr):
        return state.proposed_isr
    return state.isr


def out_of_sync_replicas(
    isr_state: IsrState,
    *,
    leader_id: int,
    leader_log_end_offset: int,
    replica_states: Mapping[int, ReplicaState],
    now_ms: int,
    replica_lag_time_max_ms: int,
) -> tuple[int, ...]:
    """ISR members to remove (``maybeShrinkIsr``): not at the leader LEO and not caught up within
    the lag time. A member with no state at all is out of sync. Empty while a change is in flight."""
    if isr_state.is_inflight:
        return ()
    lagging: list[int] = []
    for replica_id in isr_state.isr:
        if replica_id == leader_id:
            continue
        state = replica_states.get(replica_id)
        if state is None or (
            state.log_end_offset != leader_log_end_offset
            and now_ms - state.last_caught_up_time_ms > replica_lag_time_max_ms
        ):
            lagging.append(replica_id)
    return tuple(lagging)


def can_expand_isr(
    isr_state: IsrState,
    state: ReplicaState,
    *,
    high_watermark: int,
    leader_epoch_start_offset: int,
    eligible: bool,
) -> bool:
    """``maybeExpandIsr`` guard: nothing in flight, not a member, eligible (registered, unfenced,
    current broker epoch), LEO >= HW and LEO >= the leader epoch start offset (KAFKA-7128).
    There is deliberately no time condition."""
    return (
        not isr_state.is_inflight
        and state.replica_id not in isr_state.isr
        and eligible
        and state.log_end_offset >= high_watermark
        and state.log_end_offset >= leader_epoch_start_offset
    )


def leader_high_watermark(
    *,
    current_high_watermark: int,
    leader_id: int,
    leader_log_end_offset: int,
    replicas: tuple[int, ...],
    isr_state: IsrState,
    replica_states: Mapping[int, ReplicaState],
    effective_min_isr: int,
    now_ms: int,
    replica_lag_time_max_ms: int,
    eligible: Callable[[int], bool],
) -> int:
    """The leader HW after this step (``maybeIncrementLeaderHW``); never lower than the current."""
    if len(isr_state.isr) < effective_min_isr:
        return current_high_watermark  # strict min ISR: frozen below min.insync.replicas
    new_hw = leader_log_end_offset
    maximal = isr_state.maximal_isr
    for replica_id in replicas:
        if replica_id == leader_id:
            continue
        state = replica_states.get(replica_id)
        leo = state.log_end_offset if state is not None else UNKNOWN_OFFSET
        if leo >= new_hw:
            continue
        counts = replica_id in maximal or (
            state is not None
            and state.log_end_offset != UNKNOWN_OFFSET  # never fetched in this leadership
            and is_caught_up(state, leader_log_end_offset, now_ms, replica_lag_time_max_ms)
            and eligible(replica_id)
        )
        if counts:
            new_hw = leo
    return max(new_hw, current_high_watermark)
