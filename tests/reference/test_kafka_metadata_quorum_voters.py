"""Kafka's own kafka-metadata-quorum (the pinned release's ``MetadataQuorumCommand``) against a
three-controller floodmark cluster: ``describe --replication`` lists the voters with their
directory ids, ``remove-controller`` (RemoveRaftVoter through the broker, forwarded to the
quorum leader) removes one — listed as an observer afterwards — and answers a voter that is
not there with Kafka's VoterNotFoundException. (``add-controller`` needs the new controller's
Kafka properties file and ``meta.properties``, which floodmark's controllers do not write:
``floodmark cluster add-controller`` does that part, tests/cluster/test_raft_voters.py.)"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.helpers import cli_ok, run_cli, wait_until
from tests.reference.kafka_node import missing_reason, run_tool

pytestmark = pytest.mark.integration


def _kafka_uuid(text: str) -> str:
    """Kafka's Uuid text: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.UUID(text).bytes).decode().rstrip("=")


def _tool(*args: str) -> str:
    r = run_tool("kafka-metadata-quorum", list(args), timeout_s=300)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stderr[-3000:]}"
    return r.stdout


def _rows(bootstrap: str) -> dict[int, list[str]]:
    out = _tool("--bootstrap-server", bootstrap, "describe", "--replication")
    return {int(cols[0]): cols for line in out.splitlines()[1:]
            if (cols := line.split()) and cols[0].isdigit()}


def test_describe_and_remove_controller(tmp_path: Path) -> None:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    dd = ["--data-dir", str(tmp_path / "kq")]
    up = cli_ok("cluster", "up", "--detach", "--brokers", "1",
                "--controller-set", "controller.quorum.election.timeout.ms=300",
                "--controller-set", "controller.quorum.fetch.timeout.ms=600", *dd)
    bootstrap = next(line.split("bootstrap: ")[1].strip() for line in up.splitlines()
                     if "bootstrap: " in line)
    try:
        def quorum() -> dict[str, Any] | None:
            q: dict[str, Any] = json.loads(cli_ok("cluster", "quorum", "--json", *dd))
            return q if q["leader_id"] is not None and len(q["voters"]) == 3 else None
        q = wait_until(quorum, 30, "a leader of three voters")
        rows = _rows(bootstrap)
        follower = next(v for v in q["voters"] if v["voter_id"] != q["leader_id"])
        fid, directory = int(follower["voter_id"]), _kafka_uuid(follower["directory_id"])
        assert rows[q["leader_id"]][-1] == "Leader"
        assert rows[fid][1] == directory and rows[fid][-1] == "Follower"

        out = _tool("--bootstrap-server", bootstrap, "remove-controller",
                    "--controller-id", str(fid), "--controller-directory-id", directory)
        assert f"KRaft controller {fid} with directory id {directory}" in out, out
        def observed() -> dict[int, list[str]] | None:
            found = _rows(bootstrap)
            return found if found.get(fid, [""])[-1] == "Observer" else None
        rows = wait_until(observed, 60, f"controller {fid} listed as an observer", step_s=1)
        assert sorted(i for i, cols in rows.items() if cols[-1] in ("Leader", "Follower")) == (
            sorted(int(v["voter_id"]) for v in q["voters"] if int(v["voter_id"]) != fid))

        refused = run_tool("kafka-metadata-quorum", [
            "--bootstrap-server", bootstrap, "remove-controller", "--controller-id", "77",
            "--controller-directory-id", directory], timeout_s=300)
        assert refused.returncode != 0 and "VoterNotFoundException" in refused.stderr
    finally:
        run_cli("cluster", "down", *dd)
