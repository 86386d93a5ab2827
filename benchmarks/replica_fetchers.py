"""Replica fetchers at scale, two floodmarks side by side: connections between brokers, idle
broker CPU and acks=all latency on a 3-broker cluster with N partitions (RF 3).

For each floodmark (``--src`` directories, e.g. main's ``src/`` and this checkout's; each run
in a child process whose nodes import that ``src/``), ``--rounds`` times in turn:

1. a cluster of one controller and 3 brokers (``broker.session.timeout.ms`` 9000, or
   ``--session-timeout-ms``, so a loaded machine does not fence brokers while they create), ``--partitions`` partitions in topics of
   ``--per-topic``, RF 3; wait (at most ``--create-wait-s``) until every partition has its
   full ISR, then 5 s more;
2. ``peer conns``: each broker's established TCP connections to another broker's listener
   (``ss -tnp``, by pid), summed over the brokers; ``fds``: the brokers' open file descriptors,
   summed;
3. ``idle CPU``: each broker's CPU time (``/proc/PID/stat``) over ``--idle-window-s``, median
   of the brokers, in percent of one core; over the same window the replica fetches between
   the brokers (``peer_traffic``): Fetch requests per second, kB per second both ways, and
   bytes per Fetch (request+answer);
4. ``acks=all p50/p99/max``: ``--samples`` single writes (produce + flush, one at a time,
   linger 0) to partitions spread over the topics, after one warm-up write to each sampled
   partition; ``CPU ms/write``: the brokers' CPU time over the writes, summed, per write.

By default the floodmarks run one after the other. On a machine whose load comes and goes (other
jobs), that compares one moment's load with the next's: at load 8 to 14, before/after ``ccd8fb0``
gave p50 4.8/10.6 ms in one round and 7.3/2.3 ms two rounds later (``docs/scale.md``). ``--interleave N`` runs every floodmark's
cluster at once, starts each phase (creation, idle window, warm-up) together, and alternates the
writes N at a time between them (the order flipped every turn), so the load falls on both alike.

    .venv/bin/python benchmarks/replica_fetchers.py --src /work/main/src --src src \\
        [--partitions 1000] [--rounds 1] [--samples 300] [--idle-window-s 10] [--interleave 1]

Prints figures and the load average; never passes or fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULT = "RESULT "
READY = "READY "
LATENCY = "LATENCY "
_PID = re.compile(r"pid=(\d+)")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _wait(pred: Callable[[], Any], limit_s: float, what: str) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"timed out after {limit_s:.0f} s waiting for {what}")


def peer_connections(addresses: dict[int, str], pids: dict[int, int]) -> int:
    """Established TCP connections from a broker to another broker's listener, summed."""
    ports = {int(a.rsplit(":", 1)[1]): b for b, a in addresses.items()}
    by_pid = {p: b for b, p in pids.items()}
    out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    total = 0
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        peer = ports.get(int(fields[3].rsplit(":", 1)[1]))
        owners = [by_pid[int(p)] for p in _PID.findall(line) if int(p) in by_pid]
        if peer is not None and owners and owners[0] != peer:
            total += 1
    return total


_TCP_COUNTER = re.compile(r"\b(bytes_sent|bytes_received|data_segs_out):(\d+)")


def peer_traffic(addresses: dict[int, str], pids: dict[int, int]) -> tuple[int, int, int]:
    """(bytes sent, bytes received, data segments sent) of the brokers' connections to another
    broker's listener (the followers' side of the replica fetches), summed: the kernel's
    per-socket counters (``ss -tni``). On loopback a Fetch request under 64 kB is written once
    and goes as one segment, so the segments sent count the Fetch requests."""
    ports = {int(a.rsplit(":", 1)[1]): b for b, a in addresses.items()}
    by_pid = {p: b for b, p in pids.items()}
    out = subprocess.run(["ss", "-tnpiH", "state", "established"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    totals = {"bytes_sent": 0, "bytes_received": 0, "data_segs_out": 0}
    counting = False
    for line in out.splitlines():
        if not line[:1].isspace():  # a socket's line; its counters follow on the next one
            fields = line.split()
            peer = ports.get(int(fields[3].rsplit(":", 1)[1])) if len(fields) >= 4 else None
            owners = [by_pid[int(p)] for p in _PID.findall(line) if int(p) in by_pid]
            counting = peer is not None and bool(owners) and owners[0] != peer
        elif counting:
            for name, value in _TCP_COUNTER.findall(line):
                totals[name] += int(value)
    return totals["bytes_sent"], totals["bytes_received"], totals["data_segs_out"]


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Writer:
    """Single acks=all writes, one at a time, to partitions spread over the topics (sample
    ``i`` goes to ``targets[i]``), after one warm-up write to each of them."""

    def __init__(self, bootstrap: str, topics: list[str], per_topic: int, samples: int) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 0, "log_level": 0})
        self.targets = [(topics[i % len(topics)], (i * 37) % per_topic) for i in range(samples)]
        for topic, p in dict.fromkeys(self.targets):  # warm-up: leaders known, connections up
            self.producer.produce(topic, value=b"warm", partition=p)
        assert self.producer.flush(120) == 0, "warm-up writes not acknowledged"

    def write(self, i: int) -> float:
        """Sample ``i``: ms from produce to acknowledgement."""
        topic, p = self.targets[i]
        t0 = time.perf_counter()
        self.producer.produce(topic, value=b"x" * 100, partition=p)
        assert self.producer.flush(60) == 0, "write not acknowledged"
        return (time.perf_counter() - t0) * 1000


def percentiles(took: list[float]) -> dict[str, Any]:
    took = sorted(took)
    return {"p50 ms": round(took[len(took) // 2], 1),
            "p99 ms": round(took[min(len(took) - 1, int(len(took) * 0.99))], 1),
            "max ms": round(took[-1], 1)}


def _step(args: argparse.Namespace, name: str) -> None:
    """Interleaved (``--serve``): say the phase ``name`` is reached and wait for the parent's
    go, so the clusters measured side by side do each phase at the same time."""
    if args.serve:
        print(f"{READY}{name}", flush=True)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("the parent went away")


def _writes(args: argparse.Namespace, writer: Writer) -> list[float]:
    """The samples: all in a row, or (``--serve``) one per ``write`` line from the parent."""
    if not args.serve:
        return [writer.write(i) for i in range(args.samples)]
    took = []
    for line in sys.stdin:
        if line.startswith("write "):
            took.append(writer.write(int(line.split()[1])))
            print(f"{LATENCY}{took[-1]}", flush=True)
        elif line.strip() == "end":
            break
    return took


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement with the floodmark this process imports (PYTHONPATH)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    import floodmark
    from floodmark.cluster import LocalCluster

    n, per_topic = args.partitions, args.per_topic
    row: dict[str, Any] = {"floodmark": str(Path(floodmark.__file__).parent.parent)}
    with tempfile.TemporaryDirectory(prefix="replica-fetchers-") as tmp:
        cluster = LocalCluster(Path(tmp) / "c", 3, {},
                               {"broker.session.timeout.ms": str(args.session_timeout_ms),
                                "leader.imbalance.check.interval.ms": "3600000"},
                               metrics=False)
        cluster.start()
        try:
            def registered() -> bool:
                status = cluster.status()
                brokers = [x for x in status["nodes"] if x["role"] == "broker"]
                return len(brokers) == 3 and all(
                    x["alive"] and x.get("fenced") is False for x in brokers)

            _wait(registered, 120, "three unfenced brokers")
            _step(args, "started")
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            topics = [f"scale-{i}" for i in range((n + per_topic - 1) // per_topic)]
            started = time.monotonic()
            missing = list(topics)
            while missing:  # a topic refused (a loaded broker briefly fenced) is asked again
                if time.monotonic() - started > args.create_wait_s:
                    raise RuntimeError(f"{len(missing)} topics not created")
                name = missing.pop(0)
                try:
                    admin.create_topics([NewTopic(name, per_topic, 3)],
                                        request_timeout=120)[name].result(180)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        missing.append(name)
                        time.sleep(1)

            def healthy() -> bool:
                st = cluster.controller_status(timeout_s=30) or {}
                parts = [p for t, ps in st.get("topics", {}).items() if t.startswith("scale-")
                         for p in ps.values() if isinstance(p, dict)]
                return len(parts) == len(topics) * per_topic and all(
                    int(p["leader"]) > 0 and len(p["isr"]) == 3 for p in parts)

            try:  # not settled in time: what follows is measured anyway, and said so
                _wait(healthy, max(1.0, args.create_wait_s - (time.monotonic() - started)),
                      "every partition at full ISR")
                row["create s"] = round(time.monotonic() - started, 1)
            except RuntimeError:
                row["create s"] = f"no full ISR in {args.create_wait_s:.0f}"
            with open(cluster.log_path(0)) as fh:
                row["fencings"] = sum("missed heartbeats" in line for line in fh)
            _step(args, "created")
            time.sleep(5)
            addresses = {b: cluster.address(b) for b in cluster.broker_ids}
            pids = {b: p for b in cluster.broker_ids if (p := cluster.pid(b)) is not None}
            row["peer conns"] = peer_connections(addresses, pids)
            row["fds"] = sum(len(os.listdir(f"/proc/{p}/fd")) for p in pids.values())
            traffic = peer_traffic(addresses, pids)
            before = {b: cpu_s(p) for b, p in pids.items()}
            time.sleep(args.idle_window_s)
            row["idle CPU %"] = round(statistics.median(
                (cpu_s(p) - before[b]) / args.idle_window_s * 100 for b, p in pids.items()), 1)
            sent, received, fetches = (b - a for a, b in zip(
                traffic, peer_traffic(addresses, pids), strict=True))
            if fetches > 0 and sent >= 0 and received >= 0:
                row["idle Fetches/s"] = round(fetches / args.idle_window_s, 1)
                row["idle peer kB/s"] = round((sent + received) / args.idle_window_s / 1000, 1)
                row["B/idle Fetch"] = f"{sent // fetches}+{received // fetches}"
            else:  # connections re-made during the window: their counters started over
                row["idle Fetches/s"] = row["idle peer kB/s"] = row["B/idle Fetch"] = "-"

            try:
                writer = Writer(cluster.bootstrap, topics, per_topic, args.samples)
                _step(args, "warm")
                cpu_before = {b: cpu_s(p) for b, p in pids.items()}
                took = _writes(args, writer)
                row.update(percentiles(took))
                row["CPU ms/write"] = round(sum(cpu_s(p) - cpu_before[b] for b, p in pids.items())
                                            * 1000 / max(len(took), 1), 2)
            except (AssertionError, KafkaException) as exc:
                row["p50 ms"] = row["p99 ms"] = f"failed ({exc})"
            row["load"] = _load()
        finally:
            cluster.stop()
    return row


def _report(r: int, src: str, row: dict[str, Any]) -> None:
    print(f"round {r + 1} {src}: " + ", ".join(f"{k} {v}" for k, v in row.items()
                                               if k != "floodmark"), flush=True)


def _sequential(r: int, sources: list[str], passthrough: list[str]) -> None:
    for src in sources:
        env = {**os.environ, "PYTHONPATH": src}
        proc = subprocess.run([sys.executable, __file__, "--child", *passthrough], env=env,
                              capture_output=True, text=True, timeout=3600, check=False)
        line = next((x for x in proc.stdout.splitlines() if x.startswith(RESULT)), None)
        if line is None:
            print(f"round {r + 1} {src}: failed\n{proc.stderr[-2000:]}", flush=True)
            continue
        _report(r, src, json.loads(line[len(RESULT):]))


def _interleaved(r: int, sources: list[str], passthrough: list[str], samples: int,
                 block: int) -> None:
    """Every floodmark's cluster up at once, each phase started together, and the writes
    alternated between them, ``block`` writes to each in turn (the order flipped every turn):
    a load that comes and goes falls on all of them alike."""
    with tempfile.TemporaryDirectory(prefix="replica-fetchers-") as tmp:
        procs = []
        for k, src in enumerate(sources):
            err = open(Path(tmp) / f"stderr-{k}", "w+")  # noqa: SIM115 - closed below
            procs.append((subprocess.Popen(
                [sys.executable, __file__, "--child", "--serve", *passthrough],
                env={**os.environ, "PYTHONPATH": src}, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, text=True), err))

        def expect(k: int, prefix: str) -> str:
            proc, err = procs[k]
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
            err.seek(0)
            raise RuntimeError(f"{sources[k]}: child ended\n{err.read()[-2000:]}")

        def tell(k: int, line: str) -> None:
            stdin = procs[k][0].stdin
            assert stdin is not None
            stdin.write(line + "\n")
            stdin.flush()

        try:
            for phase in ("started", "created", "warm"):
                for k in range(len(procs)):
                    if expect(k, READY) != phase:
                        raise RuntimeError(f"{sources[k]}: not at {phase}")
                for k in range(len(procs)):
                    tell(k, "go")
            order = list(range(len(procs)))
            for turn, first in enumerate(range(0, samples, block)):
                for k in (order if turn % 2 == 0 else order[::-1]):
                    for i in range(first, min(first + block, samples)):
                        tell(k, f"write {i}")
                        expect(k, LATENCY)
            for k in range(len(procs)):
                tell(k, "end")
            for k, src in enumerate(sources):
                _report(r, src, json.loads(expect(k, RESULT)))
        finally:
            for proc, err in procs:
                with contextlib.suppress(OSError):
                    if proc.stdin is not None:
                        proc.stdin.close()
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                err.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", default=[], metavar="DIR",
                    help="a floodmark src/ directory to measure (repeat: side by side)")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--idle-window-s", type=float, default=10.0)
    ap.add_argument("--create-wait-s", type=float, default=300.0)
    ap.add_argument("--session-timeout-ms", type=int, default=9000,
                    help="broker.session.timeout.ms (longer on a loaded machine: a broker "
                    "fenced while creating leaves the cluster electing, not idle)")
    ap.add_argument("--interleave", type=int, default=0, metavar="N",
                    help="run the --src clusters at once and alternate their writes, N at a "
                    "time (0: one cluster after the other)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(RESULT + json.dumps(child(args)), flush=True)
        return
    sources = [str(Path(s).resolve()) for s in (args.src or [Path(__file__).parents[1] / "src"])]
    for src in sources:  # else the child would import whichever floodmark is installed
        if not (Path(src) / "floodmark" / "__init__.py").is_file():
            raise SystemExit(f"--src {src}: no floodmark/ package there")
    passthrough = [f"--partitions={args.partitions}", f"--per-topic={args.per_topic}",
                   f"--samples={args.samples}", f"--idle-window-s={args.idle_window_s}",
                   f"--create-wait-s={args.create_wait_s}",
                   f"--session-timeout-ms={args.session_timeout_ms}"]
    print(f"{args.partitions} partitions RF 3 on 3 brokers; load {_load()}", flush=True)
    for r in range(args.rounds):
        if args.interleave:
            try:
                _interleaved(r, sources, passthrough, args.samples, args.interleave)
            except (RuntimeError, OSError) as exc:  # a child failed: said, and the next round
                print(f"round {r + 1}: failed: {exc}", flush=True)
        else:
            _sequential(r, sources, passthrough)
    print(f"load after: {_load()}")


if __name__ == "__main__":
    main()
