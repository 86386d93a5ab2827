"""``floodmark cluster elect-leaders --election-type preferred`` moving a real leader on a
3-broker cluster (kafka-leader-election.sh's lines, the new leader seen by confluent-kafka), and
``cluster log-dirs`` asking every broker. The commands run in this process
(``floodmark.cli.main.main``); the cluster is real processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from floodmark.cli.main import main
from floodmark.client.cluster import ClusterClient
from tests.cluster.helpers import cluster_progress, isr_full, start_cluster, wait_until

pytestmark = pytest.mark.integration


def test_preferred_election_moves_the_leader(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # No automatic rebalance: only the command may move the leader.
    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    try:
        bs = ["--bootstrap-server", cluster.bootstrap]

        def run(*argv: str) -> tuple[int, str, str]:
            capsys.readouterr()
            rc = main([*argv, *bs])
            out, err = capsys.readouterr()
            assert "Traceback" not in err, err
            return rc, out, err

        assert run("topic", "create", "pref", "--replication-factor", "3")[0] == 0
        progress = lambda: cluster_progress(cluster)  # noqa: E731
        wait_until(lambda: isr_full(cluster, "pref"), 30, "a full ISR", progress=progress)
        reg = cluster.partition_registration("pref")
        assert reg is not None
        first, second, third = (int(r) for r in reg["replicas"])
        assert int(reg["leader"]) == first

        # The same replicas in another order (AlterPartitionReassignments): the preferred
        # replica is now `second`, the leader stays `first`.
        with ClusterClient(cluster.bootstrap) as client:
            resp = client.request_any(45, 0, {"timeout": 30000, "topics": [{
                "name": "pref", "partitions": [
                    {"partition_index": 0, "replicas": [second, first, third]}]}]})
        assert int(resp.error_code) == 0
        assert int(resp.responses[0].partitions[0].error_code) == 0

        def reordered() -> bool:
            r = cluster.partition_registration("pref")
            return r is not None and [int(x) for x in r["replicas"]] == [second, first, third]
        wait_until(reordered, 30, "the new replica order", progress=progress)
        assert cluster.leader_of("pref") == first

        rc, out, err = run("cluster", "elect-leaders", "--election-type", "preferred",
                           "--topic", "pref", "--partition", "0")
        assert rc == 0, err
        assert out.splitlines() == [
            "Successfully completed leader election (PREFERRED) for partitions pref-0"]

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

        def leader_seen_by_confluent() -> int:
            meta = admin.list_topics("pref", timeout=10)
            return int(meta.topics["pref"].partitions[0].leader)
        wait_until(lambda: leader_seen_by_confluent() == second, 30,
                   "confluent-kafka to see the preferred leader", progress=progress)

        rc, out, err = run("cluster", "elect-leaders", "--election-type", "preferred",
                           "--all-topic-partitions", "--json")
        assert rc == 0, err
        assert {"topic": "pref", "partition": 0, "outcome": "ELECTION_NOT_NEEDED",
                "error_message": "the preferred replica leads already"} in json.loads(out)
        rc, out, err = run("cluster", "elect-leaders", "--election-type", "unclean",
                           "--topic", "pref", "--partition", "0")
        assert rc == 0 and out.splitlines() == [
            "Valid replica already elected for partitions pref-0"], err

        # Every broker holds a replica of pref-0: log-dirs asks each one.
        rc, out, err = run("cluster", "log-dirs", "--topic", "pref", "--json")
        assert rc == 0, err
        doc = json.loads(out)
        assert [b["broker"] for b in doc["brokers"]] == [1, 2, 3]
        for b in doc["brokers"]:
            (d,) = b["logDirs"]
            assert [p["partition"] for p in d["partitions"]] == ["pref-0"]
            assert Path(d["logDir"]) == cluster.partition_dir(b["broker"], "pref").parent
    finally:
        cluster.stop()
