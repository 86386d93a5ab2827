"""Kafka's own Java consumer (kafka-clients 4.1.1, the reference implementation of both group
protocols) in a group on a 3-broker floodmark cluster: ``group.protocol=consumer`` (KIP-848,
ConsumerGroupHeartbeat) and ``classic`` (JoinGroup/SyncGroup).

Two members (``tests/reference/clients/GroupConsumer.java``, compiled by the test) share a
6-partition topic, committing synchronously after each poll. The broker that coordinates the
group is SIGKILLed while records keep coming, then started again; later one member leaves and the
other takes every partition. Checked:

- every record is delivered (each partition's offsets 0..end-1 all seen: nothing skipped);
- a member never moves backwards within one assignment of a partition (its offsets there
  strictly increase);
- a record is delivered twice only at a hand-over (at most one poll's worth per partition and
  hand-over: the records after the last commit);
- the group's committed offsets end at the log end of every partition.

Waits fail only when consumption stops. On demand (two JVMs per protocol):
``./dev test-slow tests/reference/test_java_consumer_groups_on_floodmark.py``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.cluster import ClusterClient
from floodmark.cluster import LocalCluster
from tests.cluster.helpers import start_cluster
from tests.reference.java_group import (
    MAX_POLL_RECORDS,
    Member,
    backwards,
    compile_group_consumer,
    produce,
    wait_consumed,
)

pytestmark = [pytest.mark.slow, pytest.mark.integration]

TOPIC, PARTITIONS = "java-group", 6


def _coordinator(cluster: LocalCluster, group: str) -> int:
    with ClusterClient(cluster.bootstrap) as client:
        return client.coordinator(group)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_java_consumers_share_a_topic_through_a_coordinator_sigkill(tmp_path: Path,
                                                                    protocol: str) -> None:
    classpath = compile_group_consumer(tmp_path / "classes")
    cluster = start_cluster(tmp_path / "cluster")
    group = f"java-{protocol}"
    members: list[Member] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(60)
        produce(cluster.bootstrap, TOPIC, 0, 1500)
        members = [Member(classpath, cluster.bootstrap, group, TOPIC, protocol, f"m{i}",
                          tmp_path / f"m{i}.log") for i in (1, 2)]
        wait_consumed(members, 1500)
        both_own = [m.assigned() for m in members]
        assert set().union(*both_own) == set(range(PARTITIONS)), both_own

        victim = _coordinator(cluster, group)
        cluster.kill(victim)
        produce(cluster.bootstrap, TOPIC, 1500, 1500)
        cluster.start_node(victim)
        wait_consumed(members, 3000)

        members[0].stop()
        produce(cluster.bootstrap, TOPIC, 3000, 1000)
        wait_consumed(members, 4000)
        assert members[1].assigned() == set(range(PARTITIONS)), members[1].lines[-10:]
        members[1].stop()

        # Nothing skipped: every partition's offsets 0..end-1 were delivered.
        delivered = Counter(r for m in members for r in m.records())
        ends = {p: 1 + max(o for (q, o) in delivered if q == p) for p in range(PARTITIONS)}
        assert sum(ends.values()) == 4000
        for p in range(PARTITIONS):
            missing = [o for o in range(ends[p]) if (p, o) not in delivered]
            assert not missing, (p, missing[:10])
        # Never backwards within one assignment.
        assert not backwards(members), backwards(members)[:5]
        # Twice only at a hand-over, and at most one poll's worth.
        doubles = sum(n - 1 for n in delivered.values() if n > 1)
        handovers = sum(1 for m in members for line in m.lines
                        if line.startswith(("REVOKED", "LOST"))) + 1
        assert doubles <= handovers * MAX_POLL_RECORDS, (doubles, handovers)
        # The group's commits end at the log end.
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        committed = admin.list_consumer_group_offsets([request])[group].result(30)
        assert {tp.partition: tp.offset for tp in committed.topic_partitions} == ends
    finally:
        for m in members:
            m.stop()
        cluster.stop()

