"""The readable report: per scenario, each field that differs, Kafka's value, floodmark's, and
the known difference's reason when there is one; error message texts side by side."""

from __future__ import annotations

from typing import Any

from floodmark.errors import ErrorCode
from tests.reference.differential.runner import Outcome


def _show(path: str, value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and path.endswith("error_code"):
        try:
            return f"{value} {ErrorCode(value).name}" if value else "0 NONE"
        except ValueError:
            return str(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def render(outcomes: list[Outcome], *, kafka_label: str = "Kafka") -> str:
    lines: list[str] = []
    total = sum(len(o.differences) for o in outcomes)
    open_ = sum(len(o.unexplained()) for o in outcomes)
    lines.append(f"{len(outcomes)} scenarios, {sum(len(o.kafka.steps) for o in outcomes)} "
                 f"steps; {total} differences, {open_} not in the known list")
    for o in outcomes:
        steps = len(o.kafka.steps)
        lines.append("")
        lines.append(f"## {o.scenario.name} ({steps} steps, {len(o.differences)} differences)")
        lines.append(o.scenario.doc)
        for side, label in ((o.kafka, kafka_label), (o.floodmark, "floodmark")):
            if side.failure:
                lines.append(f"  scenario failed on {label}: {side.failure.splitlines()[0]}")
        if o.differences:
            lines.append("")
            rows = [("field", kafka_label, "floodmark", "")]
            for d, known in o.explained():
                rows.append((d.path, _show(d.path, d.kafka), _show(d.path, d.floodmark),
                             "known" if known else "NEW"))
            widths = [max(len(r[i]) for r in rows) for i in range(3)]
            for r in rows:
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, [*widths, 0],
                                                                          strict=True)).rstrip())
            reasons = {k.reason for _, k in o.explained() if k}
            for reason in sorted(reasons):
                lines.append(f"  - known: {reason}")
        msgs = [(p, o.kafka.messages.get(p), o.floodmark.messages.get(p))
                for p in sorted(set(o.kafka.messages) | set(o.floodmark.messages))]
        msgs = [m for m in msgs if m[1] or m[2]]
        if msgs:
            lines.append("  messages:")
            for p, k, f in msgs:
                lines.append(f"    {p}\n      {kafka_label}: {k!r}\n      floodmark: {f!r}")
    return "\n".join(lines) + "\n"
