"""floodmark's own idempotent producer (``client.IdempotentProducer``, what ``floodmark produce``
and the Spark sinks use), five Produce requests in flight per leader connection, through partition
leader SIGKILLs on real processes: 3 brokers, RF=3, min.insync.replicas=2, acks=all.

A thread sends numbered values to two partitions (explicit partitions, so each partition's
expected order is known), in flushes of 20 batches (small batches: many of them in flight when a
leader dies); every flush must end with all its records acknowledged. The leader of partition 0 is
SIGKILLed while batches are in flight, restarted; then the leader of partition 1. Read back:
each partition holds exactly the values sent to it, in order, each once: no gap, no duplicate,
nothing acknowledged lost.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.chaos.readback import read_partition
from floodmark.client import ClusterClient, IdempotentProducer
from floodmark.cluster import LocalCluster
from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "pipelined"
PARTITIONS = 2
VALUE_BYTES = 16 * 1024  # 32 records close a 512 KiB batch: batches go as they fill
RECORDS_PER_FLUSH = 32 * 20
MAX_FLUSHES = 1000  # the bound of the write loop (the test stops it once its kills are done)


class Writer(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.sent: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.acked = 0  # records of completed flushes
        self.lock = threading.Lock()
        self.error: BaseException | None = None
        self.retries = 0

    def run(self) -> None:
        try:
            with ClusterClient(self.bootstrap, timeout_s=10) as cluster:
                producer = IdempotentProducer(cluster, timeout_ms=90_000,
                                              request_timeout_ms=5_000)
                assert producer.max_in_flight == 5
                n = 0
                for _ in range(MAX_FLUSHES):
                    if self.stop.is_set():
                        break
                    pending: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
                    for _ in range(RECORDS_PER_FLUSH):
                        p = n % PARTITIONS
                        producer.send(TOPIC, b"%010d" % n + b"." * (VALUE_BYTES - 10),
                                      partition=p)
                        pending[p].append(n)
                        n += 1
                    acked = producer.flush()  # raises unless every record is acknowledged
                    assert acked == {(TOPIC, p): len(v) for p, v in pending.items()}
                    with self.lock:
                        for p, values in pending.items():
                            self.sent[p].extend(values)
                        self.acked += RECORDS_PER_FLUSH
                    self.retries = producer.retries
        except BaseException as exc:  # seen by the test thread
            self.error = exc

    def count(self) -> int:
        with self.lock:
            return self.acked


def _progress(writer: Writer, flushes: int, timeout_s: float, what: str) -> None:
    target = writer.count() + flushes * RECORDS_PER_FLUSH
    wait_until(lambda: writer.count() >= target or writer.error is not None
               or not writer.is_alive(), timeout_s, what)
    assert writer.error is None, f"{what}: {writer.error!r}"
    assert writer.count() >= target, f"{what}: the writer stopped"


def _full_isr(cluster: LocalCluster) -> bool:
    for p in range(PARTITIONS):
        reg = cluster.partition_registration(TOPIC, p)
        if not reg or sorted(reg["isr"]) != cluster.broker_ids or reg["leader"] < 0:
            return False
    return True


def _kill_leader_mid_flight(cluster: LocalCluster, writer: Writer, partition: int) -> None:
    old = cluster.leader_of(TOPIC, partition)
    assert old > 0
    # wait until a flush is under way (records sent, not all acknowledged), then kill
    _progress(writer, 1, 60, "a flush completes")
    cluster.kill(old, signal.SIGKILL)
    wait_until(lambda: cluster.leader_of(TOPIC, partition) not in (old, -1), 20,
               f"a new leader of {TOPIC}-{partition}")
    _progress(writer, 2, 120, f"two flushes after the leader of {partition} died")
    cluster.start_node(old)
    wait_until(lambda: _full_isr(cluster), 60, "ISR full after restart", 0.3)


def test_pipelined_produce_through_leader_kills_writes_every_record_once_in_order(
        tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    writer: Writer | None = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3,
                                      config={"min.insync.replicas": "2"})])[TOPIC].result(20)
        wait_until(lambda: _full_isr(cluster), 20, "leaders and full ISRs")
        writer = Writer(cluster.bootstrap)
        writer.start()
        _progress(writer, 1, 60, "warm-up")
        _kill_leader_mid_flight(cluster, writer, 0)
        _kill_leader_mid_flight(cluster, writer, 1)
        writer.stop.set()
        writer.join(180)
        assert not writer.is_alive()
        assert writer.error is None, repr(writer.error)
        assert writer.retries > 0  # the kills did hit batches in flight

        for p in range(PARTITIONS):
            log = read_partition(cluster.bootstrap, TOPIC, p, 120)
            got = [int(v[:10]) for _, v in sorted(log.items()) if v is not None]
            assert len(got) == len(log)
            expected = writer.sent[p]
            assert len(got) == len(expected), (p, len(got), len(expected))
            assert got == expected, f"partition {p}: not every record once, in order"
            assert sorted(log) == list(range(len(log)))  # offsets without a gap
    finally:
        if writer is not None:
            writer.stop.set()
        cluster.stop()
