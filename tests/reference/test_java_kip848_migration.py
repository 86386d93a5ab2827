"""KIP-848's online migration with Kafka's own Java consumer (kafka-clients 4.1.1, the reference
implementation of both group protocols) on floodmark: members are
``tests/reference/clients/GroupConsumer.java`` (one JVM each, compiled once per module), on one
6-partition topic, committing synchronously after each poll.

1. Upgrade and downgrade: two ``group.protocol=classic`` members; one is stopped and started
   again with ``group.protocol=consumer`` (its ConsumerGroupHeartbeat converts the classic group,
   the other member stays as a classic member of the consumer group); then it leaves, and the
   group is a classic group again whose member takes every partition.
2. A mixed group (one classic, one consumer-protocol member) through a SIGKILL of the broker
   coordinating it (3 brokers): both members go on with their assignments (no rebalance
   callback at all: the new coordinator loads the group's records), then the consumer-protocol
   member leaves and the new coordinator downgrades the group.

Checked throughout, from what the parts say: every produced record is delivered (none lost;
at-least-once), no partition is owned by two members at once (the members' own
ConsumerRebalanceListener callbacks, by their clocks), a member never moves backwards within
one ownership of a partition, and the group's committed offsets (OffsetFetch) never move
backwards, read at every wait, and end at the log end. Waits fail only when progress stops.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cli.group_offsets import committed_offsets
from floodmark.client.cluster import ClusterClient
from floodmark.cluster import LocalCluster
from tests.cluster.helpers import start_cluster, wait_progress
from tests.reference.java_group import (
    Member,
    backwards,
    compile_group_consumer,
    overlaps,
    produce,
    wait_consumed,
)

# one worker runs the module's tests (``--dist loadgroup``), so they share one javac
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("java_kip848_migration")]

TOPIC, PARTITIONS = "java-migrate", 6
STALL_S = 60.0
# The consumer-protocol member's heartbeat and session are the broker's to say: reconciliation
# in a few heartbeats; a session shorter than Kafka's 45 s, because a leave heartbeat that fails
# while the coordinator moves is not retried by the Java consumer (it completes the leave), so
# the group keeps the member for its session timeout before downgrading (seen when the restarted
# broker's __consumer_offsets leadership moved again just as the member left, machine loaded)
BROKER_SETTINGS = {"group.consumer.heartbeat.interval.ms": "500",
                   "group.consumer.min.session.timeout.ms": "15000",
                   "group.consumer.session.timeout.ms": "15000"}
COORDINATOR_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                      KafkaError.COORDINATOR_NOT_AVAILABLE}


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_group_consumer(tmp_path_factory.mktemp("java-classes"))


class Group:
    """The group as its coordinator tells it: type and members (ConsumerGroupDescribe or
    DescribeGroups, by librdkafka's admin client), committed offsets (OffsetFetch; each read
    checked against the last: committed offsets never move backwards)."""

    def __init__(self, cluster: LocalCluster, group_id: str) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        self.offsets: dict[int, int] = {}

    def _ask(self, call: Callable[[], Any]) -> Any:
        """``call()``, asked again while the group's coordinator moves (a restarted broker
        takes its ``__consumer_offsets`` partitions back: the one asked answers NOT_COORDINATOR,
        which librdkafka's admin client hands back instead of finding the new one)."""
        deadline = time.monotonic() + STALL_S
        while True:
            try:
                return call()
            except KafkaException as exc:
                if (exc.args[0].code() not in COORDINATOR_MOVING
                        or time.monotonic() > deadline):
                    raise
            time.sleep(0.2)

    def _describe(self) -> Any:
        return self._ask(lambda: self.admin.describe_consumer_groups(
            [self.group_id])[self.group_id].result(30))

    def kind(self) -> str:
        """classic or consumer."""
        return str(self._describe().type.name).lower()

    def client_ids(self) -> list[str]:
        return sorted(m.client_id for m in self._describe().members)

    def committed(self) -> dict[int, int]:
        # floodmark's own client (OffsetFetch v7 to the coordinator it finds, following a move):
        # librdkafka's ListConsumerGroupOffsets dereferences a NULL consumer group on
        # NOT_COORDINATOR and crashes the process (confluentinc/librdkafka#5040; seen here in
        # confluent-kafka 2.16 when the restarted broker takes the group back)
        with ClusterClient(self.cluster.bootstrap) as client:
            got = committed_offsets(client, self.group_id)
        now = {p: o for (t, p), o in got.items() if t == TOPIC}
        moved_back = {p: (self.offsets[p], o) for p, o in now.items()
                      if o < self.offsets.get(p, -1)}
        assert not moved_back, f"committed offsets moved backwards: {moved_back}"
        assert now.keys() >= self.offsets.keys(), (self.offsets, now)
        self.offsets = now
        return now

    def coordinator(self) -> int:
        with ClusterClient(self.cluster.bootstrap) as client:
            return client.coordinator(self.group_id)


def _progress(group: Group, members: list[Member]) -> object:
    return (group.committed(), [sorted(m.assigned()) for m in members],
            [len(m.lines) for m in members])


def _shared(members: list[Member]) -> bool:
    """Every member owns partitions, every partition is owned once."""
    owned = [m.assigned() for m in members]
    return (all(owned) and sum(map(len, owned)) == PARTITIONS
            and set().union(*owned) == set(range(PARTITIONS)))


def _check_deliveries(everyone: list[Member], group: Group, total: int) -> None:
    delivered = {r for m in everyone for r in m.records()}
    ends = {p: 1 + max((o for q, o in delivered if q == p), default=-1)
            for p in range(PARTITIONS)}
    assert sum(ends.values()) == total, ends
    missing = [(p, o) for p in range(PARTITIONS) for o in range(ends[p])
               if (p, o) not in delivered]
    assert not missing, f"{len(missing)} records never delivered: {missing[:10]}"
    assert not overlaps(everyone), overlaps(everyone)[:5]
    assert not backwards(everyone), backwards(everyone)[:5]
    wait_progress(lambda: group.committed() == ends, lambda: group.offsets, STALL_S,
                  "the group's commits at the log end")


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.stop()


def test_java_classic_group_upgrades_and_downgrades(tmp_path: Path, classpath: str,
                                                    members: list[Member]) -> None:
    cluster = start_cluster(tmp_path / "cluster", 1, broker_settings=BROKER_SETTINGS)
    try:
        group = Group(cluster, "java-migrate-up")
        group.admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)

        def member(protocol: str, name: str) -> Member:
            m = Member(classpath, cluster.bootstrap, group.group_id, TOPIC, protocol, name,
                       tmp_path / f"{name}.log")
            members.append(m)
            return m

        produce(cluster.bootstrap, TOPIC, 0, 1200)
        m1, m2 = member("classic", "m1"), member("classic", "m2")
        wait_consumed(members, 1200)
        wait_progress(lambda: _shared([m1, m2]), lambda: _progress(group, members), STALL_S,
                      "two classic members share the partitions")
        assert group.kind() == "classic"

        # m2 comes back speaking the consumer protocol: the group converts
        m2.stop()
        wait_progress(lambda: m1.assigned() == set(range(PARTITIONS)),
                      lambda: _progress(group, members), STALL_S, "m1 owns every partition")
        m3 = member("consumer", "m3")
        wait_progress(lambda: _shared([m1, m3]), lambda: _progress(group, members), STALL_S,
                      "the classic and the consumer-protocol member share the partitions")
        assert group.kind() == "consumer"
        assert group.client_ids() == ["m1", "m3"]
        produce(cluster.bootstrap, TOPIC, 1200, 1200)
        wait_consumed(members, 2400)
        group.committed()

        # the last consumer-protocol member leaves: the group is a classic group again
        m3.stop()
        wait_progress(lambda: group.kind() == "classic"
                      and m1.assigned() == set(range(PARTITIONS)),
                      lambda: _progress(group, members), STALL_S,
                      "a classic group again, m1 owning every partition")
        produce(cluster.bootstrap, TOPIC, 2400, 600)
        wait_consumed(members, 3000)
        assert not m1.errors(), m1.errors()[:3]
        _check_deliveries(members, group, 3000)
        assert not [c for m in members for c in m.callbacks() if c.kind == "LOST"]
    finally:
        cluster.stop()


def test_java_mixed_group_through_a_coordinator_sigkill(tmp_path: Path, classpath: str,
                                                        members: list[Member]) -> None:
    cluster = start_cluster(tmp_path / "cluster", broker_settings=BROKER_SETTINGS)
    try:
        group = Group(cluster, "java-migrate-failover")
        group.admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(60)
        classic = Member(classpath, cluster.bootstrap, group.group_id, TOPIC, "classic",
                         "classic", tmp_path / "classic.log")
        members.append(classic)
        produce(cluster.bootstrap, TOPIC, 0, 1500)
        wait_progress(lambda: classic.assigned() == set(range(PARTITIONS)),
                      lambda: _progress(group, members), STALL_S,
                      "the classic member owns every partition")
        modern = Member(classpath, cluster.bootstrap, group.group_id, TOPIC, "consumer",
                        "consumer", tmp_path / "consumer.log")
        members.append(modern)
        wait_progress(lambda: _shared(members), lambda: _progress(group, members), STALL_S,
                      "the upgraded group shares the partitions")
        assert group.kind() == "consumer"
        wait_consumed(members, 1500)
        before = group.committed()
        callbacks = [m.callbacks() for m in members]

        victim = group.coordinator()
        cluster.kill(victim)
        produce(cluster.bootstrap, TOPIC, 1500, 1500)
        cluster.start_node(victim)
        wait_consumed(members, 3000)
        # The restarted broker takes its __consumer_offsets partitions back (preferred leader
        # election): wait for that second move, then for both members' commits of more records
        # (a commit goes to the coordinator the member knows), before a member leaves, so that
        # its leave most likely reaches the coordinator (see BROKER_SETTINGS when it does not).
        wait_progress(lambda: group.coordinator() == victim,
                      lambda: _progress(group, members), STALL_S,
                      "the restarted broker coordinates the group again")
        produce(cluster.bootstrap, TOPIC, 3000, 120)
        wait_consumed(members, 3120)
        wait_progress(lambda: sum(group.committed().values()) == 3120,
                      lambda: _progress(group, members), STALL_S, "all 3120 records committed")
        # the new coordinator went on with the group: nothing revoked, lost or reassigned
        assert [m.callbacks() for m in members] == callbacks, [m.lines[-10:] for m in members]
        assert group.kind() == "consumer"
        assert group.client_ids() == ["classic", "consumer"]
        assert all(group.committed()[p] >= before[p] for p in before)

        # the consumer-protocol member leaves: the new coordinator downgrades the group
        modern.stop()
        wait_progress(lambda: group.kind() == "classic"
                      and classic.assigned() == set(range(PARTITIONS)),
                      lambda: _progress(group, members), STALL_S,
                      "a classic group again, its member owning every partition")
        produce(cluster.bootstrap, TOPIC, 3120, 600)
        wait_consumed(members, 3720)
        _check_deliveries(members, group, 3720)
        assert not [c for m in members for c in m.callbacks() if c.kind == "LOST"]
    finally:
        cluster.stop()
