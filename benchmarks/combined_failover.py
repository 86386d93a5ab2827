"""Losing the active controller and a partition leader at once: combined nodes vs controllers of
their own, side by side in one run (issue 11, "combined mode keeps working").

* ``combined``: 3 nodes with ``process.roles=broker,controller`` (``LocalCluster(combined=True)``);
  one SIGKILL takes the node that is the active controller and the partition's leader.
* ``separate``: 3 controller processes (one quorum) and 3 brokers; the active controller and the
  partition's leader are SIGKILLed together (two processes).

Each run creates an RF=3 topic (min.insync.replicas=2) whose preferred leader is the victim,
writes with an idempotent acks=all confluent-kafka producer, kills, and times from the kill:
``elected`` (a new active controller answers DescribeQuorum), ``leader`` (the controller's
registration names a new partition leader), ``client`` (the first acks=all write sent after the
kill is acknowledged) and ``create`` (the first CreateTopics through a broker succeeds, RF=2).
Then the victims restart and the cluster heals before the next run.

    .venv/bin/python benchmarks/combined_failover.py [--runs 3] [--session-timeout-ms 2000]

Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # controller_failover's pieces

from controller_failover import _ms, _quorum_caught_up, failover_producer, first_ack

from floodmark.cluster import LocalCluster

POLL_S = 0.005
LIMIT_S = 60.0
QUORUM = {"controller.quorum.election.timeout.ms": "500",
          "controller.quorum.fetch.timeout.ms": "1000",
          "auto.leader.rebalance.enable": "false"}


def _wait(pred: Any, what: str) -> Any:
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


def _healed(cluster: LocalCluster, topic: str) -> bool:
    reg = cluster.partition_registration(topic)
    return bool(reg and sorted(reg["isr"]) == cluster.broker_ids and reg["leader"] > 0)


def failover_once(cluster: LocalCluster, run: int) -> dict[str, float]:
    active = cluster.wait_active_controller(LIMIT_S)
    brokers = cluster.broker_ids
    first = active if active in brokers else brokers[run % len(brokers)]
    topic = f"dbl-{run}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[
        [first, *(b for b in brokers if b != first)]], config={"min.insync.replicas": "2"})]
                        )[topic].result(LIMIT_S)
    _wait(lambda: _healed(cluster, topic) and cluster.leader_of(topic) == first, "topic ready")
    acked: list[float] = []
    p, cb = failover_producer(cluster.bootstrap, topic, acked)
    victims = sorted({active, first})
    clocks: dict[str, float] = {}
    t_kill = time.perf_counter()
    for v in victims:
        cluster.kill(v, signal.SIGKILL)

    def watch() -> None:
        deadline = time.monotonic() + LIMIT_S
        while time.monotonic() < deadline and not {"elected", "leader"} <= set(clocks):
            if "elected" not in clocks:
                found = cluster.active_controller(timeout_s=0.5)
                if found is not None and found != active:
                    clocks["elected"] = time.perf_counter()
            elif "leader" not in clocks:
                leader = cluster.leader_of(topic)
                if leader not in (first, -1):
                    clocks["leader"] = time.perf_counter()
            time.sleep(POLL_S)

    def create() -> None:
        deadline = time.monotonic() + LIMIT_S
        attempt = 0
        while time.monotonic() < deadline:
            attempt += 1
            name = f"after-{run}-{attempt}"
            # A fresh client each attempt: librdkafka keeps the controller_id of its first
            # Metadata answer (a random live broker, KIP-590), and one that names the victim
            # before it is fenced leaves every later attempt "waiting for controller".
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
            try:
                admin.create_topics([NewTopic(name, 1, 2)], request_timeout=3)[name].result(5)
                clocks["create"] = time.perf_counter()
                return
            except Exception as exc:
                clocks.setdefault("create_errors", 0.0)
                clocks["create_errors"] += 1
                errors.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.01)

    errors: list[str] = []
    threads = [threading.Thread(target=f, daemon=True) for f in (watch, create)]
    for t in threads:
        t.start()
    client = first_ack(p, cb, topic, acked, LIMIT_S)
    if client is not None:
        clocks["client"] = client
    for t in threads:
        t.join(LIMIT_S)
    for v in victims:
        cluster.start_node(v)
    p.flush(30)
    _wait(lambda: _quorum_caught_up(cluster) and _healed(cluster, topic), "healed")
    if "create" not in clocks:
        print(f"run {run}: no CreateTopics succeeded: {errors[-1:]}", file=sys.stderr)
    return {k: v if k == "create_errors" else v - t_kill for k, v in clocks.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--session-timeout-ms", type=int, default=2000)
    args = ap.parse_args()
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="combined-failover-") as tmp:
        for mode in ("combined", "separate"):
            cluster = LocalCluster(
                Path(tmp) / mode, 3, {"replica.lag.time.max.ms": "2000"},
                {**QUORUM, "broker.session.timeout.ms": str(args.session_timeout_ms)},
                metrics=False, controllers=3, combined=mode == "combined").start()
            try:
                _wait(lambda c=cluster: all(n.get("fenced") is False
                                            for n in c.status()["nodes"]
                                            if n["role"] != "controller"), "brokers registered")
                results[mode] = [failover_once(cluster, r) for r in range(args.runs)]
            finally:
                cluster.stop()
    print(f"SIGKILL of the active controller and the partition leader (combined: one node; "
          f"separate: two processes); RF=3, min.insync.replicas=2, "
          f"broker.session.timeout.ms={args.session_timeout_ms}, runs={args.runs}")
    for key in ("elected", "leader", "client", "create"):
        for mode, runs in results.items():
            values = [r[key] for r in runs if key in r]
            if values:
                print(f"  {key:<8} {mode:<9} {_ms(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
