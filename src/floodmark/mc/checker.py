"""Breadth-first explicit-state search with parent pointers (shortest counterexamples).

Bounded in states and wall time (``max_states``, ``time_limit_s``): a search that hits a bound
reports ``complete=False`` and never claims the invariants hold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from floodmark.mc.invariants import Violation, check_state, check_transition
from floodmark.mc.model import Action, Model, ModelConfig, ModelState, StateView

log = logging.getLogger(__name__)

DEFAULT_MAX_STATES = 5_000_000
DEFAULT_TIME_LIMIT_S = 600.0


@dataclass(frozen=True, slots=True)
class TraceStep:
    action: Action | None
    """None for the initial state."""
    state: StateView
    """The state after the action, as values (comparable across model runs)."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    config: ModelConfig
    states: int
    """Distinct states reached."""
    transitions: int
    depth: int
    """BFS levels fully or partly explored (length of the longest shortest path seen)."""
    seconds: float
    complete: bool
    """True when the whole reachable state space was explored (no bound hit, no violation)."""
    violation: Violation | None
    trace: tuple[TraceStep, ...]
    search: str = "bfs"
    """"bfs" (exhaustive, shortest counterexample) or "random-walk" (never a proof)."""
    walks: int = 0
    seed: int | None = None

    @property
    def holds(self) -> bool:
        return self.complete and self.violation is None

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else float("inf")


StateKey = tuple[int, ...]


def _trace(
    model: Model, parents: dict[StateKey, StateKey | None], last: StateKey
) -> list[TraceStep]:
    """The path to ``last``: parent keys back to the initial state, then forward again, finding
    each step's action among the parent's successors (actions are not stored: a parent pointer
    per state is all the search keeps)."""
    keys: list[StateKey] = []
    current: StateKey | None = last
    while current is not None:
        keys.append(current)
        current = parents[current]
    keys.reverse()
    state = model.from_key(keys[0])
    steps = [TraceStep(None, model.full_view(state))]
    for key in keys[1:]:
        action, state = next(
            (a, succ) for a, succ in model.successors(state) if model.key(succ) == key
        )
        steps.append(TraceStep(action, model.full_view(state)))
    return steps


def replay(config: ModelConfig, actions: list[Action]) -> list[StateView] | None:
    """Take ``actions`` from the initial state in a fresh model: the states passed, or None if
    some action is not offered where the trace takes it (a trace the model cannot produce)."""
    model = Model(config)
    state = model.initial_state()
    views = [model.full_view(state)]
    for action in actions:
        nxt = next((succ for act, succ in model.successors(state) if act == action), None)
        if nxt is None:
            return None
        state = nxt
        views.append(model.full_view(state))
    return views


def check(
    config: ModelConfig,
    *,
    max_states: int = DEFAULT_MAX_STATES,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    prefix: Sequence[Action] = (),
) -> CheckResult:
    """Explore every state reachable under ``config``; stop at the first invariant violation.

    With ``prefix``: every state reachable from the state those actions lead to (one part of a
    search split by ``floodmark.mc.distributed``); a trace then starts at the initial state."""
    model = Model(config)
    started = time.perf_counter()
    deadline = started + time_limit_s
    init = model.initial_state()
    lead = [TraceStep(None, model.full_view(init))]
    for action in prefix:
        nxt = next((succ for act, succ in model.successors(init) if act == action), None)
        if nxt is None:
            raise ValueError(f"prefix action {action} is not offered")
        init = nxt
        lead.append(TraceStep(action, model.full_view(init)))
    # Seen states as flat tuples of small ints, each with its parent's (the BFS tree): about a
    # third of the memory of the states themselves.
    init_key = model.key(init)
    parents: dict[StateKey, StateKey | None] = {init_key: None}
    transitions = 0
    depth = 0

    def result(complete: bool, violation: Violation | None, trace: list[TraceStep]) -> CheckResult:
        if trace and prefix:
            trace = lead + trace[1:]
        seconds = time.perf_counter() - started
        outcome = CheckResult(
            config=config,
            states=len(parents),
            transitions=transitions,
            depth=depth,
            seconds=seconds,
            complete=complete,
            violation=violation,
            trace=tuple(trace),
        )
        log.info(
            "model check truncation=%s replicas=%d states=%d depth=%d seconds=%.2f holds=%s",
            config.truncation.value,
            config.replicas,
            outcome.states,
            depth,
            seconds,
            outcome.holds,
        )
        return outcome

    violation = check_state(model, init)
    if violation is not None:
        return result(False, violation, _trace(model, parents, init_key))
    frontier = [init]
    key_of = model.key
    while frontier:
        next_frontier: list[ModelState] = []
        for index, state in enumerate(frontier):
            if index % 1024 == 0 and time.perf_counter() > deadline:
                return result(False, None, [])
            state_key = key_of(state)
            for action, succ in model.successors(state):
                transitions += 1
                violation = check_transition(model, state, action, succ)
                if violation is not None:
                    depth += 1
                    trace = _trace(model, parents, state_key)
                    trace.append(TraceStep(action, model.full_view(succ)))
                    return result(False, violation, trace)
                succ_key = key_of(succ)
                if succ_key in parents:
                    continue
                parents[succ_key] = state_key
                violation = check_state(model, succ)
                if violation is not None:
                    depth += 1
                    return result(False, violation, _trace(model, parents, succ_key))
                if len(parents) >= max_states:
                    return result(False, None, [])
                next_frontier.append(succ)
        if next_frontier:
            depth += 1
        frontier = next_frontier
    return result(True, None, [])
