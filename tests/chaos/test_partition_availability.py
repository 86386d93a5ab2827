"""Issue 26 §4 on real processes in network namespaces: availability while the partition leader is
cut off from the other brokers and the controllers, the clients still reaching it.

Three controllers (a quorum) and three brokers, each in a network namespace of its own; one
partition, RF=3, min.insync.replicas=2, ``broker.session.timeout.ms`` and
``replica.lag.time.max.ms`` 6 s; a confluent-kafka producer (acks=all, idempotence on, ~200
records/s) in a client namespace. The leader's namespace drops every packet to and from the
controllers and the other brokers for 20 s. The controller fences it after the session timeout
and elects another leader; the test watches the controller's registration from the client
namespace to time that election.

Before the rule (``replication/lease.py``) the client kept asking the isolated broker, its one
connection, for Metadata and was told it still led: no acknowledgement for the whole cut plus
about a second (21 s with a 20 s cut). With it, the isolated broker steps down for clients
once its session lapses and the producer finds the elected leader: the longest gap between
acknowledgements is at most the election time plus 1 s, and nothing acknowledged is lost.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from floodmark.chaos.netns import Lab, LabError, check_available, namespace_executor, run_in
from floodmark.chaos.nodes import LabCluster, host_of
from tests.chaos.isolation_driver import Client

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION_TIMEOUT_MS = 6000
ISOLATION_S = 20.0
REQUEST_TIMEOUT_MS = 2000
TOPIC = "isolated"  # isolation_client.py's
POLL_S = 0.1


def _lab_or_skip() -> None:
    try:
        check_available()
    except LabError as exc:
        pytest.skip(str(exc))


def _leader(cluster: LabCluster) -> int | None:
    status = cluster.controller_status(timeout_s=1.0)
    part = (status or {}).get("topics", {}).get(TOPIC, {}).get("0")
    return int(part["leader"]) if isinstance(part, dict) else None


def run_partition(tmp_path: Path) -> dict[str, Any]:
    _lab_or_skip()
    with Lab(["ctl", "ctl2", "ctl3", "b1", "b2", "b3", "c"], prefix="avail") as lab:
        cluster = LabCluster(
            lab, tmp_path / "cluster", 3, {"replica.lag.time.max.ms": str(SESSION_TIMEOUT_MS)},
            {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
             "auto.leader.rebalance.enable": "false"}, controllers=3)
        watcher = namespace_executor(lab.ns("c"))
        client: Client | None = None
        try:
            cluster.start()
            client = Client(lab, cluster.bootstrap, tmp_path / "client.log", REQUEST_TIMEOUT_MS)
            old = int(client.next_event("leader", 120)["id"])
            assert old in cluster.broker_ids, old
            client.wait_acked(400, stall_s=60)
            cut_off = host_of(old)
            peers = [host_of(n) for n in (*cluster.controller_ids, *cluster.broker_ids)
                     if n != old]
            cut_at = time.monotonic()
            lab.isolate(cut_off, peers)
            elected_s = None
            while time.monotonic() < cut_at + ISOLATION_S:  # bounded by the fault's length
                leader = run_in(watcher, lambda: _leader(cluster), 5)
                if leader is not None and leader not in (-1, old):
                    elected_s = time.monotonic() - cut_at
                    break
                time.sleep(POLL_S)
            time.sleep(max(0.0, cut_at + ISOLATION_S - time.monotonic()))  # the fault's length
            lab.heal(cut_off)
            healed_at = client.last.get("acked", 0)
            client.wait_acked(healed_at + 400, stall_s=60)  # writes go on after healing
            result = client.stop()
            gap_start, gap_end = result["longest_ack_gap"]
            result.update(leader_isolated=old, elected_s=elected_s,
                          gap_from_cut_s=round(gap_start - cut_at, 3),
                          gap_end_from_cut_s=round(gap_end - cut_at, 3))
            print(json.dumps(result))
            return result
        finally:
            watcher.shutdown(wait=False)
            if client is not None and client.proc.poll() is None:
                client.proc.kill()
                client.proc.wait(10)
            lab.heal()
            cluster.kill_all()


def test_cut_off_leader_steps_down_and_the_producer_finds_the_new_one(tmp_path: Path) -> None:
    result = run_partition(tmp_path)
    assert result["lost"] == 0 and result["duplicates"] == 0, result
    assert result["unflushed"] == 0 and not result["fatal"], result
    assert result["elected_s"] is not None, f"no leader elected during the cut: {result}"
    assert result["longest_ack_gap_s"] <= result["elected_s"] + 1.0, result
