"""The simulator's reference scenarios, step by step, in the dashboard's partition shape.

``floodmark sim scenario NAME --truncation MODE`` runs the real replication core in the
deterministic simulator and records, after every step, what each replica holds. Each step is
turned here into the same object ``GET /api/partitions`` returns for a live partition (plus the
record values and each replica's liveness), so the page draws the lesson and the live cluster
with one drawing.
"""

from __future__ import annotations

from typing import Any

from floodmark.replication import DEFAULT_TRUNCATION, Truncation
from floodmark.sim import SCENARIOS, run_scenario


def scenario_list() -> dict[str, Any]:
    return {"scenarios": [{"name": name, "description": desc}
                          for name, (_fn, desc) in SCENARIOS.items()],
            "truncation_modes": [t.value for t in Truncation],
            "default_truncation": DEFAULT_TRUNCATION.value}


def _lso(replica: dict[str, Any]) -> int | None:
    """A replica's last stable offset as the simulator recorded it (None: down, or a step
    table from before transactions)."""
    lso = replica.get("lso")
    return int(lso) if lso is not None and replica.get("leo", -1) >= 0 else None


def _step(name: str, index: int, step: dict[str, Any]) -> dict[str, Any]:
    replicas = step["replicas"]
    leader = step.get("leader")
    lead = replicas.get(leader, {}) if leader else {}
    order = sorted(replicas)
    partition = {
        "topic": name, "partition": 0, "leader": leader if leader is not None else -1,
        "leader_epoch": step.get("leader_epoch", -1),
        "isr": list(lead.get("isr", [])),
        "log_start_offset": 0,
        "replicas": [{"broker": b, "log_end_offset": replicas[b]["leo"],
                      "high_watermark": replicas[b]["hw"], "epochs": replicas[b]["epochs"],
                      "last_stable_offset": _lso(replicas[b])}
                     for b in order],
        "remote_log_end_offsets": dict(lead.get("remote_leos", {})),
        "last_stable_offset": _lso(lead) if lead else None,
    }
    return {"index": index, "event": step["event"], "notes": step.get("notes", []),
            "partition": partition,
            "brokers": [{"id": b, "alive": bool(replicas[b].get("alive", True)),
                         "role": replicas[b].get("role")} for b in order],
            "values": {b: {str(o): v for o, _e, v in replicas[b]["log"]} for b in order}}


def scenario_steps(name: str, truncation: str) -> dict[str, Any]:
    """Every step of one scenario under one truncation mode; KeyError/ValueError if unknown."""
    result = run_scenario(name, Truncation(truncation))
    return {"scenario": name, "truncation": truncation, "verdict": result.verdict,
            "as_expected": result.as_expected, "lost": result.lost,
            "steps": [_step(name, i, s) for i, s in enumerate(result.steps)]}
