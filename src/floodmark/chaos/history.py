"""The chaos run's history: one JSON object per line, one file per process, merged by time.

Every line has ``time`` (wall clock, seconds), ``process`` (the worker's name), ``type``
(``invoke`` | ``ok`` | ``fail`` | ``info``: Jepsen's words, ``fail`` meaning it definitely did not
happen and ``info`` that it may have) and ``f`` (what happened):

* ``send``: ``topic``, ``partition``, ``value``; on ``ok`` also ``offset``; on ``fail``/``info``
  ``error``.
* ``poll``: ``records`` = ``[[topic, partition, offset, value], ...]`` in delivery order, and ``hw``
  = ``[[topic, partition, high_watermark], ...]`` as the client last heard it from the broker.
* ``commit``: ``offsets`` = ``[[topic, partition, offset], ...]`` (``group``).
* ``assign`` (``partitions``), ``subscribe`` (``topics``, ``group``), ``rebalance``
  (``assigned``), ``crash`` (the client was closed and a new one built: polls restart).
* ``final``: the final reader's ``high_watermarks`` = ``[[topic, partition, hw], ...]`` and
  ``complete`` (every partition was read up to its high watermark).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any


class HistoryWriter:
    """Appends events for one process (thread-safe: client callbacks run on other threads)."""

    def __init__(self, path: str | Path, process: str) -> None:
        self.process = process
        self._lock = threading.Lock()
        self._out: IO[str] = open(path, "a", buffering=1)  # noqa: SIM115 - closed by close()

    def event(self, type_: str, f: str, **fields: Any) -> None:
        line = json.dumps({"time": round(time.time(), 6), "process": self.process,
                           "type": type_, "f": f, **fields}, separators=(",", ":"))
        with self._lock:
            self._out.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._out.close()


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every complete line of one history file (a torn last line of a killed worker is
    skipped)."""
    with open(path) as fh:
        for line in fh:
            if not line.endswith("\n"):
                break
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict):
                yield event


def merge(paths: Iterable[str | Path], out: str | Path) -> list[dict[str, Any]]:
    """All events of all files ordered by time (ties keep each file's order), numbered from 1
    (``line``) and written to ``out`` as the run's one history file."""
    events: list[tuple[float, int, int, dict[str, Any]]] = []
    for n, path in enumerate(sorted(str(p) for p in paths)):
        for i, event in enumerate(read_events(path)):
            events.append((float(event.get("time", 0.0)), n, i, event))
    events.sort(key=lambda t: (t[0], t[1], t[2]))
    merged = []
    with open(out, "w") as fh:
        for line, (_t, _n, _i, event) in enumerate(events, start=1):
            event = {"line": line, **event}
            merged.append(event)
            fh.write(json.dumps(event, separators=(",", ":")) + "\n")
    return merged
