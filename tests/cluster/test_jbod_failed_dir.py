"""A failed log directory takes only its replicas offline (JBOD, KIP-112 / KIP-858), on a real
3-broker cluster (RF=3) with confluent-kafka: the leader's directory holding one partition
disappears (renamed away, as an unmounted disk); that broker stays up, tells the controller in
its heartbeat, the partition's leadership moves to another broker, the partitions in its other
directory keep being served by it, and every acknowledged record is read back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import SESSION_TIMEOUT_MS, wait_until


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i, value in enumerate(values):
        p.produce(topic, value=value, partition=i % partitions)
    assert p.flush(30) == 0


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> set[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "jbod-failed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: set[bytes] = set()
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            for msg in c.consume(1000, 0.5):
                if msg.error() is None:
                    got.add(bytes(msg.value()))
    finally:
        c.close()
    return got


def _log_dirs(bootstrap: str, broker: int) -> dict[str, dict[str, Any]]:
    """log dir -> {"error_code", "partitions": set of names} on one broker."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        [answer] = admin.describe_log_dirs(brokers=[broker])
    finally:
        admin.close()
    return {d["log_dir"]: {"error_code": d["error_code"],
                           "partitions": {f"{t['name']}-{p['partition_index']}"
                                          for t in d["topics"] for p in t["partitions"]}}
            for d in answer["log_dirs"]}


def test_a_failed_log_dir_moves_only_its_leaderships(tmp_path: Path) -> None:
    disks = tmp_path / "disks"
    cluster = LocalCluster(
        tmp_path / "c", 3,
        {"replica.lag.time.max.ms": "2000",
         "log.dirs": f"{disks}/b{{node_id}}-a,{disks}/b{{node_id}}-b"},
        {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("fail", 4, 3)])["fail"].result(30)
        first = [b"before-%d" % i for i in range(200)]
        _produce(cluster.bootstrap, "fail", first, 4)

        leader = cluster.leader_of("fail", 0)
        dirs = _log_dirs(cluster.bootstrap, leader)
        [failing] = [d for d, info in dirs.items() if "fail-0" in info["partitions"]]
        [other] = [d for d in dirs if d != failing]
        gone = {p for p in dirs[failing]["partitions"] if p.startswith("fail-")}
        kept_led = [p for p in range(4) if f"fail-{p}" in dirs[other]["partitions"]
                    and cluster.leader_of("fail", p) == leader]

        Path(failing).rename(Path(failing + ".unmounted"))  # the disk is gone

        def moved() -> bool:
            return all(cluster.leader_of("fail", int(p.rsplit("-", 1)[1])) not in (leader, -1)
                       for p in gone)
        wait_until(moved, 20, f"leadership of {sorted(gone)} off broker {leader}")
        for p in gone:
            reg = cluster.partition_registration("fail", int(p.rsplit("-", 1)[1]))
            assert reg is not None and leader not in reg["isr"], reg
        # Its other directory keeps serving: the partitions it led there are still its own.
        assert [p for p in kept_led if cluster.leader_of("fail", p) == leader] == kept_led
        after = _log_dirs(cluster.bootstrap, leader)
        assert after[failing]["error_code"] == 56  # KAFKA_STORAGE_ERROR
        assert after[other]["error_code"] == 0 and after[other]["partitions"]
        assert f"log dir {failing} failed" in cluster.log_path(leader).read_text(
            errors="replace")

        second = [b"after-%d" % i for i in range(200)]
        _produce(cluster.bootstrap, "fail", second, 4)
        got = _read_all(cluster.bootstrap, "fail", 4, len(first) + len(second))
        assert got == set(first) | set(second), "every acknowledged record is there"
        [node] = [n for n in cluster.status()["nodes"] if n["id"] == leader]
        assert node["state"] == "running" and not node["fenced"], node  # still up, unfenced
    finally:
        cluster.stop()
    # ... and it stops cleanly too (its other directory marked clean, nothing raised).
    text = cluster.log_path(leader).read_text(errors="replace")
    assert "Traceback" not in text and "closed cleanly" in text
