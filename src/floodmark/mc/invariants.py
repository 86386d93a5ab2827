"""SPEC §4 invariants over model states (and, for the monotonic ones, over transitions).

Each check returns ``None`` when it holds or a one-line description of the violation. The
properties the simulator checks too are defined once, in ``floodmark.spec.partition``, over
``ReplicaView`` values (``replica_views``); what only a state shows (the controller's ISR
against the leader's, the history of committed records, a restarted replica's read_committed
view) is judged here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

from floodmark.mc.model import (
    STUCK_FETCH,
    TXN_COMMIT,
    TXN_STATUS,
    Action,
    Model,
    ModelState,
    StateView,
)
from floodmark.mc.pieces import (
    Entry,
    ReplicaValue,
    has_transactions,
    record_kind,
    record_name,
)
from floodmark.records import AbortedTracker, iter_batches
from floodmark.replication import LeaderState
from floodmark.replication import isr as isr_rules
from floodmark.spec import partition as spec


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str
    detail: str


StateCheck = Callable[[Model, StateView], str | None]
TransitionCheck = Callable[[Model, StateView, Action, StateView], str | None]


def replica_views(model: Model, state: StateView) -> tuple[spec.ReplicaView, ...]:
    """The state's replicas as the shared invariants see them (no producer state: no LSO);
    built once per view (several invariants read them)."""
    cached = model.replica_views_of
    if cached is not None and cached[0] is state:
        return cached[1]
    name = model.config.name
    views = tuple([spec.ReplicaView(name(r), rep.log, rep.hw, rep.leader_epoch, rep.is_leader)
                   for r, rep in enumerate(state.replicas)])
    model.replica_views_of = (state, views)
    return views


def hw_below_leo(model: Model, state: StateView) -> str | None:
    """HW <= LEO on every replica."""
    for view in replica_views(model, state):
        found = spec.hw_above_leo(view)
        if found is not None:
            return found
    return None


def one_leader_per_epoch(model: Model, state: StateView) -> str | None:
    """No two replicas presume leadership in the same leader epoch."""
    return spec.one_leader_per_epoch(replica_views(model, state))


def log_matching(model: Model, state: StateView) -> str | None:
    """Below min(HW_a, HW_b) two replicas hold identical records."""
    return spec.log_matching(replica_views(model, state))


def strong_isr(model: Model, state: StateView) -> str | None:
    """Leader completeness: below any presumed leader's HW, every member of the controller's ISR
    holds exactly the leader's records (anything exposed to consumers is on every electable
    replica)."""
    reps = state.replicas
    isr = state.controller.registration.isr
    for r, rep in enumerate(reps):
        if not rep.is_leader or not rep.hw:
            continue
        prefix = rep.log[: rep.hw]
        for m in isr:
            if reps[m].log[: rep.hw] != prefix:
                ln, mn = model.config.name(r), model.config.name(m)
                return (
                    f"ISR member {mn} lacks records below leader {ln}'s HW {rep.hw} "
                    f"(epoch {rep.leader_epoch})"
                )
    return None


def replication_quorum_superset(model: Model, state: StateView) -> str | None:
    """The controller's current leader, once in the current leader epoch, waits for (at least)
    every member of the controller's ISR: its maximal ISR (plus a proposal in flight) contains
    the controller's ISR."""
    reg = state.controller.registration
    r = reg.leader
    if r < 0:
        return None
    rep = state.replicas[r]
    role = rep.role
    if not isinstance(role, LeaderState) or role.leader_epoch != reg.leader_epoch:
        return None
    waits = set(role.isr_state.maximal_isr) | set(isr_rules.proposed_isr(role.isr_state))
    missing = [m for m in reg.isr if m not in waits]
    if missing:
        names = ",".join(model.config.name(m) for m in missing)
        return f"leader {model.config.name(r)}'s maximal ISR lacks controller ISR member(s) {names}"
    return None


def single_record_per_committed_offset(model: Model, state: StateView) -> str | None:
    """No two different records were ever committed at one offset."""
    known: dict[int, object] = {}
    for offset, epoch, record in state.committed:
        earlier = spec.commit_conflict(known, offset, (epoch, record))
        if earlier is not None:
            return (f"two different records were committed at offset {offset}: {earlier} and "
                    f"{(epoch, record)}")
        known[offset] = (epoch, record)
    return None


def no_committed_record_lost(model: Model, state: StateView) -> str | None:
    """Every record that was ever below some leader's HW is still held, at its offset, by some
    replica."""
    views = replica_views(model, state)
    for offset, epoch, record in state.committed:
        if all(spec.lacks_record(view, offset, record, epoch=epoch) for view in views):
            return f"committed record r{record} (offset {offset}, epoch {epoch}) is on no replica"
    return None


def leader_hw_monotonic(
    model: Model, before: StateView, action: Action, after: StateView
) -> str | None:
    """A replica's HW never decreases while it stays leader (of the same epoch or a later one)."""
    for r in range(len(before.replicas)):
        a, b = before.replicas[r], after.replicas[r]
        if a.is_leader and b.is_leader:
            found = spec.leader_hw_decreased(model.config.name(r), b.leader_epoch, a.hw, b.hw)
            if found is not None:
                return found
    return None


def epochs_monotonic(
    model: Model, before: StateView, action: Action, after: StateView
) -> str | None:
    """Leader epochs never decrease, on the controller or on a running replica (a restarted
    process has no epoch until it applies metadata again)."""
    if after.controller.registration.leader_epoch < before.controller.registration.leader_epoch:
        return "controller epoch decreased"
    for r in range(len(before.replicas)):
        b = after.replicas[r]
        if b.role is not None:
            found = spec.epoch_decreased(model.config.name(r), before.replicas[r].leader_epoch,
                                         b.leader_epoch)
            if found is not None:
                return found
    return None


def truncation_progress(
    model: Model, before: StateView, action: Action, after: StateView
) -> str | None:
    """A diverging fetch answer always lets the follower cut something (else it loops forever)."""
    if action.kind == STUCK_FETCH:
        f, leader = model.config.name(action.replica), model.config.name(action.arg)
        return f"{f} gets a diverging answer from {leader} but its truncation point cuts nothing"
    return None


def read_committed_view(model: Model, rep: ReplicaValue, scan_chunk_bytes: int, *,
                        with_index: bool = True) -> tuple[int, list[int]]:
    """What a read_committed consumer fetching from offset 0 gets from replica ``rep`` once it
    restarted (its log read in chunks of ``scan_chunk_bytes``; ``with_index``: the ``.txnindex``
    the live path wrote survived): the LSO and the offsets of the records it is shown. The
    broker's start-up path over a real storage ``Log`` rebuilds the producer state and the
    ``.txnindex`` (``mc.restart``); the LSO comes from that producer state, the batches from
    ``Log.read``, the aborted transactions from the ``.txnindex``, and
    ``records.AbortedTracker`` filters, exactly as Fetch with isolation_level=1 and a consumer
    do."""
    key = ("read_committed", rep.log, rep.hw, scan_chunk_bytes, with_index)
    found = model.state_verdicts.get(key)
    if found is None:
        restarted = model.restarts.restart(rep.log, rep.hw, scan_chunk_bytes,
                                           with_index=with_index)
        tracker = AbortedTracker.from_response(
            [(a.producer_id, a.first_offset) for a in restarted.aborted])
        shown = [h.base_offset for _p, h in iter_batches(restarted.records, validate=False)
                 if not tracker.skip(h)]
        found = model.state_verdicts[key] = (restarted.last_stable_offset, shown)
    return found  # type: ignore[return-value]


def _restart_views(model: Model, rep: ReplicaValue) -> Iterator[tuple[str, int, list[int]]]:
    """(how it was read, LSO, offsets shown) of ``rep`` restarted with each chunk size, with
    the ``.txnindex`` the live path wrote and without it."""
    for with_index in (True, False):
        for chunk in model.config.scan_chunk_bytes:
            lso, shown = read_committed_view(model, rep, chunk, with_index=with_index)
            lost = "" if with_index else " that lost its .txnindex"
            yield f"after a restart{lost} reading its log in {chunk}-byte chunks", lso, shown


def _marker_at(log: tuple[Entry, ...], txn: int) -> tuple[int, bool] | None:
    for offset, (_epoch, record) in enumerate(log):
        kind = record_kind(record)
        if kind.txn == txn and kind.marker is not None:
            return offset, kind.marker
    return None


def read_committed_sees_only_committed(model: Model, state: StateView) -> str | None:
    """A read_committed consumer (of any replica that presumes leadership) never sees a record
    of an aborted transaction, nor one of a transaction still open: every transactional record
    it is shown has its transaction's COMMIT marker later in the log, below the LSO."""
    for r, rep in enumerate(state.replicas):
        if not rep.is_leader or not has_transactions(rep.log):
            continue
        seen = _uncommitted_seen(model, rep)
        if seen is not None:
            return f"read_committed at {model.config.name(r)} {seen}"
    return None


def _uncommitted_seen(model: Model, rep: ReplicaValue) -> str | None:
    """What a read_committed consumer of ``rep`` sees that it must not, after any of the
    restarts (a function of the log and the HW: memoised on them)."""
    key = ("uncommitted_seen", rep.log, rep.hw)
    memo = model.state_verdicts
    if key in memo:
        return cast(str | None, memo[key])
    found = None
    for how, lso, shown in _restart_views(model, rep):
        for offset in shown:
            kind = record_kind(rep.log[offset][1])
            if kind.txn is None:
                continue
            marker = _marker_at(rep.log, kind.txn)
            what = spec.uncommitted_shown(None if marker is None or marker[0] >= lso
                                          else marker[1])
            if what is not None:
                found = (f"(LSO {lso}, {how}) sees {record_name(rep.log[offset][1])} at "
                         f"offset {offset} of an {what} transaction")
                break
        if found is not None:
            break
    memo[key] = found
    return found


def committed_transaction_all_or_nothing(model: Model, state: StateView) -> str | None:
    """A committed transaction is all-or-nothing: once its COMMIT marker is visible to a
    read_committed consumer of a leader, every record the producer wrote in it (all
    acknowledged before the commit) is visible there too, once each."""
    for t, packed in enumerate(state.txns):
        status, written = divmod(packed, TXN_STATUS)
        if status != TXN_COMMIT:
            continue
        for r, rep in enumerate(state.replicas):
            if not rep.is_leader:
                continue
            marker = _marker_at(rep.log, t)
            if marker is None or not marker[1]:
                continue
            for how, lso, shown in _restart_views(model, rep):
                if marker[0] >= lso:
                    continue
                seqs = sorted(record_kind(rep.log[o][1]).seq for o in shown
                              if record_kind(rep.log[o][1]).txn == t)
                if seqs != list(range(written)):
                    got = ", ".join(f"t{t}.{s}" for s in seqs) or "none"
                    return (f"transaction t{t} committed {written} record(s) but read_committed "
                            f"at {model.config.name(r)} ({how}) shows {got}")
    return None


STATE_INVARIANTS: dict[str, StateCheck] = {
    "HwBelowLeo": hw_below_leo,
    "OneLeaderPerEpoch": one_leader_per_epoch,
    "LogMatching": log_matching,
    "StrongIsr": strong_isr,
    "ReplicationQuorumSuperset": replication_quorum_superset,
    "OneRecordPerCommittedOffset": single_record_per_committed_offset,
    "NoCommittedRecordLost": no_committed_record_lost,
    "ReadCommittedSeesOnlyCommitted": read_committed_sees_only_committed,
    "CommittedTransactionAllOrNothing": committed_transaction_all_or_nothing,
}

TRANSITION_INVARIANTS: dict[str, TransitionCheck] = {
    "LeaderHwMonotonic": leader_hw_monotonic,
    "EpochsMonotonic": epochs_monotonic,
    "TruncationProgress": truncation_progress,
}


_UNKNOWN = object()


def check_state(model: Model, state: ModelState) -> Violation | None:
    """The first state invariant ``state`` violates. Invariants read only the replicas, the
    controller and the history, so the verdict is memoised on those ids per model run."""
    key = (state.replicas, state.controller, state.committed, state.txns)
    memo = model.state_verdicts
    known = memo.get(key, _UNKNOWN)
    if known is not _UNKNOWN:
        return cast(Violation | None, known)
    view = model.view(state)
    model.replica_views_of = (view, model.spec_views(state.replicas))
    found = None
    for name, check in STATE_INVARIANTS.items():
        detail = check(model, view)
        if detail is not None:
            found = Violation(name, detail)
            break
    memo[key] = found
    return found


def check_transition(
    model: Model, before: ModelState, action: Action, after: ModelState
) -> Violation | None:
    """The first transition invariant the step violates (memoised like ``check_state``)."""
    stuck = action.kind == STUCK_FETCH
    old, new = before.replicas, after.replicas
    if not stuck and old == new and before.controller == after.controller:
        return None
    # The transition invariants compare a replica (and the controller) with itself across the
    # step: only the parts that changed can violate them, so the verdict is memoised on those.
    changed = tuple([(r, a, b) for r, (a, b) in enumerate(zip(old, new, strict=True)) if a != b])
    key = (changed, before.controller, after.controller, stuck)
    memo = model.transition_verdicts
    known = memo.get(key, _UNKNOWN)
    if known is not _UNKNOWN:
        return cast(Violation | None, known)
    views = model.view(before), model.view(after)
    found = None
    for name, check in TRANSITION_INVARIANTS.items():
        detail = check(model, views[0], action, views[1])
        if detail is not None:
            found = Violation(name, detail)
            break
    memo[key] = found
    return found
