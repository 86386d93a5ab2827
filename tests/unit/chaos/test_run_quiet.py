"""``chaos run``'s quiet period ends once every client still running has moved on in the healed
cluster (``_Workers.all_moved_on``: an ``ok`` line of its history after the recovery), read from
the workers' history files as they are being written; a client that ended is not waited for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from floodmark.chaos.run import ChaosConfig, _Workers


class _Proc:
    def __init__(self, running: bool = True) -> None:
        self.running = running

    def poll(self) -> int | None:
        return None if self.running else 0


def _append(workers: _Workers, process: str, *events: dict[str, Any], torn: str = "") -> None:
    with open(workers.history_path(process), "a") as out:
        out.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events) + torn)


def _ok(process: str, f: str) -> dict[str, Any]:
    return {"time": 1.0, "process": process, "type": "ok", "f": f}


def test_every_running_client_must_move_on(tmp_path: Path) -> None:
    workers = _Workers(cast(Any, None), ChaosConfig(), "b:9092", tmp_path)
    workers.procs.update({"cp1": cast(Any, _Proc()), "ca1": cast(Any, _Proc()),
                          "cg1": cast(Any, _Proc(running=False))})
    _append(workers, "cp1", {"time": 0.5, "process": "cp1", "type": "invoke", "f": "send"},
            _ok("cp1", "send"))
    _append(workers, "ca1", _ok("ca1", "poll"))
    since = workers.progress()
    assert since == {"cp1": 1, "ca1": 1}  # cg1 wrote nothing
    assert workers.acknowledged() == 1
    assert not workers.all_moved_on(since)
    # an invoke is no progress, nor is a line still being written
    _append(workers, "cp1", {"time": 2.0, "process": "cp1", "type": "invoke", "f": "send"})
    _append(workers, "ca1", torn='{"time":2.0,"process":"ca1","type":"ok","f":"po')
    assert not workers.all_moved_on(since)
    _append(workers, "cp1", _ok("cp1", "send"))
    assert not workers.all_moved_on(since)  # ca1 has not polled since
    _append(workers, "ca1", torn='ll"}\n')
    # cg1 ended: it is not waited for
    assert workers.all_moved_on(since)
    assert workers.acknowledged() == 2
