"""KIP-848: a consumer group (librdkafka's ``group.protocol=consumer``) survives the SIGKILL of
its coordinator. Its state is Kafka's consumer-group records in ``__consumer_offsets``; the
broker that takes the partition over replays them, so every member goes on with its member id
and member epoch: no rebalance callback fires, no commit is refused (STALE_MEMBER_EPOCH,
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH), and every record is consumed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import SESSION_TIMEOUT_MS, wait_progress, wait_until

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS, GROUP, RECORDS = "kip848-events", 6, "kip848-failover", 3000
REFUSALS = ("STALE_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH")


class Member:
    """One consumer of the group on its own thread, committing every 50 records."""

    def __init__(self, bootstrap: str, name: str) -> None:
        self.events: list[str] = []
        self.commit_errors: list[str] = []
        self.values: set[int] = set()
        self.member_id = ""
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "client.id": name,
            "reconnect.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.subscribe(
            [TOPIC], on_assign=lambda _c, ps: self._event(f"assign {len(ps)}"),
            on_revoke=lambda _c, ps: self._event(f"revoke {len(ps)}"),
            on_lost=lambda _c, ps: self._event(f"lost {len(ps)}"))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _event(self, what: str) -> None:
        with self.lock:
            self.events.append(what)

    def owned(self) -> int:
        return len(self.consumer.assignment())

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            m = self.consumer.poll(0.2)
            if not self.member_id:
                self.member_id = self.consumer.memberid() or ""
            if m is None or m.error() is not None:
                continue
            n += 1
            with self.lock:
                self.values.add(int(m.value()))
            time.sleep(0.002)  # a consumer that works: the failover lands mid-stream
            if n % 50 == 0:
                try:
                    self.consumer.commit(asynchronous=False)
                except KafkaException as exc:
                    with self.lock:
                        self.commit_errors.append(str(exc))
        self.consumer.close()


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
        members = [Member(cluster.bootstrap, f"member-{i}") for i in range(3)]

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
        for m in members:
            m.stop.set()
        for m in members:
            m.thread.join(30)
        cluster.stop()
