"""Issue 8, on real processes: a retried idempotent acks=all batch is acknowledged only once the
high watermark covers it.

3 brokers, RF=3, min.insync.replicas=2. Both followers are SIGSTOPped, so the leader's HW cannot
move. A confluent-kafka producer (acks=all, idempotence on, request.timeout.ms=2000) sends one
record: the first attempt waits in the purgatory and times out, librdkafka retries the same
(producer id, epoch, sequence), and the retry is a duplicate of a batch the leader already holds.
Then the leader is SIGKILLed and the followers continued: one of them is elected, and it never had
the record. Kafka's rule (and floodmark's): the duplicate waits for the HW like the original, so
the producer is never told the record is written, and nothing acknowledged is lost.

Plain acks=1 records are written right after the followers stop: a follower fetch that was
parked at the leader carries them, not the probe (or it would reach a follower on SIGCONT).

The same test with the broker's unsafe switch (``floodmark.unsafe.ack.duplicates.before.commit``,
the behaviour before the fix) shows the test is able to see the bug: the retry is acknowledged at
once, and the acknowledged record is gone after the failover.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.chaos.readback import read_partition
from floodmark.client import ClusterClient
from floodmark.cluster import LocalCluster
from tests.cluster.helpers import wait_until

pytestmark = pytest.mark.integration

TOPIC = "retry"
SESSION_TIMEOUT_MS = 12_000  # long enough that the paused followers are not fenced meanwhile
REQUEST_TIMEOUT_MS = 2000


class Deliveries:
    def __init__(self) -> None:
        self.acked: dict[bytes, int] = {}
        self.failed: dict[bytes, str] = {}
        self.lock = threading.Lock()

    def __call__(self, err: Any, msg: Any) -> None:
        with self.lock:
            if err is None:
                self.acked[msg.value()] = msg.offset()
            else:
                self.failed[msg.value()] = str(err)

    def settled(self, value: bytes) -> bool:
        with self.lock:
            return value in self.acked or value in self.failed


def _run(tmp_path: Path, unsafe: bool) -> tuple[Deliveries, dict[int, bytes | None], int]:
    broker_settings = {"replica.lag.time.max.ms": "60000"}
    if unsafe:
        broker_settings["floodmark.unsafe.ack.duplicates.before.commit"] = "true"
    cluster = LocalCluster(tmp_path / "c", 3, broker_settings,
                           {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                            "leader.imbalance.check.interval.ms": "600000"}).start()
    stopped: list[int] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                            )[TOPIC].result(30)
        wait_until(lambda: cluster.leader_of(TOPIC) > 0, 30, "a leader")
        deliveries = Deliveries()  # acks=all
        leader_only = Deliveries()  # acks=1
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 0,
                             "request.timeout.ms": REQUEST_TIMEOUT_MS,
                             "message.timeout.ms": 3 * REQUEST_TIMEOUT_MS - 500,
                             "retry.backoff.ms": 50})
        # Committed history first: 50 records acknowledged with every replica in the ISR.
        for i in range(50):
            producer.produce(TOPIC, value=b"base-%03d" % i, partition=0,
                             on_delivery=deliveries)
        producer.flush(60)
        assert len(deliveries.acked) == 50, deliveries.failed
        wait_until(lambda: sorted(cluster.partition_registration(TOPIC)["isr"]) == [1, 2, 3],
                   30, "a full ISR")

        leader = cluster.leader_of(TOPIC)
        followers = [b for b in cluster.broker_ids if b != leader]
        for b in followers:
            pid = cluster.pid(b)
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        # A follower fetch parked at the leader when the followers stopped would be answered
        # with the next record and carry it to them on SIGCONT. Let a plain acks=1 record take
        # that ride (twice, in case a fetch was still on its way), so the probe has none.
        flusher = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1,
                            "enable.idempotence": False, "linger.ms": 0})
        for i in range(2):
            time.sleep(0.3)
            flusher.produce(TOPIC, value=b"flush-%d" % i, partition=0, on_delivery=leader_only)
            flusher.flush(30)
        assert len(leader_only.acked) == 2, leader_only.failed  # acks=1: may be lost
        probe = b"probe"
        producer.produce(TOPIC, value=probe, partition=0, on_delivery=deliveries)
        deadline = time.monotonic() + 60
        while not deliveries.settled(probe) and time.monotonic() < deadline:
            producer.poll(0.1)
        assert deliveries.settled(probe), "the probe's delivery report never came"

        # The leader dies; the followers, which never had the probe, come back and one of them
        # is elected (cleanly: both are still in the ISR).
        cluster.kill(leader, signal.SIGKILL)
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        stopped.clear()
        wait_until(lambda: cluster.leader_of(TOPIC) in followers, SESSION_TIMEOUT_MS / 1000 + 60,
                   "a follower elected after the leader's death")
        # The read below takes its metadata from the followers: one that has not applied the
        # election yet names the dead leader, and the read's first ListOffsets waits there
        # in vain (floodmark.chaos.readback.LIST_OFFSETS_ATTEMPT_S).
        wait_until(lambda: all(_leader_seen_by(cluster, b) in followers for b in followers), 60,
                   "both followers' metadata naming the new leader")
        producer.flush(10)
        values = read_partition(",".join(cluster.address(b) for b in followers), TOPIC)
        return deliveries, values, leader
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        cluster.stop()


def _leader_seen_by(cluster: LocalCluster, broker: int) -> int:
    """The leader of the topic's partition 0 in ``broker``'s Metadata answer."""
    with ClusterClient(cluster.address(broker)) as client:
        return int(client.metadata([TOPIC]).topics[0].partitions[0].leader_id)


def _lost(deliveries: Deliveries, values: dict[int, bytes | None]) -> list[tuple[bytes, int]]:
    return [(v, o) for v, o in deliveries.acked.items() if values.get(o) != v]


def test_retried_duplicate_is_not_acknowledged_before_commit(tmp_path: Path) -> None:
    deliveries, values, _leader = _run(tmp_path, unsafe=False)
    lost = _lost(deliveries, values)
    print(f"acknowledged {len(deliveries.acked)}, lost {len(lost)}, "
          f"probe: {deliveries.failed.get(b'probe', 'acknowledged')}")
    assert lost == [], f"acknowledged writes lost: {lost}"
    assert b"probe" in deliveries.failed, "the probe cannot have been committed"


def test_unsafe_switch_shows_the_loss_the_test_is_there_to_catch(tmp_path: Path) -> None:
    deliveries, values, _leader = _run(tmp_path, unsafe=True)
    lost = _lost(deliveries, values)
    print(f"unsafe: acknowledged {len(deliveries.acked)}, lost {len(lost)}, "
          f"probe at {deliveries.acked.get(b'probe')}, read {len(values)}: "
          f"{[values.get(o) for o in (50, 51, 52)]}")
    assert lost == [(b"probe", 52)], (lost, deliveries.failed)
