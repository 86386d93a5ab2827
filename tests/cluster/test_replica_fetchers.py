"""Replica fetchers on real processes: the connections between brokers grow with brokers and
``num.replica.fetchers``, not with partitions (Kafka's one Fetch per fetcher for all its
partitions), and replication still works through them.

* 3 brokers, 200 partitions RF=3, ``num.replica.fetchers=2``: each broker's established TCP
  connections to the other brokers' listeners (``ss -tnp``, by the broker's pid) are at most
  2 leaders x 2 fetchers = 4 (one connection per partition followed would be ~133);
* an acks=all producer writes to every partition and every write is acknowledged; every
  replica's segment files then hold every partition's records (the followers caught up);
* with ``replica.fetch.wait.max.ms`` at 3 s, sequential acks=all writes to partitions spread
  over the fetchers complete far faster than one long poll each: the followers' Fetch requests,
  each naming ~65 partitions and parked at the leader, are woken by an append to any of them.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import SESSION_TIMEOUT_MS, cluster_progress, replica_values, wait_until

pytestmark = pytest.mark.integration

TOPIC = "many"
PARTITIONS = 200
FETCHERS = 2
PER_PARTITION = 5
WAIT_MAX_MS = 3000
_PID = re.compile(r"pid=(\d+)")


def peer_connections(cluster: LocalCluster) -> dict[int, int]:
    """Each broker's established TCP connections to another broker's listener."""
    ports = {int(cluster.address(b).rsplit(":", 1)[1]): b for b in cluster.broker_ids}
    pids = {cluster.pid(b): b for b in cluster.broker_ids}
    out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    counts = dict.fromkeys(cluster.broker_ids, 0)
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        peer_port = int(fields[3].rsplit(":", 1)[1])
        owner = {int(p) for p in _PID.findall(line)} & set(pids)
        if peer_port in ports and owner:
            node = pids[next(iter(owner))]
            if ports[peer_port] != node:
                counts[node] += 1
    return counts


def test_connections_bounded_by_fetchers_not_partitions(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "c", 3,
        {"replica.lag.time.max.ms": "5000", "num.replica.fetchers": str(FETCHERS),
         "replica.fetch.wait.max.ms": str(WAIT_MAX_MS)},
        {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
         "auto.leader.rebalance.enable": "false"}, metrics=False).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(60)

        def all_led() -> bool:
            st = cluster.controller_status()
            regs = (st or {}).get("topics", {}).get(TOPIC, {})
            return len(regs) == PARTITIONS and all(r["leader"] > 0 for r in regs.values())

        wait_until(all_led, 60, "every partition led", progress=lambda: cluster_progress(cluster))

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5})
        failed: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(str(err))

        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(TOPIC, value=b"%d-%d" % (p, i), partition=p,
                                 on_delivery=delivered)
        assert producer.flush(120) == 0
        assert failed == []

        # Every follower caught up: each replica's files hold each partition's records.
        def caught_up() -> bool:
            return all(len(replica_values(cluster, b, TOPIC, p)) == PER_PARTITION
                       for b in cluster.broker_ids for p in range(PARTITIONS))

        wait_until(caught_up, 60, "every replica caught up",
                   progress=lambda: cluster_progress(cluster))

        # At most (brokers - 1) leaders x num.replica.fetchers connections from each broker;
        # at least one to each other broker (each leads a share of the partitions).
        limit = (len(cluster.broker_ids) - 1) * FETCHERS
        counts = wait_until(
            lambda: (c if all(len(cluster.broker_ids) - 1 <= n <= limit for n in c.values())
                     else None) if (c := peer_connections(cluster)) else None,
            30, f"at most {limit} peer connections per broker")
        assert sum(counts.values()) <= len(cluster.broker_ids) * limit < PARTITIONS

        # Sequential acks=all writes, one per partition over several partitions (and so over
        # every fetcher): each completes when a parked follower Fetch is woken by the append,
        # not when its 3 s long poll runs out.
        count = 12
        started = time.monotonic()
        for p in range(count):
            producer.produce(TOPIC, value=b"late", partition=p * 7 % PARTITIONS,
                             on_delivery=delivered)
            assert producer.flush(60) == 0
        took_s = time.monotonic() - started
        assert failed == []
        assert took_s < count * WAIT_MAX_MS / 1000 / 3, f"{count} acks=all writes took {took_s}"
    finally:
        cluster.stop()

