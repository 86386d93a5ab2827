"""Breadth-first explicit-state search with parent pointers (shortest counterexamples).

Bounded in states and wall time (``max_states``, ``time_limit_s``): a search that hits a bound
reports ``complete=False`` and never claims the invariants hold.
"""

from __future__ import annotations

import logging
import time
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


def _trace(
    model: Model, parents: dict[ModelState, tuple[ModelState, Action] | None], last: ModelState
) -> list[TraceStep]:
    steps: list[TraceStep] = []
    current: ModelState | None = last
    while current is not None:
        link = parents[current]
        if link is None:
            steps.append(TraceStep(None, model.full_view(current)))
            current = None
        else:
            parent, action = link
            steps.append(TraceStep(action, model.full_view(current)))
            current = parent
    steps.reverse()
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
) -> CheckResult:
    """Explore every state reachable under ``config``; stop at the first invariant violation."""
    model = Model(config)
    started = time.perf_counter()
    deadline = started + time_limit_s
    init = model.initial_state()
    parents: dict[ModelState, tuple[ModelState, Action] | None] = {init: None}
    transitions = 0
    depth = 0

    def result(complete: bool, violation: Violation | None, trace: list[TraceStep]) -> CheckResult:
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
        return result(False, violation, _trace(model, parents, init))
    frontier = [init]
    while frontier:
        next_frontier: list[ModelState] = []
        for index, state in enumerate(frontier):
            if index % 1024 == 0 and time.perf_counter() > deadline:
                return result(False, None, [])
            for action, succ in model.successors(state):
                transitions += 1
                violation = check_transition(model, state, action, succ)
                if violation is not None:
                    depth += 1
                    trace = _trace(model, parents, state)
                    trace.append(TraceStep(action, model.full_view(succ)))
                    return result(False, violation, trace)
                if succ in parents:
                    continue
                parents[succ] = (state, action)
                violation = check_state(model, succ)
                if violation is not None:
                    depth += 1
                    return result(False, violation, _trace(model, parents, succ))
                if len(parents) >= max_states:
                    return result(False, None, [])
                next_frontier.append(succ)
        if next_frontier:
            depth += 1
        frontier = next_frontier
    return result(True, None, [])
