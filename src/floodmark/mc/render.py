"""Human and JSON renderings of checker results and counterexample traces (no printing here)."""

from __future__ import annotations

from typing import Any

from floodmark.constants import NO_LEADER
from floodmark.mc.checker import CheckResult, TraceStep
from floodmark.mc.model import STUCK_FETCH, Action, ModelConfig, StateView
from floodmark.mc.pieces import ControllerValue, ReplicaValue, record_name
from floodmark.replication import FollowerState, LeaderState
from floodmark.replication import isr as isr_rules


def _names(config: ModelConfig, isr: tuple[int, ...]) -> list[str]:
    return [config.name(r) for r in sorted(isr)]


def _registration(config: ModelConfig, ctrl: ControllerValue) -> str:
    reg = ctrl.registration
    fenced = [config.name(b.broker_id) for b in ctrl.brokers if b.fenced]
    text = (
        f"leader={config.name(reg.leader) if reg.leader != NO_LEADER else 'none'} "
        f"epoch={reg.leader_epoch} ISR={{{','.join(_names(config, reg.isr))}}}"
    )
    return text + (f" fenced={{{','.join(fenced)}}}" if fenced else "")


def _role(config: ModelConfig, r: int, rep: ReplicaValue) -> str:
    role = rep.role
    if isinstance(role, LeaderState):
        text = f"leader e{role.leader_epoch} ISR={{{','.join(_names(config, role.isr_state.isr))}}}"
        if role.isr_state.is_inflight:
            proposed = isr_rules.proposed_isr(role.isr_state)
            text += f" proposed={{{','.join(_names(config, proposed))}}}"
        return text
    if isinstance(role, FollowerState):
        target = config.name(role.leader_id) if role.leader_id != NO_LEADER else "no leader"
        phase = "" if role.phase.value == "fetching" else f" ({role.phase.value})"
        return f"follows {target} e{role.leader_epoch}{phase}"
    return "no metadata applied"


def describe(action: Action | None, after: StateView, config: ModelConfig) -> str:
    """One line saying what happened in a step."""
    if action is None:
        return "initial state: the topic is created; no broker has applied it yet"
    name = config.name(action.replica) if action.replica >= 0 else "?"
    other = config.name(action.arg) if 0 <= action.arg < config.replicas else "?"
    kind = action.kind
    reg = _registration(config, after.controller)
    if kind == "Fence":
        return f"controller fences {name} (session expired): {reg}"
    if kind == "Unfence":
        return f"controller unfences {name} (heartbeat): {reg}"
    if kind == "MoveLeadership":
        return f"controller moves leadership to {name}: {reg}"
    if kind == "ApplyMetadata":
        return f"{name} applies a metadata change: {_role(config, action.replica, after.replicas[action.replica])}"
    if kind == "LeaderWrite":
        return f"{name} (leader) appends r{action.arg}"
    if kind == "LeaderShrinkIsr":
        return f"{name} (leader) proposes an ISR shrink (AlterPartition)"
    if kind == "AlterPartition":
        return f"controller answers {name}'s AlterPartition: {reg}"
    if kind == "Fetch":
        return f"{name} fetches from {other}"
    if kind == STUCK_FETCH:
        return f"{name} fetches from {other}: diverging answer, nothing to cut (stuck)"
    if kind == "OffsetsForLeaderEpoch":
        return f"{name} asks {other} OffsetsForLeaderEpoch and truncates"
    if kind == "UncleanRestart":
        return f"{name} restarts uncleanly, keeping offsets < {action.arg}, and registers again: {reg}"
    return f"{kind} {name} {action.arg}"


def replica_dict(config: ModelConfig, r: int, rep: ReplicaValue) -> dict[str, Any]:
    role = rep.role
    leader = rep.presumed_leader(r)
    isr = proposed = None
    if isinstance(role, LeaderState):
        isr = _names(config, role.isr_state.isr)
        if role.isr_state.is_inflight:
            proposed = _names(config, isr_rules.proposed_isr(role.isr_state))
    return {
        "log": [[o, e, record_name(v)] for o, (e, v) in enumerate(rep.log)],
        "leo": rep.leo,
        "hw": rep.hw,
        "epochs": [[e, s] for e, s in rep.cache],
        "leader_epoch": rep.leader_epoch,
        "leader": config.name(leader) if leader != NO_LEADER else None,
        "isr": isr,
        "proposed_isr": proposed,
        "role": _role(config, r, rep),
    }


def step_dict(step: TraceStep, config: ModelConfig) -> dict[str, Any]:
    state = step.state
    reg = state.controller.registration
    return {
        "action": describe(step.action, state, config),
        "kind": step.action.kind if step.action else "Init",
        "controller": {
            "leader_epoch": reg.leader_epoch,
            "leader": config.name(reg.leader) if reg.leader != NO_LEADER else None,
            "isr": _names(config, reg.isr),
            "partition_epoch": reg.partition_epoch,
            "fenced": [config.name(b.broker_id) for b in state.controller.brokers if b.fenced],
        },
        "committed": [[o, e, record_name(v)] for o, e, v in state.committed],
        "replicas": {
            config.name(r): replica_dict(config, r, rep) for r, rep in enumerate(state.replicas)
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
        "transactions": config.transactions,
        "txn_records": config.txn_records,
        "txn_producers": config.txn_producers,
        "scan_chunk_bytes": list(config.scan_chunk_bytes),
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


def _replica_line(config: ModelConfig, r: int, rep: ReplicaValue) -> str:
    log = " ".join(f"{o}:e{e}:{record_name(v)}" for o, (e, v) in enumerate(rep.log)) or "-"
    cache = ", ".join(f"{e}:{s}" for e, s in rep.cache)
    role = _role(config, r, rep)
    return f"    {config.name(r)}: [{log}] LEO={rep.leo} HW={rep.hw} epochs={{{cache}}}  {role}"


def trace_text(result: CheckResult) -> list[str]:
    config = result.config
    lines: list[str] = []
    for index, step in enumerate(result.trace):
        state = step.state
        lines.append(f"  {index:2d}. {describe(step.action, state, config)}")
        lines.append(f"      controller: {_registration(config, state.controller)}")
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
    if config.transactions:
        header += (
            f"\ntransactions={config.transactions} txn-records={config.txn_records} "
            f"txn-producers={config.txn_producers or config.transactions} "
            f"restarts read the log in chunks of "
            f"{'/'.join(str(c) for c in config.scan_chunk_bytes)} bytes"
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
