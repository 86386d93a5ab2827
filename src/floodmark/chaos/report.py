"""``floodmark chaos run --report DIR``: one HTML page a person can read.

``DIR/index.html`` holds the verdict and the configuration; a timeline of the faults and of every
partition's leader (from the controller, twice a second); throughput (acknowledged sends and
records read per second) and acknowledgement latency over time; and each anomaly with the history
lines that prove it. ``DIR/history.jsonl`` and ``DIR/result.json`` sit beside it. Plots are
matplotlib figures inlined as SVG (the page has no other files and needs no network).
"""

from __future__ import annotations

import html
import io
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FAMILY_COLOURS = {"isolate": "#e4572e", "split": "#e4572e", "bridge": "#f3a712",
                  "flap": "#f3a712", "kill": "#29335c", "pause": "#669bbc",
                  "controller": "#8e44ad", "power": "#000000"}


def _colour(name: str) -> str:
    if "controller" in name:
        return FAMILY_COLOURS["controller"]
    for prefix, colour in FAMILY_COLOURS.items():
        if name.startswith(prefix):
            return colour
    return "#888888"


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg"):]


def _start_time(result: dict[str, Any], events: Sequence[dict[str, Any]]) -> float:
    times = [float(e["time"]) for e in events if "time" in e]
    times += [float(f["start"]) for f in result.get("faults", [])]
    return min(times) if times else 0.0


def _fault_spans(ax: Any, result: dict[str, Any], t0: float, label: bool) -> None:
    for fault in result.get("faults", []):
        ax.axvspan(fault["start"] - t0, fault["end"] - t0, color=_colour(fault["name"]),
                   alpha=0.18, lw=0)
        if label:
            ax.text(fault["start"] - t0, 1.0, fault["name"], rotation=90, va="top",
                    ha="left", fontsize=7, transform=ax.get_xaxis_transform())


def timeline_svg(result: dict[str, Any], t0: float, end: float) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted({e["key"] for e in result.get("leaders", [])})
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.45 * max(1, len(keys) + 1)))
    _fault_spans(ax, result, t0, label=True)
    cmap = plt.get_cmap("tab10")
    for row, key in enumerate(keys):
        changes = [e for e in result["leaders"] if e["key"] == key]
        for i, change in enumerate(changes):
            start = change["time"] - t0
            stop = (changes[i + 1]["time"] - t0) if i + 1 < len(changes) else end - t0
            leader = change["leader"]
            colour = "#dddddd" if leader < 0 else cmap(leader % 10)
            ax.broken_barh([(start, max(stop - start, 0.01))], (row - 0.35, 0.7),
                           facecolors=colour)
            if stop - start > (end - t0) / 40:
                elr = f" elr{change['elr']}" if change.get("elr") else ""
                ax.text(start + 0.2, row, f"{leader} e{change['leader_epoch']} "
                        f"isr{change['isr']}{elr}", va="center", fontsize=6)
    down = result.get("controller_up", [])
    for i, (when, up) in enumerate(down):
        if not up:
            stop = down[i + 1][0] if i + 1 < len(down) else end
            ax.broken_barh([(when - t0, stop - when)], (len(keys) - 0.35, 0.7),
                           facecolors="#8e44ad")
    ax.set_yticks(range(len(keys) + 1), [*keys, "controller down"])
    ax.set_xlim(0, end - t0)
    ax.set_xlabel("seconds since the workload started")
    ax.set_title("Faults (shaded) and each partition's leader (colour = broker id, e = epoch)")
    return _svg(fig)


def throughput_svg(result: dict[str, Any], events: Sequence[dict[str, Any]], t0: float,
                   end: float) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    acks: Counter[int] = Counter()
    reads: Counter[int] = Counter()
    ends: dict[str, Counter[int]] = {"commit": Counter(), "abort": Counter()}
    invoked: dict[str, float] = {}
    latency: list[tuple[float, float]] = []
    for e in events:
        t = float(e["time"]) - t0
        if e.get("f") == "send":
            if e.get("type") == "invoke":
                invoked[str(e["value"])] = float(e["time"])
            elif e.get("type") == "ok":
                acks[int(t)] += 1
                sent = invoked.get(str(e["value"]))
                if sent is not None:
                    latency.append((t, (float(e["time"]) - sent) * 1000.0))
        elif e.get("f") == "poll" and e.get("process") not in ("final", "final-rc", "live", "live-rc"):
            reads[int(t)] += len(e.get("records", []))
        elif e.get("f") in ends and e.get("type") == "ok":
            ends[str(e["f"])][int(t)] += 1
    seconds = list(range(int(end - t0) + 1))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
    _fault_spans(top, result, t0, label=False)
    top.plot(seconds, [acks.get(s, 0) for s in seconds], label="acknowledged sends/s")
    top.plot(seconds, [reads.get(s, 0) for s in seconds], label="records read/s", alpha=0.7)
    for f, counts in ends.items():
        if counts:  # the transactional workload
            top.plot(seconds, [counts.get(s, 0) for s in seconds], label=f"{f}s ok/s",
                     alpha=0.8)
    top.set_ylabel("per second")
    top.legend(loc="upper right", fontsize=8)
    _fault_spans(bottom, result, t0, label=False)
    if latency:
        bottom.scatter([x for x, _ in latency], [y for _, y in latency], s=2, alpha=0.4)
        bottom.set_yscale("log")
    bottom.set_ylabel("send -> ack latency (ms)")
    bottom.set_xlabel("seconds since the workload started")
    bottom.set_xlim(0, end - t0)
    return _svg(fig)


def _anomaly_html(result: dict[str, Any], by_line: dict[int, dict[str, Any]]) -> str:
    parts = []
    for name, examples in result.get("anomalies", {}).items():
        count = result.get("anomaly_counts", {}).get(name, len(examples))
        if not count:
            continue
        parts.append(f"<h3>{html.escape(name)}: {count}</h3>")
        for example in examples[:50]:
            summary = {k: v for k, v in example.items() if k != "lines"}
            lines = "\n".join(
                f"{n}: {json.dumps(by_line[n])}" if n in by_line else f"{n}: (not in history)"
                for n in example.get("lines", [])[:20])
            parts.append(f"<details><summary><code>{html.escape(json.dumps(summary))}</code>"
                         f"</summary><pre>{html.escape(lines)}</pre></details>")
        if len(examples) < count:
            parts.append(f"<p>... {count - len(examples)} more in result.json</p>")
    return "\n".join(parts) or "<p>None: every check passed.</p>"


def _gap_html(result: dict[str, Any], t0: float) -> str:
    gap_s = result.get("longest_ack_gap_s")
    gap = result.get("longest_ack_gap")
    if gap_s is None or not gap:
        return ""
    return (f"&middot; longest gap between acknowledgements {float(gap_s):.2f} s "
            f"(from {gap['start'] - t0:.1f} s to {gap['end'] - t0:.1f} s)")


def write_report(directory: str | Path, result: dict[str, Any],
                 events: Sequence[dict[str, Any]]) -> Path:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    t0 = _start_time(result, events)
    times = [float(e["time"]) for e in events if "time" in e]
    end = max([*times, *(f["end"] for f in result.get("faults", [])), t0 + 1.0])
    by_line = {int(e["line"]): e for e in events if "line" in e}
    with open(out / "history.jsonl", "w") as fh:
        for e in events:
            fh.write(json.dumps(e, separators=(",", ":")) + "\n")
    (out / "result.json").write_text(json.dumps(result, indent=1))
    verdict = "VALID" if result.get("valid") else "INVALID"
    counts = {k: v for k, v in result.get("anomaly_counts", {}).items() if v}
    txns = result.get("transactions")
    txn_html = ""
    if txns:
        resolved = txns.get("unknown_resolved", {})
        committed_read = result.get("final", {}).get("read_committed", {})
        txn_html = (
            f"<p>transactions: {txns.get('committed')} committed, {txns.get('aborted')} "
            f"aborted, {txns.get('unknown')} unknown (resolved {resolved.get('visible')} "
            f"visible, {resolved.get('invisible')} invisible, {resolved.get('torn')} torn, "
            f"{resolved.get('not_covered')} not covered by the final read) &middot; "
            f"{txns.get('committed_values')} committed values, {txns.get('read_committed')} "
            f"read with read_committed &middot; read_committed final read "
            f"{'complete' if committed_read.get('complete') else 'INCOMPLETE'}: reached "
            f"<code>{html.escape(json.dumps(committed_read.get('reached', {})))}</code></p>")
    faults_rows = "".join(
        f"<tr><td>{f['start'] - t0:.1f}</td><td>{f['end'] - f['start']:.1f}</td>"
        f"<td>{html.escape(f['name'])}</td><td>{html.escape(json.dumps({k: v for k, v in f.items() if k not in ('name', 'start', 'end')}))}</td></tr>"
        for f in result.get("faults", []))
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>floodmark chaos run: {verdict}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1300px}}
.valid{{color:#1b7f3b}}.invalid{{color:#b00020}}td,th{{padding:2px 8px;text-align:left}}
pre{{background:#f6f6f6;padding:6px;overflow-x:auto;font-size:12px}}
details{{margin:2px 0}}</style></head><body>
<h1>floodmark chaos run: <span class="{verdict.lower()}">{verdict}</span></h1>
<p>seed {result.get('seed')} &middot; {result.get('acknowledged')} acknowledged of
{result.get('attempted')} sent &middot; {result.get('read')} distinct values read &middot;
final read {'complete' if result.get('final', {}).get('complete') else 'INCOMPLETE'} &middot;
anomalies: {html.escape(', '.join(f'{k} {v}' for k, v in counts.items()) or 'none')}
{_gap_html(result, t0)}</p>
{txn_html}
<p>configuration: <code>{html.escape(json.dumps(result.get('config', {})))}</code></p>
<h2>Timeline</h2>{timeline_svg(result, t0, end)}
<h2>Throughput and latency</h2>{throughput_svg(result, events, t0, end)}
<h2>Faults</h2><table><tr><th>start (s)</th><th>length (s)</th><th>fault</th><th>details</th></tr>
{faults_rows}</table>
<h2>Anomalies</h2>{_anomaly_html(result, by_line)}
<p>The whole history: <a href="history.jsonl">history.jsonl</a>; the verdict:
<a href="result.json">result.json</a>.</p>
</body></html>
"""
    path = out / "index.html"
    path.write_text(page)
    return path
