"""The connector on a real 3-broker floodmark cluster (controller + brokers as processes):
the high watermark held back by a lagging follower, and a leader stopped between micro-batches."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.fetch import FetchClient

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]

TOPIC = "lagging"


def _wait(pred, timeout_s: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _produce(bootstrap: str, lo: int, hi: int, acks: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "enable.idempotence": acks == "all", "message.timeout.ms": 60000})
    for i in range(lo, hi):
        p.produce(TOPIC, value=b"v%d" % i, partition=0)
    assert p.flush(60) == 0


def test_reads_stop_at_the_hw_while_a_follower_lags_and_follow_a_new_leader(
        spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from floodmark.cluster import LocalCluster

    # A stopped follower stays in the ISR for a minute, so it holds the HW back.
    cluster = LocalCluster(tmp_path / "cluster", 3, {"replica.lag.time.max.ms": "60000"},
                           {"broker.session.timeout.ms": "60000"}).start()
    stopped: int | None = None
    try:
        bs = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})  # keep it alive while the future runs
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        leader = _wait(lambda: max(cluster.leader_of(TOPIC), 0), 20, "a leader")
        _produce(bs, 0, 100, acks="all")
        stopped = next(b for b in cluster.broker_ids if b != leader)
        cluster.kill(stopped, signal.SIGSTOP)
        _produce(bs, 100, 150, acks="1")  # the leader's log end is 150, the HW stays at 100
        client = FetchClient(bs)
        assert client.bounds(TOPIC, 0).high_watermark == 100

        def batch_offsets() -> list[int]:
            df = (spark.read.format("floodmark").option("kafka.bootstrap.servers", bs)
                  .option("subscribe", TOPIC).load())
            return sorted(r["offset"] for r in df.select("offset").collect())

        assert batch_offsets() == list(range(100))

        out, ckpt = tmp_path / "out", tmp_path / "ckpt"

        def stream() -> list[int]:
            q = (spark.readStream.format("floodmark").option("kafka.bootstrap.servers", bs)
                 .option("subscribe", TOPIC).option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", "60").load()
                 .writeStream.format("parquet").option("path", str(out))
                 .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
            assert q.awaitTermination(180)
            assert q.exception() is None
            return sorted(r["offset"] for r in spark.read.parquet(str(out)).collect())

        assert stream() == list(range(100))  # not one offset at or above the HW

        cluster.kill(stopped, signal.SIGCONT)
        stopped = None
        _wait(lambda: client.bounds(TOPIC, 0).high_watermark == 150, 30, "HW 150")
        assert stream() == list(range(150))  # resumed at 100, each record once

        # Take the leader down between micro-batches: the reader follows the new leader. SIGTERM
        # (controlled shutdown, the controller moves leadership at once): with the 60 s session
        # timeout this test needs for the lagging follower, a SIGKILLed leader would only be
        # replaced after a minute.
        old = cluster.leader_of(TOPIC)
        cluster.kill(old, signal.SIGTERM)
        _wait(lambda: cluster.leader_of(TOPIC) not in (old, -1), 30, "a new leader")
        _produce(bs, 150, 200, acks="all")
        assert stream() == list(range(200))
        assert batch_offsets() == list(range(200))
        values = sorted(int(bytes(r["value"])[1:]) for r in spark.read.parquet(str(out)).collect())
        assert values == list(range(200))
    finally:
        if stopped is not None:
            cluster.kill(stopped, signal.SIGCONT)
        cluster.stop()


def test_stream_survives_a_leader_sigkill_mid_stream(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A running query (processingTime trigger) while the partition leader is SIGKILLed and a
    producer keeps writing with acks=all: the output holds every acknowledged record once."""
    import threading

    from tests.cluster.helpers import start_cluster

    cluster = start_cluster(tmp_path / "cluster")  # 1.5 s broker session timeout
    topic = "failover"
    stop = threading.Event()
    acked: list[bytes] = []
    errors: list[str] = []
    q = None
    try:
        bs = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})]
                            )[topic].result(30)
        _wait(lambda: max(cluster.leader_of(topic), 0), 20, "a leader")

        def produce() -> None:
            p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                          "linger.ms": 5, "message.timeout.ms": 60000,
                          "request.timeout.ms": 4000, "retry.backoff.ms": 50,
                          "topic.metadata.refresh.interval.ms": 1000})

            def cb(err, msg):  # type: ignore[no-untyped-def]
                (errors.append(str(err)) if err else acked.append(msg.value()))

            i = 0
            while not stop.is_set() and i < 100_000:
                try:
                    p.produce(topic, value=b"v%d" % i, partition=0, on_delivery=cb)
                    i += 1
                except BufferError:
                    p.poll(0.01)
                if i % 20 == 0:
                    p.poll(0.01)
            p.flush(60)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        out = tmp_path / "out"
        q = (spark.readStream.format("floodmark").option("kafka.bootstrap.servers", bs)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="500 milliseconds").start())
        _wait(lambda: len(acked) > 500 and any(p["numInputRows"] for p in q.recentProgress),
              60, "records flowing")
        old = cluster.leader_of(topic)
        cluster.kill(old, signal.SIGKILL)
        _wait(lambda: cluster.leader_of(topic) not in (old, -1), 30, "a new leader")
        n = len(acked)
        _wait(lambda: len(acked) > n + 500, 60, "acks from the new leader")
        stop.set()
        producer.join(90)
        assert not errors, errors[:3]
        q.processAllAvailable()
        assert q.exception() is None
        got = sorted(bytes(r["value"]) for r in spark.read.parquet(str(out)).collect())
        assert got == sorted(acked)  # every acknowledged record, none twice
    finally:
        stop.set()
        if q is not None:
            q.stop()
        cluster.stop()
