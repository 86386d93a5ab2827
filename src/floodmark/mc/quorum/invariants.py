"""The quorum's invariants over model states: the simulator's definitions
(``floodmark.spec.quorum``), applied to every state and every step the checker
reaches. Names and details are the simulator's.

State invariants read the voters' values and the histories: election safety (over every
leader there ever was), HW <= LEO, one value per committed offset, every committed record on a
majority of the voters' logs (a crashed voter's disk counts), log matching. Step invariants
compare a voter with itself across one step: a voter that becomes leader holds every record
committed before (leader completeness), a leader's HW never decreases in its epoch, and a
running voter's HW never moves back (a truncation below it would cut a committed record).
"""

from __future__ import annotations

from collections.abc import Callable

from floodmark.controller import in_force
from floodmark.mc.invariants import Violation
from floodmark.mc.quorum.model import (
    Action,
    QuorumModel,
    QuorumState,
    StateView,
    committed_entries,
)
from floodmark.mc.quorum.voter import VoterValue
from floodmark.spec import quorum as inv


def _name(i: int) -> str:
    return f"c{i + 1}"


def election_safety(state: StateView) -> str | None:
    leaders: dict[int, int] = {}
    for epoch, node in state.leaders:
        holder = inv.other_leader(leaders, epoch, node)
        if holder is not None:
            return f"epoch {epoch} has leaders c{holder} and c{node}"
        leaders[epoch] = node
    return None


def hw_le_leo(state: StateView) -> str | None:
    for i, value in enumerate(state.voters):
        if value.alive and inv.hw_above_leo(value.high_watermark, len(value.log)):
            return f"{_name(i)} HW {value.high_watermark} > LEO {len(value.log)}"
    return None


def committed_changed(state: StateView) -> str | None:
    first: dict[int, tuple[int, str]] = {}
    for offset, epoch, name in state.committed:
        known = inv.commit_conflict(first, offset, (epoch, name))
        if known is not None:
            return f"offset {offset} committed as {known}, later as {(epoch, name)}"
        first[offset] = (epoch, name)
    return None


def committed_on_majority(state: StateView, bootstrap: int = 0) -> str | None:
    """With a changing voter set (KIP-853): on a majority of *some* voter set in force on
    some node (its log's latest ``voter_set`` record, else nodes 1..``bootstrap``; 0: every
    node) — a record committed under one set is on a majority of it, and the set after one
    change either keeps that (an added voter has caught up) or is in force only where the
    change record is, past every record committed before it."""
    committed = committed_entries(state.committed)
    everyone = tuple(range(1, len(state.voters) + 1))
    sets = sorted({everyone if not bootstrap else in_force(
        v.stored.voter_sets, len(v.log), tuple(range(1, bootstrap + 1)))
        for v in state.voters})
    found = None
    for voter_set in sets:
        found = inv.under_replicated(committed, [state.voters[v - 1].entries()
                                                 for v in voter_set], len(voter_set))
        if found is None:
            return None
    assert found is not None
    offset, entry, holders = found
    return f"committed {entry} at offset {offset} is on {holders} voters"


def log_matching(state: StateView) -> str | None:
    logs = {i: v.entries() for i, v in enumerate(state.voters)}
    found = inv.log_matching(logs)
    if found is None:
        return None
    a, b, top, offset = found
    return (f"{_name(a)} and {_name(b)} agree on epoch at {top} but differ at {offset}: "
            f"{logs[a].get(offset)} vs {logs[b].get(offset)}")


STATE_INVARIANTS: dict[str, Callable[[StateView], str | None]] = {
    inv.ELECTION_SAFETY: election_safety,
    inv.HW_LE_LEO: hw_le_leo,
    inv.COMMITTED_CHANGED: committed_changed,
    inv.COMMITTED_LOST: committed_on_majority,
    inv.LOG_MATCHING: log_matching,
}


def leader_completeness(before: StateView, i: int, old: VoterValue, new: VoterValue
                        ) -> str | None:
    if not new.is_leader or (old.is_leader and old.epoch == new.epoch):
        return None
    entries = new.entries()
    missing = inv.missing_committed(entries, committed_entries(before.committed))
    if missing is None:
        return None
    offset, entry = missing
    return (f"{_name(i)} leads epoch {new.epoch} without committed {entry} at offset {offset} "
            f"(has {entries.get(offset)})")


def leader_hw_monotonic(before: StateView, i: int, old: VoterValue, new: VoterValue
                        ) -> str | None:
    if old.is_leader and new.is_leader and old.epoch == new.epoch and inv.hw_cut(
            old.high_watermark, new.high_watermark):
        return f"{_name(i)} HW {new.high_watermark} < {old.high_watermark}"
    return None


def hw_not_cut(before: StateView, i: int, old: VoterValue, new: VoterValue) -> str | None:
    if old.alive and new.alive and inv.hw_cut(old.high_watermark, new.high_watermark):
        return f"{_name(i)} cut its log to {new.high_watermark}, below its HW {old.high_watermark}"
    return None


STEP_INVARIANTS: dict[str, Callable[[StateView, int, VoterValue, VoterValue], str | None]] = {
    inv.LEADER_COMPLETENESS: leader_completeness,
    inv.LEADER_HW_MONOTONIC: leader_hw_monotonic,
    inv.COMMITTED_LOST: hw_not_cut,
}


class QuorumInvariants:
    """The checks of one model run, memoised on what they read."""

    def __init__(self, model: QuorumModel) -> None:
        self.model = model
        bootstrap = model.config.bootstrap
        self._state_checks = dict(STATE_INVARIANTS)
        self._state_checks[inv.COMMITTED_LOST] = (
            lambda view: committed_on_majority(view, bootstrap))
        self._states: dict[tuple[object, ...], Violation | None] = {}
        self._steps: dict[tuple[object, ...], Violation | None] = {}

    def check_state(self, state: QuorumState) -> Violation | None:
        key = (state.voters, state.leaders, state.committed)
        if key not in self._states:
            view = self.model.view(state)
            self._states[key] = next(
                (Violation(name, detail) for name, check in self._state_checks.items()
                 if (detail := check(view)) is not None), None)
        return self._states[key]

    def check_step(self, before: QuorumState, action: Action, after: QuorumState
                   ) -> Violation | None:
        changed = tuple((i, a, b) for i, (a, b) in enumerate(zip(before.voters, after.voters,
                                                                 strict=True)) if a != b)
        if not changed:
            return None
        key = (changed, before.committed)
        if key not in self._steps:
            view = self.model.view(before)
            self._steps[key] = next(
                (Violation(name, detail) for i, a, b in changed
                 for name, check in STEP_INVARIANTS.items()
                 if (detail := check(view, i, self.model.voter(a), self.model.voter(b)))
                 is not None), None)
        return self._steps[key]
