"""CPU seconds per test (user + sys), for finding where the suite's CPU goes.

Turned on by ``FLOODMARK_TEST_CPU=DIR`` (tests/conftest.py registers it): every pytest process
(the controller and each xdist worker) appends one JSON line per test to
``DIR/cpu-<worker>.jsonl``. A test's figure covers its setup, call and teardown and counts:

- the test process itself (``RUSAGE_SELF``),
- its children that ended and were reaped during the test (``RUSAGE_CHILDREN``, which also holds
  the grandchildren those children reaped),
- the processes still alive when the test ends that descend from the test process or carry its
  mark in their environment (``FLOODMARK_TEST_CPU_OWNER``: a detached cluster, re-parented to
  init by a double fork, still has it): their CPU since the test began, read from
  ``/proc/PID/stat`` (own time + reaped children).

A long-lived process's CPU is charged to the tests during which it used it; a child that was
alive at the start and reaped during the test has only its CPU after the start counted. A
detached process that ends before the test does (``cluster down``) is seen only up to the
test's start: the table says what it sees, no more.

``python -m tests.cpu_usage DIR [N]`` prints the N costliest tests (default 25) and the total.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Generator
from pathlib import Path

import pytest

ENV = "FLOODMARK_TEST_CPU"
OWNER_ENV = "FLOODMARK_TEST_CPU_OWNER"  # the pytest process whose tests started this process
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (ppid, CPU seconds of the process and its reaped children) for every process."""
    table: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue  # ended while we looked
        # the command name is in parentheses and may hold spaces: split after the last ')'
        fields = raw[raw.rfind(b")") + 2:].split()
        ppid = int(fields[1])
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
        table[int(entry)] = (ppid, (utime + stime + cutime + cstime) / _TICKS_PER_S)
    return table


def _marked(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:
        return False


def descendants_cpu_s(root_pid: int, *, marked: bool = False) -> dict[int, float]:
    """CPU seconds of every live descendant of ``root_pid`` (not the root itself); ``marked``:
    also of every process whose environment names ``root_pid`` as its owner (OWNER_ENV)."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    roots = list(children.get(root_pid, []))
    if marked:
        mark = f"{OWNER_ENV}={root_pid}".encode()
        roots += [pid for pid in table if pid != root_pid and _marked(pid, mark)]
    out: dict[int, float] = {}
    stack = roots
    while stack:
        pid = stack.pop()
        if pid in out:
            continue
        out[pid] = table[pid][1]
        stack.extend(children.get(pid, []))
    return out


def _children_of(pid: int) -> set[int]:
    return {p for p, (ppid, _) in _proc_table().items() if ppid == pid}


def _rusage_s(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


class CpuRecorder:
    def __init__(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self._out = (out_dir / f"cpu-{worker}.jsonl").open("a", encoding="utf-8")
        self._worker = worker
        os.environ[OWNER_ENV] = str(os.getpid())  # inherited by every process a test starts
        self._out_dir = out_dir

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        me = os.getpid()
        self_0 = _rusage_s(resource.RUSAGE_SELF)
        reaped_0 = _rusage_s(resource.RUSAGE_CHILDREN)
        live_0 = descendants_cpu_s(me, marked=True)
        mine_0 = _children_of(me)
        wall_0 = time.monotonic()
        yield
        wall_s = time.monotonic() - wall_0
        self_s = _rusage_s(resource.RUSAGE_SELF) - self_0
        reaped_s = _rusage_s(resource.RUSAGE_CHILDREN) - reaped_0
        live_1 = descendants_cpu_s(me, marked=True)
        live_s = sum(cpu - live_0.get(pid, 0.0) for pid, cpu in live_1.items())
        # a child alive at the start and reaped since: RUSAGE_CHILDREN holds its whole life
        gone_before_s = sum(cpu for pid, cpu in live_0.items()
                            if pid not in live_1 and pid in mine_0)
        children_s = max(0.0, reaped_s - gone_before_s) + live_s
        self._out.write(json.dumps({
            "nodeid": item.nodeid, "worker": self._worker, "wall_s": round(wall_s, 3),
            "self_cpu_s": round(self_s, 3), "children_cpu_s": round(children_s, 3),
            "cpu_s": round(self_s + children_s, 3),
        }) + "\n")
        self._out.flush()

    def pytest_unconfigure(self) -> None:
        self._out.close()
        # the whole process (collection, session fixtures, the tests): what the tests' rows miss
        total_s = _rusage_s(resource.RUSAGE_SELF) + _rusage_s(resource.RUSAGE_CHILDREN)
        session = self._out_dir / f"session-{self._worker}.json"
        session.write_text(json.dumps({"worker": self._worker, "cpu_s": round(total_s, 3)}))


def register(config: pytest.Config) -> None:
    out = os.environ.get(ENV)
    if out:
        config.pluginmanager.register(CpuRecorder(Path(out)), "floodmark-cpu-usage")


def load(out_dir: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for path in sorted(out_dir.glob("cpu-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1])
    top_n = int(argv[2]) if len(argv) > 2 else 25
    rows = load(out_dir)
    rows.sort(key=lambda r: float(str(r["cpu_s"])), reverse=True)
    total = sum(float(str(r["cpu_s"])) for r in rows)
    print(f"{'cpu_s':>8} {'self':>7} {'child':>7} {'wall_s':>7}  test")
    for r in rows[:top_n]:
        print(f"{r['cpu_s']:>8} {r['self_cpu_s']:>7} {r['children_cpu_s']:>7} "
              f"{r['wall_s']:>7}  {r['nodeid']}")
    print(f"{len(rows)} tests, {total:.0f} CPU s in tests")
    sessions = [json.loads(p.read_text(encoding="utf-8")) for p in out_dir.glob("session-*.json")]
    if sessions:
        whole = sum(float(s["cpu_s"]) for s in sessions)
        print(f"{len(sessions)} pytest processes, {whole:.0f} CPU s in all (with collection; "
              "a worker's total also appears in the controller's reaped children)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
