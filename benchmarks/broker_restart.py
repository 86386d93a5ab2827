"""Broker restart time with many partitions (issue 3 follow-up: fast ``Log.open``).

Starts a broker on a fresh data directory, creates ``--partitions`` partitions (topics of 10
partitions each), writes one record to every partition, stops the broker cleanly (SIGTERM), then
restarts it ``--restarts`` times and reports the time from process start to its "listening" line
(all logs are opened and recovered before the broker listens), plus the broker's own "opened N
partitions in X s" figure from its log. ``--kill`` stops with SIGKILL instead (an unclean
restart: logs are re-validated from their recovery point; the first restart follows the clean
stop after populating). Each restart also prints the broker's CPU seconds at "listening". A
floodmark cluster holds at most 10,000 partitions, ``__consumer_offsets`` included: 9,990 is the
largest ``--partitions`` that fits.

    .venv/bin/python benchmarks/broker_restart.py [--partitions 1000] [--restarts 3]
        [--src OTHER_CHECKOUT/src]     # measure another source tree (e.g. a "before" snapshot)
        [--count-fsyncs]               # run the restarts under strace, count fsync calls
                                       # (strace slows the process: times are not comparable)

The figure depends heavily on the disk (each fsync is a journal commit) and on machine load.
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

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

CREATE_CHUNK = 50
"""Topics (of 10 partitions) a CreateTopics request."""
_OPENED = re.compile(r"opened (\d+) partitions.* in ([0-9.]+)s")


def start(data_dir: Path, log_path: Path, src: str | None,
          strace_out: Path | None = None) -> tuple[subprocess.Popen[bytes], str, float]:
    env = dict(os.environ)
    env.setdefault("FLOODMARK_LOG_LEVEL", "INFO")
    if src:
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", str(data_dir),
           "--listen", "127.0.0.1:0"]
    if strace_out is not None:
        cmd = ["strace", "-f", "-qq", "-c", "-e", "trace=fsync,fdatasync", "-o", str(strace_out),
               *cmd]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=open(log_path, "ab"), env=env)  # noqa: SIM115
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    elapsed = time.perf_counter() - t0
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}; see {log_path}")
    port = int(line.rsplit(":", 1)[1])
    return proc, f"127.0.0.1:{port}", elapsed


def cpu_s(pid: int) -> float:
    """The process's CPU seconds so far (user + system): on a loaded machine the start-up's
    wall time follows the load, its CPU much less."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(proc: subprocess.Popen[bytes], sig: int, traced: bool = False) -> None:
    if traced:  # signal the broker, not strace
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        os.kill(int(children[0]), sig)
    else:
        proc.send_signal(sig)
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def populate(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(f"restart-{i}", 10, 1) for i in range((partitions + 9) // 10)]
    # A few hundred partitions a CreateTopics: one request of thousands stalls the broker's
    # loop past any client timeout while it creates the logs.
    for i in range(0, len(topics), CREATE_CHUNK):
        chunk = topics[i:i + CREATE_CHUNK]
        for fut in admin.create_topics(chunk, request_timeout=300).values():
            fut.result(600)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for t in topics:
        for p in range(10):
            producer.produce(t.topic, value=b"x" * 100, partition=p)
    remaining = producer.flush(120)
    if remaining:
        raise SystemExit(f"{remaining} records not delivered")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--kill", action="store_true", help="SIGKILL before each restart")
    ap.add_argument("--src", help="PYTHONPATH for the broker (another checkout's src/)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--count-fsyncs", action="store_true",
                    help="run the restarts under strace and count fsync/fdatasync calls")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fm-restart-"))
    data = work / "data"
    log_path = work / "broker.log"
    try:
        proc, bootstrap, _ = start(data, log_path, args.src)
        try:
            populate(bootstrap, args.partitions)
        finally:
            stop(proc, signal.SIGTERM)
        times: list[float] = []
        for i in range(args.restarts):
            mark = log_path.stat().st_size
            strace_out = work / f"strace-{i}.txt" if args.count_fsyncs else None
            proc, _, elapsed = start(data, log_path, args.src, strace_out)
            cpu = "" if strace_out is not None else f", {cpu_s(proc.pid):.1f} CPU s"
            # Count only the start: strace -c reports when the process exits.
            stop(proc, signal.SIGKILL if args.kill else signal.SIGTERM, traced=args.count_fsyncs)
            with open(log_path, "rb") as fh:
                fh.seek(mark)
                m = _OPENED.search(fh.read().decode(errors="replace"))
            opened = f"{m.group(1)} partitions opened in {m.group(2)} s" if m else "(no open line)"
            fsyncs = ""
            if strace_out is not None:
                calls = re.findall(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)$",
                                   strace_out.read_text(), re.M)
                fsyncs = "; fsync calls in the whole run (start + stop): " + (
                    ", ".join(f"{name}={n}" for n, name in calls) or "0")
            print(f"restart {i}: {elapsed:.2f} s to listening{cpu}; broker log: {opened}{fsyncs}",
                  flush=True)
            times.append(elapsed)
        print(f"{args.partitions} partitions, {'SIGKILL' if args.kill else 'clean'} restarts: "
              f"median {statistics.median(times):.2f} s, min {min(times):.2f} s, "
              f"max {max(times):.2f} s (load average {os.getloadavg()[0]:.1f})")
    finally:
        if args.keep:
            print(f"work directory: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
