"""Measured limits with many partitions (issue 26 §3).

For each N of ``--partitions`` (default 1000,5000; ``--quick``: 200), on a fresh local cluster
of 3 controllers (a quorum) and 3 brokers, with N partitions of replication factor 3 (topics
of ``--topic-partitions`` partitions each, so every broker hosts N replicas):

* ``create``          CreateTopics of all N partitions, until every partition has a leader
                      and its full ISR (the controller's view);
* ``written``         then one acks=all record to every partition, until all are acknowledged
                      (every replica has opened its log and fetched): from the first
                      CreateTopics, the time until the cluster serves every partition;
* ``rss/partition``   broker memory per idle partition: (RSS with N idle partitions - RSS of
                      the same broker with none) / N, the median of the 3 brokers; and the
                      same from the broker restarted cleanly (no creation garbage);
* ``fds``             file descriptors a broker holds with N idle partitions;
* ``idle CPU``        a broker's CPU use with N idle partitions (percent of one core);
* ``metadata all``    one Metadata request for every topic (time per request, on one open
                      connection; the median of a bounded count of requests);
* ``metadata one``    one Metadata request for one topic (the same; should stay flat);
* ``propagation``     one CreateTopics (1 partition, RF 3): from the request to every broker
                      having applied it (their own timestamps, ``controller_failover.py``);
* ``ctl failover``    SIGKILL the active controller: until a new one is active, and until the
                      first CreateTopics through a broker succeeds;
* ``leader failover`` SIGKILL the broker leading the most partitions (about N/3): until the
                      controller committed a new leader for every one of them (``commit``),
                      until the two survivors applied it (``applied``), and as the poller saw
                      it (``seen``);
* ``start (kill)``    SIGKILL broker 1 and start it again: to its "listening" line, and until
                      every partition has its full ISR again (a cluster member opens and
                      recovers its logs when the metadata names them, after it listens: the
                      second figure is the start-up);
* ``start (clean)``   the same after a SIGTERM (controlled shutdown);
* ``stall``           the event-loop stall of each broker while the step above ran: the
                      longest answer to an ApiVersions request sent every 20 ms by a probe
                      thread on its own connection (a broker answers it on its event loop at
                      once, so a long answer is time the loop spent on something else), the
                      largest of the brokers; printed with ``create`` and ``leader failover``
                      (the survivors become leaders of the victim's partitions);
* ``elections``       (with ``create``) how many times the controller quorum elected a new
                      leader while creating, and ``AlterPartition``: the requests and the
                      partitions they carried (before batching: the accepted ISR changes, one
                      request each); both from the controllers' logs;
* ``connections``     ``--connections`` (1000) idle client connections to each broker, each
                      having made one ApiVersions request: the broker's RSS growth per
                      connection, and a Metadata request on one more connection still answered
                      (its time).

``--checkpoints`` measures instead, in this process on real files, what a broker's event loop
spends when one metadata batch makes it leader of N partitions (N of ``--partitions``): each
leader-epoch checkpoint written and fsynced in turn (``Log.assign_epoch``, as before), against one
``EpochCheckpointBatch`` run on an event loop beside a 5 ms ticker (how long until durable: the
new leaders take writes then; and the ticker's longest gap, the loop's stall).

A measurement that fails is printed as one line (and ``failed`` in the table) and the
next one runs. Every figure is printed as it is measured, then a table of all N. Load average before and
after each N is printed with it (the machine is shared). Prints figures; never passes or fails.

    .venv/bin/python benchmarks/scale.py [--partitions 1000,5000,10000] [--quick]
        [--connections 1000] [--session-timeout-ms MS] [--src OTHER/src] [--keep-dir DIR]
        [--only memory,leaders,...] [--idle-window-s S]
    .venv/bin/python benchmarks/scale.py --checkpoints [--partitions 200,1000,5000]

``--periodic`` measures instead, in this process, the broker's periodic loop alone: one broker
(a single node, its own controller) with N idle partitions (RF 1, N of ``--partitions``) runs
``Broker._periodic`` for ``--idle-window-s``; the figure is this process's CPU seconds over
that window (``time.process_time``), so the machine's other load does not count. No fetchers,
no client: only the loop whose cost should not grow with N.

Idle CPU on the cluster (``memory``) is the brokers' user + system CPU seconds
(``/proc/PID/stat``) over ``--idle-window-s``, likewise.

``FLOODMARK_PROFILE_DIR=DIR`` runs every node under cProfile (``benchmarks/profiling``'s
``sitecustomize``): each node writes ``DIR/<pid>.prof`` when it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = Path(__file__).resolve().parent
# ``--src DIR``: the nodes (and this script) run the floodmark in DIR (an older checkout's
# src/, for before/after figures); read before the imports below.
SRC = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--src"),
           str(HERE.parent / "src"))
sys.path.insert(0, str(Path(SRC).resolve()))
sys.path.insert(0, str(HERE))

# floodmark from SRC before controller_failover, which puts this checkout's src/ first on the
# path: once the package is imported, every submodule (and the nodes' PYTHONPATH,
# ``cluster.node_env``) comes from SRC. (Without this, every --src run ran this checkout.)
import floodmark  # noqa: E402, F401, I001

from controller_failover import controller_failover_once, propagation_once  # noqa: E402

from floodmark.client.connection import (  # noqa: E402
    KafkaConnection,
    RequestFailed,
    encode_request,
)
from floodmark.cluster import LocalCluster  # noqa: E402

PROFILE_ENV = "FLOODMARK_PROFILE_DIR"
STATUS_TIMEOUT_S = 60.0
WAIT_LIMIT_S = 300.0
METADATA_BUDGET_S = 5.0  # each Metadata figure: at most this long of requests ...
METADATA_MAX_REQUESTS = 200  # ... and at most this many
Row = dict[str, str]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _pid(cluster: LocalCluster, node_id: int) -> int:
    pid = cluster.pid(node_id)
    assert pid is not None
    return pid


def wait_until(pred: Callable[[], Any], what: str, limit_s: float = WAIT_LIMIT_S,
               step_s: float = 0.05) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step_s)
    raise RuntimeError(f"timed out after {limit_s:.0f} s waiting for {what}")


def _topics(cluster: LocalCluster) -> dict[str, Any]:
    ctl = cluster.controller_status(timeout_s=STATUS_TIMEOUT_S)
    return {} if ctl is None else dict(ctl["topics"])


def _scale_parts(topics: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for name, parts in topics.items() if name.startswith("scale-")
            for p in parts.values() if isinstance(p, dict)]


def all_healthy(cluster: LocalCluster, n: int) -> bool:
    parts = _scale_parts(_topics(cluster))
    return len(parts) == n and all(
        int(p["leader"]) > 0 and len(p["isr"]) == len(p["replicas"]) for p in parts)


def _broker_settled(cluster: LocalCluster) -> bool:
    status = cluster.status()
    end = status.get("metadata_offset")
    return end is not None and all(
        n.get("metadata_offset") == end and n.get("fenced") is False
        for n in status["nodes"] if n["role"] == "broker" and n["alive"])


class StallProbe:
    """One thread per broker asks ApiVersions every ``interval_s`` on its own connection and
    keeps the longest answer since ``reset`` (a refused or broken connection is retried and
    not counted: a dead broker has no event loop to stall)."""

    def __init__(self, addresses: dict[int, str], interval_s: float = 0.02) -> None:
        self.addresses = addresses
        self.interval_s = interval_s
        self._longest: dict[int, float] = dict.fromkeys(addresses, 0.0)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._probe, args=(b,), daemon=True)
                         for b in addresses]

    def __enter__(self) -> StallProbe:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=70)

    def reset(self) -> None:
        with self._lock:
            self._longest = dict.fromkeys(self.addresses, 0.0)

    def longest_s(self) -> dict[int, float]:
        with self._lock:
            return dict(self._longest)

    def _probe(self, broker: int) -> None:
        while not self._stop.is_set():
            try:
                with KafkaConnection(self.addresses[broker], timeout_s=60,
                                     client_id="scale-stall-probe") as conn:
                    while not self._stop.is_set():
                        t0 = time.perf_counter()
                        conn.request(18, 0, {})
                        took = time.perf_counter() - t0
                        with self._lock:
                            self._longest[broker] = max(self._longest[broker], took)
                        self._stop.wait(self.interval_s)
            except (OSError, RuntimeError, EOFError, RequestFailed):
                self._stop.wait(0.2)


def fencings(cluster: LocalCluster) -> int:
    """Brokers the controllers fenced for missed heartbeats so far (a live broker whose event
    loop stalled past broker.session.timeout.ms; a killed one is fenced for its closed
    connections instead, not counted here)."""
    count = 0
    for node in cluster.controller_ids:
        path = cluster.log_path(node)
        if path.exists():
            with open(path, "rb") as fh:
                count += sum(1 for line in fh if b"missed heartbeats" in line)
    return count


_ALTER_PARTITION = re.compile(rb"AlterPartition from broker \d+: (\d+) partition")


def controller_log_counts(cluster: LocalCluster) -> tuple[int, int | None, int | None]:
    """From the controllers' logs so far: how many times a controller became the active one
    (the first activation included: elections = this - 1), and the AlterPartition requests and
    the partitions they carried (None, N when the code does not log requests: before batching,
    one request a partition, and N the accepted ones, each logged as a partition change)."""
    activations, requests, proposals, accepted = 0, 0, 0, 0
    for node in cluster.controller_ids:
        path = cluster.log_path(node)
        if not path.exists():
            continue
        with open(path, "rb") as fh:
            for line in fh:
                if b"is the active controller (epoch" in line:
                    activations += 1
                elif (m := _ALTER_PARTITION.search(line)) is not None:
                    requests += 1
                    proposals += int(m.group(1))
                elif b"(AlterPartition from" in line:
                    accepted += 1
    if requests == 0:
        return activations, None, accepted
    return activations, requests, proposals


def _stall(probe: StallProbe, brokers: list[int] | None = None) -> str:
    longest = probe.longest_s()
    chosen = {b: t for b, t in longest.items() if brokers is None or b in brokers}
    worst = max(chosen, key=lambda b: chosen[b])
    return f"{chosen[worst] * 1000:.0f} ms (broker {worst})"


# -- the measurements --------------------------------------------------------------------------
def create(cluster: LocalCluster, n: int, per_topic: int,
           wait_s: float = WAIT_LIMIT_S) -> float:
    """CreateTopics of every partition (50 topics a request; a refused topic, e.g. while a
    loaded broker is briefly fenced, is asked again), until all have their full ISR."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    t0 = time.perf_counter()
    sizes = {f"scale-{i}": min(per_topic, n - i * per_topic)
             for i in range((n + per_topic - 1) // per_topic)}
    missing = list(sizes)
    deadline = time.monotonic() + WAIT_LIMIT_S
    while missing:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(missing)} topics still not created")
        batch, missing = missing[:50], missing[50:]
        futures = admin.create_topics([NewTopic(t, sizes[t], 3) for t in batch],
                                      request_timeout=300)
        for name, fut in futures.items():
            try:
                fut.result(600)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    missing.append(name)
                    time.sleep(0.2)
    wait_until(lambda: all_healthy(cluster, n), f"{n} partitions with full ISR", wait_s,
               step_s=0.5)
    return time.perf_counter() - t0


def write_each(cluster: LocalCluster, n: int, per_topic: int, wait_s: float) -> int:
    """One acks=all record to every partition (librdkafka retries each one while its leader is
    not ready, up to ``wait_s``): every replica of the ISR must have opened its log and fetched
    it, so this is when the cluster really serves every partition (the controller's view,
    ``all_healthy``, holds as soon as the partitions are created). Returns how many were
    acknowledged (all of them, or it raises)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 50, "log_level": 0,
                         "message.timeout.ms": int(wait_s * 1000)})
    acked: list[int] = [0]
    failed: list[str] = []

    def done(err: Any, _msg: Any) -> None:
        if err is None:
            acked[0] += 1
        else:
            failed.append(str(err))

    for i in range(n):
        topic, partition = f"scale-{i // per_topic}", i % per_topic
        while True:
            try:
                producer.produce(topic, b"x", partition=partition, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.1)
    deadline = time.monotonic() + wait_s + 10
    while acked[0] + len(failed) < n and time.monotonic() < deadline:
        producer.poll(0.2)
    if acked[0] < n:
        raise RuntimeError(f"{acked[0]} of {n} acks=all writes acknowledged "
                           f"({len(failed)} failed: {failed[:1]})")
    return acked[0]


def metadata_cost(address: str, topics: list[str] | None) -> tuple[float, int]:
    """The median time of one Metadata v9 request (for ``topics``; None: all), and the answer's
    partition count."""
    body = {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False}
    times: list[float] = []
    partitions = 0
    with KafkaConnection(address, timeout_s=60) as conn:
        conn.request(3, 9, body)  # warm: the connection's first request
        t_end = time.perf_counter() + METADATA_BUDGET_S
        while len(times) < METADATA_MAX_REQUESTS and (len(times) < 3
                                                       or time.perf_counter() < t_end):
            t0 = time.perf_counter()
            md = conn.request(3, 9, body)
            times.append(time.perf_counter() - t0)
        partitions = sum(len(t.partitions) for t in md.topics)
    return statistics.median(times), partitions


def leader_failover(cluster: LocalCluster, victim: int,
                    wait_s: float = WAIT_LIMIT_S) -> dict[str, float]:
    before = _topics(cluster)
    led = [(name, idx) for name, parts in before.items() if name.startswith("scale-")
           for idx, p in parts.items() if isinstance(p, dict) and int(p["leader"]) == victim]
    survivors = [b for b in cluster.broker_ids if b != victim]
    t_kill_wall = time.time()
    t_kill = time.perf_counter()
    cluster.kill(victim, signal.SIGKILL)

    def moved() -> dict[str, Any] | None:
        ctl = cluster.controller_status(timeout_s=STATUS_TIMEOUT_S)
        if ctl is None:
            return None
        topics = ctl["topics"]
        if all(int(topics[t][i]["leader"]) not in (victim, -1) for t, i in led):
            return dict(ctl)
        return None

    ctl = wait_until(moved, f"new leaders for {len(led)} partitions of broker {victim}",
                     wait_s, step_s=0.02)
    out = {"seen": time.perf_counter() - t_kill, "partitions": float(len(led))}
    end = int(ctl["metadata_offset"])
    commits = [(int(e), int(ms)) for e, ms in ctl.get("metadata_commits", [])]
    done = next((ms for e, ms in commits if e >= end), None)
    if done is not None:
        out["commit"] = done / 1000 - t_kill_wall

    def applied() -> list[dict[str, Any]] | None:
        nodes = [n for n in cluster.status()["nodes"] if n["id"] in survivors]
        return nodes if all(int(n.get("metadata_offset", -1)) >= end for n in nodes) else None

    nodes = wait_until(applied, "survivors applied the new leaders")
    times = []
    for node in nodes:
        hist = node.get("metadata_applied") or []
        ms = next((int(t) for o, t in hist if int(o) >= end), None)
        if ms is not None:
            times.append(ms / 1000 - t_kill_wall)
    if len(times) == len(survivors):
        out["applied"] = max(times)
    return out


def opened_figure(cluster: LocalCluster, node_id: int, log_from: int) -> str:
    with open(cluster.log_path(node_id), "rb") as fh:
        fh.seek(log_from)
        text = fh.read().decode(errors="replace")
    lines = [line for line in text.splitlines() if f"broker {node_id} opened" in line]
    return lines[-1].split("opened", 1)[1].strip() if lines else "?"


def restart(cluster: LocalCluster, node_id: int, n: int) -> dict[str, Any]:
    log_from = cluster.log_path(node_id).stat().st_size
    t0 = time.perf_counter()
    cluster.start_node(node_id, timeout_s=WAIT_LIMIT_S)
    listening = time.perf_counter() - t0
    wait_until(lambda: all_healthy(cluster, n), "full ISR after the restart", step_s=0.2)
    return {"listening": listening, "isr": time.perf_counter() - t0,
            "opened": opened_figure(cluster, node_id, log_from)}


def connections(cluster: LocalCluster, count: int) -> dict[int, tuple[int, float]]:
    """Per broker: RSS growth (kB) with ``count`` idle connections, and a Metadata request's
    time on one more connection while they are open."""
    api_versions = encode_request(18, 0, 1, {}, "scale-idle")
    out: dict[int, tuple[int, float]] = {}
    for b in cluster.broker_ids:
        pid = _pid(cluster, b)
        host, port = cluster.address(b).rsplit(":", 1)
        base = rss_kb(pid)
        socks: list[socket.socket] = []
        try:
            for _ in range(count):
                s = socket.create_connection((host, int(port)), timeout=30)
                s.sendall(api_versions)
                socks.append(s)
            for s in socks:  # each answered: the broker has set the connection up
                size = int.from_bytes(_recv(s, 4), "big")
                _recv(s, size)
            grown = rss_kb(pid) - base
            t0 = time.perf_counter()
            with KafkaConnection(cluster.address(b), timeout_s=60) as conn:
                md = conn.request(3, 9, {"topics": [{"name": "scale-0"}],
                                         "allow_auto_topic_creation": False})
                assert md.topics[0].error_code == 0
            out[b] = (grown, time.perf_counter() - t0)
        finally:
            for s in socks:
                s.close()
    return out


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("connection closed by the broker")
        buf += chunk
    return buf


# -- one N ---------------------------------------------------------------------------------------
def run(root: Path, n: int, args: argparse.Namespace) -> Row:
    row: Row = {"partitions": str(n)}
    print(f"== {n} partitions (RF 3, {args.topic_partitions} per topic), load {_load()}",
          flush=True)
    controller_settings = {"leader.imbalance.check.interval.ms": "3600000"}
    if args.session_timeout_ms:
        controller_settings["broker.session.timeout.ms"] = str(args.session_timeout_ms)
    cluster = LocalCluster(root / f"n{n}", 3, {}, controller_settings, metrics=False,
                           controllers=3)
    cluster.start(timeout_s=WAIT_LIMIT_S)
    base: dict[int, int] = {}
    probe = StallProbe({b: cluster.address(b) for b in cluster.broker_ids})
    only = set(args.only.split(",")) if args.only else None

    def wanted(name: str) -> bool:
        return only is None or name in only

    def phase(name: str, fn: Callable[[], None]) -> bool:
        """One measurement; a failure is one line in the output and in the table."""
        try:
            fn()
            return True
        except Exception as exc:  # a benchmark reports what broke and goes on
            row[name] = "failed"
            print(f"  {name} FAILED: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            return False

    def idle_before() -> None:
        wait_until(lambda: _broker_settled(cluster), "brokers registered")
        time.sleep(2)
        base.update({b: rss_kb(_pid(cluster, b)) for b in cluster.broker_ids})
        print(f"  idle RSS before topics: {base} kB", flush=True)

    def create_all() -> None:
        probe.reset()
        t0 = time.perf_counter()
        try:
            took = create(cluster, n, args.topic_partitions, args.create_wait_s)
            row["create s"] = f"{took:.1f}"
            print(f"  created and in sync (the controller's view): {took:.1f} s", flush=True)
            try:
                write_each(cluster, n, args.topic_partitions, args.create_wait_s)
            except RuntimeError as exc:
                row["written s"] = "failed"
                print(f"  acks=all writes FAILED: {exc}", flush=True)
            else:
                written = time.perf_counter() - t0
                row["written s"] = f"{written:.1f}"
                print(f"  an acks=all record acknowledged by every partition: {written:.1f} s "
                      f"after the first CreateTopics", flush=True)
        finally:  # (the stall too when the partitions never got their full ISR)
            row["create stall"] = _stall(probe).split(" ms")[0]
            row["fenced"] = str(fencings(cluster))
            activations, requests, proposals = controller_log_counts(cluster)
            row["elections"] = str(max(0, activations - 1))
            row["AlterPartition"] = (f"{requests}/{proposals}" if requests is not None
                                     else f"{proposals} accepted, one a request")
            print(f"  longest event-loop stall while creating: {_stall(probe)}; brokers fenced "
                  f"for missed heartbeats: {row['fenced']}; controller quorum elections "
                  f"after the first: {row['elections']}; AlterPartition requests/partitions: "
                  f"{row['AlterPartition']}", flush=True)

    def idle_after() -> None:
        try:
            wait_until(lambda: _broker_settled(cluster), "brokers at the metadata end",
                       limit_s=WAIT_LIMIT_S if "create s" not in row else 30)
        except RuntimeError as exc:  # churning still (created, ISR incomplete): measure anyway
            print(f"  (measuring memory while not settled: {exc})", flush=True)
        time.sleep(5)  # idle
        rss = {b: rss_kb(_pid(cluster, b)) for b in cluster.broker_ids}
        per = statistics.median((rss[b] - base[b]) * 1024 / n for b in cluster.broker_ids)
        fds = statistics.median(fd_count(_pid(cluster, b)) for b in cluster.broker_ids)
        cpu = _idle_cpu(cluster, args.idle_window_s)
        row["RSS MB"] = f"{statistics.median(rss.values()) / 1024:.0f}"
        row["kB/partition"] = f"{per / 1000:.1f}"
        row["fds"] = f"{fds:.0f}"
        row["idle CPU %"] = f"{cpu:.1f}"
        print(f"  idle RSS: {rss} kB; {per / 1000:.1f} kB per partition; fds {fds:.0f}; "
              f"idle CPU {cpu:.1f} % of a core per broker (median over "
              f"{args.idle_window_s:.0f} s)", flush=True)

    def metadata() -> None:
        address = cluster.address(1)
        t_all, p_all = metadata_cost(address, None)
        t_one, p_one = metadata_cost(address, ["scale-0"])
        row["metadata all ms"] = f"{t_all * 1000:.1f}"
        row["metadata one ms"] = f"{t_one * 1000:.2f}"
        print(f"  Metadata all topics ({p_all} partitions): {t_all * 1000:.1f} ms; one topic "
              f"({p_one} partitions): {t_one * 1000:.2f} ms", flush=True)

    def propagation() -> None:
        prop = propagation_once(cluster, 0, "CreateTopics")
        row["propagation ms"] = f"{prop['applied'] * 1000:.0f}" if "applied" in prop else "?"
        print("  CreateTopics propagation: " + ", ".join(
            f"{k} {v * 1000:.0f} ms" for k, v in sorted(prop.items())), flush=True)

    def controller() -> None:
        elected, created = controller_failover_once(cluster, 0)
        row["ctl failover s"] = f"{elected:.2f}/{created:.2f}"
        print(f"  controller failover: active {elected:.2f} s, first CreateTopics "
              f"{created:.2f} s", flush=True)
        wait_until(lambda: _broker_settled(cluster), "brokers at the metadata end")

    def leaders() -> None:
        # The broker that leads the most partitions (after a fenced moment under load the
        # leaders may have moved; preferred leaders are not restored here).
        counts = {b: 0 for b in cluster.broker_ids}
        for p in _scale_parts(_topics(cluster)):
            if int(p["leader"]) in counts:
                counts[int(p["leader"])] += 1
        victim = max(counts, key=lambda b: counts[b])
        probe.reset()
        survivors = [b for b in cluster.broker_ids if b != victim]
        try:
            fo = leader_failover(cluster, victim, args.create_wait_s)
        except RuntimeError:
            print(f"  (leader failover of broker {victim}: longest event-loop stall of a "
                  f"survivor {_stall(probe, survivors)})", flush=True)
            raise
        time.sleep(1)  # the new leaders' epoch checkpoints: written after the metadata applied
        row["leader failover s"] = (f"{fo.get('commit', float('nan')):.2f}/"
                                    f"{fo.get('applied', float('nan')):.2f}")
        row["failover stall"] = _stall(probe, survivors).split(" ms")[0]
        print(f"  leader failover of {fo['partitions']:.0f} partitions of broker {victim}: "
              + ", ".join(f"{k} {v:.2f} s" for k, v in fo.items() if k != "partitions")
              + f"; longest event-loop stall of a survivor {_stall(probe, survivors)}",
              flush=True)
        if victim != 1 and (wanted("start") or wanted("connections")):
            # The restarts below are of broker 1: bring this one back first.
            cluster.start_node(victim, timeout_s=WAIT_LIMIT_S)
            wait_until(lambda: all_healthy(cluster, n), "full ISR after the failover")

    def start_after(kind: str) -> None:
        if kind == "clean":
            cluster.kill(1, signal.SIGTERM)
        elif cluster.node_state(1) != "dead":
            cluster.kill(1, signal.SIGKILL)
        took = restart(cluster, 1, n)
        row[f"start {kind} s"] = f"{took['listening']:.1f}/{took['isr']:.1f}"
        print(f"  start after {'SIGTERM' if kind == 'clean' else 'SIGKILL'}: listening "
              f"{took['listening']:.1f} s (opened {took['opened']}), full ISR "
              f"{took['isr']:.1f} s", flush=True)

    def fresh_memory() -> None:
        time.sleep(5)
        fresh = rss_kb(_pid(cluster, 1))
        row["kB/partition fresh"] = f"{(fresh - base[1]) * 1024 / n / 1000:.1f}"
        print(f"  restarted broker's idle RSS: {fresh} kB "
              f"({row['kB/partition fresh']} kB per partition)", flush=True)

    def idle_connections() -> None:
        conns = connections(cluster, args.connections)
        growth = statistics.median(g for g, _ in conns.values())
        row["kB/connection"] = f"{growth * 1024 / args.connections / 1000:.1f}"
        row["metadata busy ms"] = f"{max(t for _, t in conns.values()) * 1000:.0f}"
        print(f"  {args.connections} idle connections per broker: " + ", ".join(
            f"broker {b} +{g} kB, Metadata {t * 1000:.0f} ms" for b, (g, t) in
            conns.items()), flush=True)

    try:
        probe.__enter__()
        settled = phase("idle", idle_before)
        created = settled and phase("create s", create_all)
        if settled:  # (created but not all at full ISR in time: what needs no ISR still runs)
            if wanted("memory"):
                phase("kB/partition", idle_after)
            if wanted("metadata"):
                phase("metadata all ms", metadata)
        if created:
            if wanted("propagation"):
                phase("propagation ms", propagation)
            if wanted("controller"):
                phase("ctl failover s", controller)
        if settled and wanted("leaders"):  # (every partition has a leader, if not its full ISR)
            phase("leader failover s", leaders)
        if created:
            if wanted("start"):
                phase("start kill s", lambda: start_after("kill"))
                if phase("start clean s", lambda: start_after("clean")):
                    phase("kB/partition fresh", fresh_memory)
            if args.connections and wanted("connections"):
                phase("kB/connection", idle_connections)
        row["load"] = _load()
        row["fenced"] = str(fencings(cluster))
        print(f"  load {row['load']}; brokers fenced for missed heartbeats in all: "
              f"{row['fenced']}", flush=True)
    finally:
        probe.__exit__()
        cluster.stop()
    return row


def _idle_cpu(cluster: LocalCluster, window_s: float = 5.0) -> float:
    """Median CPU use of the brokers over ``window_s``, in percent of one core."""
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu(pid: int) -> float:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    pids = [_pid(cluster, b) for b in cluster.broker_ids]
    before = [cpu(p) for p in pids]
    time.sleep(window_s)
    return statistics.median((cpu(p) - b) / window_s * 100 for p, b in zip(pids, before,
                                                                            strict=True))


def checkpoint_figures(counts: list[int]) -> None:
    """The event loop's share of N leader-epoch checkpoint writes, one by one and batched."""
    from floodmark.storage import Log, LogConfig, RealFileSystem
    from floodmark.storage.epoch_checkpoints import EpochCheckpointBatch

    fs = RealFileSystem()
    with tempfile.TemporaryDirectory(prefix="scale-checkpoints-") as tmp:
        logs = [Log.open(f"{tmp}/t-{i}", LogConfig(), fs=fs, now_ms=0)
                for i in range(max(counts))]
        for n in counts:
            print(f"== {n} partitions, load {_load()}", flush=True)
            t0 = time.perf_counter()
            for log in logs[:n]:
                log.assign_epoch(log.epoch_cache.latest_epoch + 1, 0)
            one_by_one = time.perf_counter() - t0
            batch = EpochCheckpointBatch()
            for log in logs[:n]:
                log.assign_epoch(log.epoch_cache.latest_epoch + 1, 0, durable=False)
                batch.add(log, lambda _now_ms: None)
            took, durable, worst = asyncio.run(_batch_on_a_loop(batch))
            print(f"  one after another on the loop: {one_by_one:.2f} s; batched: "
                  f"{took:.2f} s until durable ({durable} of {n}), the loop's longest gap "
                  f"meanwhile {worst * 1000:.0f} ms (a 5 ms ticker)", flush=True)
        for log in logs:
            log.close()


async def _batch_on_a_loop(batch: Any) -> tuple[float, int, float]:
    """Run ``batch`` on this event loop beside a 5 ms ticker: (seconds until durable, logs
    durable, the ticker's longest gap)."""
    t0 = time.perf_counter()
    task = asyncio.create_task(batch.run(lambda: 0))
    worst = 0.0
    while not task.done():
        t1 = time.perf_counter()
        await asyncio.sleep(0.005)
        worst = max(worst, time.perf_counter() - t1)
    durable = await task
    return time.perf_counter() - t0, int(durable), worst


def periodic_figures(counts: list[int], window_s: float) -> None:
    """CPU of the broker's periodic loop with N idle partitions, in this process."""
    import logging

    from floodmark.broker.broker import Broker
    from floodmark.broker.config import BrokerConfig

    logging.disable(logging.WARNING)
    for n in counts:
        with tempfile.TemporaryDirectory(prefix="scale-periodic-") as tmp:
            config = BrokerConfig.load(data_dir=Path(tmp), listen="127.0.0.1:0",
                                       overrides=["offsets.topic.num.partitions=1"])
            broker = Broker(config)
            broker.open()

            async def measure(broker: Broker = broker, n: int = n) -> tuple[float, float]:
                for i in range(0, n, 100):
                    await broker.create_topic(f"scale-{i // 100}", min(100, n - i), 1, {})
                assert len(broker.partitions) >= n, len(broker.partitions)
                print("  (floodmark from", Path(sys.modules["floodmark"].__file__).parent, ")")
                task = asyncio.create_task(broker._periodic())
                await asyncio.sleep(1.0)  # settle: the first checkpoint of the new partitions
                cpu0, wall0 = time.process_time(), time.perf_counter()
                await asyncio.sleep(window_s)
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                task.cancel()
                return cpu, wall

            try:
                cpu, wall = asyncio.run(measure())
            finally:
                broker.close()
            print(f"  {n} idle partitions: the periodic loop used {cpu:.2f} CPU s in "
                  f"{wall:.1f} s ({cpu / wall * 100:.1f} % of a core); load {_load()}",
                  flush=True)


def table(rows: list[Row]) -> str:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    widths = {c: max(len(c), *(len(r.get(c, "")) for r in rows)) for c in cols}
    lines = [" | ".join(c.ljust(widths[c]) for c in cols),
             "-|-".join("-" * widths[c] for c in cols)]
    lines += [" | ".join(r.get(c, "").ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", default="1000,5000",
                    help="comma-separated partition counts (default 1000,5000)")
    ap.add_argument("--quick", action="store_true", help="one small run: 200 partitions")
    ap.add_argument("--topic-partitions", type=int, default=100,
                    help="partitions per topic (default 100)")
    ap.add_argument("--connections", type=int, default=1000,
                    help="idle client connections per broker (0: skip)")
    ap.add_argument("--session-timeout-ms", type=int, default=0,
                    help="broker.session.timeout.ms (default: LocalCluster's, 2000)")
    ap.add_argument("--src", default=None, metavar="DIR",
                    help="run the floodmark in DIR (another checkout's src/)")
    ap.add_argument("--keep-dir", default=None, help="run the clusters here and keep them")
    ap.add_argument("--only", default=None, metavar="STEPS",
                    help="besides create: only these of memory,metadata,propagation,controller,"
                         "leaders,start,connections (comma-separated; default all)")
    ap.add_argument("--create-wait-s", type=float, default=WAIT_LIMIT_S,
                    help="how long to wait for every partition's full ISR after creating them, "
                         "and for new leaders after a broker's SIGKILL "
                         f"(default {WAIT_LIMIT_S:.0f}; the steps after the first run anyway)")
    ap.add_argument("--idle-window-s", type=float, default=5.0,
                    help="idle CPU: CPU seconds over this window (default 5)")
    ap.add_argument("--periodic", action="store_true",
                    help="only the broker's periodic loop with N idle partitions, in process")
    ap.add_argument("--checkpoints", action="store_true",
                    help="only the leader-epoch checkpoint writes of N new leaders, in process")
    args = ap.parse_args()
    counts = [200] if args.quick else [int(x) for x in args.partitions.split(",")]
    if args.checkpoints:
        checkpoint_figures(counts)
        return 0
    if args.periodic:
        periodic_figures(counts, args.idle_window_s)
        return 0
    if os.environ.get(PROFILE_ENV):
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(HERE / "profiling"), *filter(None, [os.environ.get("PYTHONPATH")])])
    rows = []
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        root = Path(args.keep_dir or tmp)
        for n in counts:
            rows.append(run(root, n, args))
    print()
    print(f"3 controllers, 3 brokers, RF 3; {os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d')}; "
          f"floodmark from {SRC}")
    print("create: all partitions with full ISR; ctl failover: active/first CreateTopics; "
          "leader failover: committed/applied; start: listening/full ISR; stall: the longest "
          "ApiVersions answer of a broker (ms) during create / of a survivor during failover")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
