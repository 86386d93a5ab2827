"""An acknowledged OffsetCommit survives the loss of its coordinator (Kafka answers an offset
commit only once it is replicated: ``offsets.commit.required.acks=-1``).

Both followers of the group's ``__consumer_offsets`` partition are paused (SIGSTOP), a commit is
sent to the coordinator, the coordinator is SIGKILLed and the followers resume: one of them, still
in the ISR, is elected. Whatever the old coordinator acknowledged must be what the new one
answers. (Before the commit waited for the high watermark, the answer came at once and the
commit was lost with the coordinator.)"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from floodmark.broker.replica_fetcher import REPLICA_MAX_WAIT_MS
from floodmark.client.cluster import ClusterClient
from floodmark.client.replica_state import read_replica_state
from floodmark.metadata import OFFSETS_TOPIC
from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration

GROUP = "durable-commits"
TOPIC = "committed-topic"


def _commit(client: ClusterClient, node: int, offset: int) -> int:
    resp = client.request_node(node, 8, 8, {
        "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]})
    return int(resp.topics[0].partitions[0].error_code)


def _fetch(client: ClusterClient) -> int | None:
    try:
        node = client.coordinator(GROUP)
        resp = client.request_node(node, 9, 7, {"group_id": GROUP, "require_stable": False,
                                                "topics": [{"name": TOPIC,
                                                            "partition_indexes": [0]}]})
    except Exception:
        client.leaders.clear()
        return None
    p = resp.topics[0].partitions[0]
    return int(p.committed_offset) if int(resp.error_code) == 0 and int(p.error_code) == 0 \
        else None


def test_an_acknowledged_offset_commit_survives_its_coordinator(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "offsets-durability")
    paused: list[int] = []
    try:
        with ClusterClient(cluster.bootstrap, timeout_s=20) as client:
            client.request_any(19, 4, {"topics": [{"name": TOPIC, "num_partitions": 1,
                                                   "replication_factor": 3, "assignments": [],
                                                   "configs": []}],
                                       "timeout": 10_000, "validate_only": False})
            coordinator = client.coordinator(GROUP)
            assert _commit(client, coordinator, 1) == 0
            followers = [b for b in cluster.broker_ids if b != coordinator]

            def replicated() -> bool:
                states = [read_replica_state(cluster.address(b), OFFSETS_TOPIC, 0, 8)
                          for b in cluster.broker_ids]
                return len({(s["log_end_offset"], s["high_watermark"]) for s in states}) == 1
            wait_until(replicated, 30, "the first commit on every replica")
            reg = cluster.partition_registration(OFFSETS_TOPIC)
            assert reg is not None and sorted(reg["isr"]) == cluster.broker_ids

            for b in followers:
                cluster.kill(b, signal.SIGSTOP)
                paused.append(b)
            # The fetches the followers had parked on the leader expire (REPLICA_MAX_WAIT_MS):
            # nothing the leader appends from now on reaches them.
            time.sleep(REPLICA_MAX_WAIT_MS / 1000 + 0.2)
            answer: dict[str, Any] = {}

            def commit() -> None:
                try:
                    answer["error"] = _commit(client, coordinator, 42)
                except Exception as exc:  # the coordinator is killed under it
                    answer["exception"] = exc
            t = threading.Thread(target=commit)
            t.start()
            t.join(0.3)  # within replica.lag.time.max.ms and the session timeout: they stay ISR
            acknowledged = answer.get("error") == 0
            cluster.kill(coordinator)
            for b in followers:
                cluster.kill(b, signal.SIGCONT)
            paused.clear()
            t.join(30)
            client.leaders.clear()
            wait_until(lambda: cluster.leader_of(OFFSETS_TOPIC) in followers, 60,
                       "a follower elected for the offsets partition")
            now = wait_until(lambda: _fetch(client), 60, "the new coordinator's answer")
            if acknowledged:
                assert now == 42, "an acknowledged offset commit was lost with its coordinator"
            else:
                assert now == 1
    finally:
        for b in paused:
            cluster.kill(b, signal.SIGCONT)
        cluster.stop()
