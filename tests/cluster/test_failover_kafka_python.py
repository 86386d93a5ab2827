"""The leader SIGKILLed under kafka-python (acks=all, RF=3, min.insync.replicas=2): every
acknowledged value is at its acknowledged offset afterwards, replicas identical below the HW.
(Non-idempotent: a retried send may be stored twice — allowed; an acknowledged one never lost.)"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.cluster.helpers import (
    AckLog,
    healed,
    isr_full,
    prefix_below,
    replica_batches,
    start_cluster,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "kp"


def test_kafka_python_leader_sigkill(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.close()
        wait_until(lambda: cluster.leader_of(TOPIC) > 0, 10, "a leader")
        acks = AckLog()
        stop = threading.Event()

        def run() -> None:
            p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=50,
                              enable_idempotence=False, request_timeout_ms=4000,
                              retry_backoff_ms=100, metadata_max_age_ms=500, linger_ms=2,
                              max_in_flight_requests_per_connection=1)
            i = 0
            while not stop.is_set() and i < 100_000:
                value = b"k%07d" % i
                fut = p.send(TOPIC, value=value, partition=0)
                fut.add_callback(lambda md, v=value: acks.ok(md.offset, v))
                fut.add_errback(lambda exc: acks.error(repr(exc)))
                i += 1
                if i % 20 == 0:
                    time.sleep(0.01)
            p.flush(60)
            p.close(10)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        wait_until(lambda: acks.count() > 300, 30, "warm-up")
        old = cluster.leader_of(TOPIC)
        cluster.kill(old, signal.SIGKILL)
        wait_until(lambda: cluster.leader_of(TOPIC) not in (old, -1), 15, "a new leader")
        n = acks.count()
        wait_until(lambda: acks.count() > n + 300, 45, "acks after the failover")
        cluster.start_node(old)
        wait_until(lambda: isr_full(cluster, TOPIC), 45, "ISR full", 0.3)
        stop.set()
        t.join(90)
        assert not t.is_alive()
        wait_until(lambda: healed(cluster, TOPIC), 45, "replicas identical", 0.3)

        c = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                          consumer_timeout_ms=3000)
        tp = TopicPartition(TOPIC, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        hw = c.end_offsets([tp])[tp]
        stored: dict[int, bytes] = {}
        deadline = time.monotonic() + 60
        while len(stored) < hw and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                for r in records:
                    assert r.offset not in stored
                    stored[r.offset] = r.value
        c.close()
        assert sorted(stored) == list(range(hw))
        assert not acks.failed, acks.failed[:3]
        for offset, value in acks.acked:
            assert stored.get(offset) == value, f"acked {value!r}@{offset} lost"
        prefixes = {prefix_below(replica_batches(cluster, b, TOPIC), hw)
                    for b in cluster.broker_ids}
        assert len(prefixes) == 1, "replica logs differ below the HW"
    finally:
        cluster.stop()
