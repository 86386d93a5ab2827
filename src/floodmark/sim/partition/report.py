"""Text rendering of scenario steps, in the spirit of the reference documents' figures."""

from __future__ import annotations

from typing import Any


def _log_cells(log: list[list[Any]], lso: int | None = None) -> str:
    """The log as offset:epoch:value cells; with ``lso`` (a transaction is open) a ``|`` marks
    the last stable offset: a read_committed consumer reads only the cells left of it."""
    cells = [("| " if o == lso else "") + f"{o}:e{e}:{v}" for o, e, v in log]
    if lso is not None and lso >= len(log):
        cells.append("|")
    return "[" + " ".join(cells) + "]"


def transactions_open(snap: dict[str, Any]) -> bool:
    return bool(snap.get("open_txns")) or snap.get("lso", snap.get("hw")) != snap.get("hw")


def _epochs(pairs: list[list[int]]) -> str:
    return "{" + ", ".join(f"{e}:{s}" for e, s in pairs) + "}"


def render_replica(name: str, snap: dict[str, Any], width: int) -> str:
    if not snap.get("alive", True) and snap.get("leo", 0) < 0:
        return f"    {name:<{width}}  (down)"
    mark = "*" if snap.get("role") == "leader" else " "
    txn = transactions_open(snap)
    cells = _log_cells(snap["log"], snap.get("lso") if txn else None)
    line = f"    {name:<{width}}{mark} {cells:<36} LEO={snap['leo']:<3} HW={snap['hw']:<3} "
    if txn:
        opened = " ".join(f"{pid}@{first}" for pid, first in snap.get("open_txns", {}).items())
        line += f"LSO={snap['lso']:<3} " + (f"open={{{opened}}} " if opened else "")
    line += f"epochs={_epochs(snap['epochs'])}"
    if snap.get("remote_leos"):
        remote = " ".join(f"{k}={v}" for k, v in snap["remote_leos"].items())
        line += f"  remote LEOs: {remote}  ISR={{{','.join(snap.get('isr', []))}}}"
    return line


def render_steps(steps: list[dict[str, Any]], *, verbose: bool = False) -> list[str]:
    lines: list[str] = []
    for index, step in enumerate(steps, 1):
        lines.append(
            f"{index:>2}. {step['event']}   [controller: leader {step['leader']}, epoch {step['leader_epoch']}]"
        )
        width = max((len(n) for n in step["replicas"]), default=1)
        for name, snap in step["replicas"].items():
            lines.append(render_replica(name, snap, width))
        if verbose:
            lines.extend(f"       · {note}" for note in step.get("notes", []))
    return lines
