"""KIP-853 with real processes: ``floodmark cluster remove-controller|add-controller`` (Kafka's
kafka-metadata-quorum.sh commands) through a broker, forwarded to the quorum leader, on a
three-controller ``cluster up``. A removed controller keeps running as an observer and is
added back once caught up; the leader removes itself and hands over; a fourth controller
process started outside ``controller.quorum.voters`` is added; leaders are SIGKILLed and the
cluster keeps creating topics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.helpers import REPO, stop_process, wait_until
from tests.cluster.helpers import cli_ok as _ok
from tests.cluster.helpers import run_cli as _cli

pytestmark = pytest.mark.integration

QUICK_QUORUM = ["--controller-set", "controller.quorum.election.timeout.ms=300",
                "--controller-set", "controller.quorum.fetch.timeout.ms=600",
                "--controller-set", "broker.session.timeout.ms=3000"]


def _quorum(dd: list[str]) -> dict[str, Any]:
    return json.loads(_ok("cluster", "quorum", "--json", *dd))  # type: ignore[no-any-return]


def _leader(dd: list[str], besides: int | None = None) -> int:
    found = wait_until(lambda: (q["leader_id"],) if (q := _quorum(dd))["leader_id"] is not None
                       and q["leader_id"] != besides else None, 30, "a quorum leader")
    return int(found[0])


def _voters(dd: list[str]) -> list[int]:
    return sorted(int(v["voter_id"]) for v in _quorum(dd)["voters"])


def _change(verb: str, node: int, bootstrap: str) -> str:
    """add-controller / remove-controller, retried while the leader answers REQUEST_TIMED_OUT
    (the controller has not caught up yet, or the previous change is not committed)."""
    def attempt() -> tuple[str] | None:
        out = _cli("cluster", verb, "--controller-id", str(node), "--bootstrap-server",
                   bootstrap)
        if out.returncode == 0:
            return (out.stdout,)
        assert "REQUEST_TIMED_OUT" in out.stderr or "NOT_CONTROLLER" in out.stderr, out.stderr
        return None
    return str(wait_until(attempt, 60, f"{verb} {node}", step_s=0.5)[0])


def test_remove_add_back_remove_the_leader_then_sigkill_it(tmp_path: Path) -> None:
    dd = ["--data-dir", str(tmp_path / "voters")]
    up = _ok("cluster", "up", "--detach", "--brokers", "1", *QUICK_QUORUM, *dd)
    bootstrap = next(line.split("bootstrap: ")[1].strip() for line in up.splitlines()
                     if "bootstrap: " in line)
    try:
        leader = _leader(dd)
        assert _voters(dd) == [0, 1001, 1002]
        other = next(c for c in (0, 1001, 1002) if c != leader)

        # Kafka's refusals, one line each.
        dup = _cli("cluster", "add-controller", "--controller-id", str(leader),
                   "--bootstrap-server", bootstrap)
        assert dup.returncode == 1 and "DUPLICATE_VOTER" in dup.stderr, dup.stderr
        missing = _cli("cluster", "remove-controller", "--controller-id", "77",
                       "--bootstrap-server", bootstrap)
        assert missing.returncode == 1 and "VOTER_NOT_FOUND" in missing.stderr, missing.stderr
        assert "Traceback" not in dup.stderr + missing.stderr

        # Remove a follower: two voters left; it keeps fetching as an observer.
        assert "Removed controller" in _change("remove-controller", other, bootstrap)
        assert _voters(dd) == sorted({0, 1001, 1002} - {other})
        _ok("topic", "create", "with-two-voters", "--bootstrap-server", bootstrap)
        # Add it back once the leader has seen it caught up.
        assert "Added controller" in _change("add-controller", other, bootstrap)
        assert _voters(dd) == [0, 1001, 1002]

        # The leader removes itself: committed, it resigns, a voter of the new set leads.
        _change("remove-controller", leader, bootstrap)
        new = _leader(dd, besides=leader)
        assert leader not in _voters(dd)
        _ok("topic", "create", "after-the-leader-left", "--bootstrap-server", bootstrap)
        _change("add-controller", leader, bootstrap)
        assert _voters(dd) == [0, 1001, 1002]

        # SIGKILL the leader: the other two elect one, topics are still created.
        _ok("cluster", "kill", str(new), *dd)
        _leader(dd, besides=new)
        _ok("topic", "create", "after-sigkill", "--bootstrap-server", bootstrap)
        listed = _ok("topic", "list", "--bootstrap-server", bootstrap).split()
        assert {"with-two-voters", "after-the-leader-left", "after-sigkill"} <= set(listed)
    finally:
        _cli("cluster", "down", *dd)


def test_a_fourth_controller_joins_as_an_observer_is_added_and_outlives_a_leader_sigkill(
        tmp_path: Path) -> None:
    """A controller process outside ``controller.quorum.voters`` (``--listen`` given) starts as
    an observer: it finds the leader by fetching, the voters learn its address from its
    messages. add-controller adds it once caught up, remove-controller removes another voter,
    the leader is SIGKILLed: the three voters left (the new one among them) elect a leader and
    the cluster keeps creating topics."""
    dd = ["--data-dir", str(tmp_path / "four")]
    up = _ok("cluster", "up", "--detach", "--brokers", "1", *QUICK_QUORUM, *dd)
    bootstrap = next(line.split("bootstrap: ")[1].strip() for line in up.splitlines()
                     if "bootstrap: " in line)
    fourth: subprocess.Popen[str] | None = None
    try:
        leader = _leader(dd)
        status = json.loads(_ok("cluster", "status", "--json", *dd))
        book = ",".join(f"{n['id']}@{n['address']}" for n in status["nodes"]
                        if n["role"] == "controller")
        fourth = subprocess.Popen(
            [sys.executable, "-m", "floodmark.controller", "--node-id", "1003",
             "--data-dir", str(tmp_path / "controller-1003"), "--listen", "127.0.0.1:0",
             "--controller-quorum-voters", book,
             "--controller-quorum-election-timeout-ms", "300",
             "--controller-quorum-fetch-timeout-ms", "600"],
            cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
        assert "Added controller 1003" in _change("add-controller", 1003, bootstrap)
        assert _voters(dd) == [0, 1001, 1002, 1003]
        _ok("topic", "create", "with-four-voters", "--bootstrap-server", bootstrap)
        other = next(c for c in (0, 1001, 1002) if c != leader)
        _change("remove-controller", other, bootstrap)
        assert _voters(dd) == sorted({0, 1001, 1002, 1003} - {other})

        _ok("cluster", "kill", str(leader), *dd)
        _ok("topic", "create", "after-sigkill", "--bootstrap-server", bootstrap)
        listed = _ok("topic", "list", "--bootstrap-server", bootstrap).split()
        assert {"with-four-voters", "after-sigkill"} <= set(listed)
        assert fourth.poll() is None  # the added controller still runs
    finally:
        if fourth is not None:
            stop_process(fourth)
        _cli("cluster", "down", *dd)
