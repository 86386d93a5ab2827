"""Racks (KIP-36) on real processes with real clients: four brokers started as
``cluster up --racks a,a,b,b`` does (brokers 1 and 2 in rack a, 3 and 4 in rack b, so plain
round-robin over broker ids would put both replicas of a partition in one rack).

* confluent-kafka's DescribeCluster and aiokafka's Metadata name every broker's rack;
* CreateTopics and CreatePartitions place each partition's two replicas in both racks, leaders
  two per broker;
* a restarted controller still knows the racks (its image replays the ``register_broker``
  records): a topic it creates afterwards is spread the same way.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import SESSION_TIMEOUT_MS, cluster_progress, wait_until

pytestmark = pytest.mark.integration

RACKS = {1: "a", 2: "a", 3: "b", 4: "b"}


def _replicas(admin: AdminClient, topic: str, partitions: int) -> dict[int, list[int]] | None:
    """Each partition's replicas, once Metadata lists them all (None before)."""
    md = admin.list_topics(topic, timeout=10).topics.get(topic)
    if md is None or md.error is not None or len(md.partitions) != partitions:
        return None
    return {p: list(pm.replicas) for p, pm in md.partitions.items()}


def _spread(cluster: LocalCluster, admin: AdminClient, topic: str, partitions: int) -> None:
    placed: dict[int, list[int]] = wait_until(
        lambda: _replicas(admin, topic, partitions), 20, f"{topic} in Metadata",
        progress=lambda: cluster_progress(cluster))
    for p, replicas in placed.items():
        assert sorted(RACKS[b] for b in replicas) == ["a", "b"], (p, replicas)
    leaders = Counter(replicas[0] for replicas in placed.values())
    assert sorted(leaders.values()) == [partitions // 4] * 4, leaders


def _metadata_racks(bootstrap: str) -> dict[int, Any]:
    """The brokers and racks of a Metadata answer, as aiokafka's client reads it."""
    from aiokafka.client import AIOKafkaClient

    async def ask() -> dict[int, Any]:
        client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        try:
            await client.bootstrap()
            return {b.nodeId: b.rack for b in client.cluster.brokers()}
        finally:
            await client.close()

    return asyncio.run(ask())


def test_racks_in_metadata_and_replicas_spread_over_them(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", 4, {"replica.lag.time.max.ms": "2000"},
                           {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)},
                           racks=["a", "a", "b", "b"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

        def described() -> dict[int, Any] | None:
            nodes = admin.describe_cluster(request_timeout=10).result(15).nodes
            found = {n.id: n.rack for n in nodes}
            return found if len(found) == len(RACKS) else None

        assert wait_until(described, 20, "every broker registered",
                          progress=lambda: cluster_progress(cluster)) == RACKS
        assert _metadata_racks(cluster.bootstrap) == RACKS

        admin.create_topics([NewTopic("spread", 8, 2)])["spread"].result(30)
        _spread(cluster, admin, "spread", 8)
        admin.create_partitions([NewPartitions("spread", 12)])["spread"].result(30)
        _spread(cluster, admin, "spread", 12)

        # The controller restarts: its image (replayed from the metadata log) keeps the racks.
        controller = cluster.controller_ids[0]
        cluster.kill(controller)
        cluster.wait_dead(controller)
        cluster.start_node(controller)
        wait_until(lambda: _created(admin, "after-restart"), 30, "CreateTopics answered",
                   progress=lambda: cluster_progress(cluster))
        _spread(cluster, admin, "after-restart", 4)
        assert _metadata_racks(cluster.bootstrap) == RACKS
    finally:
        cluster.stop()


def _created(admin: AdminClient, topic: str) -> bool:
    """CreateTopics once the restarted controller answers (True: created, or created by an
    earlier attempt whose answer was lost)."""
    try:
        admin.create_topics([NewTopic(topic, 4, 2)], request_timeout=10)[topic].result(15)
    except (KafkaException, TimeoutError) as exc:  # not answered yet: try again
        return "TOPIC_ALREADY_EXISTS" in str(exc)
    return True
