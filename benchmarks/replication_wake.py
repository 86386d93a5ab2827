"""Does an acks=all produce wake the follower fetches parked on the leader *after* its append?

A follower's fetch that finds nothing new parks on the leader for up to 500 ms
(``REPLICA_MAX_WAIT_MS``); the leader's append wakes it (the core's ``WakeFollowerFetches``
effect, applied right after the append by the partition's driver).
A wake sent before the append is in the log is missed: the follower sees nothing, parks again,
and the acks=all answer waits out the rest of the 500 ms. Produce appends in two ways:

- at once, in the handler;
- after an await: a transaction's first batch on a partition is verified with the transaction
  coordinator first (KIP-890, ``data._verify_then_produce``), and only then appended (when the
  coordinator is another broker, the leader's event loop runs other tasks meanwhile: woken
  fetches too).

Both end in ``produce_as_leader``, whose effects wake the followers right after the append. (Before, a
wrapper around the Produce handler woke them when the handler returned: before the append on
the second path, which therefore needed a second, remembered wake.)

This script times both on a real 3-broker cluster (RF=3, min.insync.replicas=3, acks=all,
confluent-kafka): ``--transactions`` transactions of ``--per-txn`` single-record produces
(each flushed), one at a time, to a partition whose leader is not the transaction's
coordinator. The first produce of each transaction takes the verified path; the others the
direct one. A missed wake shows as a latency near 500 ms.

    .venv/bin/python benchmarks/replication_wake.py [--transactions 40] [--per-txn 4]

Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from floodmark.client.connection import KafkaConnection
from floodmark.cluster import LocalCluster


def _coordinator(bootstrap: str, txn_id: str) -> int:
    """The broker FindCoordinator names for ``txn_id`` (-1: none yet)."""
    with KafkaConnection(bootstrap.split(",")[0]) as conn:
        resp = conn.request(10, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
    c = resp.coordinators[0]
    return int(c.node_id) if int(c.error_code) == 0 else -1


def _wait_coordinator(bootstrap: str, txn_id: str) -> int:
    for _ in range(600):
        coordinator = _coordinator(bootstrap, txn_id)
        if coordinator > 0:
            return coordinator
        time.sleep(0.1)
    raise SystemExit(f"no coordinator for {txn_id}")


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return (f"p50 {statistics.median(ordered):6.1f} ms  p90 {p90:6.1f} ms  "
            f"max {ordered[-1]:6.1f} ms  (n={len(ordered)})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--transactions", type=int, default=40)
    p.add_argument("--per-txn", type=int, default=4)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tidy-wake-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", 3).start()
        try:
            txn_id = "tidy-wake"
            coordinator = _wait_coordinator(cluster.bootstrap, txn_id)
            # The partition's leader (first replica) is another broker than the coordinator,
            # so the leader's KIP-890 check is a network round trip, during which its event
            # loop runs whatever fetches were woken.
            replicas = [b for b in cluster.broker_ids if b != coordinator] + [coordinator]
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
            admin.create_topics([NewTopic("wake", -1, -1, replica_assignments={0: replicas},
                                          topic_configs={"min.insync.replicas": "3"})])
            admin.close()
            print(f"partition leader: broker {replicas[0]}; coordinator of {txn_id}: broker "
                  f"{coordinator}")
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "transactional.id": txn_id, "linger.ms": 0,
                                 "log_level": 0})
            producer.init_transactions(60)
            first: list[float] = []
            later: list[float] = []
            for t in range(args.transactions):
                producer.begin_transaction()
                for i in range(args.per_txn):
                    start = time.perf_counter()
                    producer.produce("wake", b"v%d-%d" % (t, i), partition=0)
                    producer.flush(30)
                    (first if i == 0 else later).append((time.perf_counter() - start) * 1000)
                producer.commit_transaction(60)
            producer.flush(30)
            del producer  # closed before the cluster stops (no reconnect noise)
            print(f"first produce of a transaction (verified, then appended): {_ms(first)}")
            print(f"later produces in it (appended at once):                  {_ms(later)}")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
