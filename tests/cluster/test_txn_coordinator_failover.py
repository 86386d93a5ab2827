"""The transaction coordinator on a 3-broker cluster (issue 15): SIGKILL of the coordinator in the
middle of a commit. The commit's PrepareCommit is in ``__transaction_state`` (the producer was
told the commit succeeded) but one of its markers cannot be written: that partition (RF 2,
min.insync.replicas 2) lost a replica, so its leader refuses writes (NOT_ENOUGH_REPLICAS) and
the coordinator keeps retrying. Then the coordinator is killed and the lost replica comes back.
The broker that takes over ``__transaction_state`` replays it, sends the COMMIT markers again
and completes the transaction. A librdkafka transactional producer goes on with the new
coordinator; read_committed consumers see exactly the committed transactions (nothing
committed lost, nothing aborted visible)."""

from __future__ import annotations

import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.cluster import ClusterClient
from floodmark.metadata import TRANSACTION_STATE_TOPIC
from tests.cluster.helpers import start_cluster, wait_until
from tests.compat.txn_helpers import end_transaction

pytestmark = pytest.mark.integration

TOPIC = "txn-coord"
HELD = "txn-coord-held"
TXN_ID = "txn-coord-failover"


def _describe(client: ClusterClient, txn_id: str) -> Any | None:
    """DescribeTransactions at the current coordinator (None while there is none)."""
    try:
        resp = client.request_any(10, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
        c = resp.coordinators[0]
        if int(c.error_code):
            return None
        client.brokers[int(c.node_id)] = (str(c.host), int(c.port))
        state = client.request_node(int(c.node_id), 65, 0, {"transactional_ids": [txn_id]})
        s = state.transaction_states[0]
        return s if int(s.error_code) == 0 else None
    except Exception:  # a dead broker, a coordinator still loading: ask again
        client.leaders.clear()
        return None


def _txn(p: Producer, values: list[bytes], commit: bool) -> None:
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(TOPIC, value=v, partition=i % 3)
    assert p.flush(60) == 0
    end_transaction(p, commit, backoff_s=0.5)  # retriable errors while the coordinator moves


def _read(bootstrap: str, isolation: str, ends: dict[tuple[str, int], int]) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "isolation.level": isolation})
    tps = [TopicPartition(t, p, 0) for t, p in ends]
    c.assign(tps)
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            out += [m.value() for m in c.consume(500, 0.3) if m.error() is None]
            if all(tp.offset >= ends[(tp.topic, tp.partition)] for tp in c.position(tps)):
                return out
    finally:
        c.close()
    raise AssertionError(f"{isolation} consumer stopped before {ends}; saw {len(out)}")


def test_sigkill_of_the_coordinator_mid_commit(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "txncoord-cluster", metrics=True)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})]
                            )[TOPIC].result(30)
        wait_until(lambda: all(cluster.leader_of(TOPIC, p) > 0 for p in range(3)), 30,
                   "leaders of every partition")
        p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": TXN_ID,
                      "linger.ms": 5, "transaction.timeout.ms": 60000})
        p.init_transactions(60)
        committed: list[bytes] = []
        aborted: list[bytes] = []

        def run(name: str, commit: bool) -> None:
            values = [f"{name}-{i}".encode() for i in range(30)]
            _txn(p, values, commit)
            (committed if commit else aborted).extend(values)

        run("t1", True)
        run("t2", False)
        coordinator = cluster.leader_of(TRANSACTION_STATE_TOPIC)
        assert coordinator > 0
        leader, follower = [b for b in cluster.broker_ids if b != coordinator]
        # The partition whose marker will be held: replicas on the two other brokers only.
        admin.create_topics([NewTopic(HELD, 1, replica_assignment=[[leader, follower]],
                                      config={"min.insync.replicas": "2"})])[HELD].result(30)
        wait_until(lambda: cluster.leader_of(HELD) == leader, 30, "the held partition's leader")

        with ClusterClient(cluster.bootstrap, timeout_s=10) as client:
            p.begin_transaction()
            values = [f"t3-{i}".encode() for i in range(30)]
            for i, v in enumerate(values):
                p.produce(TOPIC, value=v, partition=i % 3)
            p.produce(HELD, value=b"t3-held", partition=0)
            assert p.flush(60) == 0
            cluster.kill(follower)  # the held partition is now below min.insync.replicas
            wait_until(lambda: (reg := cluster.partition_registration(HELD)) is not None
                       and reg["isr"] == [leader], 30, "the held partition's ISR shrink")
            p.commit_transaction(60)  # PrepareCommit is in the log: the commit is decided
            committed.extend([*values, b"t3-held"])
            state = wait_until(lambda: _describe(client, TXN_ID), 30, "the coordinator's answer")
            assert state.transaction_state == "PrepareCommit", state
            time.sleep(1.0)  # markers retried meanwhile; the held one still refused
            assert _describe(client, TXN_ID).transaction_state == "PrepareCommit"

            # Mid-commit: the coordinator dies; the lost replica comes back.
            cluster.kill(coordinator)
            cluster.start_node(follower)
            wait_until(lambda: cluster.leader_of(TRANSACTION_STATE_TOPIC) not in (-1, coordinator),
                       60, "a new leader of __transaction_state")
            done = wait_until(lambda: (s := _describe(client, TXN_ID)) is not None
                              and s.transaction_state == "CompleteCommit" and s, 90,
                              "the new coordinator completing the commit")
            assert done.producer_epoch == state.producer_epoch  # completed, not fenced
            # The new coordinator's /metrics say so.
            new = cluster.leader_of(TRANSACTION_STATE_TOPIC)
            url = next(n["metrics"] for n in cluster.status()["nodes"] if n["id"] == new)
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            assert 'floodmark_transactions{state="CompleteCommit"} 1.0' in text, text[-2000:]
            markers = [float(line.split()[-1]) for line in text.splitlines()
                       if line.startswith("floodmark_transaction_markers_written_total")]
            assert markers and markers[0] >= 4  # t3's four partitions
        cluster.start_node(coordinator)

        # The producer goes on with the new coordinator.
        run("t4", True)
        run("t5", False)
        seen = _read(cluster.bootstrap, "read_committed", _ends(cluster.bootstrap))
        assert sorted(seen) == sorted(committed), "read_committed saw other than the committed"
        everything = _read(cluster.bootstrap, "read_uncommitted", _ends(cluster.bootstrap))
        assert set(aborted) <= set(everything) and set(committed) <= set(everything)
    finally:
        cluster.stop()


def _ends(bootstrap: str) -> dict[tuple[str, int], int]:
    """The log end (HW) of every partition, markers included."""
    out = {}
    with ClusterClient(bootstrap) as client:
        for topic, part in [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2), (HELD, 0)]:
            def ask(topic: str = topic, part: int = part) -> int:
                resp = client.request_node(client.leader(topic, part), 2, 5, {
                    "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic,
                    "partitions": [{"partition_index": part, "timestamp": -1,
                                    "current_leader_epoch": -1}]}]})
                return int(resp.topics[0].partitions[0].offset)
            out[(topic, part)] = client.retry(ask)
    return out
