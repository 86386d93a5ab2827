"""``floodmark cluster reassign-partitions`` (kafka-reassign-partitions.sh) on a real 4-broker
cluster with racks a, b (brokers 1, 3 in rack a; 2, 4 in rack b): ``--generate`` proposes a
rack-aware plan over brokers 1-4, ``--execute`` starts it (printing the rollback document),
``--verify`` reports progress until every partition is completed, and the replicas the cluster
then holds are the plan's. A move to a dead broker stays in progress (``--list`` shows it)
and ``--cancel`` reverts it. File mistakes are one line each. The commands run in this process
(``floodmark.cli.main.main``); the cluster is real processes; waits fail only when no partition
makes progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from floodmark.cli.main import main
from floodmark.cli.reassign import propose, verify_states
from floodmark.client.cluster import ClusterClient
from floodmark.cluster import LocalCluster
from tests.cluster.helpers import SESSION_TIMEOUT_MS, cluster_progress, wait_until

pytestmark = pytest.mark.integration

TOPIC = "moving"


def test_generate_execute_verify_list_cancel(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    cluster = LocalCluster(tmp_path / "c", 4, {"replica.lag.time.max.ms": "2000"},
                           {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)},
                           racks=("a", "b")).start()
    try:
        bs = ["--bootstrap-server", cluster.bootstrap]

        def run(*argv: str) -> tuple[int, str, str]:
            capsys.readouterr()
            rc = main([*argv, *bs])
            out, err = capsys.readouterr()
            assert "Traceback" not in err, err
            return rc, out, err

        # Four partitions, RF 2, all on brokers 1 and 2 to start with.
        assert run("topic", "create", TOPIC, "--replica-assignment",
                   "1:2,2:1,1:2,2:1")[0] == 0
        topics_file = tmp_path / "topics.json"
        topics_file.write_text(json.dumps({"topics": [{"topic": TOPIC}], "version": 1}))
        rc, out, err = run("cluster", "reassign-partitions", "--generate",
                           "--topics-to-move-json-file", str(topics_file),
                           "--broker-list", "1,2,3,4")
        assert rc == 0, err
        lines = out.splitlines()
        assert lines[0] == "Current partition replica assignment"
        current = json.loads(lines[1])
        assert [p["replicas"] for p in current["partitions"]] == [[1, 2], [2, 1], [1, 2], [2, 1]]
        assert lines[3] == "Proposed partition reassignment configuration"
        proposed = json.loads(lines[4])
        plan = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
        racks = {1: "a", 2: "b", 3: "a", 4: "b"}
        assert sorted(plan) == [0, 1, 2, 3]
        for replicas in plan.values():  # rack-aware: each partition in both racks
            assert {racks[b] for b in replicas} == {"a", "b"}, plan
        assert sorted(r[0] for r in plan.values()) == [1, 2, 3, 4]  # leaders spread
        assert all(p["log_dirs"] == ["any", "any"] for p in proposed["partitions"])

        plan_file = tmp_path / "plan.json"
        plan_file.write_text(lines[4])
        rc, out, err = run("cluster", "reassign-partitions", "--execute",
                           "--reassignment-json-file", str(plan_file))
        assert rc == 0, err
        assert out.startswith("Current partition replica assignment\n\n")
        assert "Save this to use as the --reassignment-json-file option during rollback" in out
        assert out.splitlines()[-1] == (
            "Successfully started partition reassignments for "
            + ",".join(f"{TOPIC}-{p}" for p in range(4)))

        def verified() -> list[str]:
            rc, out, err = run("cluster", "reassign-partitions", "--verify",
                               "--reassignment-json-file", str(plan_file), "--json")
            assert rc == 0, err
            return [s["state"] for s in json.loads(out)]
        wait_until(lambda: verified() == ["completed"] * 4, 60, "every move to complete",
                   progress=lambda: (verified(), cluster_progress(cluster)))
        rc, out, _err = run("cluster", "reassign-partitions", "--verify",
                            "--reassignment-json-file", str(plan_file))
        assert out.splitlines() == ["Status of partition reassignment:"] + [
            f"Reassignment of partition {TOPIC}-{p} is completed." for p in range(4)]
        for p, replicas in plan.items():
            reg = cluster.partition_registration(TOPIC, p)
            assert reg is not None and [int(b) for b in reg["replicas"]] == replicas
        assert run("cluster", "reassign-partitions", "--list")[1] == (
            "No partition reassignments found.\n")

        # A move to a dead broker waits; --list shows it, --cancel reverts it.
        moved_from = plan[0]
        target = [b for b in (1, 2, 3, 4) if b not in moved_from][:1] + moved_from[1:]
        cluster.kill(target[0])
        wait_until(lambda: target[0] not in _live_brokers(cluster), 60,
                   f"broker {target[0]} fenced")
        stuck = tmp_path / "stuck.json"
        stuck.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": target}]}))
        # As kafka-reassign-partitions, --execute refuses a broker that is not alive ...
        rc, out, err = run("cluster", "reassign-partitions", "--execute",
                           "--reassignment-json-file", str(stuck))
        assert rc == 1 and f"Unknown broker id {target[0]}" in err, err
        # ... so the move is started through the API, as a broker dies under a started move.
        with ClusterClient(cluster.bootstrap) as client:
            resp = client.request_any(45, 0, {"timeout_ms": 30000, "topics": [{
                "name": TOPIC, "partitions": [{"partition_index": 0, "replicas": target}]}]})
        assert int(resp.responses[0].partitions[0].error_code) == 0
        other = tmp_path / "other.json"
        other.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 1,
             "replicas": [b for b in (1, 2, 3, 4) if b != target[0]][:2]}]}))
        rc, out, err = run("cluster", "reassign-partitions", "--execute",
                           "--reassignment-json-file", str(other))
        assert rc == 1 and "--additional" in err and len(err.strip().splitlines()) == 1, err
        rc, out, err = run("cluster", "reassign-partitions", "--list")
        assert out.splitlines()[0] == "Current partition reassignments:", out
        assert out.splitlines()[1].startswith(f"{TOPIC}-0: replicas: ")
        assert f"adding: {target[0]}." in out
        rc, out, _err = run("cluster", "reassign-partitions", "--verify",
                            "--reassignment-json-file", str(stuck))
        assert f"Reassignment of partition {TOPIC}-0 is still in progress." in out
        rc, out, err = run("cluster", "reassign-partitions", "--cancel",
                           "--reassignment-json-file", str(stuck))
        assert rc == 0 and out == (
            f"Successfully cancelled partition reassignment for: {TOPIC}-0\n"), (out, err)
        wait_until(lambda: _replicas(cluster, 0) == moved_from, 30, "the move reverted")
        rc, out, _err = run("cluster", "reassign-partitions", "--cancel",
                            "--reassignment-json-file", str(stuck))
        assert out == "None of the specified partition reassignments are active.\n"
        rc, out, _err = run("cluster", "reassign-partitions", "--verify",
                            "--reassignment-json-file", str(stuck))
        assert (f"There is no active reassignment of partition {TOPIC}-0, but replica set is "
                f"{','.join(map(str, moved_from))} rather than "
                f"{','.join(map(str, target))}.") in out

        # Mistakes: one line each, exit status 1 or 2, nothing changed.
        bad = tmp_path / "bad.json"
        for doc, needle in [
            ("{", "not JSON"),
            ('{"version": 1, "partitions": [{"topic": "moving", "partition": 0}]}',
             "partitions[0] is not"),
            ('{"version": 1, "partitions": [{"topic": "moving", "partition": 0, '
             '"replicas": [1, 1]}]}', "twice"),
            ('{"version": 1, "partitions": [{"topic": "moving", "partition": 0, '
             '"replicas": [1, 9]}]}', "Unknown broker id 9"),
            ('{"version": 1, "partitions": [{"topic": "moving", "partition": 7, '
             '"replicas": [1, 2]}]}', "does not exist"),
            ('{"version": 1, "partitions": [{"topic": "moving", "partition": 0, '
             '"replicas": [1, 2], "log_dirs": ["/x", "any"]}]}', "AlterReplicaLogDirs"),
        ]:
            bad.write_text(doc)
            rc, out, err = run("cluster", "reassign-partitions", "--execute",
                               "--reassignment-json-file", str(bad))
            assert rc != 0 and needle in err and len(err.strip().splitlines()) == 1, (doc, err)
        rc, _out, err = run("cluster", "reassign-partitions", "--generate",
                            "--topics-to-move-json-file", str(topics_file))
        assert rc != 0 and "--broker-list" in err
        rc, _out, err = run("cluster", "reassign-partitions", "--list", "--additional")
        assert rc != 0 and "cannot be used with --list" in err
        assert _replicas(cluster, 0) == moved_from
    finally:
        cluster.stop()


def _replicas(cluster: LocalCluster, partition: int) -> list[int] | None:
    reg = cluster.partition_registration(TOPIC, partition)
    return None if reg is None else [int(b) for b in reg["replicas"]]


def _live_brokers(cluster: LocalCluster) -> set[int]:
    """The brokers DescribeCluster lists (unfenced), as the command asks."""
    with ClusterClient(cluster.bootstrap) as client:
        described = client.request_any(60, 1, {"include_cluster_authorized_operations": False,
                                                "endpoint_type": 1})
        return {int(b.broker_id) for b in described.brokers}


def test_propose_keeps_partition_count_and_factor_and_spreads_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}
    current = {("t", p): [1, 2, 3] for p in range(6)} | {("u", 0): [1]}
    plan = propose(racks, current, [1, 2, 3, 4, 5], rack_aware=True)
    assert sorted(plan) == sorted(current)
    for key, replicas in plan.items():
        assert len(replicas) == len(current[key]) == len(set(replicas))
        if len(replicas) == 3:
            assert len({racks[b] for b in replicas}) == 3
    no_racks = propose(racks, current, [1, 2, 3], rack_aware=False)
    assert all(set(r) <= {1, 2, 3} for r in no_racks.values())
    with pytest.raises(Exception, match="Unknown broker id 7"):
        propose(racks, current, [1, 7], rack_aware=True)


def test_verify_states() -> None:
    target = {("t", 0): [1, 2], ("t", 1): [2, 3], ("t", 2): [3, 1]}
    current = {("t", 0): [1, 2], ("t", 1): [2, 1], ("t", 2): [1, 2]}
    states = verify_states(target, current, {("t", 2): object()})
    assert [s["state"] for s in states] == ["completed", "mismatch", "in_progress"]
