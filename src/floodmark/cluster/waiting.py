"""Blocking waits on progress for the process supervisor (``LocalCluster``) and the tests.

A busy machine slows a starting node or an election; it does not stop it. So a wait here fails
only when the awaited work stops moving — no new output, no CPU time, no new epoch — for
``stall_ms`` (``floodmark.progress.ProgressWatch`` decides that), or after ``limit_s`` in all, a
generous bound that catches work moving in circles. ``process_progress`` is what a process shows
while it works: the CPU time it was given (in whole seconds) and the bytes it wrote to its log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from floodmark.errors import FloodmarkError
from floodmark.progress import ProgressWatch

T = TypeVar("T")

# A node that neither writes a line nor gets CPU time for this long is stuck (a busy machine
# still gives every runnable process some CPU within seconds).
STALL_MS = 30_000
# However much it moves, one wait ends after this long (a loop that never converges).
LIMIT_S = 300.0


_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


class Stalled(FloodmarkError):
    """The awaited work stopped moving (or went on past the overall bound); the message is one
    line saying what stayed where."""


def process_cpu_s(pid: int) -> int:
    """Whole seconds of user + system CPU time a process has used (-1: no such process).
    Whole seconds, so that an idle process's timers (a heartbeat every 200 ms costs well under
    1 % of a core) do not pass for work: to look busy within ``STALL_MS`` a process must get
    more than 1/30 of a core."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return -1
    # After the command name: state is field 3, utime field 14, stime field 15 (man proc).
    return (int(fields[11]) + int(fields[12])) // _CLOCK_TICKS_PER_S


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def process_progress(pid: int, log_path: Path | None = None) -> dict[str, object]:
    """What a working process moves: its CPU time and (when it has one) its log's size."""
    values: dict[str, object] = {f"CPU seconds of pid {pid}": process_cpu_s(pid)}
    if log_path is not None:
        values[f"bytes in {log_path.name}"] = file_size(log_path)
    return values


def wait_progress(done: Callable[[], T | None], progress: Callable[[], dict[str, object]], *,
                  what: str, stall_ms: int = STALL_MS, limit_s: float = LIMIT_S,
                  step_s: float = 0.05) -> T:
    """``done()``'s first true value (wrap a value that may be false, such as node id 0);
    Stalled when ``progress()`` has not changed for
    ``stall_ms`` or after ``limit_s`` in all."""
    start = time.monotonic()
    watch = ProgressWatch(stall_ms, int(start * 1000))
    while True:
        value = done()
        if value:
            return value
        now = time.monotonic()
        stalled = watch.observe(int(now * 1000), progress())
        if stalled:
            raise Stalled(f"{what}: {stalled}")
        if now - start > limit_s:
            raise Stalled(f"{what}: still moving but not done after {limit_s:.0f} s "
                          f"({watch.last})")
        time.sleep(step_s)
