"""RF=3, min.insync.replicas=2, acks=all, real clients, real processes, real signals.

While an idempotent confluent-kafka producer writes unique values and a consumer reads along,
the partition leader is SIGKILLed (and restarted), then SIGSTOPped for longer than the broker
session timeout (and continued), then a follower and the leader are killed one after the other
(and restarted). After healing, a fresh consumer reads everything and the replicas' segment
files are compared: every acknowledged value is at its acknowledged offset, exactly once; no
offset holds two values; no duplicates; the replica logs are byte-identical below the HW; and
every record the concurrent consumer saw is committed data at its final offset (it never saw an
offset at or above the HW, or it would have seen records that were later truncated).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import (
    SESSION_TIMEOUT_MS,
    AckLog,
    consumer_thread,
    healed,
    isr_full,
    producer_thread,
    start_cluster,
    verify_after_healing,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "faults"


def _progress(acks: AckLog, extra: int, timeout_s: float, what: str) -> None:
    target = acks.count() + extra
    wait_until(lambda: acks.count() >= target, timeout_s, f"{extra} more acks ({what})")


def test_leader_kill_stop_and_double_failure_lose_nothing_acknowledged(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                            )[TOPIC].result(20)
        wait_until(lambda: cluster.leader_of(TOPIC) > 0, 10, "a leader")
        acks = AckLog()
        seen: dict[int, bytes] = {}
        stop = threading.Event()
        producer = producer_thread(cluster.bootstrap, TOPIC, acks, stop)
        consumer = consumer_thread(cluster.bootstrap, TOPIC, seen, stop)
        _progress(acks, 200, 30, "warm-up")

        # 1. SIGKILL the leader; a new leader takes over; the old one comes back as follower.
        old = cluster.leader_of(TOPIC)
        cluster.kill(old, signal.SIGKILL)
        wait_until(lambda: cluster.leader_of(TOPIC) not in (old, -1), 15, "a new leader")
        _progress(acks, 200, 30, "after SIGKILL")
        cluster.start_node(old)
        wait_until(lambda: isr_full(cluster, TOPIC), 45, "ISR full after restart", 0.3)

        # 2. SIGSTOP the leader past the session timeout; it is fenced; then it continues.
        stopped = cluster.leader_of(TOPIC)
        cluster.kill(stopped, signal.SIGSTOP)
        wait_until(lambda: cluster.leader_of(TOPIC) not in (stopped, -1), 15,
                   "a new leader after SIGSTOP")
        time.sleep(SESSION_TIMEOUT_MS / 1000)
        _progress(acks, 200, 30, "while the old leader is stopped")
        cluster.kill(stopped, signal.SIGCONT)
        wait_until(lambda: isr_full(cluster, TOPIC), 45, "ISR full after SIGCONT", 0.3)

        # 3. A follower, then the leader, one after the other; restart both.
        leader = cluster.leader_of(TOPIC)
        follower = next(b for b in cluster.broker_ids if b != leader)
        cluster.kill(follower, signal.SIGKILL)
        _progress(acks, 100, 30, "with one follower dead")
        cluster.kill(leader, signal.SIGKILL)
        wait_until(lambda: cluster.leader_of(TOPIC) not in (leader, -1), 15, "last leader")
        time.sleep(1.0)  # ISR of one < min.insync.replicas: acks=all writes wait
        cluster.start_node(follower)
        _progress(acks, 100, 45, "after the follower returned")
        cluster.start_node(leader)
        wait_until(lambda: isr_full(cluster, TOPIC), 45, "ISR full at the end", 0.3)
        _progress(acks, 100, 30, "healed")

        stop.set()
        producer.join(150)
        consumer.join(30)
        assert not producer.is_alive() and not consumer.is_alive()
        wait_until(lambda: healed(cluster, TOPIC), 45, "replicas identical", 0.3)

        verify_after_healing(cluster, TOPIC, acks, seen)
    finally:
        cluster.stop()


def test_controller_outage_stalls_isr_changes_and_recovers(tmp_path: Path) -> None:
    """The controller is SIGKILLed and a follower SIGSTOPped: the leader cannot shrink the ISR
    (no controller), so acks=all writes wait — the maximal ISR keeps the HW safe — and resume
    once the controller is back (from its metadata log); nothing acknowledged is lost."""
    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                            )[TOPIC].result(20)
        wait_until(lambda: cluster.leader_of(TOPIC) > 0, 10, "a leader")
        acks = AckLog()
        seen: dict[int, bytes] = {}
        stop = threading.Event()
        producer = producer_thread(cluster.bootstrap, TOPIC, acks, stop)
        consumer = consumer_thread(cluster.bootstrap, TOPIC, seen, stop)
        _progress(acks, 800, 30, "warm-up")
        leader = cluster.leader_of(TOPIC)
        follower = next(b for b in cluster.broker_ids if b != leader)
        cluster.kill(0, signal.SIGKILL)
        cluster.kill(follower, signal.SIGSTOP)
        time.sleep(2.0)  # > replica.lag.time.max.ms: the leader proposes a shrink, unanswered
        stalled = acks.count()
        time.sleep(2.0)
        assert acks.count() - stalled < 50, "acks=all completed without the stopped follower"
        cluster.start_node(0)
        _progress(acks, 500, 30, "after the controller returned")
        reg = cluster.partition_registration(TOPIC)
        assert reg is not None and follower not in reg["isr"] and reg["leader"] == leader
        cluster.kill(follower, signal.SIGCONT)
        wait_until(lambda: isr_full(cluster, TOPIC), 45, "ISR full", 0.3)
        stop.set()
        producer.join(150)
        consumer.join(30)
        wait_until(lambda: healed(cluster, TOPIC), 45, "replicas identical", 0.3)
        verify_after_healing(cluster, TOPIC, acks, seen)
    finally:
        cluster.stop()
