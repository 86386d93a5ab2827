"""The controller quorum told step by step, as the simulator's scenarios and the quorum model
checker's traces both draw it: an event line, then one line per voter (its log, role, epoch,
vote, LEO, HW, epoch cache and, on a leader, the voters' LEOs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from floodmark.controller import QuorumMessage


def node_name(node_id: int) -> str:
    return f"c{node_id}"


def describe_message(message: QuorumMessage) -> str:
    """``VoteRequest(candidate_epoch=1, ...)``: the fields that are set."""
    name = type(message).__name__
    fields = ", ".join(f"{k}={getattr(message, k)}" for k in message.__dataclass_fields__
                       if getattr(message, k) not in (None, -1))
    return f"{name}({fields})"


@dataclass(slots=True)
class QuorumStep:
    event: str
    voters: dict[str, dict[str, Any]]


def render_quorum_steps(steps: list[QuorumStep]) -> list[str]:
    lines: list[str] = []
    for index, s in enumerate(steps, 1):
        lines.append(f"{index:>2}. {s.event}")
        for name, snap in s.voters.items():
            if not snap.get("alive"):
                lines.append(f"    {name}  (down)")
                continue
            mark = "*" if snap["role"] == "Leader" else " "
            cells = " ".join(f"{o}:e{e}:{v}" for o, e, v in snap["log"])
            epochs = "{" + ", ".join(f"{e}:{o}" for e, o in snap["epochs"]) + "}"
            voted = snap["voted_for"] if snap["voted_for"] >= 0 else "-"
            line = (f"    {name}{mark} {snap['role']:<11} epoch={snap['epoch']:<2} "
                    f"voted={voted:<2} [{cells}]".ljust(72)
                    + f" LEO={snap['leo']:<3} HW={snap['hw']:<3} epochs={epochs}")
            if "voter_leos" in snap:
                line += "  voter LEOs: " + " ".join(f"{k}={v}"
                                                    for k, v in snap["voter_leos"].items())
            lines.append(line)
    return lines
