"""``check``: every state of a bounded quorum (``QuorumModelConfig``) against the invariants."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from floodmark.mc.checker import DEFAULT_MAX_STATES, DEFAULT_TIME_LIMIT_S
from floodmark.mc.invariants import Violation
from floodmark.mc.quorum.invariants import QuorumInvariants
from floodmark.mc.quorum.model import Action, QuorumModel, QuorumModelConfig, QuorumState
from floodmark.mc.search import SearchResult, breadth_first

log = logging.getLogger(__name__)

QuorumResult = SearchResult[QuorumState, Action, Violation]


def check(config: QuorumModelConfig, *, max_states: int = DEFAULT_MAX_STATES,
          time_limit_s: float = DEFAULT_TIME_LIMIT_S,
          prefix: Sequence[Action] = ()) -> tuple[QuorumModel, QuorumResult]:
    """Explore every state reachable under ``config`` (a fresh model: a test that patches the
    core sees its patch); stop at the first violation, with the shortest path to it.

    With ``prefix``: every state reachable from the state those actions lead to (each must be
    offered where it is taken); a trace then starts at the initial state."""
    model = QuorumModel(config)
    invariants = QuorumInvariants(model)
    lead: list[tuple[Action | None, QuorumState]] = [(None, model.initial_state())]
    for action in prefix:
        state = next((s for a, s in model.successors(lead[-1][1]) if a == action), None)
        if state is None:
            raise ValueError(f"prefix action {action} is not offered")
        lead.append((action, state))
    result = breadth_first(lead[-1][1], model.successors, model.key,
                           invariants.check_state, invariants.check_step,
                           max_states=max_states, time_limit_s=time_limit_s)
    if prefix and result.path:
        result = replace(result, path=(*lead, *result.path[1:]))
    log.info("quorum model check voters=%d states=%d depth=%d seconds=%.2f holds=%s",
             config.voters, result.states, result.depth, result.seconds, result.holds)
    return model, result
