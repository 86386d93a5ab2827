"""Failover figures on a local cluster with a controller quorum (issue 11's benchmarks).

Starts ``LocalCluster`` with 3 controllers (one KRaft-style quorum) and 3 brokers, an RF=3 topic
with min.insync.replicas=2, and measures, ``--runs`` times each:

1. controller failover: SIGKILL the active controller -> a new one is active (DescribeQuorum)
   -> the first successful CreateTopics (confluent-kafka AdminClient through a broker);
2. partition-leader failover on SIGKILL, with where the time goes. After the kill, four clocks:
   ``fenced``   the controller's registration names a new leader (controller ``status``);
   ``applied``  the new leader's own Metadata answer names itself (it applied the record);
   ``raw``      a raw acks=all Produce sent straight to the new leader is acknowledged
                (floodmark's KafkaConnection, no client metadata logic: the server side is ready,
                i.e. the other ISR member fetched from the new leader and moved its HW);
   ``client``   confluent-kafka (acks=all, idempotent) acknowledges its first write sent after
                the kill (what an application sees).
   ``client - raw`` is the client's own share (metadata refresh, backoffs);
3. partition-leader failover on SIGSTOP: the same four clocks; the session timeout is the floor.

    .venv/bin/python benchmarks/controller_failover.py [--runs 5] [--session-timeout-ms 2000]

Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from floodmark.client.connection import KafkaConnection
from floodmark.cluster import LocalCluster
from floodmark.records import Record, build_batch

TOPIC = "fo"
POLL_S = 0.005


def _wait(pred: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


def _healed(cluster: LocalCluster) -> bool:
    reg = cluster.partition_registration(TOPIC)
    return bool(reg and sorted(reg["isr"]) == cluster.broker_ids and reg["leader"] > 0)


def _quorum_caught_up(cluster: LocalCluster) -> bool:
    q = cluster.quorum()
    return q["leader_id"] is not None and all(
        v["lag"] == 0 for v in q["voters"] if v.get("state") == "running")


# -- 1. controller failover -------------------------------------------------------------------
def controller_failover_once(cluster: LocalCluster, run: int) -> tuple[float, float]:
    active = cluster.wait_active_controller(30)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    t_kill = time.perf_counter()
    cluster.kill(active, signal.SIGKILL)
    elected: list[float] = []

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = cluster.active_controller(timeout_s=0.5)
            if found is not None and found != active:
                elected.append(time.perf_counter())
                return
            time.sleep(POLL_S)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    created = None
    attempt = 0
    deadline = time.monotonic() + 60
    while created is None and time.monotonic() < deadline:
        attempt += 1
        name = f"cf-{run}-{attempt}"
        try:
            admin.create_topics([NewTopic(name, 1, 3)], request_timeout=3)[name].result(5)
            created = time.perf_counter()
        except Exception:
            time.sleep(0.01)
    watcher.join(60)
    if created is None or not elected:
        raise RuntimeError("no new active controller / no CreateTopics succeeded")
    cluster.start_node(active)
    _wait(lambda: _quorum_caught_up(cluster), 60, "quorum caught up")
    return elected[0] - t_kill, created - t_kill


# -- 2./3. partition-leader failover -------------------------------------------------------------
def _metadata_leader(address: str) -> tuple[int, int] | None:
    try:
        with KafkaConnection(address, timeout_s=1.0) as conn:
            md = conn.request(3, 9, {"topics": [{"name": TOPIC}],
                                     "allow_auto_topic_creation": False})
    except Exception:
        return None
    part = md.topics[0].partitions[0]
    return int(part.leader_id), int(part.leader_epoch)


def _raw_produce(address: str) -> bool:
    batch = build_batch([Record(0, int(time.time() * 1000), None, b"raw")])
    try:
        with KafkaConnection(address, timeout_s=3.0) as conn:
            resp = conn.request(0, 7, {
                "transactional_id": None, "acks": -1, "timeout": 2000,
                "topic_data": [{"name": TOPIC, "partition_data": [
                    {"index": 0, "records": batch}]}]})
    except Exception:
        return False
    return all(int(p.error_code) == 0 for t in resp.responses for p in t.partition_responses)


def failover_producer(bootstrap: str, topic: str, acked: list[float]
                      ) -> tuple[Producer, Callable[[object, object], None]]:
    """An idempotent acks=all producer tuned to find a new leader quickly, warmed up with 20
    acknowledged writes to partition 0; its delivery callback appends the time of each
    acknowledgement to ``acked``."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 0, "request.timeout.ms": 4000,
                  "socket.timeout.ms": 4000, "message.timeout.ms": 60000,
                  "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100,
                  "retry.backoff.ms": 20, "topic.metadata.refresh.interval.ms": 500,
                  "log_level": 0})

    def cb(err: object, _msg: object) -> None:
        if err is None:
            acked.append(time.perf_counter())

    for i in range(20):
        p.produce(topic, value=b"w%d" % i, partition=0, on_delivery=cb)
        p.flush(30)
    return p, cb


def first_ack(p: Producer, cb: Callable[[object, object], None], topic: str,
              acked: list[float], limit_s: float = 60.0) -> float | None:
    """Write one value at a time until one sent now is acknowledged: its time (None if none
    within ``limit_s``)."""
    acked.clear()
    i = 0
    deadline = time.monotonic() + limit_s
    while not acked and time.monotonic() < deadline:
        sent = time.perf_counter()
        p.produce(topic, value=b"f%d" % i, partition=0, on_delivery=cb)
        i += 1
        while p.flush(0.01) and not acked and time.monotonic() < deadline:
            pass
        if acked and acked[0] < sent:
            acked.clear()
    return acked[0] if acked else None


def leader_failover_once(cluster: LocalCluster, sig: signal.Signals) -> dict[str, float]:
    acked: list[float] = []
    p, cb = failover_producer(cluster.bootstrap, TOPIC, acked)
    reg = cluster.partition_registration(TOPIC)
    assert reg is not None
    leader, epoch = int(reg["leader"]), int(reg["leader_epoch"])
    clocks: dict[str, float] = {}
    t_kill = time.perf_counter()
    cluster.kill(leader, sig)
    stop = threading.Event()

    def watch() -> None:
        new = -1
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            now = time.perf_counter()
            if "fenced" not in clocks:
                r = cluster.partition_registration(TOPIC)
                if r and int(r["leader"]) not in (leader, -1):
                    clocks["fenced"] = now
                    new = int(r["leader"])
            elif "applied" not in clocks:
                md = _metadata_leader(cluster.address(new))
                if md and md[0] == new and md[1] > epoch:
                    clocks["applied"] = time.perf_counter()
            elif "raw" not in clocks:
                if _raw_produce(cluster.address(new)):
                    clocks["raw"] = time.perf_counter()
            else:
                return
            time.sleep(POLL_S)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    client = first_ack(p, cb, TOPIC, acked)
    if client is not None:
        clocks["client"] = client
    watcher.join(60)
    stop.set()
    if sig == signal.SIGSTOP:
        cluster.kill(leader, signal.SIGCONT)
    else:
        cluster.start_node(leader)
    p.flush(30)
    _wait(lambda: _healed(cluster), 60, "healed ISR")
    return {k: v - t_kill for k, v in clocks.items()}


def _ms(values: list[float]) -> str:
    return (f"median {statistics.median(values) * 1000:.0f} ms "
            f"[{', '.join(f'{v * 1000:.0f}' for v in values)}]")


def _report(name: str, runs: list[dict[str, float]]) -> None:
    print(name)
    for key in ("fenced", "applied", "raw", "client"):
        values = [r[key] for r in runs if key in r]
        if values:
            print(f"  {key:<8} {_ms(values)}")
    shares = [("controller elects (kill -> fenced)", None, "fenced"),
              ("record reaches new leader (fenced -> applied)", "fenced", "applied"),
              ("first acks=all write possible (applied -> raw)", "applied", "raw"),
              ("client's own share (raw -> client)", "raw", "client")]
    for label, a, b in shares:
        values = [r[b] - (r[a] if a else 0.0) for r in runs if b in r and (a is None or a in r)]
        if values:
            print(f"    {label}: median {statistics.median(values) * 1000:.0f} ms")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--session-timeout-ms", type=int, default=2000)
    ap.add_argument("--skip-controller", action="store_true")
    ap.add_argument("--skip-stop", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctl11-failover-") as tmp:
        cluster = LocalCluster(
            Path(tmp) / "c", 3, {"replica.lag.time.max.ms": "2000"},
            {"broker.session.timeout.ms": str(args.session_timeout_ms),
             "leader.imbalance.check.interval.ms": "3600000"},
            metrics=False, controllers=3).start()
        try:
            _wait(lambda: all(n.get("fenced") is False for n in cluster.status()["nodes"]
                              if n["role"] == "broker"), 60, "brokers registered")
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
            admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                                )[TOPIC].result(60)
            _wait(lambda: _healed(cluster), 60, "topic ready")
            print(f"3 controllers (quorum), 3 brokers, RF=3, min.insync.replicas=2, "
                  f"broker.session.timeout.ms={args.session_timeout_ms}, runs={args.runs}")
            if not args.skip_controller:
                samples = [controller_failover_once(cluster, r) for r in range(args.runs)]
                print("controller failover (SIGKILL active controller)")
                print(f"  new active controller: {_ms([s[0] for s in samples])}")
                print(f"  first successful CreateTopics: {_ms([s[1] for s in samples])}")
            _report("partition-leader failover on SIGKILL",
                    [leader_failover_once(cluster, signal.SIGKILL) for _ in range(args.runs)])
            if not args.skip_stop:
                _report("partition-leader failover on SIGSTOP",
                        [leader_failover_once(cluster, signal.SIGSTOP)
                         for _ in range(args.runs)])
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
