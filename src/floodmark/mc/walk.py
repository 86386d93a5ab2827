"""Seeded random walks over the model: a cheap probe of bounds too large to explore exhaustively.

Each walk starts from the initial state and takes uniformly random enabled actions, checking every
invariant after every step, until it reaches ``depth`` steps or no action is enabled. A walk never
proves anything (``complete`` is always False); a violation it finds is real but not necessarily
the shortest. Same seed and config -> same walks.
"""

from __future__ import annotations

import logging
import random
import time

from floodmark.mc.checker import CheckResult, TraceStep
from floodmark.mc.invariants import Violation, check_state, check_transition
from floodmark.mc.model import Action, Model, ModelConfig, ModelState

log = logging.getLogger(__name__)

DEFAULT_WALK_DEPTH = 60


def random_walks(
    config: ModelConfig,
    *,
    walks: int,
    depth: int = DEFAULT_WALK_DEPTH,
    seed: int = 0,
    time_limit_s: float = 600.0,
) -> CheckResult:
    """Run up to ``walks`` random walks of at most ``depth`` steps; stop at the first violation."""
    if walks < 1 or depth < 1:
        raise ValueError("walks and depth must be >= 1")
    model = Model(config)
    rng = random.Random(seed)
    started = time.perf_counter()
    deadline = started + time_limit_s
    init = model.initial_state()
    seen: set[ModelState] = {init}
    steps_taken = 0
    longest = 0
    done = 0

    def result(trace: list[TraceStep], found: Violation | None) -> CheckResult:
        seconds = time.perf_counter() - started
        outcome = CheckResult(
            config=config,
            states=len(seen),
            transitions=steps_taken,
            depth=longest,
            seconds=seconds,
            complete=False,
            violation=found,
            trace=tuple(trace),
            search="random-walk",
            walks=done,
            seed=seed,
        )
        log.info(
            "random walks truncation=%s replicas=%d walks=%d states=%d seconds=%.2f violation=%s",
            config.truncation.value,
            config.replicas,
            done,
            len(seen),
            seconds,
            found is not None,
        )
        return outcome

    violation = check_state(model, init)
    if violation is not None:
        return result([TraceStep(None, model.full_view(init))], violation)
    for _ in range(walks):
        if time.perf_counter() > deadline:
            break
        done += 1
        state = init
        path: list[tuple[Action | None, ModelState]] = [(None, init)]
        for _step in range(depth):
            options = list(model.successors(state))
            if not options:
                break
            action, succ = options[rng.randrange(len(options))]
            steps_taken += 1
            path.append((action, succ))
            longest = max(longest, len(path) - 1)
            violation = check_transition(model, state, action, succ)
            if violation is None:
                violation = check_state(model, succ)
            if violation is not None:
                return result([TraceStep(a, model.full_view(st)) for a, st in path], violation)
            seen.add(succ)
            state = succ
    return result([], None)
