"""Where the dashboard's numbers come from: one blocking ``collect()`` per refresh.

Two ways to find the cluster, one way to read the replicas:

* ``BootstrapSource`` (``--bootstrap``): a Metadata request gives the live brokers and every
  partition's leader, leader epoch, replicas and ISR. A broker missing from Metadata (fenced or
  dead) is shown as not alive. The controller is not visible over the Kafka protocol.
* ``LocalClusterSource`` (``--data-dir``): the controller's own status (``LocalCluster.status``,
  the same as ``floodmark cluster status``): every node's process state, fenced flag and broker
  epoch, and the controller's partition registrations.

Either way every reachable broker is then asked, over one connection each and in parallel, for
its own replicas' LEO, HW, log start and epoch cache (the debug replica id -2 reads of
``floodmark cluster describe``: ``client.replica_state.replica_states``) and, for the partitions it leads,
what it knows of its followers (``client.replica_state.leader_views``: the remote LEOs).
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from floodmark.address import format_host_port, parse_bootstrap
from floodmark.client import KafkaConnection, RequestFailed, leader_views, replica_states
from floodmark.cluster import CONTROLLER_ID, LocalCluster
from floodmark.ui.groups import read_groups
from floodmark.ui.topic_stats import (
    STAT_KEYS,
    Sample,
    TopicStats,
    committed_of,
    log_dir_sizes,
    topic_byte_counters,
    topic_sizes,
)

PartitionKey = tuple[str, int]
BROKER_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Registration:
    """A partition's leader, leader epoch, replicas and ISR, as the cluster's metadata says, and
    its KIP-966 eligible leader replicas (from the controller; Metadata answers lack them)."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()


@dataclass
class ClusterView:
    """Who is in the cluster and what its metadata says, before any replica is asked."""

    mode: str
    brokers: list[dict[str, Any]]
    controller: dict[str, Any] | None
    registrations: dict[PartitionKey, Registration]
    internal_topics: set[str] = field(default_factory=set)
    # Prometheus endpoints known apart from the brokers' entries (``--metrics`` with
    # ``--bootstrap``: which broker each belongs to is not known).
    metrics: tuple[str, ...] = ()


class Source(Protocol):
    def describe(self) -> ClusterView: ...

    def bootstrap(self) -> str:
        """The brokers' addresses, for the message browser's consumer reads."""
        ...


class BootstrapSource:
    """Any floodmark cluster, found through its bootstrap servers."""

    def __init__(self, bootstrap: str, metrics: tuple[str, ...] = ()) -> None:
        """``metrics``: the brokers' Prometheus endpoints (``--metrics``), for bytes/s."""
        self.addresses = [format_host_port(h, p) for h, p in parse_bootstrap(bootstrap)]
        self.metrics = metrics

    def bootstrap(self) -> str:
        return ",".join(self.addresses)

    def _metadata(self) -> Any:
        last: Exception | None = None
        for address in self.addresses:
            try:
                with KafkaConnection(address, timeout_s=BROKER_TIMEOUT_S) as conn:
                    return conn.request(3, 12, {"topics": None,
                                                "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
            except (OSError, RequestFailed) as exc:
                last = exc
        raise ConnectionError(f"no bootstrap server answers ({last})")

    def describe(self) -> ClusterView:
        meta = self._metadata()
        live = {int(b.node_id): f"{b.host}:{int(b.port)}" for b in meta.brokers}
        registrations: dict[PartitionKey, Registration] = {}
        internal: set[str] = set()
        for t in meta.topics:
            if int(t.error_code) or t.name is None:
                continue
            if t.is_internal or str(t.name).startswith("__"):
                internal.add(str(t.name))
            for p in t.partitions:
                registrations[(str(t.name), int(p.partition_index))] = Registration(
                    int(p.leader_id), int(p.leader_epoch),
                    tuple(int(r) for r in p.replica_nodes), tuple(int(r) for r in p.isr_nodes))
        known = set(live) | {r for reg in registrations.values() for r in reg.replicas}
        brokers = [{"id": b, "address": live.get(b), "alive": b in live, "state": None,
                    "fenced": None, "broker_epoch": None, "metrics": None}
                   for b in sorted(known)]
        return ClusterView("bootstrap", brokers, None, registrations, internal, self.metrics)


DRILLS = {"kill": signal.SIGKILL, "pause": signal.SIGSTOP, "resume": signal.SIGCONT}


class LocalClusterSource:
    """A local cluster (``floodmark cluster up`` or ``LocalCluster``) by its data directory.
    It also runs the fault drills of ``floodmark cluster kill|start`` for the page's buttons."""

    def drill(self, node_id: int, action: str) -> str:
        """kill (SIGKILL), pause (SIGSTOP), resume (SIGCONT) or start one broker."""
        self.cluster.reload()
        if node_id not in self.cluster.broker_ids:
            raise ValueError(f"no broker {node_id} in this cluster")
        if action == "start":
            self.cluster.start_node(node_id)
            return f"broker {node_id} started at {self.cluster.address(node_id)}"
        if action not in DRILLS:
            raise ValueError(f"unknown drill {action!r}")
        self.cluster.kill(node_id, DRILLS[action])
        return f"sent {DRILLS[action].name} to broker {node_id} (pid {self.cluster.pid(node_id)})"

    def __init__(self, data_dir: str) -> None:
        # A user's cluster: a node a drill restarts outlives the dashboard, as the others do.
        self.cluster = LocalCluster(data_dir, die_with_supervisor=False)
        if not self.cluster.state_path.exists():
            raise FileNotFoundError(f"no cluster in {data_dir} (no {self.cluster.state_path})")

    def bootstrap(self) -> str:
        self.cluster.reload()
        return self.cluster.bootstrap

    def describe(self) -> ClusterView:
        self.cluster.reload()
        status = self.cluster.status()
        brokers: list[dict[str, Any]] = []
        controller: dict[str, Any] | None = None
        for n in status["nodes"]:
            roles = str(n["role"]).split(",")
            if "controller" in roles and (n.get("active") or (
                    n["id"] == CONTROLLER_ID and controller is None)):
                # A quorum's controllers: show the active one (node 0 while none is active).
                controller = {"id": n["id"], "address": n.get("controller_address",
                                                               n["address"]),
                              "alive": n["alive"], "state": n["state"], "pid": n["pid"],
                              "metadata_offset": status.get("metadata_offset"),
                              "answers": "partitions" in status}
            if "broker" not in roles:  # a combined node is a broker too
                continue
            # Alive means: the process runs and the controller does not fence it.
            alive = n["state"] == "running" and not n.get("fenced", False)
            brokers.append({"id": n["id"], "address": n["address"], "alive": alive,
                            "state": n["state"], "fenced": n.get("fenced"),
                            "broker_epoch": n.get("broker_epoch"),
                            "metrics": n.get("metrics")})
        registrations: dict[PartitionKey, Registration] = {}
        for topic, parts in status.get("partitions", {}).items():
            for index, reg in parts.items():
                registrations[(topic, int(index))] = Registration(
                    int(reg["leader"]), int(reg["leader_epoch"]),
                    tuple(int(r) for r in reg["replicas"]), tuple(int(r) for r in reg["isr"]),
                    tuple(int(r) for r in reg.get("elr", ())))
        internal = {t for t, _ in registrations if t.startswith("__")}
        if controller is not None and self.cluster.is_quorum:
            # The seed's remote-LEO figure for the metadata log: the leader's epoch and HW and
            # each voter's LEO and lag, as `floodmark cluster quorum` shows them.
            q = self.cluster.quorum()
            controller["quorum"] = {
                "leader_id": q["leader_id"], "leader_epoch": q["leader_epoch"],
                "high_watermark": q["high_watermark"],
                "voters": [{"id": int(v["voter_id"]), "log_end_offset": v.get("log_end_offset"),
                            "lag": v.get("lag"), "state": v.get("state")}
                           for v in q["voters"]]}
        return ClusterView("local", brokers, controller, registrations, internal)


def _ask_broker(address: str, hosted: list[tuple[str, int, int]], led: list[PartitionKey]
                ) -> tuple[dict[PartitionKey, dict[str, Any]], dict[PartitionKey, dict[str, Any]]]:
    states: dict[PartitionKey, dict[str, Any]] = {}
    views: dict[PartitionKey, dict[str, Any]] = {}
    try:
        if hosted:
            states = replica_states(address, hosted, BROKER_TIMEOUT_S)
    except (OSError, RuntimeError, RequestFailed) as exc:
        states = {(t, p): {"error": f"{address}: {exc}"} for t, p, _e in hosted}
    try:
        if led:
            views = leader_views(address, led, BROKER_TIMEOUT_S)
    except (OSError, RuntimeError, RequestFailed) as exc:
        views = {key: {"error": f"{address}: {exc}"} for key in led}
    return states, views


def _leader_high_watermarks(address: str, led: list[PartitionKey]) -> dict[PartitionKey, int]:
    """Each partition's high watermark from its leader, in one ListOffsets (latest, as any
    consumer asks it): the cheap read behind group lag and the topics table."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in led:
        by_topic.setdefault(topic, []).append(index)
    try:
        with KafkaConnection(address, timeout_s=BROKER_TIMEOUT_S) as conn:
            resp = conn.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": t, "partitions": [{"partition_index": i, "current_leader_epoch": -1,
                                            "timestamp": -1} for i in parts]}
                for t, parts in by_topic.items()]})
    except (OSError, RequestFailed):
        return {}
    return {(str(t.name), int(p.partition_index)): int(p.offset)
            for t in resp.topics for p in t.partitions if int(p.error_code) == 0}


def collect(source: Source, pool: ThreadPoolExecutor,
            focus: frozenset[PartitionKey] | None = None,
            previous: dict[str, Any] | None = None,
            stats: TopicStats | None = None) -> dict[str, Any]:
    """One refresh: ``{"time_ms", "cluster", "topics", "partitions", "groups", "focus"}``.

    ``focus``: the partitions somebody looks at; only their replicas are asked (``partitions``
    then holds only them). None: every partition (the JSON API, a page's first load).
    ``previous``: a snapshot whose groups and high watermarks (of the partitions not in focus)
    are reused instead of asking the group coordinators and the leaders again (the poller
    asks for those every few refreshes only), and so are its topics' sizes and rates.
    ``stats``: the rates' memory (``topic_stats``); None: no sizes or rates (each None)."""
    view = source.describe()
    alive = {b["id"]: b["address"] for b in view.brokers if b["alive"] and b["address"]}
    # A running broker the controller still fences (e.g. restarted, catching up) still answers
    # for its replicas; a stopped (SIGSTOP) or dead one is not asked.
    reachable = {b["id"]: b["address"] for b in view.brokers
                 if b["address"] and (b["alive"] or b["state"] == "running")}
    hosted: dict[int, list[tuple[str, int, int]]] = {b: [] for b in reachable}
    led: dict[int, list[PartitionKey]] = {b: [] for b in reachable}
    shown = {key: reg for key, reg in sorted(view.registrations.items())
             if focus is None or key in focus}
    for (topic, index), reg in shown.items():
        for r in reg.replicas:
            if r in hosted:
                hosted[r].append((topic, index, max(reg.leader_epoch, 0)))
        if reg.leader in led:
            led[reg.leader].append((topic, index))
    futures = {b: pool.submit(_ask_broker, reachable[b], hosted[b], led[b]) for b in reachable
               if hosted[b] or led[b]}
    states: dict[int, dict[PartitionKey, dict[str, Any]]] = {}
    views: dict[int, dict[PartitionKey, dict[str, Any]]] = {}
    for b, fut in futures.items():
        states[b], views[b] = fut.result()
    partitions = [partition_row(key, reg, states, views.get(reg.leader, {}).get(key))
                  for key, reg in shown.items()]
    leads: dict[int, list[str]] = {}
    for (topic, index), reg in sorted(view.registrations.items()):
        leads.setdefault(reg.leader, []).append(f"{topic}-{index}")
    for b in view.brokers:
        b["leads"] = leads.get(b["id"], [])
    high_watermarks: dict[PartitionKey, int | None] = {
        (p["topic"], p["partition"]): next(
            (r["high_watermark"] for r in p["replicas"] if r["broker"] == p["leader"]), None)
        for p in partitions}
    leaders = {key: reg.leader for key, reg in view.registrations.items()}
    if previous is None:
        if focus is not None:  # the leaders' HWs of every partition, for the lag
            all_led: dict[int, list[PartitionKey]] = {}
            for key, reg in view.registrations.items():
                if reg.leader in reachable and key not in shown:
                    all_led.setdefault(reg.leader, []).append(key)
            for answer in pool.map(lambda b: _leader_high_watermarks(reachable[b], all_led[b]),
                                   list(all_led)):
                high_watermarks.update(answer)
        groups = read_groups(reachable, leaders, high_watermarks, pool)
        per_topic = (_topic_stats(view, reachable, leaders, high_watermarks, groups, stats,
                                  pool) if stats is not None else {})
    else:
        groups = list(previous.get("groups") or [])
        per_topic = {}
        for t in previous.get("topics") or []:
            per_topic[t["topic"]] = {k: t.get(k) for k in STAT_KEYS}
            for row in t["partitions"]:
                high_watermarks.setdefault((t["topic"], row["partition"]),
                                           row.get("high_watermark"))
    rows = topic_rows(view, alive, high_watermarks)
    for row in rows:
        known = per_topic.get(row["topic"], {})
        row.update({k: known.get(k) for k in STAT_KEYS})
    return {"time_ms": int(time.time() * 1000),
            "cluster": {"mode": view.mode, "controller": view.controller,
                        "brokers": view.brokers},
            "topics": rows,
            "partitions": partitions,
            "groups": groups,
            "focus": None if focus is None else [list(k) for k in sorted(focus)]}


def _topic_stats(view: ClusterView, reachable: dict[int, str], leaders: dict[PartitionKey, int],
                 high_watermarks: dict[PartitionKey, int | None], groups: list[dict[str, Any]],
                 stats: TopicStats, pool: ThreadPoolExecutor) -> dict[str, dict[str, Any]]:
    """Sizes (one DescribeLogDirs per reachable broker) and rates (``topic_stats``) per topic."""
    metrics = [str(b["metrics"]) for b in view.brokers
               if b.get("metrics") and b["id"] in reachable] + list(view.metrics)
    size_futures = {b: pool.submit(log_dir_sizes, reachable[b]) for b in reachable}
    scrape_futures = {url: pool.submit(topic_byte_counters, url) for url in metrics}
    sizes = {b: fut.result() for b, fut in size_futures.items()}
    counters = {url: answer for url, fut in scrape_futures.items() if (answer := fut.result()) is not None}
    rates = stats.observe(Sample(
        time.monotonic(), {k: v for k, v in high_watermarks.items() if v is not None},
        committed_of(groups), counters))
    out: dict[str, dict[str, Any]] = {}
    for topic, size_row in topic_sizes(sizes, leaders).items():
        out.setdefault(topic, {}).update(size_row)
    for topic, rate_row in rates.items():
        out.setdefault(topic, {}).update(rate_row)
    return out


def partition_row(key: PartitionKey, reg: Registration,
                  states: dict[int, dict[PartitionKey, dict[str, Any]]],
                  leader_view: dict[str, Any] | None) -> dict[str, Any]:
    """One entry of ``GET /api/partitions``: the issue's contract, plus the last stable offset
    (issue 15): the partition's (its leader's) and each replica's own. It is below the HW while
    a transaction is open; None where a replica does not answer."""
    replicas = []
    for r in reg.replicas:
        state = states.get(r, {}).get(key)
        ok = state is not None and "error" not in state
        replicas.append({"broker": r,
                         "log_end_offset": state["log_end_offset"] if ok and state else None,
                         "high_watermark": state["high_watermark"] if ok and state else None,
                         "epochs": state["epoch_cache"] if ok and state else [],
                         "last_stable_offset":
                             state.get("last_stable_offset") if ok and state else None})
    leader_state = states.get(reg.leader, {}).get(key)
    log_start: int | None = None
    if leader_state is not None and "error" not in leader_state:
        log_start = int(leader_state["log_start_offset"])
    else:
        starts = [int(s[key]["log_start_offset"]) for s in states.values()
                  if key in s and "error" not in s[key]]
        log_start = min(starts) if starts else None
    remote: dict[str, int] = {}
    if leader_view is not None and "error" not in leader_view:
        remote = {str(b): leo for b, leo in sorted(leader_view["log_end_offsets"].items())
                  if b != reg.leader}
    return {"topic": key[0], "partition": key[1], "leader": reg.leader,
            "leader_epoch": reg.leader_epoch, "isr": list(reg.isr), "elr": list(reg.elr),
            "log_start_offset": log_start, "replicas": replicas,
            "remote_log_end_offsets": remote,
            "last_stable_offset": next((r["last_stable_offset"] for r in replicas
                                        if r["broker"] == reg.leader), None)}


def topic_rows(view: ClusterView, alive: dict[int, str],
               high_watermarks: dict[PartitionKey, int | None] | None = None
               ) -> list[dict[str, Any]]:
    """``GET /api/topics``: per topic, its partitions' leader, ISR, under-replicated, offline,
    and the leader's high watermark where this refresh read it (None where it did not)."""
    hws = high_watermarks or {}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), reg in sorted(view.registrations.items()):
        topics.setdefault(topic, []).append({
            "partition": index, "leader": reg.leader, "leader_epoch": reg.leader_epoch,
            "replicas": list(reg.replicas), "isr": list(reg.isr), "elr": list(reg.elr),
            "under_replicated": len(reg.isr) < len(reg.replicas),
            "offline": reg.leader < 0 or reg.leader not in alive,
            "high_watermark": hws.get((topic, index))})
    return [{"topic": t, "internal": t in view.internal_topics, "partitions": parts,
             "under_replicated": sum(p["under_replicated"] for p in parts),
             "offline": sum(p["offline"] for p in parts)}
            for t, parts in sorted(topics.items())]
