"""KIP-848: a consumer group (librdkafka's ``group.protocol=consumer``) survives the SIGKILL of
its coordinator. Its state is Kafka's consumer-group records in ``__consumer_offsets``; the
broker that takes the partition over replays them, so every member goes on with its member id
and member epoch: no rebalance callback fires, no commit is refused (STALE_MEMBER_EPOCH,
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH), and every record is consumed."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.group_member import Member, close_all
from tests.cluster.helpers import SESSION_TIMEOUT_MS, wait_progress, wait_until

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS, GROUP, RECORDS = "kip848-events", 6, "kip848-failover", 3000
REFUSALS = ("STALE_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH")


def test_consumer_group_members_keep_their_epochs_through_a_coordinator_sigkill(
        tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "kip848-cluster", 3,
        {"replica.lag.time.max.ms": "2000", "group.consumer.heartbeat.interval.ms": "500"},
        {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}).start()
    members: list[Member] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        wait_until(lambda: all(cluster.leader_of(TOPIC, p) > 0 for p in range(PARTITIONS)),
                   30, "leaders")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
        assert producer.flush(60) == 0
        members = [Member(cluster.bootstrap, GROUP, TOPIC, f"member-{i}", protocol="consumer",
                          work_s=0.002) for i in range(3)]

        def seen() -> int:
            return len(set().union(*(m.values for m in members)))

        wait_progress(lambda: all(m.owned() == 2 and m.member_id for m in members),
                      lambda: ([m.owned() for m in members], seen()), 30,
                      "three members, two partitions each")
        wait_progress(lambda: seen() >= RECORDS // 4, seen, 30, "a quarter consumed")
        events_before = [list(m.events) for m in members]
        ids_before = [m.member_id for m in members]
        # (while the members joined one by one, a commit could race an epoch bump: only what
        # comes after the failover counts)
        errors_before = [len(m.commit_errors) for m in members]
        coordinator = cluster.leader_of("__consumer_offsets", 0)
        cluster.kill(coordinator)
        wait_until(lambda: cluster.leader_of("__consumer_offsets", 0) not in (-1, coordinator),
                   30, "a new coordinator", progress=seen)
        wait_progress(lambda: seen() >= RECORDS, seen, 30, f"all {RECORDS} records consumed")
        assert [list(m.events) for m in members] == events_before, "a rebalance happened"
        assert [m.member_id for m in members] == ids_before
        refused = [e for m, n in zip(members, errors_before, strict=True)
                   for e in m.commit_errors[n:] if any(r in e for r in REFUSALS)]
        assert not refused, refused[:3]
        removed = [line for b in cluster.broker_ids
                   for line in cluster.log_path(b).read_text(errors="replace").splitlines()
                   if f"group {GROUP}: member" in line and "removed" in line]
        assert not removed, removed[:3]  # no member timed out at the new coordinator
        print(f"coordinator {coordinator} SIGKILLed: 3 members kept their ids and epochs, "
              f"{RECORDS} records consumed")
    finally:
        close_all(members)
        cluster.stop()
