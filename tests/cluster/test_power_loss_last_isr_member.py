"""Issue 13's finding 5 on real processes: a power cut of the only in-sync replica.

Three brokers whose unsynced writes live in their own page cache
(``floodmark.unsafe.power.loss.page.cache``: SIGKILL drops them, as a power cut), one partition
with replication factor 3 and the cluster's ``min.insync.replicas=2``. Acknowledged ``acks=all``
writes are on every replica. Both followers are paused (SIGSTOP) until the ISR is the leader
alone; then the leader's power is cut (SIGKILL) and it comes back with what it had fsynced
(nothing), reporting an unclean shutdown; then the followers continue.

* ``eligible.leader.replicas.version=1`` (the default; KIP-966): the followers left the ISR
  while it was below min ISR, so they are eligible leader replicas (the leader's HW stood still
  without them); the restarted leader leaves the ISR and the ELR (unclean shutdown), the
  partition waits for a follower, which leads with every acknowledged write. None is lost.
* ``eligible.leader.replicas.version=0`` (Kafka before 4.1): the restarted broker is elected
  again from the ISR of itself and the followers truncate to its empty log. The acknowledged
  writes are lost; the test asserts that, as the chaos tests do for their unsafe settings.

Every wait is on the cluster's state (registrations, offsets), bounded.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import (
    SESSION_TIMEOUT_MS,
    healed,
    high_watermark,
    wait_progress,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "last-isr"
VALUES = 3000


def _cluster(data_dir: Path, elr: bool) -> LocalCluster:
    return LocalCluster(
        data_dir, 3,
        {"replica.lag.time.max.ms": "2000", "min.insync.replicas": "2",
         "floodmark.unsafe.power.loss.page.cache": "true"},
        {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
         "auto.leader.rebalance.enable": "false",
         "eligible.leader.replicas.version": "1" if elr else "0"}).start()


def _produce(bootstrap: str) -> dict[int, bytes]:
    """VALUES acks=all writes, each acknowledged (offset -> value)."""
    acked: dict[int, bytes] = {}
    failed: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()  # type: ignore[attr-defined]
        else:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000})
    for i in range(VALUES):
        while True:
            try:
                p.produce(TOPIC, value=b"v%06d" % i, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0 and not failed, failed[:3]
    assert len(acked) == VALUES
    return acked


def _read_back(bootstrap: str) -> dict[int, bytes]:
    """Everything below the HW, read by a fresh consumer (bounded by progress)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-back",
                  "enable.auto.commit": False})
    try:
        hw = high_watermark(c, TOPIC)
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        seen: dict[int, bytes] = {}

        def done() -> bool:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                seen[msg.offset()] = msg.value()
            return len(seen) >= hw

        wait_progress(done, lambda: len(seen), 20, f"reading {hw} records", step_s=0)
        return seen
    finally:
        c.close()


def _registration(cluster: LocalCluster) -> dict[str, Any]:
    return cluster.partition_registration(TOPIC) or {}


def _broker(cluster: LocalCluster, broker_id: int) -> dict[str, Any]:
    """The controller's registration of one broker ({} while it does not answer)."""
    status = cluster.controller_status() or {}
    return next((b for b in status.get("brokers", []) if b["id"] == broker_id), {})


@pytest.mark.parametrize("elr", [True, False], ids=["elr", "no-elr-unsafe"])
def test_power_cut_of_the_only_in_sync_replica(tmp_path: Path, elr: bool) -> None:
    cluster = _cluster(tmp_path / "c", elr)
    paused: list[int] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        wait_until(lambda: healed(cluster, TOPIC), 30, "a leader and a full ISR")
        acked = _produce(cluster.bootstrap)
        leader = cluster.leader_of(TOPIC)
        paused = [b for b in cluster.broker_ids if b != leader]

        # The ISR shrinks to the leader alone: the followers stop fetching and heartbeating.
        for b in paused:
            cluster.kill(b, signal.SIGSTOP)
        wait_until(lambda: _registration(cluster).get("isr") == [leader], 30,
                   f"ISR = [{leader}]")
        reg = _registration(cluster)
        if elr:  # they left below min ISR: eligible, holding every committed record
            assert reg["elr"] and set(reg["elr"]) <= set(paused), reg
        else:
            assert reg["elr"] == [], reg

        # The power cut: SIGKILL drops the leader's unsynced page cache; it comes back.
        cluster.kill(leader, signal.SIGKILL)
        assert cluster.wait_dead(leader, 10)
        marker = cluster.data_dir / f"broker-{leader}" / ".floodmark-clean-shutdown"
        assert not marker.exists()  # an unclean shutdown, reported at registration
        epoch_before = _broker(cluster, leader)["broker_epoch"]
        cluster.start_node(leader)

        def re_registered() -> bool:
            now = _broker(cluster, leader)
            return bool(now and now["broker_epoch"] != epoch_before and not now["fenced"])

        wait_until(re_registered, 60, f"broker {leader} registered again")
        reg = _registration(cluster)
        if elr:  # it lost data: neither in the ISR nor eligible, and it does not lead
            assert reg["leader"] == -1 and reg["isr"] == [], reg
            assert leader not in reg["elr"], reg
        else:  # Kafka without KIP-966: re-elected from an ISR of itself
            wait_until(lambda: _registration(cluster).get("leader") == leader, 30,
                       f"broker {leader} re-elected")

        for b in paused:
            cluster.kill(b, signal.SIGCONT)
        paused = []
        wait_progress(lambda: healed(cluster, TOPIC), lambda: _registration(cluster), 60,
                      "a full ISR with identical replica logs", limit_s=180)
        new_leader = cluster.leader_of(TOPIC)
        seen = _read_back(cluster.bootstrap)
        lost = [o for o, v in acked.items() if seen.get(o) != v]
        if elr:
            assert new_leader != leader
            assert lost == [], f"{len(lost)} of {len(acked)} acknowledged writes lost"
            assert _registration(cluster)["elr"] == []  # the ISR is whole again
        else:
            assert new_leader == leader
            assert len(lost) == len(acked), f"{len(lost)} of {len(acked)} lost"
    finally:
        for b in paused:
            cluster.kill(b, signal.SIGCONT)
        cluster.stop()


def test_the_marker_is_written_by_sigterm_and_absent_after_sigkill(tmp_path: Path) -> None:
    """What a broker reports at registration: ``clean_shutdown`` is the data directory's
    marker, written after a SIGTERM's flush and consumed (removed) at the next start."""
    cluster = _cluster(tmp_path / "c", True)
    try:
        broker = cluster.broker_ids[0]
        marker = cluster.data_dir / f"broker-{broker}" / ".floodmark-clean-shutdown"
        assert not marker.exists()  # consumed at start
        cluster.kill(broker, signal.SIGTERM)
        assert cluster.wait_dead(broker, 30)
        assert marker.exists()
        cluster.start_node(broker)
        wait_until(lambda: not marker.exists(), 30, "the marker consumed at start")
        cluster.kill(broker, signal.SIGKILL)
        assert cluster.wait_dead(broker, 10)
        assert not marker.exists()
    finally:
        cluster.stop()
