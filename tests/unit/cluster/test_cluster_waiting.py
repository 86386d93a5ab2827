"""``floodmark.cluster.waiting``: waits fail when the awaited process stops moving, never
because it is slow (real processes; the stall bounds are small so the tests stay short)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from floodmark.cluster.waiting import Stalled, process_progress, wait_progress

WRITER = """
import sys, time
with open(sys.argv[1], "a") as out:
    for i in range(int(sys.argv[2])):
        out.write(f"line {i}\\n"); out.flush(); time.sleep(0.2)
"""


def test_a_slow_process_that_keeps_writing_is_waited_for_past_the_stall_bound(
        tmp_path: Path) -> None:
    log = tmp_path / "tidy-writer.log"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(log), "25"])
    try:
        start = time.monotonic()
        wait_progress(lambda: proc.poll() is not None, lambda: process_progress(proc.pid, log),
                      what="the writer", stall_ms=2_000, limit_s=120)
        # It took longer than the stall bound (a fixed 2 s limit would have failed it).
        assert time.monotonic() - start > 2.0
        assert log.read_text().count("line") == 25
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_stops_moving_fails_the_wait_after_the_stall_bound(
        tmp_path: Path) -> None:
    log = tmp_path / "tidy-sleeper.log"
    log.write_text("started\n")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        start = time.monotonic()
        with pytest.raises(Stalled) as stalled:
            wait_progress(lambda: proc.poll() is not None,
                          lambda: process_progress(proc.pid, log),
                          what="the sleeper", stall_ms=1_500, limit_s=120)
        assert time.monotonic() - start < 60  # the stall ended it, not the overall bound
        assert "the sleeper: no progress for" in str(stalled.value)
        assert "bytes in tidy-sleeper.log stayed at 8" in str(stalled.value)
        assert "\n" not in str(stalled.value)
    finally:
        proc.kill()
        proc.wait()


def test_work_that_moves_in_circles_ends_at_the_overall_bound() -> None:
    ticks = iter(range(10**9))
    start = time.monotonic()
    with pytest.raises(Stalled, match="still moving but not done after 1 s"):
        wait_progress(lambda: False, lambda: {"tick": next(ticks)}, what="circles",
                      stall_ms=60_000, limit_s=1.0, step_s=0.01)
    assert time.monotonic() - start < 30
