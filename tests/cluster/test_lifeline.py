"""A killed test run leaves no cluster behind: the broker and controller processes a pytest run
started end when that run is killed (SIGKILL, SIGTERM, SIGINT), and only then.

The parent here is a real pytest run of a small test that starts a ``LocalCluster`` and then
hangs; this test kills it and watches the cluster's processes go."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from floodmark import lifeline
from floodmark.cluster import LocalCluster
from floodmark.cluster.local import pid_state
from floodmark.cluster.waiting import process_progress
from tests.cluster.helpers import cluster_progress, wait_progress, wait_until

HANGING_RUN = """
import time
from pathlib import Path
from floodmark.cluster import LocalCluster

def test_holds_a_cluster():
    LocalCluster({data!r}, brokers=1).start()
    Path({ready!r}).write_text("up")
    time.sleep(600)  # killed before it ends; no stop(), as in a run killed mid-test
"""


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _node_pids(data_dir: Path) -> list[int]:
    state = json.loads((data_dir / "cluster.json").read_text())
    return [int(n["pid"]) for n in state["nodes"].values() if n.get("pid")]


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if pid_state(p) != "dead"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT],
                         ids=lambda s: signal.Signals(s).name)
def test_the_nodes_of_a_killed_pytest_run_end_with_it(tmp_path: Path, sig: int) -> None:
    data, ready = tmp_path / "tidy-cluster", tmp_path / "ready"
    test_file = tmp_path / "test_hanging.py"
    test_file.write_text(textwrap.dedent(HANGING_RUN.format(data=str(data), ready=str(ready))))
    log = tmp_path / "pytest.log"
    with open(log, "wb") as out:
        # SIGINT as a terminal would send it: a shell running this suite in the background
        # (`cmd &`) starts it with SIGINT ignored, and a child inherits that.
        run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                str(test_file)], cwd=tmp_path, stdout=out, stderr=out,
                               preexec_fn=_default_sigint)
    pids: list[int] = []
    try:
        wait_progress(ready.exists, lambda: (process_progress(run.pid, log),
                                             sorted(data.glob("logs/*"))), 60,
                      "the inner pytest run to start its cluster")
        pids = _node_pids(data)
        assert len(pids) == 2 and _alive(pids) == pids  # a controller and a broker, running
        run.send_signal(sig)
        run.wait(60)
        # They go within a lifeline check (a quarter second); fail only if they stop going.
        wait_progress(lambda: not _alive(pids), lambda: _alive(pids), 30,
                      f"the nodes of a pytest run killed with {signal.Signals(sig).name} to end")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in _alive(pids):  # only what this test's run started, by pid
            os.kill(pid, signal.SIGKILL)


def test_a_node_started_from_a_short_lived_thread_outlives_the_thread(tmp_path: Path) -> None:
    """(What rules out prctl(PR_SET_PDEATHSIG): it fires when the forking *thread* ends.)"""
    cluster = LocalCluster(tmp_path / "tidy-thread", brokers=1)
    starter = threading.Thread(target=cluster.start)
    starter.start()
    starter.join()
    try:
        pids = _node_pids(cluster.data_dir)
        assert len(pids) == 2
        # After the thread that started them ended, the broker registers with the controller
        # (a round trip of both processes), and both are still alive then.
        wait_until(lambda: "broker_epoch" in cluster.status()["nodes"][1], 30,
                   "the broker to register", progress=lambda: cluster_progress(cluster))
        assert _alive(pids) == pids
    finally:
        cluster.stop()


def test_a_node_outlives_a_supervisor_that_did_not_ask(tmp_path: Path) -> None:
    """``cluster up --detach`` nodes (die_with_supervisor=False) have no lifeline, and one
    inherited from a supervised environment is dropped."""
    env = lifeline.unsupervised_env({**os.environ, lifeline.ENV: "1"})
    assert lifeline.ENV not in env
    assert lifeline.supervised_env({})[lifeline.ENV] == str(os.getpid())
    assert not lifeline.orphaned(os.getppid()) and lifeline.orphaned(os.getppid() + 1)
