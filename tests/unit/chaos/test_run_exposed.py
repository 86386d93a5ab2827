"""``chaos run --end-on-anomaly``: what ends a run's fault schedule early is an inconsistent
offset the history so far already shows (``run._exposed``), read from the workers' history
files as they are being written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from floodmark.chaos.history import merge, merged
from floodmark.chaos.run import _exposed


def _write(path: Path, events: list[dict[str, Any]], torn: str = "") -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + torn)


def _send_ok(t: float, process: str, value: str, offset: int) -> dict[str, Any]:
    return {"time": t, "process": process, "type": "ok", "f": "send", "topic": "a",
            "partition": 0, "value": value, "offset": offset}


def _poll(t: float, process: str, records: list[list[Any]]) -> dict[str, Any]:
    return {"time": t, "process": process, "type": "ok", "f": "poll", "records": records}


def test_a_value_acknowledged_at_an_offset_another_value_was_read_at(tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    _write(history / "cp1.jsonl", [_send_ok(1.0, "cp1", "cp1-0", 0),
                                   _send_ok(2.0, "cp1", "cp1-1", 1)])
    # the consumer's last line is still being written: it is not read
    _write(history / "ca1.jsonl", [_poll(1.5, "ca1", [["a", 0, 0, "cp1-0"]])],
           torn='{"time": 3.0, "process": "ca1", "type": "ok", "f": "po')
    assert _exposed(tmp_path) == []
    _write(history / "ca1.jsonl", [_poll(1.5, "ca1", [["a", 0, 0, "cp1-0"]]),
                                   _poll(3.0, "ca1", [["a", 0, 1, "kp1-7"]])])
    found = _exposed(tmp_path)
    assert [(f["kind"], f["key"], f["offset"], f["values"]) for f in found] == [
        ("values-at-offset", "a-0", 1, ["cp1-1", "kp1-7"])]


def test_merged_is_what_merge_writes(tmp_path: Path) -> None:
    _write(tmp_path / "b.jsonl", [_send_ok(2.0, "b", "b-0", 0)])
    _write(tmp_path / "a.jsonl", [_send_ok(1.0, "a", "a-0", 0), _send_ok(2.0, "a", "a-1", 1)])
    paths = sorted(tmp_path.glob("*.jsonl"))
    events = merged(paths)
    assert [(e["line"], e["value"]) for e in events] == [(1, "a-0"), (2, "a-1"), (3, "b-0")]
    out = tmp_path / "history.out"
    assert merge(paths, out) == events
    assert [json.loads(line) for line in out.read_text().splitlines()] == events
