"""Failover figures on a local cluster with a controller quorum (issue 11's benchmarks).

Starts ``LocalCluster`` with 3 controllers (one KRaft-style quorum) and 3 brokers, an RF=3 topic
with min.insync.replicas=2, and measures, ``--runs`` times each:

1. controller failover: SIGKILL the active controller -> a new one is active (DescribeQuorum)
   -> the first successful CreateTopics (confluent-kafka AdminClient through a broker);
2. partition-leader failover on SIGKILL, with where the time goes. After the kill, five clocks:
   ``fenced``   the controller committed the fence, a new leader (its ``metadata_commits``:
                its first commit after the kill; not polled);
   ``applied``  the new leader's image reached that offset (its ``metadata_applied``, which its
                heartbeats carry: its own timestamp, not polled);
   ``seen``     the controller's ``status`` (polled every 5 ms) names a new leader: the one
                clock an older floodmark without those timestamps also gives (``--compare-src``);
   ``raw``      a raw acks=all Produce sent straight to the new leader (once its Metadata names
                itself) is acknowledged (floodmark's KafkaConnection, no client metadata logic:
                the server side is ready, i.e. the other ISR member fetched from the new leader
                and moved its HW);
   ``client``   confluent-kafka (acks=all, idempotent) acknowledges its first write sent after
                the kill (what an application sees).
   ``client - raw`` is the client's own share (metadata refresh, backoffs);
3. partition-leader failover on SIGSTOP: the same four clocks; the session timeout is the floor;
4. metadata propagation latency, from those same two timestamps: per broker and the slowest
   (every broker has it), from the controller's commit and from the client's request (or the
   fault), for a CreateTopics, an IncrementalAlterConfigs, and the leader change after a fence
   (the SIGKILL and SIGSTOP runs of 2 and 3; the surviving brokers);
5. controller restart time with ``--restart-records`` metadata records (100,000) without and
   with snapshots (``controller_snapshot_restart.py``'s build and restart, ``--runs`` restarts
   of each, alternating; ``--restart-records 0`` skips it).

Every figure: median, min and max over ``--runs`` runs, then each run's value.
``--compare-src OLD/src`` runs a second cluster on an older checkout, its runs alternating with
this tree's, and prints the failover figures of both (propagation needs the new timestamps).

    .venv/bin/python benchmarks/controller_failover.py [--runs 5] [--session-timeout-ms 2000]

Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from controller_snapshot_restart import build as build_metadata_log
from controller_snapshot_restart import restart as restart_controller

from floodmark.client.connection import KafkaConnection
from floodmark.cluster import LocalCluster
from floodmark.controller.client import APPLIED_KEPT
from floodmark.records import Record, build_batch

SRC = Path(__file__).resolve().parents[1] / "src"
TOPIC = "fo"
POLL_S = 0.005
PROPAGATION_TIMEOUT_S = 30.0
Sample = dict[str, float]  # clock name -> seconds after the request (or the fault)


# -- when the controller committed, when each broker applied (their own timestamps) ------------
def _first_commit_after(status: dict[str, Any], offset: int) -> tuple[int, int] | None:
    """The controller's first commit past ``offset``: (end offset, wall-clock ms)."""
    return next(((int(end), int(ms)) for end, ms in status.get("metadata_commits", [])
                 if int(end) > offset), None)


def _applied_ms(node: dict[str, Any], end: int) -> int | None:
    """When a broker's image first reached ``end`` (its heartbeat's ``metadata_applied``); None
    if its history no longer reaches back that far."""
    history = node.get("metadata_applied") or []
    for i, (offset, ms) in enumerate(history):
        if int(offset) >= end:
            return int(ms) if i > 0 or len(history) < APPLIED_KEPT else None
    return None


def propagation(cluster: LocalCluster, before: int, t0_s: float, brokers: list[int]
                ) -> Sample:
    """Wait (bounded) until the controller committed past metadata offset ``before`` and each
    of ``brokers`` reports an image that far; the clocks, in seconds after ``t0_s`` (wall
    clock): ``commit``, ``applied <id>`` per broker, and the slowest, ``applied``."""
    deadline = time.monotonic() + PROPAGATION_TIMEOUT_S
    while time.monotonic() < deadline:
        status = cluster.status()
        commit = _first_commit_after(status, before)
        nodes = {n["id"]: n for n in status["nodes"]}
        if commit is not None and all(
                int(nodes[b].get("metadata_offset", -1)) >= commit[0] for b in brokers):
            out = {"commit": commit[1] / 1000 - t0_s}
            for b in brokers:
                ms = _applied_ms(nodes[b], commit[0])
                if ms is not None:
                    out[f"applied {b}"] = ms / 1000 - t0_s
            if len(out) == len(brokers) + 1:
                out["applied"] = max(out[f"applied {b}"] for b in brokers)
            return out
        time.sleep(0.05)
    raise RuntimeError(f"metadata past offset {before} did not reach brokers {brokers} "
                       f"within {PROPAGATION_TIMEOUT_S:.0f} s")


def _reports_progress(status: dict[str, Any]) -> bool:
    """Does this cluster's code report commit and apply times (an older one, compared, may
    not)?"""
    return "metadata_commits" in status


def _quiet(cluster: LocalCluster) -> int:
    """The controller's metadata offset once every broker has applied all of it."""
    def settled() -> int | None:
        status = cluster.status()
        end = status.get("metadata_offset")
        brokers = [n for n in status["nodes"] if n["role"] == "broker"]
        if end is not None and (not _reports_progress(status) or all(
                n.get("metadata_offset") == end for n in brokers)):
            return int(end)
        return None
    return int(_wait(settled, 60, "every broker at the controller's metadata offset"))


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


def leader_failover_once(cluster: LocalCluster, sig: signal.Signals
                         ) -> tuple[Sample, Sample]:
    """The failover clocks, and the propagation of the fence (leader change) to the surviving
    brokers; both in seconds after the fault."""
    acked: list[float] = []
    p, cb = failover_producer(cluster.bootstrap, TOPIC, acked)
    reg = cluster.partition_registration(TOPIC)
    assert reg is not None
    leader, epoch = int(reg["leader"]), int(reg["leader_epoch"])
    before = _quiet(cluster)
    clocks: dict[str, float] = {}
    new_leader: list[int] = []
    t_kill_wall = time.time()
    t_kill = time.perf_counter()
    cluster.kill(leader, sig)
    stop = threading.Event()

    def watch() -> None:
        # Only to know whom to send the raw produce to (the fence's own time is the
        # controller's commit timestamp, below).
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            if not new_leader:
                r = cluster.partition_registration(TOPIC)
                if r and int(r["leader"]) not in (leader, -1):
                    new_leader.append(int(r["leader"]))
                    clocks["seen"] = time.perf_counter()
            elif "raw" not in clocks:
                md = _metadata_leader(cluster.address(new_leader[0]))
                if (md and md[0] == new_leader[0] and md[1] > epoch
                        and _raw_produce(cluster.address(new_leader[0]))):
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
    out = {k: v - t_kill for k, v in clocks.items()}
    survivors = [b for b in cluster.broker_ids if b != leader]
    spread: Sample = {}
    if _reports_progress(cluster.status()):
        spread = propagation(cluster, before, t_kill_wall, survivors)
        out["fenced"] = spread["commit"]
        if new_leader and f"applied {new_leader[0]}" in spread:
            out["applied"] = spread[f"applied {new_leader[0]}"]
    if sig == signal.SIGSTOP:
        cluster.kill(leader, signal.SIGCONT)
    else:
        cluster.start_node(leader)
    p.flush(30)
    _wait(lambda: _healed(cluster), 60, "healed ISR")
    return out, spread


def propagation_once(cluster: LocalCluster, run: int, kind: str) -> Sample:
    """One metadata change a client asks for; the clocks in seconds after its request."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.list_topics(timeout=30)  # connected, versions known: the request alone is timed
    before = _quiet(cluster)
    t0 = time.time()
    if kind == "CreateTopics":
        name = f"mp-{run}"
        admin.create_topics([NewTopic(name, 1, 3)], request_timeout=30)[name].result(60)
    else:
        resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
            ConfigEntry("retention.ms", str(3_600_000 + run),
                        incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource], request_timeout=30).values():
            future.result(60)
    answered = time.time() - t0
    out = propagation(cluster, before, t0, cluster.broker_ids)
    out["answer"] = answered
    return out


def _ms(values: list[float]) -> str:
    """(The figure format; benchmarks/combined_failover.py prints with it.)"""
    return _stats(values)


def _stats(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (f"median {statistics.median(ms):.0f} ms, min {min(ms):.0f}, max {max(ms):.0f} "
            f"[{', '.join(f'{v:.0f}' for v in ms)}]")


def _report(name: str, runs: list[Sample]) -> None:
    print(name)
    for key in ("fenced", "applied", "seen", "raw", "client"):
        values = [r[key] for r in runs if key in r]
        if values:
            print(f"  {key:<8} {_stats(values)}")
    shares = [("controller commits the fence (fault -> fenced)", None, "fenced"),
              ("record reaches new leader (fenced -> applied)", "fenced", "applied"),
              ("first acks=all write possible (applied -> raw)", "applied", "raw"),
              ("client's own share (raw -> client)", "raw", "client")]
    for label, a, b in shares:
        values = [r[b] - (r[a] if a else 0.0) for r in runs if b in r and (a is None or a in r)]
        if values:
            print(f"    {label}: {_stats(values)}")


def _report_propagation(name: str, start: str, runs: list[Sample]) -> None:
    """Per broker and the slowest, from the commit and from the request (or fault)."""
    print(f"metadata propagation: {name}")
    brokers = sorted({k.split()[1] for r in runs for k in r if k.startswith("applied ")},
                     key=int)
    rows: list[tuple[str, list[float]]] = [
        (f"{start} -> controller commit", [r["commit"] for r in runs])]
    if any("answer" in r for r in runs):
        rows.append((f"{start} -> client answered", [r["answer"] for r in runs if "answer" in r]))
    for b in brokers:
        rows.append((f"commit -> broker {b} applied",
                     [r[f"applied {b}"] - r["commit"] for r in runs if f"applied {b}" in r]))
    rows.append(("commit -> every broker applied (max)",
                 [r["applied"] - r["commit"] for r in runs if "applied" in r]))
    rows.append((f"{start} -> every broker applied (max)",
                 [r["applied"] for r in runs if "applied" in r]))
    for label, values in rows:
        print(f"  {label}: {_stats(values) if values else 'n/a (history too short)'}")


def restart_figures(records: int, restarts: int) -> None:
    """Controller restart time with ``records`` metadata records, without and with snapshots
    (``controller_snapshot_restart.py``: the same build and restart)."""
    snapshot_bytes = 1 << 20
    with tempfile.TemporaryDirectory(prefix="ctl11-restart-") as tmp:
        without, with_ = Path(tmp) / "without", Path(tmp) / "with"
        end, topics = build_metadata_log(without, records, 0)
        build_metadata_log(with_, records, snapshot_bytes)
        times: dict[str, list[float]] = {"without": [], "with": []}
        for _ in range(restarts):
            times["without"].append(restart_controller(without, 0, topics))
            times["with"].append(restart_controller(with_, snapshot_bytes, topics))
    print(f"controller restart, {end} metadata records ({topics} topics), process start to "
          f"listening")
    for key in ("without", "with"):
        print(f"  {key} snapshots: {_stats(times[key])}")
    print(f"  without/with (medians): "
          f"{statistics.median(times['without']) / statistics.median(times['with']):.2f}x")


@contextlib.contextmanager
def _node_src(src: str | None) -> Iterator[None]:
    """Nodes launched meanwhile run the code in ``src`` (None: this tree's)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src or str(SRC)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def _start(path: Path, session_timeout_ms: int) -> LocalCluster:
    cluster = LocalCluster(
        path, 3, {"replica.lag.time.max.ms": "2000"},
        {"broker.session.timeout.ms": str(session_timeout_ms),
         "leader.imbalance.check.interval.ms": "3600000"},
        metrics=False, controllers=3).start()
    _wait(lambda: all(n.get("fenced") is False for n in cluster.status()["nodes"]
                      if n["role"] == "broker"), 60, "brokers registered")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                        )[TOPIC].result(60)
    _wait(lambda: _healed(cluster), 60, "topic ready")
    return cluster


def _interleaved(clusters: list[tuple[str, str | None, LocalCluster]], runs: int,
                 sample: Any) -> dict[str, list[Any]]:
    """``runs`` samples of each cluster, alternating (load drifts alike for all)."""
    out: dict[str, list[Any]] = {label: [] for label, _, _ in clusters}
    for r in range(runs):
        for label, src, cluster in clusters:
            with _node_src(src):
                out[label].append(sample(cluster, r))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--session-timeout-ms", type=int, default=2000)
    ap.add_argument("--skip-controller", action="store_true")
    ap.add_argument("--skip-stop", action="store_true")
    ap.add_argument("--keep-dir", default=None,
                    help="run the cluster here and keep it (its logs) afterwards")
    ap.add_argument("--restart-records", type=int, default=100_000,
                    help="metadata records for the restart figures (0: skip them)")
    ap.add_argument("--compare-src", default=None, metavar="DIR",
                    help="also run a second cluster whose nodes run the floodmark in DIR (an "
                         "older checkout's src/), its runs alternating with this tree's: the "
                         "failover figures of both side by side")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctl11-failover-") as tmp:
        root = Path(args.keep_dir or tmp)
        clusters: list[tuple[str, str | None, LocalCluster]] = []
        try:
            if args.compare_src:
                src = str(Path(args.compare_src).resolve())
                with _node_src(src):
                    clusters.append(("old", src, _start(root / "old", args.session_timeout_ms)))
            with _node_src(None):
                clusters.append(("new" if args.compare_src else "", None,
                                 _start(root / "c", args.session_timeout_ms)))
            print(f"3 controllers (quorum), 3 brokers, RF=3, min.insync.replicas=2, "
                  f"broker.session.timeout.ms={args.session_timeout_ms}, runs={args.runs}; "
                  f"client: confluent-kafka {confluent_kafka.version()} (librdkafka "
                  f"{confluent_kafka.libversion()[0]}), acks=all, idempotent, "
                  f"request.timeout.ms=4000, topic.metadata.refresh.interval.ms=500")
            if args.compare_src:
                print(f"old: nodes run {args.compare_src}; new: nodes run {SRC}; "
                      f"runs alternate old, new")
            if not args.skip_controller:
                by = _interleaved(clusters, args.runs, controller_failover_once)
                for label, samples in by.items():
                    print(f"controller failover (SIGKILL active controller){_tag(label)}")
                    print(f"  new active controller: {_stats([s[0] for s in samples])}")
                    print(f"  first successful CreateTopics: {_stats([s[1] for s in samples])}")
            killed = _interleaved(clusters, args.runs,
                                  lambda c, _r: leader_failover_once(c, signal.SIGKILL))
            for label, pairs in killed.items():
                _report(f"partition-leader failover on SIGKILL{_tag(label)}",
                        [k[0] for k in pairs])
            stopped: dict[str, list[tuple[Sample, Sample]]] = {}
            if not args.skip_stop:
                stopped = _interleaved(clusters, args.runs,
                                       lambda c, _r: leader_failover_once(c, signal.SIGSTOP))
                for label, pairs in stopped.items():
                    _report(f"partition-leader failover on SIGSTOP (session timeout "
                            f"{args.session_timeout_ms} ms){_tag(label)}", [s[0] for s in pairs])
            label, _, cluster = clusters[-1]  # propagation: this tree's (the timestamps)
            for kind in ("CreateTopics", "IncrementalAlterConfigs"):
                _report_propagation(kind, "request",
                                    [propagation_once(cluster, r, kind)
                                     for r in range(args.runs)])
            _report_propagation("leader change after a fence (SIGKILL of the leader)",
                                "kill", [k[1] for k in killed[label]])
            if stopped:
                _report_propagation("leader change after a fence (SIGSTOP of the leader)",
                                    "stop", [s[1] for s in stopped[label]])
        finally:
            for _, src, cluster in clusters:
                with _node_src(src):
                    cluster.stop()
    if args.restart_records > 0:
        restart_figures(args.restart_records, args.runs)
    return 0


def _tag(label: str) -> str:
    return f" [{label}]" if label else ""


if __name__ == "__main__":
    sys.exit(main())
