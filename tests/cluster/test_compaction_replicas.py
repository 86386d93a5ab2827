"""Issue 9, build 2: compaction on a three-broker cluster. Every replica cleans on its own (as
Kafka's cleaner threads do) below its own high watermark; a follower that was down while the
leader compacted catches up across the gaps the cleaner left. Every replica's files then hold
only records written at exactly those offsets, and each one's latest value per key below the
HW is the acknowledged latest value."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from floodmark.cluster import LocalCluster
from floodmark.records import decode_batch
from tests.cluster.helpers import SESSION_TIMEOUT_MS, replica_batches, wait_until

pytestmark = pytest.mark.integration

TOPIC = "compacted-rf3"
KEYS = 6


def _records(cluster: LocalCluster, node: int) -> dict[int, tuple[bytes | None, bytes | None]]:
    out: dict[int, tuple[bytes | None, bytes | None]] = {}
    for _base, _last, raw in replica_batches(cluster, node, TOPIC):
        for r in decode_batch(raw, validate=False)[1]:
            out[r.offset] = (r.key, r.value)
    return out


def _produce(bootstrap: str, start: int, count: int,
             written: dict[int, tuple[bytes | None, bytes | None]]) -> None:
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            written[msg.offset()] = (msg.key(), msg.value())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                  "batch.num.messages": 20})
    for i in range(start, start + count):
        p.produce(TOPIC, key=b"k%d" % (i % KEYS), value=b"v%05d-%s" % (i, b"x" * 40),
                  partition=0, on_delivery=report)
        p.poll(0)
    assert p.flush(30) == 0 and not errors, errors[:3]


def _cleanings(cluster: LocalCluster, node: int) -> int:
    path = cluster.data_dir / "logs" / f"broker-{node}.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    return sum(1 for line in text.splitlines()
               if f"partition {TOPIC}-0" in line and " cleaned (" in line)


def _check_replica(cluster: LocalCluster, node: int,
                   written: dict[int, tuple[bytes | None, bytes | None]]) -> int:
    held = _records(cluster, node)
    for offset, record in held.items():
        assert written[offset] == record, f"broker {node}: offset {offset} moved or changed"
    latest: dict[bytes | None, int] = {}
    for offset, (key, _value) in sorted(written.items()):
        latest[key] = offset
    for key, offset in latest.items():
        assert held.get(offset) == written[offset], f"broker {node}: latest of {key!r} is gone"
    return len(held)


def test_replicas_compact_independently_and_stay_consistent(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", 3,
                           {"replica.lag.time.max.ms": "2000", "log.cleaner.backoff.ms": "300"},
                           {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                            "auto.leader.rebalance.enable": "false"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={
            "cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "2"})])[TOPIC].result(30)
        wait_until(lambda: cluster.partition_registration(TOPIC), 20, "the partition")
        written: dict[int, tuple[bytes | None, bytes | None]] = {}
        t0 = time.monotonic()
        stages: list[float] = []
        _produce(cluster.bootstrap, 0, 800, written)
        stages.append(time.monotonic())
        wait_until(lambda: all(_cleanings(cluster, b) for b in cluster.broker_ids), 40,
                   "every replica to clean on its own")
        stages.append(time.monotonic())
        leader = cluster.leader_of(TOPIC)
        follower = next(b for b in cluster.broker_ids if b != leader)

        # A follower is down while the leader takes and compacts more updates.
        cluster.kill(follower, signal.SIGKILL)
        assert cluster.wait_dead(follower, 10)
        before = _cleanings(cluster, leader)
        _produce(cluster.bootstrap, 800, 800, written)
        stages.append(time.monotonic())
        wait_until(lambda: _cleanings(cluster, leader) > before, 40, "the leader to clean again")
        stages.append(time.monotonic())
        cluster.start_node(follower)
        end = max(written) + 1
        wait_until(lambda: max(_records(cluster, follower), default=-1) == end - 1, 40,
                   "the restarted follower to catch up across the gaps")
        stages.append(time.monotonic())
        def full_isr() -> bool:
            reg = cluster.partition_registration(TOPIC)
            return reg is not None and sorted(reg["isr"]) == cluster.broker_ids

        wait_until(full_isr, 30, "the follower back in the ISR")
        stages.append(time.monotonic())

        held = {b: _check_replica(cluster, b, written) for b in cluster.broker_ids}
        print(f"written {len(written)} records; held per replica {held}; stages (s) "
              f"{[round(t - t0, 1) for t in stages]}")
        assert all(n < len(written) for n in held.values())
    finally:
        cluster.stop()
