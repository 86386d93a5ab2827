"""What /metrics costs: produce and consume throughput of a 3-broker cluster, metrics off vs on.

First, the request path's own cost: ``RequestMetrics.wrap`` around a dispatch that does nothing,
per request, for a response returned at once and for one returned by a coroutine (acks=all
produce, long-poll fetch): what every request pays, independent of machine noise.

Then each round starts a fresh local cluster (``LocalCluster(metrics=False|True)``), produces
``--messages`` values of ``--size`` bytes with acks=all into an RF=3 topic (3 partitions), then
reads them all back with one consumer; besides throughput it reports the CPU time the cluster's
processes (controller + brokers, from /proc) spent per record, which other load on a shared
machine disturbs far less than wall-clock throughput. With metrics on, a scraper thread fetches every node's
``/metrics`` every ``--scrape-interval-s`` (what Prometheus does; 0 = never, to separate the
request path's cost from the scrapes') for the whole round. Rounds
alternate off/on (``--rounds`` pairs) so machine drift hits both alike; the figures are medians.

    .venv/bin/python benchmarks/metrics_overhead.py [--messages 100000] [--size 100]
        [--rounds 3] [--scrape-interval-s 1]

Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from floodmark.cluster import LocalCluster

TOPIC = "bench"


def produce(bootstrap: str, messages: int, size: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True, "log_level": 0})
    value = b"x" * size
    errors: list[object] = []

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    t0 = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                p.produce(TOPIC, value=value, partition=i % 3, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} failed deliveries, e.g. {errors[0]}")
    return messages / elapsed


def consume(bootstrap: str, messages: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "log_level": 0,
                  "enable.auto.commit": False, "fetch.max.bytes": 16 << 20})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
    seen = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 120
    while seen < messages and time.monotonic() < deadline:
        for msg in c.consume(10000, 0.5):
            if msg.error() is None:
                seen += 1
    elapsed = time.perf_counter() - t0
    c.close()
    if seen < messages:
        raise RuntimeError(f"read {seen} of {messages}")
    return messages / elapsed


def scraper(urls: list[str], interval_s: float, stop: threading.Event,
            counts: list[int]) -> None:
    while not stop.wait(interval_s):
        for url in urls:
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    resp.read()
                counts[0] += 1
            except OSError:
                pass


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes so far (/proc/PID/stat)."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def one_round(metrics: bool, messages: int, size: int,
              interval_s: float) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory(prefix="fm-metrics-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", 3, metrics=metrics).start()
        stop = threading.Event()
        scrapes = [0]
        try:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
            for fut in admin.create_topics([NewTopic(TOPIC, 3, 3, config={
                    "min.insync.replicas": "2"})]).values():
                fut.result(30)
            time.sleep(1.0)  # leaders elected and followers fetching before the clock starts
            if metrics and interval_s > 0:
                urls = [n["metrics"] for n in cluster.status()["nodes"]]
                threading.Thread(target=scraper, args=(urls, interval_s, stop, scrapes),
                                 daemon=True).start()
            pids = [p for p in (cluster.pid(n) for n in [0, *cluster.broker_ids]) if p]
            cpu0 = cpu_seconds(pids)
            produced = produce(cluster.bootstrap, messages, size)
            consumed = consume(cluster.bootstrap, messages)
            cpu_us = (cpu_seconds(pids) - cpu0) / messages * 1e6
        finally:
            stop.set()
            cluster.stop()
        extra = f", {scrapes[0]} scrapes" if metrics else ""
        print(f"  metrics {'on ' if metrics else 'off'}: produce {produced:9.0f} rec/s, "
              f"consume {consumed:9.0f} rec/s, cluster CPU {cpu_us:6.2f} us/record{extra}",
              flush=True)
        return produced, consumed, cpu_us


def wrapper_cost_us(calls: int = 200_000) -> tuple[float, float]:
    """Extra microseconds per request that the metrics wrapper adds (sync, coroutine)."""
    import asyncio

    from floodmark.metrics import RequestMetrics

    frame = b"\x00\x00\x00\x09" + b"\x00" * 60
    parts = [b"x" * 64]

    def sync_dispatch(_frame: object, _conn: object) -> list[bytes]:
        return parts

    async def answer() -> list[bytes]:
        return parts

    def async_dispatch(_frame: object, _conn: object) -> object:
        return answer()

    def per_call(fn: object, is_async: bool) -> float:
        call = fn  # type: ignore[assignment]

        async def drive() -> float:
            t0 = time.perf_counter()
            for _ in range(calls):
                result = call(frame, None)  # type: ignore[operator]
                if is_async:
                    await result
            return (time.perf_counter() - t0) / calls * 1e6
        return asyncio.run(drive())

    metrics = RequestMetrics()
    sync = per_call(metrics.wrap(sync_dispatch), False) - per_call(sync_dispatch, False)
    coro = per_call(metrics.wrap(async_dispatch), True) - per_call(async_dispatch, True)
    return sync, coro


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scrape-interval-s", type=float, default=1.0)
    args = ap.parse_args()
    sync_us, coro_us = wrapper_cost_us()
    print(f"metrics wrapper: +{sync_us:.2f} us per request answered at once, +{coro_us:.2f} us "
          "per request answered by a coroutine", flush=True)
    results: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    print(f"{args.messages} records of {args.size} B, acks=all, RF=3, 3 partitions; "
          f"{args.rounds} rounds of off/on", flush=True)
    for _ in range(args.rounds):
        for metrics in (False, True):
            results[metrics].append(one_round(metrics, args.messages, args.size,
                                              args.scrape_interval_s))
    for what, i in (("produce", 0), ("consume", 1)):
        off = statistics.median(r[i] for r in results[False])
        on = statistics.median(r[i] for r in results[True])
        print(f"{what}: median off {off:.0f} rec/s, on {on:.0f} rec/s, "
              f"cost {100 * (off - on) / off:+.1f} %")
    # CPU time the cluster's processes spent per record: far less sensitive than wall-clock
    # throughput to whatever else the machine runs.
    off = statistics.median(r[2] for r in results[False])
    on = statistics.median(r[2] for r in results[True])
    print(f"cluster CPU per record (produce + consume): median off {off:.2f} us, on {on:.2f} us, "
          f"cost {100 * (on - off) / off:+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
