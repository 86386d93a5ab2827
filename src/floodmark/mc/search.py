"""Breadth-first explicit-state search with parent pointers, for any transition system.

The caller gives the initial state, the successor relation, a hashable key per state (the seen
set holds keys and parent keys only), and the invariants (per state, per step). The search
stops at the first violation, with the shortest path to it (re-derived from the parent keys by
taking the successors again: actions are not stored), or when ``max_states`` distinct states or
``time_limit_s`` seconds are reached (``complete=False``: nothing is claimed then).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

S = TypeVar("S")
A = TypeVar("A")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class SearchResult(Generic[S, A, V]):
    states: int
    transitions: int
    depth: int
    seconds: float
    complete: bool
    """The whole reachable space was explored and no invariant failed."""
    violation: V | None
    path: tuple[tuple[A | None, S], ...]
    """To the violating state or step: (None, initial), then (action, state) per step."""

    @property
    def holds(self) -> bool:
        return self.complete and self.violation is None

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else float("inf")


def breadth_first(initial: S, successors: Callable[[S], Iterable[tuple[A, S]]],
                  key: Callable[[S], Hashable], check_state: Callable[[S], V | None],
                  check_step: Callable[[S, A, S], V | None], *, max_states: int,
                  time_limit_s: float) -> SearchResult[S, A, V]:
    started = time.perf_counter()
    deadline = started + time_limit_s
    init_key = key(initial)
    parents: dict[Hashable, Hashable | None] = {init_key: None}
    transitions = depth = 0

    def done(complete: bool, violation: V | None = None, last: Hashable | None = None,
             step: tuple[A, S] | None = None) -> SearchResult[S, A, V]:
        path: list[tuple[A | None, S]] = []
        if violation is not None and last is not None:
            path = _path(initial, successors, key, parents, last)
            if step is not None:
                path.append(step)
        return SearchResult(len(parents), transitions, depth, time.perf_counter() - started,
                            complete, violation, tuple(path))

    violation = check_state(initial)
    if violation is not None:
        return done(False, violation, init_key)
    # Each state waits in the frontier with its key (taken once, when the state was found).
    frontier: list[tuple[S, Hashable]] = [(initial, init_key)]
    while frontier:
        next_frontier: list[tuple[S, Hashable]] = []
        for index, (state, state_key) in enumerate(frontier):
            if index % 256 == 0 and time.perf_counter() > deadline:
                return done(False)
            for action, succ in successors(state):
                transitions += 1
                violation = check_step(state, action, succ)
                if violation is not None:
                    depth += 1
                    return done(False, violation, state_key, (action, succ))
                succ_key = key(succ)
                if succ_key in parents:
                    continue
                parents[succ_key] = state_key
                violation = check_state(succ)
                if violation is not None:
                    depth += 1
                    return done(False, violation, succ_key)
                if len(parents) >= max_states:
                    return done(False)
                next_frontier.append((succ, succ_key))
        if next_frontier:
            depth += 1
        frontier = next_frontier
    return done(True)


def _path(initial: S, successors: Callable[[S], Iterable[tuple[A, S]]],
          key: Callable[[S], Hashable], parents: dict[Hashable, Hashable | None],
          last: Hashable) -> list[tuple[A | None, S]]:
    keys: list[Hashable] = []
    current: Hashable | None = last
    while current is not None:
        keys.append(current)
        current = parents[current]
    keys.reverse()
    state = initial
    path: list[tuple[A | None, S]] = [(None, initial)]
    for wanted in keys[1:]:
        action, state = next((a, s) for a, s in successors(state) if key(s) == wanted)
        path.append((action, state))
    return path
