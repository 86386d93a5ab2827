"""KIP-932: a share partition survives the SIGKILL of its leader. Its state (the share-partition
start offset, each in-flight record's state and delivery count) is kept by the share
coordinator in ``__share_group_state`` (replicated, written with acks=all before an
acknowledgement is answered); the broker that takes the partition over reads it back before it
serves ShareFetch.

The guarantee KIP-932 gives is at-least-once with a delivery count: a record whose ACCEPT was
answered is never delivered again; a record delivered but not (yet) acknowledged when its leader
died comes back, with a higher delivery count, never beyond ``group.share.delivery.count.limit``.
Two librdkafka share consumers (explicit acknowledgement) consume a 3-way replicated partition;
once the first half is acknowledged, the second half is produced and its leader is SIGKILLed
while the records of the first poll of it are delivered and not acknowledged; afterwards every
record is acknowledged, no acknowledged record comes back, and the records that were in
flight come back with delivery count 2. The membership is stored too (Kafka's share-group
records in ``__consumer_offsets``): when the killed broker was also the group coordinator, the
new one knows both members and refuses none of their heartbeats.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import SESSION_TIMEOUT_MS, wait_until

pytestmark = pytest.mark.integration

TOPIC, GROUP, RECORDS, LIMIT = "share-failover-t", "share-failover", 600, 5
STALL_S = 30.0  # fails when no record is acknowledged for this long


@pytest.mark.timeout(150)
def test_share_partition_state_survives_a_leader_sigkill(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "share-cluster", 3,
        {"replica.lag.time.max.ms": "2000", "group.share.enable": "true",
         "share.auto.offset.reset": "earliest",
         "group.share.delivery.count.limit": str(LIMIT),
         "group.share.heartbeat.interval.ms": "500"},
        {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}).start()
    members: list[ShareConsumer] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        wait_until(lambda: cluster.leader_of(TOPIC) > 0, 30, "a leader")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "linger.ms": 5})
        def produce(values: range) -> None:
            for i in values:
                producer.produce(TOPIC, value=str(i).encode(), partition=0)
            assert producer.flush(60) == 0

        half = RECORDS // 2
        produce(range(half))  # the second half once the first is acknowledged
        for name in ("a", "b"):
            c = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                               "client.id": name, "share.acknowledgement.mode": "explicit"})
            c.subscribe([TOPIC])
            members.append(c)

        accepted: set[int] = set()  # values whose ACCEPT the leader answered
        counts: dict[int, list[int]] = {}  # value -> the delivery count of each delivery
        held: set[int] = set()  # delivered, not acknowledged when the leader died
        killed = -1
        second_half = False
        last_progress = time.monotonic()
        for turn in range(100_000):
            if len(accepted) == RECORDS:
                break
            if not second_half and len(accepted) == half:
                produce(range(half, RECORDS))
                second_half = True
            c = members[turn % 2]
            polled = [m for m in c.poll(0.2) if m.error() is None]
            for m in polled:
                value = int(m.value())
                assert value not in accepted, (
                    f"{value} was acknowledged and came back (delivery {m.delivery_count()})")
                counts.setdefault(value, []).append(int(m.delivery_count()))
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if polled and killed < 0 and len(accepted) >= half:
                # the leader dies while these records are delivered and not acknowledged
                held = {int(m.value()) for m in polled}
                killed = cluster.leader_of(TOPIC)
                roles = [name for name, topic in (("group coordinator", "__consumer_offsets"),
                                                  ("share coordinator", "__share_group_state"))
                         if cluster.leader_of(topic) == killed]
                cluster.kill(killed)
            if polled:
                results = c.commit_sync(5)
                if results and all(err is None for err in results.values()):
                    accepted.update(int(m.value()) for m in polled)
                    last_progress = time.monotonic()
            assert time.monotonic() - last_progress < STALL_S, (
                f"stalled at {len(accepted)} acknowledged (killed {killed})")
        assert killed > 0, "the leader was killed mid-run"
        assert accepted == set(range(RECORDS)), f"{RECORDS - len(accepted)} not acknowledged"
        # the delivery counts: each delivery of a record counts one more, never past the limit
        for value, seen in counts.items():
            assert seen == sorted(set(seen)) and seen[0] >= 1 and seen[-1] <= LIMIT, (
                value, seen)
        again = {v: seen for v, seen in counts.items() if len(seen) > 1}
        # what the dead leader had handed out unacknowledged came back, counted as delivered
        # twice: its delivery count survived the failover
        assert held and set(again) >= held, (sorted(held)[:5], sorted(again)[:5])
        assert all(again[v][-1] >= 2 for v in held)
        # the membership was stored too: a new group coordinator knows both members, so no
        # heartbeat was refused (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH) after the kill
        refused = [line for b in cluster.broker_ids if b != killed
                   for line in cluster.log_path(b).read_text(errors="replace").splitlines()
                   if f"share group {GROUP} member" in line and "refused" in line]
        assert not refused, refused[:3]
        print(f"share-partition leader {killed} ({', '.join(roles) or 'no coordinator'}) "
              f"SIGKILLed at {half} acknowledged, "
              f"{len(held)} in flight: "
              f"{RECORDS} acknowledged once each, {len(again)} delivered again (unacknowledged "
              f"when the leader died), max delivery count "
              f"{max(s[-1] for s in counts.values())}")
    finally:
        for c in members:
            c.close()
        cluster.stop()
