"""Issue 11 "Done means", real processes: 3 controllers (one quorum), 3 brokers, RF=3,
min.insync.replicas=2, an acks=all idempotent confluent-kafka producer writing throughout:

1. SIGKILL the active controller, and at once SIGKILL the partition's leader, while the new
   controller is still being elected;
2. SIGSTOP a voter (the active controller) past the fetch timeout: another is elected and commits
   a new topic, which every broker applies; then SIGCONT it;
3. restart a follower voter with its data dir deleted, once the leader's metadata log starts
   after offset 0 (snapshots every 2 KiB of records, 4 KiB segments): it must load the leader's
   snapshot (FetchSnapshot) to catch up.

Every acknowledged write is read back once at its offset, every topic created before the faults
still exists, no broker applied metadata out of order, and each step waits on progress (an
active controller, a new leader, more acknowledgements), never on a fixed sleep."""

from __future__ import annotations

import re
import shutil
import signal
import threading
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from floodmark.controller import rpc
from tests.cluster.helpers import (
    FAST_QUORUM_SETTINGS,
    AckLog,
    acked_more,
    consumer_thread,
    producer_thread,
    verify_after_healing,
    wait_until,
)
from tests.cluster.helpers import voter_caught_up as _voter_caught_up

pytestmark = pytest.mark.integration

TOPIC = "drill"
BEFORE = [f"pre-{i}" for i in range(4)]
QUORUM = {**FAST_QUORUM_SETTINGS,
          # Snapshots every few records, small segments: the log start moves past 0, so a
          # voter with an empty data dir can only catch up from a snapshot (FetchSnapshot).
          "metadata.log.max.record.bytes.between.snapshots": "2048",
          "metadata.log.segment.bytes": "4096",
          "leader.imbalance.check.interval.ms": "3000"}
STEP_S = 60.0  # any one step stalling this long fails the drill


def _create(cluster: LocalCluster, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(n, 1, 3, config={"min.insync.replicas": "2"})
                                   for n in names], request_timeout=30)
    for f in futures.values():
        f.result(60)


def _topics(cluster: LocalCluster) -> set[str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    return set(admin.list_topics(timeout=20).topics)


def _leader(cluster: LocalCluster) -> int | None:
    leader = cluster.leader_of(TOPIC)
    return leader if leader > 0 else None


def _log_start_moved(cluster: LocalCluster, controller: int) -> bool:
    """The controller wrote a snapshot and its metadata log now starts after offset 0."""
    text = cluster.log_path(controller).read_text(errors="replace")
    return any(int(m.group(1)) > 0
               for m in re.finditer(r"metadata log starts at (\d+)", text))


def run_drill(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "drill-ctl11", 3, {"replica.lag.time.max.ms": "2000"},
                           QUORUM, metrics=False, controllers=3)
    cluster.start()
    stop = threading.Event()
    acks = AckLog()
    seen: dict[int, bytes] = {}
    producer = consumer = None
    try:
        wait_until(lambda: all(n.get("fenced") is False for n in cluster.status()["nodes"]
                               if n["role"] == "broker"), STEP_S, "every broker registered")
        _create(cluster, [TOPIC, *BEFORE])
        wait_until(lambda: _leader(cluster), STEP_S, "a leader for the drill topic")
        producer = producer_thread(cluster.bootstrap, TOPIC, acks, stop)
        consumer = consumer_thread(cluster.bootstrap, TOPIC, seen, stop)
        acked_more(acks, 0, 300)

        # 1. The active controller and, during the election, the partition's leader.
        active = cluster.wait_active_controller(STEP_S)
        leader = _leader(cluster)
        assert leader is not None
        before = acks.count()
        cluster.kill(active, signal.SIGKILL)
        cluster.kill(leader, signal.SIGKILL)
        new_active = cluster.wait_active_controller(STEP_S, besides=active)
        wait_until(lambda: _leader(cluster) not in (None, leader), STEP_S,
                   "a new partition leader")
        acked_more(acks, before)
        cluster.start_node(active)
        cluster.start_node(leader)
        wait_until(lambda: _voter_caught_up(cluster, active), STEP_S,
                   f"controller {active} caught up")
        wait_until(lambda: len((cluster.partition_registration(TOPIC) or {}).get("isr", []))
                   == 3, STEP_S, f"broker {leader} back in the ISR")

        # 2. SIGSTOP the active controller past the fetch timeout: another is elected and
        # takes writes (a topic); SIGCONT: the stopped one rejoins as a follower.
        stopped = cluster.wait_active_controller(STEP_S)
        before = acks.count()
        log_from = {c: cluster.log_path(c).stat().st_size for c in cluster.controller_ids}
        cluster.kill(stopped, signal.SIGSTOP)
        try:
            taker = cluster.wait_active_controller(STEP_S, besides=stopped)
            # Straight to the new active controller: a broker's CreateTopics handler calls
            # the controller synchronously and would block its event loop on the stopped
            # one (see the report).
            answer = rpc.blocking_call(cluster.address(taker), "create_topic", {
                "name": "during-stop", "num_partitions": 1, "replication_factor": 3,
                "configs": {"min.insync.replicas": "2"}}, 30)
            assert "error" not in answer, answer
            wait_until(lambda: "during-stop" in _topics(cluster), STEP_S,
                       "brokers applied the topic created during the stop")
            acked_more(acks, before)
            # Brokers left the silent controller for the new one within their heartbeat
            # timeout (5 heartbeat intervals), before its session timeout could fence them.
            with cluster.log_path(taker).open("rb") as fh:
                fh.seek(log_from[taker])
                assert b"missed heartbeats" not in fh.read(), "brokers fenced during the stop"
        finally:
            cluster.kill(stopped, signal.SIGCONT)
        wait_until(lambda: _voter_caught_up(cluster, stopped), STEP_S,
                   f"controller {stopped} rejoined and caught up")

        # 3. Restart a follower voter with its data dir deleted, once the leader's metadata
        # log no longer starts at 0: it catches up from the leader's snapshot.
        leader_ctl = cluster.wait_active_controller(STEP_S)
        voter = next(c for c in cluster.controller_ids if c != leader_ctl)
        wait_until(lambda: _log_start_moved(cluster, leader_ctl), STEP_S,
                   f"controller {leader_ctl} snapshotted and moved its log start")
        old_dir = cluster.quorum()["controllers"][str(voter)]["directory_id"]
        cluster.kill(voter, signal.SIGKILL)
        shutil.rmtree(cluster.controller_dir(voter))
        _create(cluster, ["during-restart"])  # the quorum of two still commits
        log_from = cluster.log_path(voter).stat().st_size
        cluster.start_node(voter)
        wait_until(lambda: _voter_caught_up(cluster, voter), STEP_S,
                   f"controller {voter} caught up after its restart with no data")
        # KIP-853: it came back on a new directory id, an observer (neither voting nor counted)
        # until the leader re-bound its id to the new directory, once caught up.
        wait_until(lambda: (cluster.quorum()["controllers"][str(voter)] or {}).get("is_voter"),
                   STEP_S, f"controller {voter} re-admitted as a voter")
        q = cluster.quorum()
        new_dir = q["controllers"][str(voter)]["directory_id"]
        assert old_dir and new_dir and new_dir != old_dir
        assert {"voter_id": voter, "directory_id": new_dir} in [
            {k: b[k] for k in ("voter_id", "directory_id")} for b in q["voter_directories"]]
        assert q["observers"] == []
        with cluster.log_path(voter).open("rb") as fh:
            fh.seek(log_from)
            assert b"from the leader" in fh.read(), "the empty voter loaded no snapshot"

        before = acks.count()
        acked_more(acks, before)
        stop.set()
        producer.join(150)
        consumer.join(30)
        assert not producer.is_alive()
        wait_until(lambda: len((cluster.partition_registration(TOPIC) or {}).get("isr", []))
                   == 3, STEP_S, "the full ISR")
        verify_after_healing(cluster, TOPIC, acks, seen)
        topics = _topics(cluster)
        assert {TOPIC, *BEFORE} <= topics, topics
        assert new_active != active
        for log in (cluster.data_dir / "logs").glob("broker-*.log"):
            text = log.read_text(errors="replace")
            assert "metadata gap" not in text and "applying metadata failed" not in text, log
    finally:
        stop.set()
        cluster.stop()


def test_quorum_drill_every_fault(tmp_path: Path) -> None:
    """About 35 s on a loaded two-core machine: in the default suite."""
    run_drill(tmp_path)
