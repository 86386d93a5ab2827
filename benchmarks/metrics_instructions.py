"""What /metrics costs a broker, counted in CPU instructions rather than seconds.

Wall-clock throughput on a shared two-core machine moves by more than the 3 % we want to see
(``metrics_overhead.py`` showed run-to-run spreads of ±25 %). Instructions do not: valgrind's
callgrind counts every instruction the broker process executes, whatever else the machine does.

One run of this script measures both sides on identical work:

1. a controller (a plain process) and one cluster broker started under
   ``valgrind --tool=callgrind --instr-atstart=no`` (instrumentation off during the start, which
   costs ~16 G instructions of imports), once without and once with ``--metrics-listen``;
2. an RF=1 topic on that broker, a warm-up, then ``callgrind_control --instr=on``;
3. the same request stream each time, one request in flight: ``--produce`` Produce v9 requests
   (acks=1, one batch of ``--records`` records of ``--size`` bytes), ``--fetch`` Fetch v12
   requests reading them back, and, with metrics on, ``--scrapes`` GETs of ``/metrics``;
4. the broker's instruction total for the window (``callgrind_control -e``, all threads), less
   what its timers execute in that much wall-clock time, measured in a quiet window after it.

It prints instructions per request for each side and the difference in percent: the CPU cost of
the metrics on the request path (plus the scrapes, which are counted separately).

    .venv/bin/python benchmarks/metrics_instructions.py [--produce 400] [--fetch 400]
        [--records 10] [--size 100] [--scrapes 2] [--rounds 3] [--keep DIR]

Needs valgrind (Debian package). Takes a few minutes; prints figures, never passes or fails.
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
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from floodmark.client.cluster import ClusterClient
from floodmark.ports import free_port
from floodmark.records import Record, build_batch

TOPIC = "bench"


def wait_line(proc: subprocess.Popen[bytes], pattern: str, timeout_s: float) -> re.Match[str]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    rx = re.compile(pattern)
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"process exited before printing {pattern!r}")
        m = rx.search(line.decode(errors="replace"))
        if m:
            return m
    raise RuntimeError(f"no {pattern!r} within {timeout_s} s")


def callgrind(pid: int, *args: str) -> str:
    out = subprocess.run(["callgrind_control", *args, str(pid)], capture_output=True,
                         text=True, timeout=300)
    return out.stdout + out.stderr


def produce_body(i: int, records: int, size: int) -> dict[str, Any]:
    value = (b"%08d" % i) * (size // 8 + 1)
    batch = build_batch([Record(j, 1_700_000_000_000 + i, None, value[:size])
                         for j in range(records)])
    return {"transactional_id": None, "acks": 1, "timeout": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}


def fetch_body(offset: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def workload(bootstrap: str, n: int, records: int, size: int, *, warm: bool) -> int:
    """``n`` produce then ``n`` fetch requests; returns requests sent."""
    sent = 0
    with ClusterClient(bootstrap, timeout_s=300) as cluster:
        leader = cluster.leader(TOPIC, 0)
        base = 10_000_000 if warm else 0
        for i in range(n):
            resp = cluster.request_node(leader, 0, 9, produce_body(base + i, records, size))
            code = resp.responses[0].partition_responses[0].error_code
            if code:
                raise RuntimeError(f"produce error {code}")
            sent += 1
        for i in range(n):
            resp = cluster.request_node(leader, 1, 12, fetch_body(i * records))
            code = resp.responses[0].partitions[0].error_code
            if code:
                raise RuntimeError(f"fetch error {code}")
            sent += 1
    return sent


def one_side(metrics: bool, args: argparse.Namespace, tmp: Path) -> tuple[int, int]:
    """Instructions of the broker in the measured window, and requests sent in it."""
    side = "on" if metrics else "off"
    cport, bport = free_port(), free_port()
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONUNBUFFERED="1",
               FLOODMARK_LOG_LEVEL="WARNING")
    ctrl = subprocess.Popen([sys.executable, "-m", "floodmark.controller", "--data-dir",
                             str(tmp / f"ctrl-{side}"), "--listen", f"127.0.0.1:{cport}",
                             "--broker-session-timeout-ms", "600000"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    tmp.mkdir(parents=True, exist_ok=True)
    out = (args.keep or tmp) / f"callgrind-{tmp.name}-{side}.out"
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
           sys.executable, "-m", "floodmark.broker.cluster_member", "--node-id", "1",
           "--controller", f"127.0.0.1:{cport}", "--data-dir", str(tmp / f"broker-{side}"),
           "--listen", f"127.0.0.1:{bport}", "--set", "broker.heartbeat.interval.ms=10000"]
    if metrics:
        cmd += ["--metrics-listen", "127.0.0.1:0"]
    errlog = tmp / f"broker-{side}.stderr"
    broker = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errlog.open("wb"), env=env)
    try:
        wait_line(ctrl, r"listening on", 60)
        murl = None
        if metrics:
            m = wait_line(broker, r"metrics on (\S+)", 600)
            murl = m.group(1)
        wait_line(broker, r"listening on", 600)
        bootstrap = f"127.0.0.1:{bport}"
        with ClusterClient(bootstrap, timeout_s=300) as cluster:
            cluster.partitions(TOPIC, create=True)
        workload(bootstrap, 20, args.records, args.size, warm=True)  # code paths loaded
        # Warm fetches read offset 0.. of the warm-up's records; the measured ones start after.
        callgrind(broker.pid, "--instr=on")
        callgrind(broker.pid, "--zero")
        t0 = time.monotonic()
        sent = workload(bootstrap, args.produce, args.records, args.size, warm=False)
        elapsed = time.monotonic() - t0
        instr = total_instructions(broker.pid)  # read while counting: off means no figures
        if args.keep:
            callgrind(broker.pid, "--dump=request-window")  # callgrind_annotate reads it
        # Timers (heartbeats, the periodic loop) run by the wall clock, which callgrind slows by
        # however busy the machine is: count them in a quiet window and take their share out.
        callgrind(broker.pid, "--zero")
        idle_s = min(elapsed, args.idle_max_s)
        t1 = time.monotonic()
        time.sleep(idle_s)
        background = total_instructions(broker.pid) / (time.monotonic() - t1) * elapsed
        instr -= int(background)
        scrape_instr = 0
        if murl is not None and args.scrapes:
            callgrind(broker.pid, "--zero")
            for _ in range(args.scrapes):
                with urllib.request.urlopen(murl, timeout=300) as resp:
                    resp.read()
            scrape_instr = total_instructions(broker.pid) // args.scrapes
        callgrind(broker.pid, "--instr=off")
        print(f"  metrics {side:3}: {sent} requests in {elapsed:5.1f} s under callgrind, "
              f"{instr / sent:12,.0f} instructions per request (timers' "
              f"{background / sent:,.0f} taken out)"
              + (f"; one /metrics scrape {scrape_instr:,} instructions" if metrics else ""),
              flush=True)
        return instr, sent
    except RuntimeError:
        print(errlog.read_text(errors="replace")[-2000:], file=sys.stderr)
        raise
    finally:
        for proc in (broker, ctrl):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (broker, ctrl):
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def total_instructions(pid: int) -> int:
    """Instructions the broker executed since the last ``--zero``, all threads (``-e``)."""
    text = callgrind(pid, "-e")
    counts = re.findall(r"^\s*Th\s*\d+\s+([\d,]+)", text, re.MULTILINE)
    if not counts:
        raise RuntimeError(f"no instruction count in callgrind_control output: {text[-300:]}")
    return sum(int(c.replace(",", "")) for c in counts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--produce", type=int, default=400,
                    help="produce requests, and as many fetch requests (default 400)")
    ap.add_argument("--records", type=int, default=10, help="records per produce batch")
    ap.add_argument("--size", type=int, default=100, help="bytes per record value")
    ap.add_argument("--scrapes", type=int, default=2, help="/metrics GETs measured (on side)")
    ap.add_argument("--rounds", type=int, default=3, help="off/on pairs (medians reported)")
    ap.add_argument("--idle-max-s", type=float, default=30.0,
                    help="longest quiet window that measures the timers' own instructions")
    ap.add_argument("--keep", type=Path, default=None, metavar="DIR",
                    help="keep the callgrind files here (callgrind_annotate reads them)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("error: needs valgrind (Debian package valgrind)", file=sys.stderr)
        return 2
    print(f"{args.produce} produce (acks=1, {args.records} x {args.size} B) + {args.produce} "
          "fetch requests, one in flight, broker under callgrind", flush=True)
    per_request: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="fm-metrics-instr-") as t:
        tmp = Path(t)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        for r in range(args.rounds):
            for metrics in (False, True):  # alternating, so drift hits both sides alike
                instr, sent = one_side(metrics, args, tmp / f"round-{r}")
                per_request[metrics].append(instr / sent)
    off, on = statistics.median(per_request[False]), statistics.median(per_request[True])
    print(f"per request (median of {args.rounds}): off {off:,.0f}, on {on:,.0f} instructions; "
          f"metrics cost {100 * (on - off) / off:+.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
