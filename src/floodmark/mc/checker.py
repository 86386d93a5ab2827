"""The partition model checker's search: ``floodmark.mc.search.breadth_first`` (parent
pointers, shortest counterexamples) over ``Model`` with ``mc.invariants``.

Bounded in states and wall time (``max_states``, ``time_limit_s``): a search that hits a bound
reports ``complete=False`` and never claims the invariants hold.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from floodmark.mc.invariants import Violation, check_state, check_transition
from floodmark.mc.model import Action, Model, ModelConfig, StateView
from floodmark.mc.search import breadth_first

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
    init = model.initial_state()
    lead = [TraceStep(None, model.full_view(init))]
    for action in prefix:
        nxt = next((succ for act, succ in model.successors(init) if act == action), None)
        if nxt is None:
            raise ValueError(f"prefix action {action} is not offered")
        init = nxt
        lead.append(TraceStep(action, model.full_view(init)))
    # The seen set holds each state as one flat tuple of small ints (``Model.key``), with its
    # parent's: about a third of the memory of the states themselves.
    found = breadth_first(
        init, model.successors, model.key, partial(check_state, model),
        partial(check_transition, model), max_states=max_states, time_limit_s=time_limit_s)
    trace = [TraceStep(action, model.full_view(state)) for action, state in found.path]
    if trace and prefix:
        trace = lead + trace[1:]
    outcome = CheckResult(
        config=config,
        states=found.states,
        transitions=found.transitions,
        depth=found.depth,
        seconds=found.seconds,
        complete=found.complete,
        violation=found.violation,
        trace=tuple(trace),
    )
    log.info(
        "model check truncation=%s replicas=%d states=%d depth=%d seconds=%.2f holds=%s",
        config.truncation.value,
        config.replicas,
        outcome.states,
        outcome.depth,
        outcome.seconds,
        outcome.holds,
    )
    return outcome
