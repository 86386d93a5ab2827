"""A node process that dies with the process that started it, when that one asks.

A test run, a benchmark or a demo starts brokers and controllers (``LocalCluster``, the tests'
``BrokerProcess``) and stops them when it ends. Killed first (SIGKILL, pytest-timeout's
``os._exit``, a SIGTERM with no handler), it leaves them running: whole clusters that hold
ports, CPU and disk on a shared machine. So such a supervisor puts its own pid in the node's
environment (``supervised_env``), and the node (``hold``, first thing in its ``main``) watches
its parent: once the parent is no longer that pid (it died and the node was handed to init or a
subreaper), the node SIGKILLs itself, as if it had crashed (what it must survive anyway).

Why not ``prctl(PR_SET_PDEATHSIG)``: Linux sends that signal when the *thread* that forked the
child ends, so a node started from a short-lived thread would die with the thread; and it needs
a ``preexec_fn``, which is unsafe in a process with threads. A node with nothing in its
environment (``floodmark cluster up --detach``, ``cluster start``: nodes that outlive the
command that started them) is not watched.

A leaf module (the lowest layer): the broker, the controller and the CLI's broker all call it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

ENV = "FLOODMARK_SUPERVISOR_PID"
CHECK_INTERVAL_S = 0.25

log = logging.getLogger(__name__)


def supervised_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a node that must die with this process."""
    return {**env, ENV: str(os.getpid())}


def unsupervised_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a node that outlives this process (no inherited supervisor either)."""
    return {k: v for k, v in env.items() if k != ENV}


def orphaned(supervisor_pid: int) -> bool:
    """Has the supervisor gone (this process's parent is someone else now)?"""
    return os.getppid() != supervisor_pid


def hold() -> int | None:
    """If a supervisor asked for it, watch it from a daemon thread and die when it is gone;
    returns its pid (None: not supervised)."""
    text = os.environ.get(ENV)
    if not text:
        return None
    try:
        supervisor = int(text)
    except ValueError:
        return None

    def watch() -> None:
        while not orphaned(supervisor):
            time.sleep(CHECK_INTERVAL_S)
        log.warning("supervisor pid %d is gone: this node ends with it", supervisor)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()
    return supervisor
