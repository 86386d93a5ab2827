"""Text and JSON for a quorum check: the figures, the verdict, a counterexample step by step
(each voter drawn as ``floodmark sim quorum --scenario election`` draws it)."""

from __future__ import annotations

from typing import Any

from floodmark.constants import NO_LEADER
from floodmark.controller import Leader, leader_of, voted_for
from floodmark.mc.quorum.checker import QuorumResult
from floodmark.mc.quorum.model import Action, QuorumModel, StateView
from floodmark.mc.quorum.voter import RETRY_MS, VoterValue
from floodmark.spec import QuorumStep, describe_message, node_name, render_quorum_steps


def describe(model: QuorumModel, action: Action | None, after: StateView) -> str:
    """One line saying what happened in a step."""
    if action is None:
        return (f"{model.n} voters start on empty disks: unattached in epoch 0, nothing in "
                "flight")
    name = node_name(action.voter)
    kind = action.kind
    if kind in ("Deliver", "Drop"):
        assert action.message is not None
        src, dst, message, _records = action.message
        text = describe_message(message)
        line = (f"{node_name(dst)} <- {node_name(src)} {text}" if kind == "Deliver"
                else f"the network loses {node_name(src)} -> {node_name(dst)} {text}")
    elif kind == "Timer":
        role = after.voters[action.voter - 1].role
        timer = ("a retry timer (next fetch or resend)" if action.arg == RETRY_MS
                 else "an election, fetch or check-quorum timeout")
        line = f"{name}: {timer} fires" + (
            f" -> {type(role).__name__.lower()} epoch {role.epoch}" if role is not None else "")
    elif kind == "Write":
        line = f"{name} (leader) appends m{action.arg}"
    elif kind == "LeaderGone":
        line = f"{name} sees its connection to its leader {node_name(action.arg)} close"
    elif kind == "Crash":
        line = f"{name} crashes between steps (its log and quorum-state stay on disk)"
    elif kind == "Start":
        line = f"{name} restarts from its disk"
    else:
        line = f"{kind} {name} {action.arg}"
    if action.crash_at >= 0:
        line += (f"; {name} crashes before durable operation #{action.crash_at + 1} of this "
                 f"step, its disk keeps {action.keep} log entries")
    return line


def voter_dict(node_id: int, value: VoterValue) -> dict[str, Any]:
    """A voter in ``floodmark sim quorum --scenario``'s shape (plus its stored state)."""
    role = value.role
    base: dict[str, Any] = {
        "log": [[o, e, n] for o, (e, n) in enumerate(value.log)],
        "leo": len(value.log),
        "epochs": [[e, s] for e, s in value.cache],
        "stored": {"epoch": value.stored.epoch, "leader": value.stored.leader_id,
                   "voted_for": value.stored.voted_for},
    }
    if role is None:
        return {"alive": False, **base}
    snap = {"alive": True, "role": type(role).__name__, "epoch": role.epoch,
            "leader": leader_of(role, node_id), "voted_for": voted_for(role, node_id),
            "hw": value.high_watermark, **base}
    if isinstance(role, Leader):
        snap["voter_leos"] = {node_name(p.voter_id): p.log_end_offset for p in role.progress}
    return snap


def step_dict(model: QuorumModel, action: Action | None, state: StateView) -> dict[str, Any]:
    return {
        "action": describe(model, action, state),
        "kind": action.kind if action is not None else "Init",
        "voters": {node_name(i + 1): voter_dict(i + 1, v) for i, v in enumerate(state.voters)},
        "in_flight": [f"{node_name(s)} -> {node_name(d)} {describe_message(m)}"
                      for s, d, m, _r in state.network],
        "committed": [[o, e, n] for o, e, n in state.committed],
        "leaders": [[e, node_name(v)] for e, v in state.leaders],
    }


def result_dict(model: QuorumModel, result: QuorumResult) -> dict[str, Any]:
    config = model.config
    violation: dict[str, Any] | None = None
    if result.violation is not None:
        violation = {"invariant": result.violation.invariant, "detail": result.violation.detail,
                     "trace": [step_dict(model, a, model.view(s)) for a, s in result.path]}
    return {
        "model": "controller-quorum",
        "voters": config.voters, "max_epoch": config.max_epoch,
        "max_records": config.max_records, "max_crashes": config.max_crashes,
        "max_in_flight": config.max_in_flight,
        "search": "bfs", "states": result.states, "transitions": result.transitions,
        "depth": result.depth, "seconds": round(result.seconds, 3),
        "states_per_second": round(result.states_per_second),
        "complete": result.complete, "holds": result.holds, "violation": violation,
    }


def trace_lines(model: QuorumModel, result: QuorumResult) -> list[str]:
    lines: list[str] = []
    steps = []
    for action, state in result.path:
        view = model.view(state)
        snaps = {node_name(i + 1): voter_dict(i + 1, v) for i, v in enumerate(view.voters)}
        for snap in snaps.values():
            if snap["alive"] and snap["leader"] == NO_LEADER:
                snap["leader"] = None
        steps.append(QuorumStep(describe(model, action, view), snaps))
    rendered = render_quorum_steps(steps)
    # render_quorum_steps draws each step as its event line then one line per voter.
    per_step = 1 + model.n
    for index, (_action, state) in enumerate(result.path):
        block = rendered[index * per_step:(index + 1) * per_step]
        block[0] = f"{index:>2}. {steps[index].event}"  # step 0 is the initial state
        for i, value in enumerate(model.view(state).voters):
            if not value.alive:  # a crashed voter: what its disk holds
                cells = " ".join(f"{o}:e{e}:{n}" for o, (e, n) in enumerate(value.log))
                block[1 + i] += f"  disk: [{cells}] quorum-state epoch={value.stored.epoch} " \
                    f"voted={value.stored.voted_for}"
        lines.extend(block)
        flight = [f"{node_name(s)}->{node_name(d)} {type(m).__name__}"
                  for s, d, m, _r in model.view(state).network]
        lines.append(f"    in flight: {', '.join(flight) or '-'}")
    return lines


def result_text(model: QuorumModel, result: QuorumResult) -> str:
    config = model.config
    lines = [
        f"quorum model check: voters={config.voters} max-epoch={config.max_epoch} "
        f"max-records={config.max_records} max-crashes={config.max_crashes} "
        f"max-in-flight={config.max_in_flight} (QuorumCore + QuorumDriver, the controller's)",
        f"states explored: {result.states}  transitions: {result.transitions}  "
        f"depth: {result.depth}",
        f"wall time: {result.seconds:.2f} s  ({result.states_per_second:,.0f} states/s)",
    ]
    if result.violation is not None:
        lines.append(f"verdict: VIOLATED {result.violation.invariant}: "
                     f"{result.violation.detail}")
        lines.append(f"shortest counterexample ({len(result.path) - 1} steps); voter: role, "
                     "epoch, vote, log [offset:epoch:value], LEO, HW, epoch cache "
                     "{epoch:start}; * = leader")
        lines.extend(trace_lines(model, result))
    elif result.complete:
        lines.append("verdict: HOLDS (every reachable state checked)")
    else:
        lines.append("verdict: INCOMPLETE (state or time bound hit before exhausting the space)")
    return "\n".join(lines)
