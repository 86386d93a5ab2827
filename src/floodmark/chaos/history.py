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
* ``final``: the final reader's ``high_watermarks`` = ``[[topic, partition, hw, low], ...]`` and
  ``complete`` (every partition was read up to its high watermark). A reader of a log with
  transaction markers (``--sparse``: offsets are taken by COMMIT/ABORT control batches no
  consumer sees) also gives ``reached`` = ``[[topic, partition, offset], ...]``, where each
  partition's end-of-partition event put it (the high watermark for read_uncommitted, the last
  stable offset for read_committed), its ``isolation``, and, for read_committed partitions that
  did not reach the high watermark, ``lso`` = ``[[topic, partition, lso], ...]`` as the leader
  last answered.

The transactional workload (``producer-txn``) adds, per transaction ``txn`` (unique per run):

* ``init`` (``init_transactions``), ``begin`` (``begin_transaction``);
* ``send`` as above, with ``txn``; ``flush`` ``info`` (``remaining``) when the wait for a
  transaction's acknowledgements before its end call timed out;
* ``commit`` / ``abort``: the invoke carries ``values`` (every value sent in the transaction); the
  completion is ``ok``, or ``info`` with ``error`` and the error's flags (``retriable``,
  ``abortable``, ``fatal``): an error of ``commit_transaction`` leaves the outcome unknown until
  an ``abort`` comes back ``ok``;
* ``crash``: the producer was closed and a new one built with the same ``transactional.id``
  (its ``init`` fences the old one).

Record values may be padded (``PAD_SEPARATOR`` then filler) so logs grow faster than the
history; readers name a record by ``value_id`` (the part before the separator).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

PAD_SEPARATOR = b" "


def value_id(raw: bytes | None) -> str:
    """A record's value as the history names it: the unique value before any padding."""
    return (raw or b"").split(PAD_SEPARATOR, 1)[0].decode(errors="replace")


def padded(value: str, pad_bytes: int) -> bytes:
    """The bytes a producer writes for ``value``: the value, then ``pad_bytes`` of filler."""
    data = value.encode()
    return data + PAD_SEPARATOR + b"." * max(0, pad_bytes - 1) if pad_bytes > 0 else data


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


def merged(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """All events of all files ordered by time (ties keep each file's order), numbered from 1
    (``line``). Files still being written give their complete lines so far."""
    events: list[tuple[float, int, int, dict[str, Any]]] = []
    for n, path in enumerate(sorted(str(p) for p in paths)):
        for i, event in enumerate(read_events(path)):
            events.append((float(event.get("time", 0.0)), n, i, event))
    events.sort(key=lambda t: (t[0], t[1], t[2]))
    return [{"line": line, **event} for line, (_t, _n, _i, event) in enumerate(events, start=1)]


def merge(paths: Iterable[str | Path], out: str | Path) -> list[dict[str, Any]]:
    """``merged``, also written to ``out`` as the run's one history file."""
    events = merged(paths)
    with open(out, "w") as fh:
        for event in events:
            fh.write(json.dumps(event, separators=(",", ":")) + "\n")
    return events
