"""UpdateRaftVoter (KIP-853) with real processes: a voter of three restarted on another port
(its data dir kept, ``controller.quorum.voters`` unchanged, so the others still hold its old
address) sends UpdateRaftVoter to the leader on its own; the voter set record then names its
new listener, the leader and the other voter dial it there, and with the leader SIGKILLed the
two left (the moved one among them, whose vote is needed) elect a new active controller."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from floodmark.controller import rpc
from floodmark.ports import free_port
from tests.cluster.helpers import stop_process, wait_until
from tests.cluster.test_controller_quorum import Quorum

pytestmark = pytest.mark.integration


def test_a_voter_restarted_on_a_new_port_updates_its_endpoint_and_is_reached(
        tmp_path: Path) -> None:
    q = Quorum(tmp_path)
    try:
        for node in (1, 2, 3):
            q.start(node)
        leader = int(wait_until(lambda: (q.active([1, 2, 3]),) if q.active([1, 2, 3])
                                else None, 30, "an active controller")[0])
        moved, other = (v for v in (1, 2, 3) if v != leader)
        old = q.address(moved)
        stop_process(q.procs.pop(moved))
        q.ports[moved] = free_port()
        new = q.address(moved)
        q.extra_args = ("--listen", new)
        q.start(moved)
        q.extra_args = ()

        def recorded() -> tuple[bool] | None:
            d = q.describe(leader)
            return (True,) if d and d["voter_endpoints"].get(str(moved)) == new else None
        wait_until(recorded, 30, f"the leader records {moved} at {new} (was {old})")

        def following() -> tuple[bool] | None:
            mine, theirs = q.describe(moved), q.describe(leader)
            return (True,) if (mine and theirs and mine["role"] == "follower"
                               and mine["leader_id"] == leader
                               and mine["high_watermark"] == theirs["high_watermark"]
                               and mine["voter_endpoints"].get(str(moved)) == new) else None
        wait_until(following, 30, f"{moved} follows {leader} from its new port")
        # A request as Kafka checks it: no directory id is INVALID_REQUEST, one line.
        bad = rpc.blocking_call(q.address(leader), "update_raft_voter", {
            "current_leader_epoch": q.describe(leader)["leader_epoch"],  # type: ignore[index]
            "voter_id": moved, "voter_directory_id": "",
            "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 1}],
            "kraft_version_feature": {"min_supported_version": 0,
                                      "max_supported_version": 1}})
        assert bad["error"] == 42 and "directory" in bad["message"], bad  # INVALID_REQUEST

        # The leader dies: an election among the two left needs the moved voter's vote.
        q.procs[leader].send_signal(signal.SIGKILL)
        q.procs[leader].wait(10)
        found = wait_until(lambda: (a,) if (a := q.active([moved, other])) else None, 30,
                           "a new active controller among the two left")
        d = q.describe(int(found[0]))
        assert d is not None and d["voter_endpoints"][str(moved)] == new
    finally:
        q.stop_all()
