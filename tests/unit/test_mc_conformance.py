"""The model's own HW, ISR and fencing rules agree with the broker's (``replication.isr`` and
``replication.fencing``) on every reachable state of small bounds.

The model computes these itself for speed (the truncation decisions it takes from the real code
directly); this test is what keeps the two from drifting apart.
"""

from __future__ import annotations

from collections import deque

import pytest

from floodmark.errors import ErrorCode
from floodmark.mc.model import Action, Model, ModelConfig, ModelState, ReplicaState, members
from floodmark.replication.epochs import UNDEFINED_EPOCH
from floodmark.replication.modes import Truncation

isr_rules = pytest.importorskip("floodmark.replication.isr")
fencing = pytest.importorskip("floodmark.replication.fencing")

# The model abstracts time away: a follower counts as caught up only when its LEO equals the
# leader's (now=1, lag=0, last caught up at 0 => the time clause never holds).
NOW_MS = 1
LAG_MS = 0


def reachable(config: ModelConfig, limit: int) -> list[ModelState]:
    model = Model(config)
    init = model.initial_state()
    seen = {init}
    queue = deque([init])
    while queue and len(seen) < limit:
        state = queue.popleft()
        for _, succ in model.successors(state):
            if succ not in seen:
                seen.add(succ)
                queue.append(succ)
    return list(seen)


def isr_state(model: Model, rep: ReplicaState) -> object:
    """The broker's explicit ISR state for the model's (committed ISR, proposal) pair."""
    isr = tuple(members(rep.isr, model.n))
    committed = isr_rules.CommittedIsr(isr)
    if not rep.pending_isr:
        return committed
    proposed = members(rep.pending_isr, model.n)
    added = [r for r in proposed if r not in isr]
    if added:
        assert len(added) == 1 and set(isr) <= set(proposed)
        return isr_rules.PendingExpandIsr(isr, added[0], committed)
    removing = tuple(r for r in isr if r not in proposed)
    return isr_rules.PendingShrinkIsr(isr, removing, committed)


def broker_hw(model: Model, current_hw: int, r: int, rep: ReplicaState) -> int:
    n = model.n
    return int(
        isr_rules.leader_high_watermark(
            current_high_watermark=current_hw,
            leader_id=r,
            leader_log_end_offset=rep.leo,
            replicas=tuple(range(n)),
            isr_state=isr_state(model, rep),
            replica_states={
                f: isr_rules.ReplicaState(f, log_end_offset=rep.remote_leo[f])
                for f in range(n)
                if f != r
            },
            effective_min_isr=min(model.config.min_insync_replicas, n),
            now_ms=NOW_MS,
            replica_lag_time_max_ms=LAG_MS,
            eligible=lambda _replica: True,
        )
    )


CONFIGS = [
    ModelConfig(Truncation.LEADER_EPOCH, replicas=2, log_size=2, max_epoch=3),
    ModelConfig(Truncation.LEADER_EPOCH, replicas=2, log_size=2, max_epoch=3, async_isr=False),
    ModelConfig(Truncation.LEADER_EPOCH, replicas=3, log_size=2, max_epoch=2),
    ModelConfig(Truncation.LEADER_EPOCH, replicas=3, log_size=2, max_epoch=2, async_isr=False),
    ModelConfig(
        Truncation.LEADER_EPOCH, replicas=3, log_size=2, max_epoch=2, min_insync_replicas=2
    ),
    ModelConfig(Truncation.EPOCH_OFFSET, replicas=2, log_size=2, max_epoch=3),
    ModelConfig(Truncation.HIGH_WATERMARK, replicas=2, log_size=2, max_epoch=3, fencing=False),
]


@pytest.mark.parametrize(
    "config",
    CONFIGS,
    ids=lambda c: f"{c.truncation.value}-{c.replicas}-{'async' if c.async_isr else 'atomic'}",
)
def test_model_rules_match_replication_core(config: ModelConfig) -> None:
    model = Model(config)
    states = reachable(config, limit=20_000)
    assert len(states) > 500
    checked_hw = checked_fetch = checked_expand = checked_shrink = checked_pending = 0
    for state in states:
        successors = list(model.successors(state))
        offered = {action for action, _ in successors}
        for r, rep in enumerate(state.replicas):
            if rep.leader == r:
                # The leader's HW is a fixpoint of the broker's rule ...
                assert broker_hw(model, rep.hw, r, rep) == rep.hw
                checked_hw += 1
                checked_pending += bool(rep.pending_isr)
            elif rep.leader >= 0:
                # ... and fetch admission is the broker's fencing check.
                leader = state.replicas[rep.leader]
                request_epoch = rep.leader_epoch if config.fenced else UNDEFINED_EPOCH
                error = fencing.check_leader_request(
                    leader.leader_epoch, request_epoch, is_leader=leader.leader == rep.leader
                )
                admitted = model._leader_for_fetch(state, r) is not None
                assert admitted == (error is ErrorCode.NONE), (state, r, error)
                checked_fetch += 1
            if rep.leader != r:
                continue
            current = state.controller_leader == r and state.controller_epoch == rep.leader_epoch
            if not config.async_isr and not current:
                continue  # atomic ISR changes: only the controller's current leader proposes
            isr = tuple(members(rep.isr, model.n))
            current_isr_state = isr_state(model, rep)
            lagging = set(
                isr_rules.out_of_sync_replicas(
                    current_isr_state,
                    leader_id=r,
                    leader_log_end_offset=rep.leo,
                    replica_states={
                        f: isr_rules.ReplicaState(f, log_end_offset=rep.remote_leo[f])
                        for f in range(model.n)
                        if f != r and rep.remote_leo[f] >= 0
                    },
                    now_ms=NOW_MS,
                    replica_lag_time_max_ms=LAG_MS,
                )
            )
            for f in range(model.n):
                if f == r:
                    continue
                shrink = Action("LeaderShrinkIsr", r, f) in offered
                assert shrink == (f in lagging), (state, r, f)
                checked_shrink += 1
                if f in isr:
                    continue
                expected = isr_rules.can_expand_isr(
                    current_isr_state,
                    isr_rules.ReplicaState(f, log_end_offset=rep.remote_leo[f]),
                    high_watermark=rep.hw,
                    leader_epoch_start_offset=rep.leso,
                    eligible=True,
                )
                assert (Action("LeaderExpandIsr", r, f) in offered) == expected, (state, r, f)
                checked_expand += 1
        # Every HW step the model takes is the broker's rule applied to the pre-step HW.
        for _action, succ in successors:
            for r, rep in enumerate(succ.replicas):
                if rep.leader == r:
                    assert broker_hw(model, state.replicas[r].hw, r, rep) == rep.hw
    assert checked_hw and checked_fetch and checked_shrink and checked_expand
    assert bool(checked_pending) == config.async_isr
