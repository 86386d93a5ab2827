"""SPEC §4 invariants over model states (and, for the monotonic ones, over transitions).

Each check returns ``None`` when it holds or a one-line description of the violation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from floodmark.mc.model import STUCK_FETCH, Action, Model, ModelState, members


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str
    detail: str


StateCheck = Callable[[Model, ModelState], str | None]
TransitionCheck = Callable[[Model, ModelState, Action, ModelState], str | None]


def hw_below_leo(model: Model, state: ModelState) -> str | None:
    """HW <= LEO on every replica."""
    for r, rep in enumerate(state.replicas):
        if rep.hw > rep.leo:
            return f"{model.config.name(r)} has HW {rep.hw} > LEO {rep.leo}"
    return None


def one_leader_per_epoch(model: Model, state: ModelState) -> str | None:
    """No two replicas presume leadership in the same leader epoch."""
    seen: dict[int, int] = {}
    for r, rep in enumerate(state.replicas):
        if rep.leader == r:
            other = seen.get(rep.leader_epoch)
            if other is not None:
                names = model.config.name(other), model.config.name(r)
                return f"{names[0]} and {names[1]} both lead epoch {rep.leader_epoch}"
            seen[rep.leader_epoch] = r
    return None


def log_matching(model: Model, state: ModelState) -> str | None:
    """Below min(HW_a, HW_b) two replicas hold identical records."""
    reps = state.replicas
    for a in range(model.n):
        for b in range(a + 1, model.n):
            bound = min(reps[a].hw, reps[b].hw)
            for o in range(bound):
                if reps[a].log[o] != reps[b].log[o]:
                    na, nb = model.config.name(a), model.config.name(b)
                    return f"{na} and {nb} differ at offset {o} < min HW {bound}"
    return None


def strong_isr(model: Model, state: ModelState) -> str | None:
    """Leader completeness: below any presumed leader's HW, every member of the controller's ISR
    holds exactly the leader's records (anything exposed to consumers is on every electable
    replica)."""
    reps = state.replicas
    for r, rep in enumerate(reps):
        if rep.leader != r:
            continue
        for m in members(state.controller_isr, model.n):
            other = reps[m]
            if other.log[: rep.hw] != rep.log[: rep.hw]:
                ln, mn = model.config.name(r), model.config.name(m)
                return (
                    f"ISR member {mn} lacks records below leader {ln}'s HW {rep.hw} "
                    f"(epoch {rep.leader_epoch})"
                )
    return None


def replication_quorum_superset(model: Model, state: ModelState) -> str | None:
    """The controller's current leader, once in the current epoch, waits for (at least) every
    member of the controller's ISR: its maximal ISR contains the controller's ISR."""
    r = state.controller_leader
    if r < 0:
        return None
    rep = state.replicas[r]
    if rep.leader != r or rep.leader_epoch != state.controller_epoch:
        return None
    missing = state.controller_isr & ~(rep.isr | rep.pending_isr)
    if missing:
        names = ",".join(model.config.name(m) for m in members(missing, model.n))
        return f"leader {model.config.name(r)}'s maximal ISR lacks controller ISR member(s) {names}"
    return None


def single_record_per_committed_offset(model: Model, state: ModelState) -> str | None:
    """No two different records were ever committed at one offset."""
    last_offset = -1
    for offset, _epoch, _record in state.committed:
        if offset == last_offset:
            return f"two different records were committed at offset {offset}"
        last_offset = offset
    return None


def no_committed_record_lost(model: Model, state: ModelState) -> str | None:
    """Every record that was ever below some leader's HW is still held, at its offset, by some
    replica."""
    for offset, epoch, record in state.committed:
        entry = (epoch, record)
        if not any(rep.leo > offset and rep.log[offset] == entry for rep in state.replicas):
            return f"committed record r{record} (offset {offset}, epoch {epoch}) is on no replica"
    return None


def leader_hw_monotonic(
    model: Model, before: ModelState, action: Action, after: ModelState
) -> str | None:
    """A replica's HW never decreases while it stays leader."""
    for r in range(model.n):
        a, b = before.replicas[r], after.replicas[r]
        if a.leader == r and b.leader == r and b.hw < a.hw:
            return f"leader {model.config.name(r)}'s HW went from {a.hw} to {b.hw}"
    return None


def epochs_monotonic(
    model: Model, before: ModelState, action: Action, after: ModelState
) -> str | None:
    """Leader epochs never decrease, on any replica or on the controller."""
    if after.controller_epoch < before.controller_epoch:
        return "controller epoch decreased"
    for r in range(model.n):
        if after.replicas[r].leader_epoch < before.replicas[r].leader_epoch:
            return f"{model.config.name(r)}'s leader epoch decreased"
    return None


def truncation_progress(
    model: Model, before: ModelState, action: Action, after: ModelState
) -> str | None:
    """A diverging fetch answer always lets the follower cut something (else it loops forever)."""
    if action.kind == STUCK_FETCH:
        f, leader = model.config.name(action.replica), model.config.name(action.arg)
        return f"{f} gets a diverging answer from {leader} but its truncation point cuts nothing"
    return None


STATE_INVARIANTS: dict[str, StateCheck] = {
    "HwBelowLeo": hw_below_leo,
    "OneLeaderPerEpoch": one_leader_per_epoch,
    "LogMatching": log_matching,
    "StrongIsr": strong_isr,
    "ReplicationQuorumSuperset": replication_quorum_superset,
    "OneRecordPerCommittedOffset": single_record_per_committed_offset,
    "NoCommittedRecordLost": no_committed_record_lost,
}

TRANSITION_INVARIANTS: dict[str, TransitionCheck] = {
    "LeaderHwMonotonic": leader_hw_monotonic,
    "EpochsMonotonic": epochs_monotonic,
    "TruncationProgress": truncation_progress,
}


def check_state(model: Model, state: ModelState) -> Violation | None:
    for name, check in STATE_INVARIANTS.items():
        detail = check(model, state)
        if detail is not None:
            return Violation(name, detail)
    return None


def check_transition(
    model: Model, before: ModelState, action: Action, after: ModelState
) -> Violation | None:
    for name, check in TRANSITION_INVARIANTS.items():
        detail = check(model, before, action, after)
        if detail is not None:
            return Violation(name, detail)
    return None
