"""The issue 11 benchmark script runs end to end at its smallest settings and prints every
figure the issue names (a test of the script, not of the timings): controller failover,
partition-leader failover on SIGKILL and on SIGSTOP (with where the time goes), metadata
propagation per broker and to every broker (from the commit and from the request or fault), and
the controller's restart time without and with snapshots."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FIGURE = r"median \d+ ms, min \d+, max \d+ \[\d+\]"
EXPECTED = [
    "new active controller", "first successful CreateTopics",
    # both failover sections, each with its four clocks and their shares
    *["fenced", "applied", "seen", "raw", "client"] * 2,
    *["fault -> fenced", "fenced -> applied", "applied -> raw", "raw -> client"] * 2,
    # CreateTopics and IncrementalAlterConfigs
    *["request -> controller commit", "request -> client answered",
      "commit -> every broker applied \\(max\\)", "request -> every broker applied \\(max\\)"] * 2,
    "kill -> controller commit", "kill -> every broker applied \\(max\\)",
    "stop -> controller commit", "stop -> every broker applied \\(max\\)",
    "without snapshots", "with snapshots",
]


def test_the_failover_benchmark_prints_every_figure() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "controller_failover.py"), "--runs", "1",
         "--restart-records", "1000"],
        capture_output=True, text=True, timeout=400, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for section in ("controller failover (SIGKILL active controller)",
                    "partition-leader failover on SIGKILL",
                    "partition-leader failover on SIGSTOP",
                    "metadata propagation: CreateTopics",
                    "metadata propagation: IncrementalAlterConfigs",
                    "metadata propagation: leader change after a fence (SIGKILL",
                    "metadata propagation: leader change after a fence (SIGSTOP",
                    "controller restart"):
        assert section in out, out
    for label in EXPECTED:
        found = re.findall(rf"{label}\S*:? +{FIGURE}", out)
        assert found, f"no figure for {label!r} in:\n{out}"
    for line in out.splitlines():  # every figure has its median, min, max and runs
        if re.search(r"median \d", line):
            assert re.search(FIGURE, line), line
    # per-broker propagation: three brokers for a client's change, two survive a fault
    assert len(re.findall(rf"commit -> broker \d+ applied: {FIGURE}", out)) == 3 + 3 + 2 + 2
    assert "n/a" not in out
