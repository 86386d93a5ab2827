"""Issue 11 item 6 through the real CLI: ``floodmark cluster up`` starts three controller
processes by default, each a voter of one quorum (its own data dir); ``cluster status --json``
marks them ``"role": "controller"`` and ``"active"``; ``cluster quorum`` shows the leader, epoch,
HW and each voter's LEO and lag; ``cluster kill|start`` take controller ids, and brokers follow
the controller elected after the active one is killed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.helpers import cli_ok as _ok
from tests.cluster.helpers import one_line_error as _one_line_error
from tests.cluster.helpers import run_cli as _cli
from tests.cluster.helpers import wait_until

pytestmark = pytest.mark.integration

QUICK_QUORUM = ["--controller-set", "controller.quorum.election.timeout.ms=300",
                "--controller-set", "controller.quorum.fetch.timeout.ms=600",
                "--controller-set", "broker.session.timeout.ms=3000"]


def _json(*args: str) -> Any:
    return json.loads(_ok(*args, "--json"))


def _controllers(dd: list[str]) -> dict[int, dict[str, Any]]:
    st = _json("cluster", "status", *dd)
    return {n["id"]: n for n in st["nodes"] if n["role"] == "controller"}


def _active(dd: list[str]) -> int | None:
    active = [i for i, n in _controllers(dd).items() if n["active"]]
    assert len(active) <= 1, active
    return active[0] if active else None


def _wait_active(dd: list[str], besides: int | None = None) -> int:
    """The active controller's id (0 is an id: wait on a tuple, never on the id's truth)."""
    found = wait_until(lambda: (a,) if (a := _active(dd)) is not None and a != besides
                       else None, 30, "an active controller")
    return int(found[0])


def test_cluster_up_runs_a_controller_quorum(tmp_path: Path) -> None:
    data = tmp_path / "q-ctl11"
    dd = ["--data-dir", str(data)]
    up = _ok("cluster", "up", "--detach", "--brokers", "3", *QUICK_QUORUM, *dd)
    try:
        assert "bootstrap: " in up
        st = _json("cluster", "status", *dd)
        # Every key `status --json` had stays; controllers add "active".
        for n in st["nodes"]:
            assert {"id", "role", "pid", "address", "alive", "state"} <= set(n), n
        ctls = _controllers(dd)
        assert sorted(ctls) == [0, 1001, 1002]
        assert all(n["alive"] and isinstance(n["active"], bool) for n in ctls.values())
        assert len({n["pid"] for n in ctls.values()}) == 3  # three processes
        for c in ctls:  # each its own data dir, holding its metadata log and quorum state
            name = "controller" if c == 0 else f"controller-{c}"
            assert (data / name).is_dir()
        active = _wait_active(dd)
        assert st["controller"] in {n["address"] for n in ctls.values()}

        q = _json("cluster", "quorum", *dd)
        assert q["leader_id"] == active
        epoch = q["leader_epoch"]
        assert epoch >= 1 and q["high_watermark"] >= 1
        assert sorted(v["voter_id"] for v in q["voters"]) == [0, 1001, 1002]
        assert all({"log_end_offset", "lag"} <= set(v) for v in q["voters"])
        text = _ok("cluster", "quorum", *dd)
        assert f"leader {active} epoch {epoch}" in text

        bootstrap = st["bootstrap"]
        _ok("topic", "create", "before-ctl11", "--replication-factor", "3",
            "--bootstrap-server", bootstrap)

        # SIGKILL the active controller: another is elected, brokers follow it, topics go on.
        _ok("cluster", "kill", str(active), *dd)
        new = _wait_active(dd, besides=active)
        q = _json("cluster", "quorum", *dd)
        assert q["leader_id"] == new and q["leader_epoch"] > epoch
        dead = next(v for v in q["voters"] if v["voter_id"] == active)
        assert dead["state"] == "dead"
        assert q["controllers"][str(active)] is None
        _ok("topic", "create", "after-ctl11", "--replication-factor", "3",
            "--bootstrap-server", bootstrap)
        listed = _ok("topic", "list", "--bootstrap-server", bootstrap).split()
        assert {"before-ctl11", "after-ctl11"} <= set(listed)

        # Restart it by id: it rejoins as a follower and catches up (lag 0 at the leader's HW).
        _ok("cluster", "start", str(active), *dd)

        def caught_up() -> bool:
            q = _json("cluster", "quorum", *dd)
            back = next(v for v in q["voters"] if v["voter_id"] == active)
            return (q["leader_id"] == new and back["lag"] == 0
                    and back["log_end_offset"] >= q["high_watermark"])
        wait_until(caught_up, 30, f"controller {active} caught up")
        assert _controllers(dd)[active]["active"] is False

        # The directory keeps its count; bad counts are one line.
        _ok("cluster", "down", *dd)
        _one_line_error(_cli("cluster", "up", "--detach", "--controllers", "1", *dd),
                        "keeps its count")
        _one_line_error(_cli("cluster", "up", "--controllers", "0", "--data-dir",
                             str(tmp_path / "n")), "--controllers 0")
        _one_line_error(_cli("cluster", "quorum", "--data-dir", str(tmp_path / "nowhere")),
                        "no cluster in")
        again = _ok("cluster", "up", "--detach", *dd)  # restart: the quorum's data is kept
        assert again.count("controller ") == 3
        _wait_active(dd)
        listed = _ok("topic", "list", "--bootstrap-server", bootstrap).split()
        assert {"before-ctl11", "after-ctl11"} <= set(listed)
    finally:
        _cli("cluster", "down", *dd)


def test_one_controller_still_works(tmp_path: Path) -> None:
    dd = ["--data-dir", str(tmp_path / "one-ctl11")]
    _ok("cluster", "up", "--detach", "--brokers", "1", "--controllers", "1", *dd)
    try:
        ctls = _controllers(dd)
        assert list(ctls) == [0] and ctls[0]["active"] is True
        q = _json("cluster", "quorum", *dd)
        assert q["leader_id"] == 0 and [v["voter_id"] for v in q["voters"]] == [0]
    finally:
        _cli("cluster", "down", *dd)
