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
  each naming ~65 partitions and parked at the leader, are woken by an append to any of them;
* a broker killed and restarted leads nothing (no automatic rebalance): its partitions moved to
  fetchers for the new leaders, and the other brokers' fetchers for it, left empty, closed their
  connections (none from them to it), while it fetches from them over at most 4.
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
from tests.cluster.helpers import cluster_progress, replica_values, wait_until

pytestmark = pytest.mark.integration

TOPIC = "many"
PARTITIONS = 200
FETCHERS = 2
PER_PARTITION = 5
WAIT_MAX_MS = 3000
_PID = re.compile(r"pid=(\d+)")


def peer_connections(cluster: LocalCluster) -> dict[tuple[int, int], int]:
    """Established TCP connections from broker a to broker b's listener, by (a, b)."""
    ports = {int(cluster.address(b).rsplit(":", 1)[1]): b for b in cluster.broker_ids}
    pids = {cluster.pid(b): b for b in cluster.broker_ids}
    out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    counts = {(a, b): 0 for a in cluster.broker_ids for b in cluster.broker_ids if a != b}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        peer = ports.get(int(fields[3].rsplit(":", 1)[1]))
        owners = [pids[int(p)] for p in _PID.findall(line) if int(p) in pids]
        if peer is not None and owners and owners[0] != peer:
            counts[(owners[0], peer)] += 1
    return counts


def per_broker(counts: dict[tuple[int, int], int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for (a, _b), n in counts.items():
        out[a] = out.get(a, 0) + n
    return out


def test_connections_bounded_by_fetchers_not_partitions(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "c", 3,
        {"replica.lag.time.max.ms": "5000", "num.replica.fetchers": str(FETCHERS),
         "replica.fetch.wait.max.ms": str(WAIT_MAX_MS)},
        # Kafka's 9 s broker session: creating 200 partitions on a loaded machine can hold a
        # broker's heartbeats past LocalCluster's 1.5 s and the leaders then move about (a
        # killed broker is fenced at once anyway: its connection to the controller closes).
        {"broker.session.timeout.ms": "9000", "auto.leader.rebalance.enable": "false"},
        metrics=False).start()
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
        def bounded() -> dict[int, int] | None:
            c = per_broker(peer_connections(cluster))
            return c if all(len(cluster.broker_ids) - 1 <= n <= limit for n in c.values()) \
                else None

        counts = wait_until(bounded, 30, f"at most {limit} peer connections per broker")
        assert sum(counts.values()) <= len(cluster.broker_ids) * limit < PARTITIONS

        # Sequential acks=all writes, one per partition over several partitions (and so over
        # every fetcher): each completes when a parked follower Fetch is woken by the append,
        # not when its 3 s long poll runs out.
        count = 12
        took_ms = []
        for p in range(count):
            started = time.monotonic()
            producer.produce(TOPIC, value=b"late", partition=p * 7 % PARTITIONS,
                             on_delivery=delivered)
            assert producer.flush(60) == 0
            took_ms.append(round((time.monotonic() - started) * 1000))
        assert failed == []
        assert sum(took_ms) < count * WAIT_MAX_MS / 3, f"{count} acks=all writes took {took_ms} ms"

        # Broker 3 dies: its partitions' leaders move to 1 and 2, and their followers move to
        # the fetchers for the new leaders. Back, it leads nothing (no automatic rebalance), so
        # the fetchers of 1 and 2 for it are empty: stopped, their connections closed.
        victim = cluster.broker_ids[-1]
        cluster.kill(victim)
        cluster.wait_dead(victim)

        def moved() -> bool:
            st = cluster.controller_status() or {}
            regs = st.get("topics", {}).get(TOPIC, {}).values()
            return len(regs) == PARTITIONS and all(
                r["leader"] > 0 and r["leader"] != victim for r in regs)

        wait_until(moved, 60, "leaders off the killed broker",
                   progress=lambda: cluster_progress(cluster))
        cluster.start_node(victim)

        def rejoined() -> bool:
            return all(len(replica_values(cluster, victim, TOPIC, p)) >= PER_PARTITION
                       for p in range(PARTITIONS))

        wait_until(rejoined, 60, "the restarted broker caught up",
                   progress=lambda: cluster_progress(cluster))
        others = [b for b in cluster.broker_ids if b != victim]
        def settled() -> dict[tuple[int, int], int] | None:
            c = peer_connections(cluster)
            if any(c[(b, victim)] for b in others):
                return None
            return c if 1 <= sum(c[(victim, b)] for b in others) <= limit else None

        conns = wait_until(settled, 30, "no fetcher connection to a broker that leads nothing")
        assert sum(conns[(victim, b)] for b in others) <= limit
        for p in range(0, PARTITIONS, 17):  # and acks=all still completes everywhere
            producer.produce(TOPIC, value=b"after", partition=p, on_delivery=delivered)
        assert producer.flush(60) == 0
        assert failed == []
    finally:
        cluster.stop()

