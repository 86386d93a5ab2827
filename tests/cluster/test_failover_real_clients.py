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
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import (
    SESSION_TIMEOUT_MS,
    AckLog,
    healed,
    prefix_below,
    replica_batches,
    replica_values,
    start_cluster,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "faults"


def _producer_thread(bootstrap: str, acks: AckLog, stop: threading.Event) -> threading.Thread:
    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acks.ok(msg.offset(), msg.value())  # type: ignore[attr-defined]
        else:
            acks.error(str(err))

    def run() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                      "enable.idempotence": True, "message.timeout.ms": 120000,
                      "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 300,
                      "topic.metadata.refresh.interval.ms": 1000,
                      "retry.backoff.ms": 50,
                      # A SIGSTOPped leader never answers: give up on it well before 30 s.
                      "request.timeout.ms": 4000, "socket.timeout.ms": 4000})
        i = 0
        while not stop.is_set() and i < 2_000_000:
            try:
                p.produce(TOPIC, value=b"v%09d" % i, partition=0, on_delivery=on_delivery)
                i += 1
            except BufferError:
                p.poll(0.01)
            if i % 20 == 0:
                p.poll(0.005)  # bounded rate: a few thousand values per second
        remaining = p.flush(120)
        if remaining:
            acks.error(f"{remaining} message(s) still in flight after flush")

    t = threading.Thread(target=run, name="producer", daemon=True)
    t.start()
    return t


def _consumer_thread(bootstrap: str, seen: dict[int, bytes], stop: threading.Event
                     ) -> threading.Thread:
    def run() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watcher",
                      "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        while not stop.is_set():
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                seen[msg.offset()] = msg.value()
        c.close()

    t = threading.Thread(target=run, name="consumer", daemon=True)
    t.start()
    return t


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
        producer = _producer_thread(cluster.bootstrap, acks, stop)
        consumer = _consumer_thread(cluster.bootstrap, seen, stop)
        _progress(acks, 200, 30, "warm-up")

        # 1. SIGKILL the leader; a new leader takes over; the old one comes back as follower.
        old = cluster.leader_of(TOPIC)
        cluster.kill(old, signal.SIGKILL)
        wait_until(lambda: cluster.leader_of(TOPIC) not in (old, -1), 15, "a new leader")
        _progress(acks, 200, 30, "after SIGKILL")
        cluster.start_node(old)
        wait_until(lambda: healed(cluster, TOPIC), 45, "ISR full after restart", 0.3)

        # 2. SIGSTOP the leader past the session timeout; it is fenced; then it continues.
        stopped = cluster.leader_of(TOPIC)
        cluster.kill(stopped, signal.SIGSTOP)
        wait_until(lambda: cluster.leader_of(TOPIC) not in (stopped, -1), 15,
                   "a new leader after SIGSTOP")
        time.sleep(SESSION_TIMEOUT_MS / 1000)
        _progress(acks, 200, 30, "while the old leader is stopped")
        cluster.kill(stopped, signal.SIGCONT)
        wait_until(lambda: healed(cluster, TOPIC), 45, "ISR full after SIGCONT", 0.3)

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
        wait_until(lambda: healed(cluster, TOPIC), 45, "ISR full at the end", 0.3)
        _progress(acks, 100, 30, "healed")

        stop.set()
        producer.join(150)
        consumer.join(30)
        assert not producer.is_alive() and not consumer.is_alive()
        wait_until(lambda: healed(cluster, TOPIC), 45, "replicas identical", 0.3)

        # A fresh consumer reads everything below the HW.
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "verify",
                      "enable.auto.commit": False})
        _lo, hw = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        fresh: dict[int, bytes] = {}
        deadline = time.monotonic() + 60
        while len(fresh) < hw and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                assert msg.offset() not in fresh, "an offset delivered twice"
                fresh[msg.offset()] = msg.value()
        c.close()
        assert sorted(fresh) == list(range(hw)), "fresh consumer did not read 0..HW-1"

        # Every acknowledged value at its acknowledged offset; values unique (idempotence).
        assert not acks.failed, acks.failed[:5]
        assert len(acks.acked) > 700
        for offset, value in acks.acked:
            assert fresh.get(offset) == value, f"acked {value!r}@{offset} lost"
        values = list(fresh.values())
        assert len(values) == len(set(values)), "duplicates with an idempotent producer"
        # The concurrent consumer only ever saw committed records, at their final offsets.
        assert seen, "the watcher saw nothing"
        for offset, value in seen.items():
            assert offset < hw and fresh.get(offset) == value, (offset, value)

        # Replica logs identical below the HW (segment bytes), and each decodes to `fresh`.
        batches = {b: replica_batches(cluster, b, TOPIC) for b in cluster.broker_ids}
        prefixes = {b: prefix_below(bs, hw) for b, bs in batches.items()}
        assert len(set(prefixes.values())) == 1, "replica logs differ below the HW"
        for b in cluster.broker_ids:
            vals = replica_values(cluster, b, TOPIC)
            assert all(vals.get(o) == v for o, v in fresh.items())
    finally:
        cluster.stop()
