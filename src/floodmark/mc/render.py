"""Human and JSON renderings of checker results and counterexample traces (no printing here)."""

from __future__ import annotations

from typing import Any

from floodmark.mc.checker import CheckResult, TraceStep
from floodmark.mc.model import (
    NO_LEADER,
    STUCK_FETCH,
    Action,
    ModelConfig,
    ModelState,
    ReplicaState,
    members,
)


def _names(config: ModelConfig, mask: int) -> list[str]:
    return [config.name(r) for r in members(mask, config.replicas)]


def describe(action: Action | None, after: ModelState, config: ModelConfig) -> str:
    """One line saying what happened in a step."""
    if action is None:
        return "initial state"
    name = config.name(action.replica) if action.replica >= 0 else "?"
    other = config.name(action.arg) if 0 <= action.arg < config.replicas else "?"
    kind = action.kind
    if kind == "ElectLeader":
        return f"controller elects {name} leader of epoch {after.controller_epoch}"
    if kind == "ControllerShrinkIsr":
        isr = ",".join(_names(config, after.controller_isr))
        return f"controller removes {name} from the ISR (epoch {after.controller_epoch}, ISR {{{isr}}})"
    if kind == "BecomeLeader":
        return f"{name} applies the epoch {action.arg} request: becomes leader"
    if kind == "BecomeFollower":
        req = after.requests[action.arg]
        target = config.name(req.leader) if req.leader != NO_LEADER else "no leader"
        return f"{name} applies the epoch {action.arg} request: follows {target}"
    if kind == "LeaderWrite":
        return f"{name} (leader) appends r{action.arg}"
    if kind == "LeaderShrinkIsr":
        verb = "proposes removing" if config.async_isr else "shrinks the ISR: removes"
        return f"{name} (leader) {verb} {other}"
    if kind == "LeaderExpandIsr":
        verb = "proposes adding" if config.async_isr else "expands the ISR: adds"
        return f"{name} (leader) {verb} {other}"
    if kind == "AlterPartitionAccepted":
        isr = ",".join(_names(config, after.controller_isr))
        return f"controller accepts {name}'s AlterPartition: ISR {{{isr}}}"
    if kind == "AlterPartitionRejected":
        return f"controller rejects {name}'s AlterPartition (stale leader epoch)"
    if kind == "Fetch":
        return f"{name} fetches from {other}"
    if kind == STUCK_FETCH:
        return f"{name} fetches from {other}: diverging answer, nothing to cut (stuck)"
    if kind == "OffsetsForLeaderEpoch":
        return f"{name} asks {other} OffsetsForLeaderEpoch and truncates"
    if kind == "UncleanRestart":
        return f"{name} restarts uncleanly, keeping offsets < {action.arg}"
    return f"{kind} {name} {action.arg}"


def replica_dict(rep: ReplicaState) -> dict[str, Any]:
    return {
        "log": [[o, e, f"r{v}"] for o, (e, v) in enumerate(rep.log)],
        "leo": rep.leo,
        "hw": rep.hw,
        "epochs": [[e, s] for e, s in rep.cache],
        "leader_epoch": rep.leader_epoch,
        "leader": rep.leader,
        "isr": rep.isr,
        "proposed_isr": rep.pending_isr,
    }


def step_dict(step: TraceStep, config: ModelConfig) -> dict[str, Any]:
    state = step.state
    return {
        "action": describe(step.action, state, config),
        "kind": step.action.kind if step.action else "Init",
        "controller": {
            "leader_epoch": state.controller_epoch,
            "leader": config.name(state.controller_leader)
            if state.controller_leader != NO_LEADER
            else None,
            "isr": _names(config, state.controller_isr),
        },
        "committed": [[o, e, f"r{v}"] for o, e, v in state.committed],
        "replicas": {
            config.name(r): {
                **replica_dict(rep),
                "leader": config.name(rep.leader) if rep.leader != NO_LEADER else None,
                "isr": _names(config, rep.isr) if rep.leader == r else None,
                "proposed_isr": _names(config, rep.pending_isr) if rep.pending_isr else None,
            }
            for r, rep in enumerate(state.replicas)
        },
    }


def result_dict(result: CheckResult) -> dict[str, Any]:
    config = result.config
    violation: dict[str, Any] | None = None
    if result.violation is not None:
        violation = {
            "invariant": result.violation.invariant,
            "detail": result.violation.detail,
            "trace": [step_dict(step, config) for step in result.trace],
        }
    return {
        "truncation": config.truncation.value,
        "replicas": config.replicas,
        "log_size": config.log_size,
        "max_epoch": config.max_epoch,
        "max_records": config.record_limit,
        "min_insync_replicas": config.min_insync_replicas,
        "unclean_restarts": config.unclean_restarts,
        "fencing": config.fenced,
        "async_isr": config.async_isr,
        "search": result.search,
        "walks": result.walks,
        "seed": result.seed,
        "states": result.states,
        "transitions": result.transitions,
        "depth": result.depth,
        "seconds": round(result.seconds, 3),
        "states_per_second": round(result.states_per_second),
        "complete": result.complete,
        "holds": result.holds,
        "violation": violation,
    }


def _replica_line(config: ModelConfig, r: int, rep: ReplicaState) -> str:
    log = " ".join(f"{o}:e{e}:r{v}" for o, (e, v) in enumerate(rep.log)) or "-"
    cache = ", ".join(f"{e}:{s}" for e, s in rep.cache)
    if rep.leader == r:
        role = f"leader e{rep.leader_epoch} ISR={{{','.join(_names(config, rep.isr))}}}"
        if rep.pending_isr:
            role += f" proposed={{{','.join(_names(config, rep.pending_isr))}}}"
    elif rep.leader != NO_LEADER:
        role = f"follows {config.name(rep.leader)} e{rep.leader_epoch}"
    else:
        role = f"no leader e{rep.leader_epoch}" if rep.leader_epoch >= 0 else "idle"
    return f"    {config.name(r)}: [{log}] LEO={rep.leo} HW={rep.hw} epochs={{{cache}}}  {role}"


def trace_text(result: CheckResult) -> list[str]:
    config = result.config
    lines: list[str] = []
    for index, step in enumerate(result.trace):
        state = step.state
        leader = (
            config.name(state.controller_leader) if state.controller_leader != NO_LEADER else "none"
        )
        isr = ",".join(_names(config, state.controller_isr))
        lines.append(f"  {index:2d}. {describe(step.action, state, config)}")
        lines.append(
            f"      controller: epoch={state.controller_epoch} leader={leader} ISR={{{isr}}}"
        )
        for r, rep in enumerate(state.replicas):
            lines.append("  " + _replica_line(config, r, rep))
    return lines


def result_text(result: CheckResult) -> str:
    config = result.config
    fencing = "on" if config.fenced else "off"
    header = (
        f"model check: truncation={config.truncation.value} replicas={config.replicas} "
        f"log-size={config.log_size} max-epoch={config.max_epoch} "
        f"max-records={config.record_limit} min-isr={config.min_insync_replicas} "
        f"unclean-restarts={config.unclean_restarts} fencing={fencing} "
        f"isr-changes={'async' if config.async_isr else 'atomic'}"
    )
    walking = result.search == "random-walk"
    if walking:
        header += f"\nsearch: {result.walks} random walks, seed {result.seed}"
    lines = [
        header,
        f"states explored: {result.states}  transitions: {result.transitions}  "
        f"depth: {result.depth}",
        f"wall time: {result.seconds:.2f} s  ({result.states_per_second:,.0f} states/s)",
    ]
    if result.violation is not None:
        lines.append(f"verdict: VIOLATED {result.violation.invariant}: {result.violation.detail}")
        kind = (
            "counterexample (random walk, not necessarily shortest)"
            if walking
            else ("shortest counterexample")
        )
        lines.append(f"{kind} ({len(result.trace) - 1} steps):")
        lines.extend(trace_text(result))
    elif walking:
        lines.append(f"verdict: NO VIOLATION in {result.walks} random walks (not a proof)")
    elif result.complete:
        lines.append("verdict: HOLDS (every reachable state checked)")
    else:
        lines.append("verdict: INCOMPLETE (state or time bound hit before exhausting the space)")
    return "\n".join(lines)
