"""Broker CPU per GB fetched, sendfile vs copying, on the same data (issue 3 follow-up).

Produces ``--gb`` of 1 KiB records into ``--partitions`` partitions once, then restarts the
broker over that data directory in each variant in turn (round-robin, ``--rounds`` times) and
consumes everything from the beginning with confluent-kafka (the same consumer settings as
``broker_vs_tansu.py``), sampling the broker's utime+stime from procfs at the first and last
message. Variants: ``sendfile`` (default build), ``copy`` (``FLOODMARK_SENDFILE=0``) and, with
``--before SRC``, another source tree (e.g. a snapshot of the code before the change).

    .venv/bin/python benchmarks/fetch_sendfile.py [--gb 1] [--partitions 1,8] [--rounds 3]
        [--before /tmp/old/src]

Every consume reads the same bytes from the page cache, so the variants differ only in how the
broker moves them. Loopback: the copy saved in the broker partly moves into the client.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

GB = 1_000_000_000
RECORD = 1024


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(data: Path, log_path: Path, env_extra: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    env = dict(os.environ, FLOODMARK_LOG_LEVEL="INFO", **env_extra)
    cmd = [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", str(data),
           "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log_path, "ab"),  # noqa: SIM115
                            env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}; see {log_path}")
    return proc, f"127.0.0.1:{int(line.rsplit(':', 1)[1])}"


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    value = os.urandom(RECORD)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": 1048576, "enable.idempotence": False,
                  "queue.buffering.max.messages": 2000000, "queue.buffering.max.kbytes": 4194304})
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.001)
    if p.flush(300):
        raise SystemExit("produce did not complete")


def consume(bootstrap: str, topic: str, partitions: int, records: int, pid: int) -> tuple[float, float]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fs-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "queued.min.messages": 5000000,
                  "queued.max.messages.kbytes": 2000000, "fetch.queue.backoff.ms": 1,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
    got = 0
    first = cpu0 = 0.0
    deadline = time.monotonic() + 600
    while got < records and time.monotonic() < deadline:
        msgs = c.consume(num_messages=min(10000, records - got), timeout=1.0)
        if msgs and not first:
            first, cpu0 = time.perf_counter(), cpu_seconds(pid)
        got += sum(1 for m in msgs if m.error() is None)
    elapsed, cpu = time.perf_counter() - first, cpu_seconds(pid) - cpu0
    c.close()
    if got < records:
        raise SystemExit(f"consumed {got} of {records}")
    return elapsed, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0, help="data per topic")
    ap.add_argument("--partitions", default="1,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", help="PYTHONPATH of another source tree, run as variant 'before'")
    args = ap.parse_args()
    variants: dict[str, dict[str, str]] = {"sendfile": {"FLOODMARK_SENDFILE": "1"},
                                           "copy": {"FLOODMARK_SENDFILE": "0"}}
    if args.before:
        variants = {"before": {"PYTHONPATH": args.before}, **variants}
    records = int(args.gb * GB / RECORD)
    parts = [int(p) for p in args.partitions.split(",")]
    work = Path(tempfile.mkdtemp(prefix="fm-fetch-"))
    data, log_path = work / "data", work / "broker.log"
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    try:
        proc, bootstrap = start(data, log_path, {})
        try:
            for n in parts:
                produce(bootstrap, f"fetch-{n}", n, records)
        finally:
            stop(proc)
        for r in range(args.rounds):
            for name, env in variants.items():
                proc, bootstrap = start(data, log_path, env)
                try:
                    for n in parts:
                        elapsed, cpu = consume(bootstrap, f"fetch-{n}", n, records, proc.pid)
                        results.setdefault((name, n), []).append((elapsed, cpu))
                        print(f"[round {r}] {name:9s} x{n}: {records * RECORD / elapsed / 1e6:7.1f} "
                              f"MB/s, broker CPU {cpu / (records * RECORD / GB):.3f} s/GB",
                              file=sys.stderr, flush=True)
                finally:
                    stop(proc)
        text = log_path.read_text(errors="replace")
        stats = re.findall(r"sent by sendfile=(\d+)", text)
        print(f"\n{records} x {RECORD} B records per topic, {args.rounds} rounds, "
              f"load average {os.getloadavg()[0]:.1f}")
        print("variant    parts | consume MB/s (median)  broker CPU s/GB (median, min..max)")
        for (name, n), rs in results.items():
            mbps = statistics.median(records * RECORD / e / 1e6 for e, _ in rs)
            cpus = [c / (records * RECORD / GB) for _, c in rs]
            print(f"{name:9s} {n:6d} | {mbps:20.1f}  {statistics.median(cpus):8.3f} "
                  f"({min(cpus):.3f}..{max(cpus):.3f})")
        if stats:
            sent = sum(int(a) for a in stats)
            print(f"sendfile variant: {sent / 1e6:.0f} MB of record bytes sent by sendfile in all")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
