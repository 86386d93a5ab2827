"""``floodmark cluster health`` (as ``rpk cluster health``) and ``topic list``'s trouble filters
on a real 3-broker cluster, before and after one broker is SIGKILLed (by the pid this test's
cluster started). The commands run in this process (``floodmark.cli.main.main``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from floodmark.cli.main import main
from tests.cluster.helpers import cluster_progress, start_cluster, wait_until

pytestmark = pytest.mark.integration


def test_health_shows_a_killed_broker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        bs = ["--bootstrap-server", cluster.bootstrap]

        def run(*argv: str) -> tuple[int, str]:
            capsys.readouterr()
            rc = main([*argv, *bs])
            out, err = capsys.readouterr()
            assert "Traceback" not in err, err
            return rc, out

        def health() -> tuple[int, dict[str, Any]]:
            rc, out = run("cluster", "health", "--json")
            return rc, json.loads(out)

        assert run("topic", "create", "rep", "--partitions", "2", "--replication-factor",
                   "3")[0] == 0
        assert run("topic", "create", "solo", "--partitions", "3", "--replication-factor",
                   "1")[0] == 0
        wait_until(lambda: health()[0] == 0, 30, "a healthy cluster",
                   progress=lambda: cluster_progress(cluster))
        rc, h = health()
        assert h["healthy"] is True and h["all_nodes"] == [1, 2, 3] and h["nodes_down"] == []
        assert h["controller_id"] in (1, 2, 3)
        assert h["leaderless_partitions"] == h["under_replicated_partitions"] == []
        rc, screen = run("cluster", "health")
        assert rc == 0 and "Healthy:" in screen and "yes" in screen

        victim = 2
        solo_on_victim = sorted(p for p in range(3) if cluster.leader_of("solo", p) == victim)
        cluster.kill(victim)  # SIGKILL, by the pid the cluster started

        last: list[dict[str, Any]] = []

        def down() -> bool:
            _rc, h = health()
            last[:] = [h]
            return (h["nodes_down"] == [victim]
                    and len(h["under_replicated_partitions"]) == 2 + len(solo_on_victim)
                    and len(h["leaderless_partitions"]) == len(solo_on_victim))
        try:
            wait_until(down, 30, f"health to show broker {victim} down",
                       progress=lambda: cluster_progress(cluster))
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the last health: {last}") from None
        rc, h = health()
        assert rc == 1 and h["healthy"] is False and h["all_nodes"] == [1, 2, 3]
        # A leaderless partition of one replica is under-replicated too: with ELR (KIP-966)
        # the controller empties its ISR when its broker is fenced.
        assert h["under_replicated_partitions"] == [
            *({"topic": "rep", "partition": p} for p in (0, 1)),
            *({"topic": "solo", "partition": p} for p in solo_on_victim)]
        assert h["leaderless_partitions"] == [{"topic": "solo", "partition": p}
                                              for p in solo_on_victim]
        rc, screen = run("cluster", "health")
        assert rc == 1 and "no" in screen.splitlines()[2]
        assert "Nodes down:" in screen and "rep-0 rep-1" in screen

        # kafka-topics.sh's filters see the same partitions.
        rc, out = run("topic", "list", "--under-replicated-partitions", "--json")
        assert [(r["topic"], r["partition"]) for r in json.loads(out)] == [
            ("rep", 0), ("rep", 1), *(("solo", p) for p in solo_on_victim)]
        assert all(victim not in r["isr"] for r in json.loads(out))
        rc, out = run("topic", "list", "--unavailable-partitions", "--json")
        assert [(r["topic"], r["partition"]) for r in json.loads(out)] == [
            ("solo", p) for p in solo_on_victim]
    finally:
        cluster.stop()
