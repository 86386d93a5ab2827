"""The CPU seconds of starting and stopping floodmark's processes, the test suite's main cost.

The default suite starts hundreds of brokers, controllers, local clusters and CLI commands; this
measures what one of each costs, so a change to their start-up or stop path shows in figures:

- ``single``: one ``floodmark broker`` (broker and controller in one process, the tests'
  ``BrokerProcess``): CPU from exec to its listening line, to serving (a Metadata answer), over
  ``--idle-s`` seconds idle, and for a clean stop (SIGTERM until it has exited);
- ``controller``: one ``python -m floodmark.controller`` process, the same phases;
- ``cluster``: a ``LocalCluster`` of a controller and three brokers (the tests'
  ``start_cluster``) until it serves, idle, and stopped; the nodes' CPU and this process's own
  (the supervisor's waiting and polling);
- ``cli``: CLI commands a test runs against the single broker (``topic create``,
  ``topic describe``, ``topic list``), each a new process.

CPU is user + system: read from ``/proc/PID/stat`` while a process runs and from the rusage of
the reaped children once it has ended, so a stop's CPU is the whole of the process's life minus
what it had used before the signal. Medians over ``--reps``.

    .venv/bin/python benchmarks/start_cpu.py [--parts single,controller,cluster,cli]
        [--reps 5] [--idle-s 5]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import floodmark
from floodmark.cluster import LocalCluster
from floodmark.testing.serving import serving_problem

CLOCK_TICKS = float(os.sysconf("SC_CLK_TCK"))
_LISTENING = re.compile(rb"listening on (\S+):(\d+)")
WAIT_LIMIT_S = 120.0
IMPORT_ROOT = str(Path(floodmark.__file__).resolve().parents[1])


def node_env() -> dict[str, str]:
    """The environment of a process started here: this process's floodmark first."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join([IMPORT_ROOT, *paths])}


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (to the clock tick)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def wait_for(what: str, done: Callable[[], bool], step_s: float = 0.02) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not done after {WAIT_LIMIT_S:.0f} s")
        time.sleep(step_s)


Figures = dict[str, list[float]]


def add(figures: Figures, name: str, value: float) -> None:
    figures.setdefault(name, []).append(value)


def _listening_port(proc: subprocess.Popen[bytes]) -> int:
    """Read the process's stdout until its listening line; its port."""
    assert proc.stdout is not None
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        readable, _, _ = select.select([proc.stdout], [], [], 1.0)
        if not readable:
            continue
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"exited before listening (code {proc.wait()})")
        m = _LISTENING.search(line)
        if m:
            return int(m.group(2))
    raise RuntimeError("no listening line")


def one_process(figures: Figures, prefix: str, cmd: list[str], idle_s: float,
                serving: Callable[[int], bool] | None) -> int:
    """Start ``cmd``, wait for its listening line (and ``serving(port)``), idle, SIGTERM it;
    the phases' CPU and wall into ``figures``. Returns the port."""
    before = children_cpu_s()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=node_env())
    try:
        port = _listening_port(proc)
        add(figures, f"{prefix} listening CPU s", proc_cpu_s(proc.pid))
        add(figures, f"{prefix} listening wall s", time.monotonic() - t0)
        if serving is not None:
            wait_for("serving", lambda: serving(port))
            add(figures, f"{prefix} serving CPU s", proc_cpu_s(proc.pid))
            add(figures, f"{prefix} serving wall s", time.monotonic() - t0)
        start_cpu = proc_cpu_s(proc.pid)
        time.sleep(idle_s)  # the idle phase's length is what is measured here
        idle_cpu = proc_cpu_s(proc.pid) - start_cpu
        add(figures, f"{prefix} idle CPU % of a core", 100 * idle_cpu / idle_s)
        used = proc_cpu_s(proc.pid)
        t_stop = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(WAIT_LIMIT_S)
        add(figures, f"{prefix} stop wall s", time.monotonic() - t_stop)
        add(figures, f"{prefix} stop CPU s", children_cpu_s() - before - used)
        add(figures, f"{prefix} whole life CPU s", children_cpu_s() - before)
        return port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def broker_serves(port: int) -> bool:
    return serving_problem({1: f"127.0.0.1:{port}"}) is None


def measure_single(figures: Figures, tmp: Path, idle_s: float, cli: bool) -> None:
    cmd = [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", str(tmp / "b"),
           "--listen", "127.0.0.1:0"]
    if not cli:
        one_process(figures, "broker", cmd, idle_s, broker_serves)
        return
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=node_env())
    try:
        port = _listening_port(proc)
        wait_for("serving", lambda: broker_serves(port))
        bootstrap = f"127.0.0.1:{port}"
        topic = f"t{time.monotonic_ns()}"
        for name, args in (
                ("topic create", ["topic", "create", topic, "--partitions", "3",
                                  "--replication-factor", "1"]),
                ("topic describe", ["topic", "describe", topic]),
                ("topic list", ["topic", "list"])):
            before = children_cpu_s()
            t0 = time.monotonic()
            out = subprocess.run([sys.executable, "-m", "floodmark.cli", *args,
                                  "--bootstrap-server", bootstrap], capture_output=True,
                                 env=node_env(), timeout=WAIT_LIMIT_S, check=False)
            if out.returncode != 0:
                raise RuntimeError(f"floodmark {' '.join(args)}: {out.stderr.decode()[-500:]}")
            add(figures, f"cli {name} CPU s", children_cpu_s() - before)
            add(figures, f"cli {name} wall s", time.monotonic() - t0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(WAIT_LIMIT_S)
        if proc.stdout is not None:
            proc.stdout.close()


def measure_controller(figures: Figures, tmp: Path, idle_s: float) -> None:
    cmd = [sys.executable, "-m", "floodmark.controller", "--data-dir", str(tmp / "c"),
           "--listen", "127.0.0.1:0"]
    one_process(figures, "controller", cmd, idle_s, None)


def measure_cluster(figures: Figures, tmp: Path, idle_s: float) -> None:
    """A controller and three brokers, as tests/cluster/helpers.start_cluster makes them."""
    children0, self0 = children_cpu_s(), self_cpu_s()
    t0 = time.monotonic()
    cluster = LocalCluster(tmp / "cl", 3, {"replica.lag.time.max.ms": "2000"},
                           {"broker.session.timeout.ms": "1500",
                            "leader.imbalance.check.interval.ms": "3000"}, metrics=False)
    try:
        cluster.start()
        add(figures, "cluster started wall s", time.monotonic() - t0)
        brokers = {b: cluster.address(b) for b in cluster.broker_ids}
        wait_for("serving", lambda: serving_problem(brokers) is None, step_s=0.05)
        add(figures, "cluster serving wall s", time.monotonic() - t0)
        pids = [p for n in cluster.node_ids if (p := cluster.pid(n)) is not None]
        serving = sum(proc_cpu_s(p) for p in pids)
        add(figures, "cluster serving CPU s (4 nodes)", serving)
        add(figures, "cluster serving CPU s (supervisor)", self_cpu_s() - self0)
        time.sleep(idle_s)  # the idle phase's length is what is measured here
        idle = sum(proc_cpu_s(p) for p in pids) - serving
        add(figures, "cluster idle CPU % of a core (4 nodes)", 100 * idle / idle_s)
        used = serving + idle
        t_stop = time.monotonic()
        self_stop = self_cpu_s()
    finally:
        cluster.stop()
    add(figures, "cluster stop wall s", time.monotonic() - t_stop)
    add(figures, "cluster stop CPU s (4 nodes)", children_cpu_s() - children0 - used)
    add(figures, "cluster stop CPU s (supervisor)", self_cpu_s() - self_stop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="single,controller,cluster,cli")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--idle-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    known = ("single", "controller", "cluster", "cli")
    for part in parts:
        if part not in known:
            parser.error(f"--parts: {part!r} is not one of {', '.join(known)}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}; floodmark from {IMPORT_ROOT}",
          flush=True)
    figures: Figures = {}
    for rep in range(args.reps):
        with tempfile.TemporaryDirectory(prefix="start-cpu-") as tmp_name:
            tmp = Path(tmp_name)
            for part in parts:
                if part == "single":
                    measure_single(figures, tmp, args.idle_s, cli=False)
                elif part == "controller":
                    measure_controller(figures, tmp / f"{rep}", args.idle_s)
                elif part == "cluster":
                    measure_cluster(figures, tmp, args.idle_s)
                else:
                    measure_single(figures, tmp / "cli", args.idle_s, cli=True)
        print(f"  round {rep + 1} of {args.reps} done (load {os.getloadavg()[0]:.2f})",
              flush=True)
    print(f"\n{'figure':45s} {'median':>8s} {'min':>8s} {'max':>8s}   (of {args.reps})")
    for name, values in figures.items():
        print(f"{name:45s} {statistics.median(values):8.3f} {min(values):8.3f} "
              f"{max(values):8.3f}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
