"""The exhaustive search split into parts that run on Spark executors (``--spark MASTER``).

The driver explores the first levels breadth-first (checking every invariant on the way) until
the frontier has at least ``parts`` states; each frontier state travels as the actions that lead
to it from the initial state (portable: a model's state ids are private to its process). An
executor replays them in a fresh model and explores everything reachable from there
(``checker.check(prefix=...)``). The parts overlap (a state reachable from two frontier states
is explored twice), so "states" is the sum of the parts' own counts, not the number of distinct
states. The invariants hold when every part completes without a violation; a counterexample is
the shortest one any part found (shortest within its part, not necessarily globally).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from floodmark.mc.checker import (
    DEFAULT_MAX_STATES,
    DEFAULT_TIME_LIMIT_S,
    CheckResult,
    TraceStep,
    check,
    replay,
)
from floodmark.mc.invariants import check_state, check_transition
from floodmark.mc.model import Action, Model, ModelConfig, ModelState


@dataclass(frozen=True, slots=True)
class PartResult:
    """What one executor sends back (small and picklable)."""

    states: int
    transitions: int
    depth: int
    complete: bool
    invariant: str | None
    detail: str | None
    actions: tuple[Action, ...]


def split(config: ModelConfig, parts: int) -> tuple[list[tuple[Action, ...]], int] | None:
    """Frontier paths of the first BFS levels (at least ``parts`` of them, or the whole space)
    and the depth they reach; None when a violation shows up on the way (the caller then runs
    the plain search, which finds the shortest counterexample at once)."""
    model = Model(config)
    init = model.initial_state()
    if check_state(model, init) is not None:
        return None
    seen = {model.key(init)}
    frontier: list[tuple[ModelState, tuple[Action, ...]]] = [(init, ())]
    depth = 0
    while frontier and len(frontier) < parts:
        following = []
        for state, path in frontier:
            for action, succ in model.successors(state):
                if check_transition(model, state, action, succ) is not None:
                    return None
                key = model.key(succ)
                if key in seen:
                    continue
                seen.add(key)
                if check_state(model, succ) is not None:
                    return None
                following.append((succ, (*path, action)))
        frontier = following
        depth += 1 if following else 0
    return [path for _state, path in frontier], depth


def check_part(config: ModelConfig, prefix: tuple[Action, ...], max_states: int,
               time_limit_s: float) -> PartResult:
    result = check(config, max_states=max_states, time_limit_s=time_limit_s, prefix=prefix)
    actions = tuple(step.action for step in result.trace[1:] if step.action is not None)
    violation = result.violation
    return PartResult(result.states, result.transitions, result.depth + len(prefix),
                      result.complete, violation.invariant if violation else None,
                      violation.detail if violation else None, actions)


def check_on_spark(
    config: ModelConfig,
    master: str,
    *,
    parts: int = 64,
    max_states: int = DEFAULT_MAX_STATES,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> CheckResult:
    """``check`` with the parts of the search as Spark tasks on ``master``. ``max_states`` and
    ``time_limit_s`` bound each part."""
    started = time.perf_counter()
    first = split(config, parts)
    if first is None:
        return check(config, max_states=max_states, time_limit_s=time_limit_s)
    prefixes, split_depth = first
    results = _run(master, config, prefixes, max_states, time_limit_s)
    seconds = time.perf_counter() - started
    bad = [r for r in results if r.invariant is not None]
    trace: tuple[TraceStep, ...] = ()
    violation = None
    if bad:
        from floodmark.mc.invariants import Violation

        worst = min(bad, key=lambda r: len(r.actions))
        assert worst.invariant is not None and worst.detail is not None
        violation = Violation(worst.invariant, worst.detail)
        views = replay(config, list(worst.actions))
        assert views is not None, "a part's counterexample does not replay"
        steps = [TraceStep(a, v) for a, v in zip(worst.actions, views[1:], strict=True)]
        trace = (TraceStep(None, views[0]), *steps)
    return CheckResult(
        config=config,
        states=sum(r.states for r in results),
        transitions=sum(r.transitions for r in results),
        depth=max((r.depth for r in results), default=split_depth),
        seconds=seconds,
        complete=not bad and all(r.complete for r in results),
        violation=violation,
        trace=trace,
        search=f"bfs on spark ({len(prefixes)} parts)",
    )


def _run(master: str, config: ModelConfig, prefixes: list[tuple[Action, ...]],
         max_states: int, time_limit_s: float) -> list[PartResult]:
    import floodmark.spark

    session = floodmark.spark.batch_session(master, "floodmark-sim-check")

    def run_parts(items: Iterable[tuple[Action, ...]]) -> Iterable[PartResult]:
        for prefix in items:
            yield check_part(config, prefix, max_states, time_limit_s)

    rdd = session.sparkContext.parallelize(prefixes, len(prefixes))
    return list(rdd.mapPartitions(run_parts).collect())
