"""floodmark beside Apache Kafka (the pinned 4.x of ``tools/kafka/pom.xml``) on this machine,
driven by the same confluent-kafka client in one run, as ``broker_vs_tansu.py`` does for Tansu.

Setups (``--setups``):
- ``single``: one node each (floodmark's single broker; one combined-mode KRaft Kafka node),
  topics with replication factor 1;
- ``cluster``: three nodes each, every node a broker and a controller voter (floodmark's
  ``LocalCluster(combined=True)``; three combined-mode Kafka nodes), topics with RF=3.

For each setup, workload (value size x partitions) and ``acks`` (1, all): produce and consume
records/s, p50/p99 produce latency (one message in flight), the broker side's CPU seconds per GB
produced and fetched (summed over every node process), and the floodmark/Kafka ratio. Per setup:
start-up time to serving, resident memory (summed over the nodes) at rest and after the
workloads. Each system first runs an untimed warm-up workload (``--warmup-records``), so the
JVM's JIT has compiled Kafka's hot paths before anything is timed. The systems run in turn, alternating their order per repetition.

    .venv/bin/python benchmarks/broker_vs_kafka.py [--setups single,cluster] [--records 200000]
        [--sizes 100,1024] [--partitions 1,8] [--acks 1,all] [--reps 1]

Kafka's jars are fetched with Maven on first use (``./dev kafka fetch``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.broker_vs_tansu import (
    GB,
    MB,
    Result,
    cpu_seconds,
    pct,
    rss_bytes,
    run_workload,
)
from tests.reference.kafka_node import KafkaCluster, missing_reason

from floodmark.cluster import LocalCluster


@dataclass
class Target:
    """One running system: its bootstrap, its node processes, how to stop it."""

    name: str
    bootstrap: str
    pids: list[int]
    start_s: float
    stop: Callable[[], None]
    results: dict[tuple[int, int, str], list[Result]] = field(default_factory=dict)

    def cpu(self) -> float:
        return sum(cpu_seconds(p) for p in self.pids)

    def rss(self) -> int:
        return sum(rss_bytes(p) for p in self.pids)


def start_floodmark(workdir: Path, nodes: int) -> Target:
    t0 = time.monotonic()
    cluster = LocalCluster(workdir / "floodmark", brokers=nodes, metrics=False,
                           combined=nodes > 1,
                           broker_settings={"offsets.topic.replication.factor": str(min(3, nodes))}
                           ).start()
    start_s = time.monotonic() - t0
    pids = [p for n in cluster.node_ids if (p := cluster.pid(n)) is not None]
    return Target("floodmark", cluster.bootstrap, pids, start_s, cluster.stop)


def start_kafka(workdir: Path, nodes: int) -> Target:
    t0 = time.monotonic()
    cluster = KafkaCluster(workdir / "kafka", nodes).start()
    start_s = time.monotonic() - t0
    pids = [n.pid for n in cluster.nodes if n.pid is not None]
    return Target("kafka", cluster.bootstrap, pids, start_s, cluster.stop)


STARTERS = {"floodmark": start_floodmark, "kafka": start_kafka}


@dataclass
class SetupFigures:
    start_s: list[float] = field(default_factory=list)
    rss_rest: list[int] = field(default_factory=list)
    rss_loaded: list[int] = field(default_factory=list)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--setups", default="single,cluster")
    ap.add_argument("--records", type=int, default=200_000, help="records per workload")
    ap.add_argument("--latency-samples", type=int, default=300)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--partitions", default="1,8")
    ap.add_argument("--acks", default="1,all")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--warmup-records", type=int, default=100_000,
                    help="an untimed workload first on each system (0: none)")
    ap.add_argument("--systems", default="floodmark,kafka")
    args = ap.parse_args()
    if "kafka" in args.systems and (reason := missing_reason()):
        raise SystemExit(f"Apache Kafka cannot run here: {reason}")
    sizes = [int(s) for s in args.sizes.split(",")]
    parts = [int(p) for p in args.partitions.split(",")]
    acks_modes = args.acks.split(",")
    systems = args.systems.split(",")
    workdir = Path(tempfile.mkdtemp(prefix="fm-vs-kafka-"))
    results: dict[tuple[str, str, int, int, str], list[Result]] = {}
    figures: dict[tuple[str, str], SetupFigures] = {}
    try:
        for setup in args.setups.split(","):
            nodes = 3 if setup == "cluster" else 1
            rf = 3 if setup == "cluster" else 1
            for rep in range(args.reps):
                order = systems if rep % 2 == 0 else list(reversed(systems))
                for name in order:
                    wd = workdir / f"{setup}-{name}-{rep}"
                    wd.mkdir(parents=True)
                    target = STARTERS[name](wd, nodes)
                    fig = figures.setdefault((setup, name), SetupFigures())
                    try:
                        time.sleep(2.0)  # let start-up work settle before memory at rest
                        fig.start_s.append(target.start_s)
                        fig.rss_rest.append(target.rss())
                        if args.warmup_records:  # untimed: the JVM's JIT, Python's caches
                            run_workload(target, f"warmup-{rep}", max(sizes), max(parts),  # type: ignore[arg-type]
                                         args.warmup_records, 10, acks="all",
                                         replication_factor=rf, cpu=target.cpu)
                        for size in sizes:
                            for np_ in parts:
                                for acks in acks_modes:
                                    topic = f"b-{size}-{np_}-{acks}-{rep}"
                                    r = run_workload(target, topic, size, np_,  # type: ignore[arg-type]
                                                     args.records, args.latency_samples,
                                                     acks=acks, replication_factor=rf,
                                                     cpu=target.cpu)
                                    results.setdefault((setup, name, size, np_, acks),
                                                       []).append(r)
                                    print(f"[{setup} rep {rep}] {name:9s} {size:5d} B x{np_} "
                                          f"acks={acks}: produce "
                                          f"{args.records / r.produce_s:9.0f} rec/s, consume "
                                          f"{args.records / max(r.consume_s, 1e-9):9.0f} rec/s",
                                          file=sys.stderr, flush=True)
                        fig.rss_loaded.append(target.rss())
                    finally:
                        target.stop()
        report(results, figures, systems, args.records)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def report(results: dict[tuple[str, str, int, int, str], list[Result]],
           figures: dict[tuple[str, str], SetupFigures], systems: list[str], n: int) -> None:
    print("\nsetup    system     size parts acks | produce rec/s   MB/s  p50 ms  p99 ms CPU s/GB"
          " | consume rec/s   MB/s CPU s/GB")
    summary: dict[tuple[str, str, int, int, str], tuple[float, float, float]] = {}
    for (setup, name, size, np_, acks), rs in sorted(results.items()):
        prod = statistics.median(n / r.produce_s for r in rs)
        cons = statistics.median(n / max(r.consume_s, 1e-9) for r in rs)
        lat = [x for r in rs for x in r.latencies_ms]
        pcpu = statistics.median(r.produce_cpu / (n * size / GB) for r in rs)
        ccpu = statistics.median(r.consume_cpu / (n * size / GB) for r in rs)
        summary[(setup, name, size, np_, acks)] = (prod, cons, pct(lat, 0.5))
        print(f"{setup:8s} {name:9s} {size:5d} {np_:5d} {acks:>4s} | {prod:13.0f} "
              f"{prod * size / MB:6.1f} {pct(lat, 0.5):7.2f} {pct(lat, 0.99):7.2f} {pcpu:8.2f} | "
              f"{cons:13.0f} {cons * size / MB:6.1f} {ccpu:8.2f}")
    print("\nsetup    system     start s  RSS at rest MiB  RSS after load MiB")
    for (setup, name), fig in sorted(figures.items()):
        print(f"{setup:8s} {name:9s} {statistics.median(fig.start_s):8.2f} "
              f"{statistics.median(fig.rss_rest) / 2**20:16.1f} "
              f"{statistics.median(fig.rss_loaded or [0]) / 2**20:19.1f}")
    if "floodmark" in systems and "kafka" in systems:
        print("\nfloodmark / Kafka (records/s, median; latency: Kafka p50 / floodmark p50)")
        for (setup, name, size, np_, acks), (prod, cons, p50) in sorted(summary.items()):
            if name != "floodmark":
                continue
            k = summary.get((setup, "kafka", size, np_, acks))
            if k:
                print(f"  {setup:8s} {size:5d} B x{np_} acks={acks:>3s}: produce "
                      f"{prod / k[0]:.2f}x  consume {cons / k[1]:.2f}x  "
                      f"latency {k[2] / max(p50, 1e-9):.2f}x")


if __name__ == "__main__":
    sys.exit(main())
