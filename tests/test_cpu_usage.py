"""tests/cpu_usage.py: a live child's CPU is seen through /proc, and the table sums the rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import cpu_usage

BUSY = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n" \
       "print('done', flush=True)\ntime.sleep(60)"


def test_a_live_child_cpu_is_counted() -> None:
    child = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "done"  # its 0.3 s of CPU are spent
        seen = cpu_usage.descendants_cpu_s(os.getpid())
        assert seen.get(child.pid, 0.0) >= 0.25, seen
    finally:
        child.kill()
        child.wait(10)


def test_the_table_sorts_and_sums(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"nodeid": f"t::{name}", "worker": "gw0", "wall_s": 1.0, "self_cpu_s": cpu,
             "children_cpu_s": 0.0, "cpu_s": cpu} for name, cpu in (("a", 1.5), ("b", 4.0))]
    (tmp_path / "cpu-gw0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cpu_usage.main(["cpu_usage", str(tmp_path), "1"]) == 0
    out = capsys.readouterr().out
    assert "t::b" in out and "t::a" not in out  # the costliest only
    assert "2 tests, 6 CPU s in tests" in out


def test_a_detached_process_is_found_by_its_mark(tmp_path: Path) -> None:
    """A double fork re-parents the process to init; the owner mark in its environment still
    ties it to this test process."""
    ready = tmp_path / "pid"
    env = dict(os.environ, **{cpu_usage.OWNER_ENV: str(os.getpid())})
    code = BUSY.replace("print('done', flush=True)",
                        f"open({str(ready)!r} + '.tmp', 'w').write(str(__import__('os').getpid()));"
                        f"__import__('os').rename({str(ready)!r} + '.tmp', {str(ready)!r})")
    subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 &', code],
                   env=env, check=True, timeout=30)
    deadline_tries = 600  # bounded: the child writes its pid once its CPU is spent
    for _ in range(deadline_tries):
        if ready.exists():
            break
        time.sleep(0.1)
    pid = int(ready.read_text())
    try:
        assert pid not in cpu_usage.descendants_cpu_s(os.getpid())  # not a descendant any more
        seen = cpu_usage.descendants_cpu_s(os.getpid(), marked=True)
        assert seen.get(pid, 0.0) >= 0.25, seen
    finally:
        os.kill(pid, 9)
