"""Consumer groups on a cluster: the coordinator is the leader of the group's replicated
``__consumer_offsets`` partition; committed offsets survive the loss of that broker."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "grouped"
GROUP = "g1"


def _consume(bootstrap: str, n: int, expect_commit: int, timeout_s: float = 60) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "socket.timeout.ms": 4000,
                  "topic.metadata.refresh.interval.ms": 1000})
    c.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(TOPIC, 0)], timeout=10)
    c.close()
    assert committed[0].offset == expect_commit, committed
    return got


def test_committed_offsets_survive_coordinator_loss(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(20)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(100):
            p.produce(TOPIC, value=b"m%03d" % i, partition=0)
        assert p.flush(30) == 0
        first = _consume(cluster.bootstrap, 40, expect_commit=40)
        assert first[:40] == [b"m%03d" % i for i in range(len(first))]
        reg = cluster.partition_registration("__consumer_offsets")
        assert reg is not None and len(reg["replicas"]) == 3
        coordinator = reg["leader"]
        # Committed offsets reach the followers, then the coordinator dies.
        wait_until(lambda: all(
            any(cluster.partition_dir(b, "__consumer_offsets").glob("*.log")) and
            sum(f.stat().st_size for f in cluster.partition_dir(b, "__consumer_offsets")
                .glob("*.log")) > 0 for b in cluster.broker_ids), 10, "offsets replicated")
        cluster.kill(coordinator, signal.SIGKILL)
        wait_until(lambda: cluster.leader_of("__consumer_offsets") not in (coordinator, -1), 15,
                   "a new coordinator")
        rest = _consume(cluster.bootstrap, 100 - len(first), expect_commit=100)
        assert rest == [b"m%03d" % i for i in range(len(first), 100)], "did not resume"
    finally:
        cluster.stop()
