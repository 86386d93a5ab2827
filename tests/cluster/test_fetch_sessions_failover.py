"""Fetch sessions (KIP-227) through a leader change on a 3-broker cluster: kafka-python (incremental
sessions, Fetch v12 by name) and librdkafka (Fetch v16 by topic id, KIP-951 leader hints) consume
12 partitions while a leader is SIGKILLed and records keep arriving; both end with every
acknowledged record, in order per partition."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from floodmark.client import KafkaConnection
from tests.cluster.helpers import LogLines, start_cluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "sessions"
PARTITIONS = 12


def _produce(bootstrap: str, prefix: bytes, count: int, acked: set[tuple[int, bytes]]) -> None:
    failed: list[str] = []

    def done(err: object, msg: object) -> None:
        if err is None:
            acked.add((msg.partition(), msg.value()))  # type: ignore[attr-defined]
        else:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 2, "message.timeout.ms": 60000, "retry.backoff.ms": 50,
                  "topic.metadata.refresh.interval.ms": 1000})
    for i in range(count):
        p.produce(TOPIC, value=prefix + b"%05d" % i, partition=i % PARTITIONS, on_delivery=done)
        if i % 50 == 49:
            p.poll(0.01)
    assert p.flush(90) == 0 and not failed, failed[:3]


def _fetch_v16(cluster: Any, broker: int, epoch_delta: int) -> tuple[Any, Any, int]:
    """A consumer Fetch v16 of partition 0 at ``broker``, carrying the leader epoch its Metadata
    names plus ``epoch_delta``: (the answer, its partition, that epoch)."""
    with KafkaConnection(cluster.address(broker)) as conn:
        meta = conn.request(3, 12, {"topics": [{"name": TOPIC, "topic_id": None}]})
        (t,) = meta.topics
        epoch = next(int(p.leader_epoch) for p in t.partitions if int(p.partition_index) == 0)
        resp = conn.request(1, 16, {"max_wait": 0, "min_bytes": 1, "session_epoch": -1,
                                    "topics": [{"topic_id": t.topic_id, "partitions": [
                                        {"partition": 0, "fetch_offset": 0,
                                         "current_leader_epoch": epoch + epoch_delta,
                                         "partition_max_bytes": 1024}]}]})
    return resp, resp.responses[0].partitions[0], epoch


def _check_follower_serves(cluster: Any, leader: int) -> None:
    """KIP-392, as Kafka 4.x: a follower serves a consumer Fetch v11+ (up to its own HW). The
    follower learns the HW from its next fetch answer, which the leader may hold up to
    replica.fetch.wait.max.ms when nothing new arrives: until then it answers no error and no
    records."""
    follower = next(b for b in cluster.broker_ids if b != leader)

    def serves() -> bool:
        _resp, part, _epoch = _fetch_v16(cluster, follower, 0)
        assert int(part.error_code) == 0, part
        return bool(part.records)

    wait_until(serves, 20, f"follower {follower} to serve partition 0 up to its HW")


def _check_leader_hint(cluster: Any, leader: int, follower: int) -> None:
    """KIP-951: a follower answers a Fetch v16 with a stale leader epoch FENCED_LEADER_EPOCH,
    the current leader and epoch, and where that leader listens."""
    answer: list[tuple[Any, Any, int]] = []

    def fenced() -> bool:
        answer[:] = [_fetch_v16(cluster, follower, -1)]
        return int(answer[0][1].error_code) == 74 and answer[0][2] >= 1

    wait_until(fenced, 20, f"broker {follower} to know the new leader epoch")
    resp, part, epoch = answer[0]
    assert (int(part.current_leader.leader_id), int(part.current_leader.leader_epoch)) == (
        leader, epoch)
    host, port = cluster.address(leader).rsplit(":", 1)
    assert [(int(n.node_id), n.host, int(n.port)) for n in resp.node_endpoints] == [
        (leader, host, int(port))]


def test_sessions_through_a_leader_change(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    handler = LogLines()
    fetcher_log = logging.getLogger("kafka.consumer.fetcher")
    old_level = fetcher_log.level
    fetcher_log.addHandler(handler)
    fetcher_log.setLevel(logging.DEBUG)
    stop = threading.Event()
    seen_kp: list[tuple[int, bytes]] = []
    seen_rd: list[tuple[int, bytes]] = []
    threads: list[threading.Thread] = []
    killed = -1
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={
            "min.insync.replicas": "2"})])[TOPIC].result(30)
        wait_until(lambda: all(cluster.leader_of(TOPIC, i) > 0 for i in range(PARTITIONS)), 20,
                   "leaders")
        acked: set[tuple[int, bytes]] = set()
        _produce(cluster.bootstrap, b"a", 600, acked)

        def kafka_python() -> None:
            c = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                              fetch_max_wait_ms=100, metadata_max_age_ms=1000,
                              request_timeout_ms=5000, retry_backoff_ms=100)
            c.assign([KTopicPartition(TOPIC, i) for i in range(PARTITIONS)])
            c.seek_to_beginning()
            while not stop.is_set():
                for records in c.poll(timeout_ms=200).values():
                    seen_kp.extend((r.partition, r.value) for r in records)
            c.close()

        def librdkafka() -> None:
            c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "sessions-rd",
                          "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                          "topic.metadata.refresh.interval.ms": 1000})
            c.assign([TopicPartition(TOPIC, i, 0) for i in range(PARTITIONS)])
            while not stop.is_set():
                msg = c.poll(0.2)
                if msg is not None and msg.error() is None:
                    seen_rd.append((msg.partition(), msg.value()))
            c.close()

        threads = [threading.Thread(target=kafka_python, daemon=True),
                   threading.Thread(target=librdkafka, daemon=True)]
        for th in threads:
            th.start()
        wait_until(lambda: len(seen_kp) >= 600 and len(seen_rd) >= 600, 60, "the first 600")
        killed = cluster.leader_of(TOPIC, 0)
        _check_follower_serves(cluster, killed)
        moved = [i for i in range(PARTITIONS) if cluster.leader_of(TOPIC, i) == killed]
        cluster.kill(killed, signal.SIGKILL)
        wait_until(lambda: all(cluster.leader_of(TOPIC, i) not in (killed, -1) for i in moved),
                   30, "new leaders")
        new_leader = cluster.leader_of(TOPIC, 0)
        _check_leader_hint(cluster, new_leader,
                           next(b for b in cluster.broker_ids if b not in (killed, new_leader)))
        _produce(cluster.bootstrap, b"b", 600, acked)
        wait_until(lambda: set(seen_kp) >= acked and set(seen_rd) >= acked, 90,
                   "every acknowledged record at both consumers", 0.2)
    finally:
        stop.set()
        for th in threads:
            th.join(30)
        fetcher_log.removeHandler(handler)
        fetcher_log.setLevel(old_level)
        cluster.stop()
    for seen in (seen_kp, seen_rd):
        for part in range(PARTITIONS):  # per partition: offset order, nothing twice
            values = [v for q, v in seen if q == part]
            assert values == sorted(set(values)), f"partition {part} out of order or repeated"
    assert any("created a new incremental fetch session" in line for line in handler.lines)
    assert sum("sent an incremental fetch response for session" in line
               for line in handler.lines) >= 10
