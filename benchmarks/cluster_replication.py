"""Replicated cluster figures: RF=3 vs RF=1 acks=all throughput and latency, and failover time.

Starts a local cluster (controller + 3 broker processes on this machine's cores) with
``floodmark.cluster.LocalCluster`` and measures, with confluent-kafka:

1. throughput: ``--messages`` values of ``--size`` bytes, acks=all, linger 5 ms, into an RF=3
   topic (min.insync.replicas=2) and into an RF=1 topic; records/s and MB/s from the first
   produce to the last delivery report;
2. latency: ``--latency-samples`` single acks=all writes, one at a time (produce + flush), p50
   and p99 of the round trip, for both topics;
3. failover: ``--failovers`` times, a producer writes one value at a time (acks=all) to the RF=3
   topic; the partition leader is SIGKILLed; the figure is the time from the kill to the first
   acknowledged write *sent after* the kill. The broker is restarted and the ISR healed before
   the next run. Median and all samples are printed. It is dominated by
   ``broker.session.timeout.ms`` (``--session-timeout-ms``, default 2000 here; Kafka's default
   is 9000 on real networks).

    .venv/bin/python benchmarks/cluster_replication.py [--messages 100000] [--size 100]
        [--latency-samples 500] [--failovers 5] [--session-timeout-ms 2000]

Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from floodmark.cluster import LocalCluster


def _wait(pred, timeout_s: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def _producer(bootstrap: str, **extra: object) -> Producer:
    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "acks": "all",
                               "enable.idempotence": True, "linger.ms": 5,
                               "request.timeout.ms": 4000, "socket.timeout.ms": 4000,
                               "message.timeout.ms": 60000, "reconnect.backoff.ms": 20,
                               "reconnect.backoff.max.ms": 100, "retry.backoff.ms": 20,
                               "topic.metadata.refresh.interval.ms": 500,
                               "log_level": 0}
    conf.update(extra)
    return Producer(conf)


def throughput(bootstrap: str, topic: str, messages: int, size: int) -> tuple[float, float]:
    p = _producer(bootstrap, **{"batch.size": 262144, "queue.buffering.max.messages": 500000})
    value = b"x" * size
    done = {"n": 0, "err": 0}

    def cb(err: object, _msg: object) -> None:
        if err is None:
            done["n"] += 1
        else:
            done["err"] += 1

    p.produce(topic, value=value, partition=0, on_delivery=cb)
    p.flush(30)  # connection + metadata warm-up
    done["n"] = 0
    t0 = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                p.produce(topic, value=value, partition=0, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.005)
        p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - t0
    if done["err"]:
        print(f"  ({done['err']} delivery errors)")
    return done["n"] / elapsed, done["n"] * size / elapsed / 1e6


def latency(bootstrap: str, topic: str, samples: int) -> tuple[float, float]:
    p = _producer(bootstrap, **{"linger.ms": 0})
    p.produce(topic, value=b"warm", partition=0)
    p.flush(30)
    out = []
    errors: list[object] = []

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for i in range(samples):
        t0 = time.perf_counter()
        p.produce(topic, value=b"l%d" % i, partition=0, on_delivery=cb)
        p.flush(30)
        out.append((time.perf_counter() - t0) * 1000)
    if errors:
        raise RuntimeError(f"{len(errors)} latency writes failed, e.g. {errors[0]}")
    out.sort()
    return statistics.median(out), out[min(len(out) - 1, int(len(out) * 0.99))]


def _healed(cluster: LocalCluster, topic: str) -> bool:
    reg = cluster.partition_registration(topic)
    return bool(reg and sorted(reg["isr"]) == cluster.broker_ids and reg["leader"] > 0)


def failover_once(cluster: LocalCluster, topic: str) -> float:
    p = _producer(cluster.bootstrap, **{"linger.ms": 0})
    acked: list[float] = []

    def cb(err: object, _msg: object) -> None:
        if err is None:
            acked.append(time.perf_counter())

    for i in range(20):
        p.produce(topic, value=b"w%d" % i, partition=0, on_delivery=cb)
        p.flush(30)
    leader = cluster.leader_of(topic)
    t_kill = time.perf_counter()
    cluster.kill(leader, signal.SIGKILL)
    acked.clear()
    i = 0
    deadline = time.monotonic() + 60
    while not acked and time.monotonic() < deadline:
        sent = time.perf_counter()
        p.produce(topic, value=b"f%d" % i, partition=0, on_delivery=cb)
        p.poll(0.01)
        i += 1
        while p.flush(0.01) and not acked and time.monotonic() < deadline:
            pass
        if acked and acked[0] < sent:
            acked.clear()
    p.flush(30)
    if not acked:
        raise RuntimeError("no write succeeded after the failover")
    result = acked[0] - t_kill
    cluster.start_node(leader)
    _wait(lambda: _healed(cluster, topic), 60, "healed ISR")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--latency-samples", type=int, default=500)
    ap.add_argument("--failovers", type=int, default=5)
    ap.add_argument("--session-timeout-ms", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fm-cluster-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "c", 3, {},
                               {"broker.session.timeout.ms": str(args.session_timeout_ms),
                                "auto.leader.rebalance.enable": "false"})
        cluster.start()
        try:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            futs = admin.create_topics([
                NewTopic("rf3", 1, 3, config={"min.insync.replicas": "2"}),
                NewTopic("rf1", 1, 1)])
            for f in futs.values():
                f.result(30)
            _wait(lambda: cluster.leader_of("rf3") > 0 and cluster.leader_of("rf1") > 0, 20,
                  "leaders")
            print(f"cluster: controller + 3 brokers on {cluster.bootstrap}")
            print(f"throughput, acks=all, {args.messages} x {args.size} B, 1 partition:")
            for topic in ("rf1", "rf3"):
                rps, mbs = throughput(cluster.bootstrap, topic, args.messages, args.size)
                print(f"  {topic}: {rps:,.0f} records/s  {mbs:.2f} MB/s")
            print(f"latency, acks=all, one write at a time, {args.latency_samples} samples:")
            for topic in ("rf1", "rf3"):
                p50, p99 = latency(cluster.bootstrap, topic, args.latency_samples)
                print(f"  {topic}: p50 {p50:.2f} ms  p99 {p99:.2f} ms")
            print(f"failover (SIGKILL leader -> first acked acks=all write sent after it), "
                  f"broker.session.timeout.ms={args.session_timeout_ms}:")
            samples = []
            for _ in range(args.failovers):
                try:
                    samples.append(failover_once(cluster, "rf3") * 1000)
                except (RuntimeError, KafkaException) as exc:
                    print(f"  run failed: {exc}")
            if samples:
                print(f"  median {statistics.median(samples):.0f} ms; samples "
                      + ", ".join(f"{s:.0f}" for s in samples) + " ms")
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
