"""Fetching from the closest replica (KIP-392) on real processes with a real client: three
brokers in racks a, b and c with ``replica.selector.class`` set to Kafka's rack-aware selector,
one partition on all three, an idempotent acks=all producer, and a confluent-kafka consumer with
``client.rack`` set to the rack of a follower.

* The consumer reads everything produced exactly once and in order, and the follower served it:
  its ``bytesout`` counter for the topic (record bytes sent to consumers) carries what the
  consumer read, the leader's stays near zero (it only answered with the preferred replica).
* That follower is SIGKILLed mid-read while the producer keeps writing: the consumer goes back
  to the leader and still reads every acknowledged record exactly once, in order, its position
  never moving backwards.

librdkafka's own fetch-from-follower test (0101) needs its test suite built; not run here.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from floodmark.constants import RACK_AWARE_REPLICA_SELECTOR
from tests.cluster.helpers import (
    SESSION_TIMEOUT_MS,
    AckLog,
    cluster_progress,
    isr_full,
    wait_progress,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "near"
FIRST = 400  # records read from the follower before the kill
TOTAL = 1200


def _bytes_out(cluster: LocalCluster, node_id: int) -> int:
    """The broker's ``bytesout`` counter for TOPIC (record bytes sent to consumers)."""
    port = cluster.state["nodes"][str(node_id)].get("metrics_port")
    assert port, f"broker {node_id} has no metrics port"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    pattern = r'^kafka_server_brokertopicmetrics_bytesout_total\{topic="' + TOPIC + r'"\} (\S+)$'
    m = re.search(pattern, text, re.M)
    return int(float(m.group(1))) if m else 0


def _produce(p: Producer, acks: AckLog, start: int, end: int, every: int = 20) -> None:
    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acks.ok(msg.offset(), msg.value())  # type: ignore[attr-defined]
        else:
            acks.error(str(err))

    for i in range(start, end):
        while True:
            try:
                p.produce(TOPIC, value=b"v%06d" % i, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % every == 0:
            p.poll(0.01)  # a bounded rate (every=4: a few hundred a second)


def test_consumer_reads_from_follower_in_its_rack_and_survives_its_death(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", 3,
                           {"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR,
                            "replica.lag.time.max.ms": "2000", "min.insync.replicas": "2"},
                           {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                            "auto.leader.rebalance.enable": "false"},  # the leader stays put
                           racks=["a", "b", "c"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        wait_until(lambda: isr_full(cluster, TOPIC), 20, "a full ISR",
                   progress=lambda: cluster_progress(cluster))
        racks = {n.id: n.rack for n in admin.describe_cluster(request_timeout=10).result(15).nodes}
        leader = cluster.leader_of(TOPIC)
        follower = max(b for b in cluster.broker_ids if b != leader)
        assert racks[follower] not in (None, racks[leader]), racks

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 60000, "retry.backoff.ms": 50,
                             "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 300})
        acks = AckLog()
        _produce(producer, acks, 0, FIRST)
        assert producer.flush(30) == 0 and not acks.failed, acks.failed[:3]

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "near",
                             "client.rack": racks[follower], "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                             "topic.metadata.refresh.interval.ms": 1000,
                             "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 300})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        read: list[tuple[int, bytes]] = []

        def poll_once() -> None:
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                return
            offset = msg.offset()
            # exactly once, in order: each record the one after the last, never back
            assert offset == (read[-1][0] + 1 if read else 0), (offset, read[-1:])
            read.append((offset, msg.value()))

        try:
            wait_progress(lambda: poll_once() or len(read) >= FIRST, lambda: len(read), 15,
                          f"the consumer to read the first {FIRST}", step_s=0)
            served = {b: _bytes_out(cluster, b) for b in cluster.broker_ids}
            # The follower in the consumer's rack served the records; the leader none (or the
            # first answer, before it knew the follower's position).
            assert served[follower] >= 0.9 * sum(served.values()) > 0, served

            # The rest is produced while the consumer reads; the follower dies mid-read.
            writer = threading.Thread(target=_produce, args=(producer, acks, FIRST, TOTAL, 4),
                                      daemon=True)
            writer.start()
            wait_progress(lambda: poll_once() or len(read) >= FIRST + 100, lambda: len(read),
                          15, "the consumer to read on from the follower", step_s=0)
            cluster.kill(follower)
            at_kill = len(read)
            assert at_kill <= TOTAL - 300, "the kill came after the reads, not in the middle"
            writer.join(60)
            assert not writer.is_alive()
            assert producer.flush(60) == 0 and not acks.failed, acks.failed[:3]
            wait_progress(lambda: poll_once() or len(read) >= TOTAL, lambda: len(read), 20,
                          f"the consumer to read all {TOTAL} after the kill", step_s=0)
            deadline = time.monotonic() + 0.5  # nothing more arrives (no duplicates)
            while time.monotonic() < deadline:
                poll_once()
        finally:
            consumer.close()

        assert len(read) == TOTAL
        assert dict(read) == dict(acks.acked), "read differs from what was acknowledged"
        assert _bytes_out(cluster, leader) > 0  # the leader served the rest
    finally:
        cluster.stop()
