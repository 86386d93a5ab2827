"""The model checker drives the code the broker and the simulator run (issue 10, "Done means").

Two proofs: (1) the objects behind a state are the running classes, and a search calls their
methods (counted by wrapping the class methods, not the checker's own functions); (2) one
scenario taken step by step through the checker's transitions and through the simulator ends
every step with the same logs, epoch caches, leader epochs and roles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from floodmark.controller.logic import ControllerLogic
from floodmark.mc.checker import check
from floodmark.mc.model import Model, ModelConfig, ModelState
from floodmark.mc.pieces import ModelLog, ReplicaValue
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.epochs import EpochCache
from floodmark.replication.modes import Truncation
from floodmark.replication.partition import FollowerState, LeaderState, Partition
from floodmark.sim.partition.script import Script

LE = Truncation.LEADER_EPOCH
NAMES = ("A", "B", "C")


def test_the_objects_behind_a_state_are_the_running_classes() -> None:
    model = Model(ModelConfig(LE, replicas=3))
    state = model.initial_state()
    live = model.live(state, 0)
    assert type(live.partition) is Partition
    assert type(live.driver) is ReplicaDriver
    assert live.driver.partition is live.partition and live.driver.log is live.log
    assert type(live.log.epoch_cache) is EpochCache
    assert type(live.log) is ModelLog  # the one stand-in: a log in memory behind the driver
    assert type(model.live_controller(state)) is ControllerLogic


def test_a_search_goes_through_partition_driver_and_controller_logic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: Counter[str] = Counter()

    def counted(cls: type, name: str) -> None:
        real: Callable[..., Any] = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[f"{cls.__name__}.{name}"] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    for name in ("apply_metadata", "on_leader_append", "handle_follower_fetch",
                 "on_fetch_response", "maybe_shrink_isr", "handle_alter_partition_response"):
        counted(Partition, name)
    for name in ("apply", "on_fetch_response"):
        counted(ReplicaDriver, name)
    for name in ("fence_broker", "unfence_broker", "move_leadership", "alter_partition"):
        counted(ControllerLogic, name)
    result = check(ModelConfig(LE, replicas=2, log_size=2, max_epoch=3))
    assert result.holds
    assert all(calls[name] > 0 for name in (
        "Partition.apply_metadata", "Partition.on_leader_append",
        "Partition.handle_follower_fetch", "Partition.on_fetch_response",
        "Partition.maybe_shrink_isr", "Partition.handle_alter_partition_response",
        "ReplicaDriver.apply", "ReplicaDriver.on_fetch_response",
        "ControllerLogic.fence_broker", "ControllerLogic.unfence_broker",
        "ControllerLogic.move_leadership", "ControllerLogic.alter_partition",
    )), calls


# -- one scenario, both worlds -------------------------------------------------------------------
def _checker_replica(value: ReplicaValue, me: int) -> tuple[object, ...]:
    role = value.role
    kind = "leader" if isinstance(role, LeaderState) else "follower" if role else "none"
    leader = value.presumed_leader(me)
    return (
        [[o, e, f"r{v}"] for o, (e, v) in enumerate(value.log)],
        [list(p) for p in value.cache],
        value.leader_epoch,
        kind,
        NAMES[leader] if leader >= 0 else None,
        value.hw,
    )


def _sim_replica(script: Script, name: str) -> tuple[object, ...]:
    broker = script.cluster.broker(name)
    snap = broker.snapshot()
    p = broker.partition
    assert p is not None
    leader = p.leader_id
    kind = "leader" if isinstance(p.role, LeaderState) else (
        "follower" if isinstance(p.role, FollowerState) else "none")
    return (snap["log"], snap["epochs"], snap["leader_epoch"], kind,
            script.cluster.name_of(leader) if leader >= 0 else None, snap["hw"])


def _take(model: Model, state: ModelState, kind: str, replica: int,
          arg: int | None = None) -> ModelState:
    found = [(a, s) for a, s in model.successors(state)
             if a.kind == kind and a.replica == replica and (arg is None or a.arg == arg)]
    assert found, f"{kind}({NAMES[replica]}) not offered"
    return max(found, key=lambda pair: pair[0].arg)[1]  # ApplyMetadata: the newest change


def test_one_scenario_gives_the_same_trace_in_the_checker_and_in_the_simulator() -> None:
    """A leads epoch 0 and writes r0; B and C replicate it; C misses the move of leadership to
    B (epoch 1) while B writes r1 and A, now a follower, fetches it; C applies the change late
    and catches up. After every step both worlds hold the same logs, epoch caches, leader epochs,
    roles and HWs."""
    a, b, c = 0, 1, 2
    s = Script(NAMES, LE, restart_keeps_isr=False)
    model = Model(ModelConfig(LE, replicas=3, log_size=2, max_epoch=2))
    state = model.initial_state()
    compared = 0

    def same() -> None:
        nonlocal compared
        view = model.view(state)
        for r, name in enumerate(NAMES):
            assert _checker_replica(view.replicas[r], r) == _sim_replica(s, name), (name, s.steps[-1])
        compared += 1

    s.boot()
    for r in (a, b, c):
        state = _take(model, state, "ApplyMetadata", r)
    same()
    s.produce("r0")
    state = _take(model, state, "LeaderWrite", a, 0)
    same()
    for r, name in ((b, "B"), (c, "C")):
        s.fetch(name)
        state = _take(model, state, "Fetch", r, a)
        same()
    s.deafen("C", "C misses the next metadata change")
    s.move_leadership()
    state = _take(model, state, "MoveLeadership", b)
    state = _take(model, state, "ApplyMetadata", a)
    state = _take(model, state, "ApplyMetadata", b)
    same()
    s.produce("r1")
    state = _take(model, state, "LeaderWrite", b, 1)
    same()
    s.fetch("A")
    state = _take(model, state, "Fetch", a, b)
    same()
    s.undeafen("C", "C applies the change late")
    state = _take(model, state, "ApplyMetadata", c)
    same()
    s.fetch("C")
    state = _take(model, state, "Fetch", c, b)
    same()
    view = model.view(state)
    assert [rep.log for rep in view.replicas] == [((0, 0), (1, 1))] * 3
    assert compared == 9
