"""``floodmark cluster up|down|status|kill|start``: a real local cluster on loopback.

``up`` starts the controller (node 0) and N brokers (nodes 1..N) as separate processes, each
binding a free port, writes ``<data-dir>/cluster.json`` (pids, addresses, ports), prints the
bootstrap address and stays in the foreground until ``floodmark cluster down`` or Ctrl-C, then
stops every node (SIGTERM: brokers do a controlled shutdown). ``kill ID [--signal KILL|TERM|
STOP|CONT]`` and ``start ID`` are fault drills: a restarted node gets its previous port back, so
the bootstrap address stays valid. ``status [--json]`` prints
``{"bootstrap": ..., "nodes": [{"id", "role", "pid", "address", "alive", "state"}, ...]}``
(``state`` is running / stopped (SIGSTOP) / dead) plus, when the controller answers, each
broker's fenced flag and broker epoch, and each node's Prometheus address
(``"metrics": "http://host:port/metrics"``).

``LocalCluster`` is the same machinery as a Python class, for tests and benchmarks.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from floodmark.client.replica_state import replica_state
from floodmark.controller import rpc

STATE_FILE = "cluster.json"
CONTROLLER_ID = 0
DEFAULT_DATA_DIR = "floodmark-cluster"
_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_METRICS = re.compile(r"metrics on http://(\S+):(\d+)/metrics")

# Local-cluster defaults: loopback, so detection can be much quicker than Kafka's
# (broker.session.timeout.ms 9000, replica.lag.time.max.ms 30000).
BROKER_DEFAULTS = {
    "broker.heartbeat.interval.ms": "200",
    "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "100",
}
CONTROLLER_DEFAULTS = {
    "broker.session.timeout.ms": "2000",
    "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.ms": "10000",
}


def _pid_state(pid: int) -> str:
    """running | stopped | dead (zombies count as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "dead"
    if state == "Z":
        return "dead"
    if state in ("T", "t"):
        return "stopped"
    return "running"


class LocalCluster:
    def __init__(self, data_dir: str | Path, brokers: int = 3,
                 broker_settings: dict[str, str] | None = None,
                 controller_settings: dict[str, str] | None = None,
                 metrics: bool = True) -> None:
        """``metrics``: every node serves Prometheus ``/metrics`` on a port of its own."""
        self.data_dir = Path(data_dir).resolve()
        self.state_path = self.data_dir / STATE_FILE
        self.state: dict[str, Any] = {}
        if self.state_path.exists():
            self.state = json.loads(self.state_path.read_text())
        if not self.state.get("nodes"):
            bset = {**BROKER_DEFAULTS,
                    "default.replication.factor": str(min(3, brokers)),
                    **(broker_settings or {})}
            cset = {**CONTROLLER_DEFAULTS, **(controller_settings or {})}
            self.state = {
                "data_dir": str(self.data_dir),
                "broker_settings": bset,
                "controller_settings": cset,
                "metrics": metrics,
                "nodes": {str(CONTROLLER_ID): {"role": "controller", "port": 0, "pid": None}},
            }
            for i in range(1, brokers + 1):
                self.state["nodes"][str(i)] = {"role": "broker", "port": 0, "pid": None}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # -- state -------------------------------------------------------------------------------------
    def _save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        os.replace(tmp, self.state_path)

    def reload(self) -> None:
        if self.state_path.exists():
            self.state = json.loads(self.state_path.read_text())

    @property
    def broker_ids(self) -> list[int]:
        return sorted(int(i) for i, n in self.state["nodes"].items() if n["role"] == "broker")

    def node(self, node_id: int) -> dict[str, Any]:
        return dict(self.state["nodes"][str(node_id)])

    def address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.state['nodes'][str(node_id)]['port']}"

    @property
    def controller_address(self) -> str:
        return self.address(CONTROLLER_ID)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(b) for b in self.broker_ids)

    def pid(self, node_id: int) -> int | None:
        pid = self.state["nodes"][str(node_id)].get("pid")
        return int(pid) if pid else None

    def node_state(self, node_id: int) -> str:
        proc = self._procs.get(node_id)
        if proc is not None and proc.poll() is not None:
            return "dead"
        pid = self.pid(node_id)
        return _pid_state(pid) if pid else "dead"

    # -- processes ---------------------------------------------------------------------------------
    def _command(self, node_id: int) -> list[str]:
        n = self.state["nodes"][str(node_id)]
        if n["role"] == "controller":
            c = self.state["controller_settings"]
            return [sys.executable, "-m", "floodmark.controller",
                    "--data-dir", str(self.data_dir / "controller"),
                    "--listen", f"127.0.0.1:{n['port']}",
                    "--broker-session-timeout-ms", str(c["broker.session.timeout.ms"]),
                    "--unclean-leader-election-enable", str(c["unclean.leader.election.enable"]),
                    "--auto-leader-rebalance-enable", str(c["auto.leader.rebalance.enable"]),
                    "--leader-imbalance-check-interval-ms",
                    str(c["leader.imbalance.check.interval.ms"]), *self._metrics_args(n)]
        cmd = [sys.executable, "-m", "floodmark.broker.cluster_member",
               "--node-id", str(node_id), "--controller", self.controller_address,
               "--data-dir", str(self.data_dir / f"broker-{node_id}"),
               "--listen", f"127.0.0.1:{n['port']}", *self._metrics_args(n)]
        for k, v in self.state["broker_settings"].items():
            cmd += ["--set", f"{k}={v}"]
        return cmd

    def _metrics_args(self, node: dict[str, Any]) -> list[str]:
        if not self.state.get("metrics", True):
            return []
        return ["--metrics-listen", f"127.0.0.1:{node.get('metrics_port', 0)}"]

    def _log_path(self, node_id: int) -> Path:
        n = self.state["nodes"][str(node_id)]
        name = "controller" if n["role"] == "controller" else f"broker-{node_id}"
        return self.data_dir / "logs" / f"{name}.log"

    def _launch(self, node_id: int) -> tuple[subprocess.Popen[bytes], Path, int]:
        log_path = self._log_path(node_id)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        start = log_path.stat().st_size if log_path.exists() else 0
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(self._command(node_id), stdout=out, stderr=out,
                                    stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self._procs[node_id] = proc
        return proc, log_path, start

    def _await_listening(self, node_id: int, proc: subprocess.Popen[bytes], log_path: Path,
                         start: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with open(log_path, "rb") as fh:
                fh.seek(start)
                text = fh.read().decode(errors="replace")
            for line in text.splitlines():
                metrics = _METRICS.search(line) if "INFO" not in line else None
                if metrics and line.startswith("floodmark"):
                    self.state["nodes"][str(node_id)]["metrics_port"] = int(metrics.group(2))
                if "floodmark" in line and "listening on" in line and "INFO" not in line:
                    m = _LISTENING.search(line)
                    if m:
                        n = self.state["nodes"][str(node_id)]
                        n["port"] = int(m.group(2))
                        n["pid"] = proc.pid
                        self._save()
                        return
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        proc.kill()
        raise RuntimeError(f"node {node_id} did not start; log {log_path}:\n{text[-3000:]}")

    def start_node(self, node_id: int, timeout_s: float = 60.0) -> None:
        if self.node_state(node_id) != "dead":
            raise RuntimeError(f"node {node_id} is already running (pid {self.pid(node_id)})")
        proc, path, start = self._launch(node_id)
        self._await_or_rebind(node_id, proc, path, start, timeout_s)

    def _await_or_rebind(self, node_id: int, proc: subprocess.Popen[bytes], path: Path,
                         start: int, timeout_s: float) -> None:
        try:
            self._await_listening(node_id, proc, path, start, timeout_s)
        except RuntimeError as exc:
            node = self.state["nodes"][str(node_id)]
            if "address already in use" not in str(exc).lower() or not node["port"]:
                raise
            # Its old port was taken meanwhile: any free port (the controller keeps brokers'
            # registered addresses current; a moved controller needs its brokers restarted).
            node["port"] = 0
            proc, path, start = self._launch(node_id)
            self._await_listening(node_id, proc, path, start, timeout_s)

    def start(self, timeout_s: float = 60.0) -> LocalCluster:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.state["supervisor_pid"] = os.getpid()
        self._save()
        self.start_node(CONTROLLER_ID, timeout_s)
        launched = [(b, *self._launch(b)) for b in self.broker_ids]
        for b, proc, path, start in launched:
            self._await_or_rebind(b, proc, path, start, timeout_s)
        return self

    def kill(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        pid = self.pid(node_id)
        if pid is None or self.node_state(node_id) == "dead":
            raise RuntimeError(f"node {node_id} is not running")
        os.kill(pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.wait_dead(node_id, 30.0)

    def wait_dead(self, node_id: int, timeout_s: float) -> bool:
        pid = self.pid(node_id)
        proc = self._procs.get(node_id)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc is not None:
                if proc.poll() is not None:
                    return True
            elif pid is None or _pid_state(pid) == "dead":
                return True
            time.sleep(0.02)
        return False

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGCONT anything stopped, SIGTERM everyone (brokers first), SIGKILL stragglers."""
        for node_id in self.broker_ids:
            pid = self.pid(node_id)
            if pid is None or self.node_state(node_id) == "dead":
                continue
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for node_id in [*self.broker_ids, CONTROLLER_ID]:
            if node_id == CONTROLLER_ID:
                # Brokers first (their controlled shutdown needs the controller), then it.
                pid = self.pid(node_id)
                if pid is not None and self.node_state(node_id) != "dead":
                    try:
                        os.kill(pid, signal.SIGCONT)
                        os.kill(pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            if not self.wait_dead(node_id, timeout_s):
                pid = self.pid(node_id)
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.wait_dead(node_id, 5.0)
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.wait(5)
        self._procs.clear()

    # -- queries -----------------------------------------------------------------------------------
    def controller_status(self, timeout_s: float = 2.0) -> dict[str, Any] | None:
        try:
            answer = rpc.blocking_call(self.controller_address, "status", {}, timeout_s)
        except rpc.RpcError:
            return None
        result = answer.get("result")
        return result if isinstance(result, dict) else None

    def status(self) -> dict[str, Any]:
        ctl = self.controller_status()
        registered = {b["id"]: b for b in (ctl or {}).get("brokers", [])}
        nodes = []
        for node_id in [CONTROLLER_ID, *self.broker_ids]:
            n = self.state["nodes"][str(node_id)]
            state = self.node_state(node_id)
            entry: dict[str, Any] = {"id": node_id, "role": n["role"], "pid": n.get("pid"),
                                     "address": self.address(node_id),
                                     "alive": state != "dead", "state": state}
            if n.get("metrics_port"):
                entry["metrics"] = f"http://127.0.0.1:{n['metrics_port']}/metrics"
            if node_id in registered:
                entry["fenced"] = registered[node_id]["fenced"]
                entry["broker_epoch"] = registered[node_id]["broker_epoch"]
            nodes.append(entry)
        out: dict[str, Any] = {"bootstrap": self.bootstrap, "data_dir": str(self.data_dir),
                               "nodes": nodes}
        if ctl is not None:
            out["metadata_offset"] = ctl["metadata_offset"]
            out["partitions"] = ctl["topics"]
        return out

    def partition_registration(self, topic: str, partition: int = 0) -> dict[str, Any] | None:
        ctl = self.controller_status()
        if ctl is None:
            return None
        part = ctl["topics"].get(topic, {}).get(str(partition))
        return part if isinstance(part, dict) else None

    def leader_of(self, topic: str, partition: int = 0) -> int:
        reg = self.partition_registration(topic, partition)
        return int(reg["leader"]) if reg else -1

    def partition_dir(self, node_id: int, topic: str, partition: int = 0) -> Path:
        return self.data_dir / f"broker-{node_id}" / f"{topic}-{partition}"


# -- CLI ---------------------------------------------------------------------------------------------
def register(subparsers: Any) -> None:
    cluster = subparsers.add_parser("cluster", help="a local replicated cluster: up, down, "
                                                    "status, kill, start")
    sub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION")

    def data_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                       help=f"cluster directory (default ./{DEFAULT_DATA_DIR})")

    p = sub.add_parser("up", help="start the controller and N brokers; stay in the foreground")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="NAME=VALUE", help="broker setting (Kafka names), repeatable")
    p.add_argument("--controller-set", dest="controller_overrides", action="append", default=[],
                   metavar="NAME=VALUE",
                   help="controller setting: broker.session.timeout.ms, "
                        "unclean.leader.election.enable, auto.leader.rebalance.enable, "
                        "leader.imbalance.check.interval.ms")
    data_dir(p)
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("down", help="stop a cluster started with `cluster up`")
    data_dir(p)
    p.set_defaults(func=cmd_down)
    p = sub.add_parser("status", help="nodes, pids, addresses, liveness")
    p.add_argument("--json", action="store_true")
    data_dir(p)
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("describe", help="per replica: LEO, HW, log start, epoch cache, read "
                                        "from each broker")
    p.add_argument("topic")
    p.add_argument("--json", action="store_true")
    data_dir(p)
    p.set_defaults(func=cmd_describe)
    p = sub.add_parser("diff", help="offsets whose records differ between two brokers' copies "
                                    "of a partition (reads the segment files; e.g. what an "
                                    "unclean election lost)")
    p.add_argument("topic")
    p.add_argument("old", type=int, help="broker id whose records are checked (old leader)")
    p.add_argument("new", type=int, help="broker id to compare with (new leader)")
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--upto", type=int, default=None,
                   help="only offsets below this (e.g. the old leader's HW); default: all")
    data_dir(p)
    p.set_defaults(func=cmd_diff)
    p = sub.add_parser("kill", help="send a signal to one node (fault drill)")
    p.add_argument("id", type=int)
    p.add_argument("--signal", default="KILL", choices=["KILL", "TERM", "STOP", "CONT"])
    data_dir(p)
    p.set_defaults(func=cmd_kill)
    p = sub.add_parser("start", help="start one (dead) node again, on its previous port")
    p.add_argument("id", type=int)
    data_dir(p)
    p.set_defaults(func=cmd_start)
    cluster.set_defaults(func=lambda a: (cluster.print_help(), 2)[1])


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"expected NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _load(args: argparse.Namespace) -> LocalCluster:
    path = Path(args.data_dir) / STATE_FILE
    if not path.exists():
        raise SystemExit(f"no cluster in {args.data_dir} (start one with `floodmark cluster up`)")
    return LocalCluster(args.data_dir)


def cmd_up(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.data_dir, args.brokers, _pairs(args.overrides),
                           _pairs(args.controller_overrides))
    if any(cluster.node_state(n) != "dead" for n in [CONTROLLER_ID, *cluster.broker_ids]):
        print(f"a cluster is already running in {args.data_dir}", file=sys.stderr)
        return 1
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster.start()
        print(f"controller 0 at {cluster.controller_address}", flush=True)
        for b in cluster.broker_ids:
            print(f"broker {b} at {cluster.address(b)} (pid {cluster.pid(b)})", flush=True)
        print(f"bootstrap: {cluster.bootstrap}", flush=True)
        print(f"logs: {cluster.data_dir / 'logs'}; stop with `floodmark cluster down "
              f"--data-dir {args.data_dir}` or Ctrl-C", flush=True)
        while not stop["now"]:
            time.sleep(0.2)
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass  # reap nodes we started that died (kill drills)
            except ChildProcessError:
                pass
            cluster.reload()
    finally:
        cluster.stop()
        cluster.state["supervisor_pid"] = None
        cluster._save()
        print("cluster stopped", flush=True)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    cluster = _load(args)
    sup = cluster.state.get("supervisor_pid")
    if sup and _pid_state(int(sup)) != "dead":
        os.kill(int(sup), signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _pid_state(int(sup)) != "dead":
            time.sleep(0.1)
    cluster.reload()
    cluster.stop()  # nodes started by `cluster start`, or a supervisor that is gone
    print("cluster down")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    status = _load(args).status()
    if args.json:
        print(json.dumps(status, indent=1))
        return 0
    print(f"bootstrap: {status['bootstrap']}")
    for n in status["nodes"]:
        extra = ""
        if "fenced" in n:
            extra = f" broker_epoch={n['broker_epoch']}" + (" FENCED" if n["fenced"] else "")
        if "metrics" in n:
            extra += f" metrics={n['metrics']}"
        print(f"  {n['id']:>3} {n['role']:<10} pid={n['pid']} {n['address']:<22} "
              f"{n['state']}{extra}")
    for topic, parts in sorted(status.get("partitions", {}).items()):
        for p, reg in sorted(parts.items(), key=lambda kv: int(kv[0])):
            print(f"  {topic}-{p}: leader={reg['leader']} leader_epoch={reg['leader_epoch']} "
                  f"isr={reg['isr']} replicas={reg['replicas']} "
                  f"partition_epoch={reg['partition_epoch']}")
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    cluster = _load(args)
    cluster.kill(args.id, getattr(signal, f"SIG{args.signal}"))
    print(f"sent SIG{args.signal} to node {args.id} (pid {cluster.pid(args.id)})")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    cluster = _load(args)
    cluster.start_node(args.id)
    print(f"node {args.id} started at {cluster.address(args.id)} (pid {cluster.pid(args.id)})")
    return 0


# -- checks ------------------------------------------------------------------------------------------
def read_partition_values(partition_dir: str | Path) -> dict[int, bytes | None]:
    """offset -> value of every record in a partition directory's segment files (read-only)."""
    from floodmark.records import decode_batch, iter_batches

    values: dict[int, bytes | None] = {}
    for seg in sorted(Path(partition_dir).glob("*.log")):
        data = seg.read_bytes()
        for pos, _h in iter_batches(data, validate=False):
            _header, records = decode_batch(memoryview(data)[pos:], validate=False)
            for r in records:
                values[r.offset] = r.value
    return values


def lost_offsets(old_dir: str | Path, new_dir: str | Path, upto: int) -> list[int]:
    """Offsets below ``upto`` (e.g. the old leader's HW) whose record in ``old_dir`` is missing
    from, or different in, ``new_dir``: what an unclean election threw away."""
    old = read_partition_values(old_dir)
    new = read_partition_values(new_dir)
    return sorted(o for o, v in old.items() if o < upto and new.get(o, b"\0missing") != v)


def describe(cluster: LocalCluster, topic: str) -> list[dict[str, Any]]:
    ctl = cluster.controller_status()
    if ctl is None:
        raise RuntimeError("the controller does not answer")
    parts = ctl["topics"].get(topic)
    if parts is None:
        raise RuntimeError(f"unknown topic {topic!r}")
    out = []
    for index, reg in sorted(parts.items(), key=lambda kv: int(kv[0])):
        replicas = []
        for r in reg["replicas"]:
            entry: dict[str, Any] = {"id": r}
            try:
                entry.update(replica_state(cluster.address(r), topic, int(index),
                                           int(reg["leader_epoch"])))
            except (OSError, RuntimeError) as exc:
                entry["error"] = str(exc)
            replicas.append(entry)
        out.append({"partition": int(index), "leader": reg["leader"],
                    "leader_epoch": reg["leader_epoch"],
                    "partition_epoch": reg["partition_epoch"], "isr": reg["isr"],
                    "replicas": replicas})
    return out


def cmd_describe(args: argparse.Namespace) -> int:
    cluster = _load(args)
    try:
        rows = describe(cluster, args.topic)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        print(f"{args.topic}-{row['partition']}: leader {row['leader']} leader_epoch "
              f"{row['leader_epoch']} partition_epoch {row['partition_epoch']} isr {row['isr']}")
        for r in row["replicas"]:
            if "error" in r:
                print(f"  replica {r['id']}: unreachable ({r['error']})")
                continue
            cache = ", ".join(f"{e}@{o}" for e, o in r["epoch_cache"])
            role = "leader  " if r["id"] == row["leader"] else "follower"
            print(f"  replica {r['id']} {role} LEO {r['log_end_offset']} HW "
                  f"{r['high_watermark']} log_start {r['log_start_offset']} epochs [{cache}]")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    cluster = _load(args)
    old_dir = cluster.partition_dir(args.old, args.topic, args.partition)
    new_dir = cluster.partition_dir(args.new, args.topic, args.partition)
    for d in (old_dir, new_dir):
        if not d.is_dir():
            print(f"error: no partition directory {d}", file=sys.stderr)
            return 1
    upto = args.upto if args.upto is not None else 1 << 62
    lost = lost_offsets(old_dir, new_dir, upto)
    if not lost:
        print(f"{args.topic}-{args.partition}: every record of broker {args.old} is on broker "
              f"{args.new}")
        return 0
    runs: list[str] = []
    start = prev = lost[0]
    for o in [*lost[1:], None]:
        if o is not None and o == prev + 1:
            prev = o
            continue
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        if o is not None:
            start = prev = o
    print(f"{args.topic}-{args.partition}: {len(lost)} record(s) of broker {args.old} missing "
          f"or different on broker {args.new}: offsets {', '.join(runs)}")
    return 3
