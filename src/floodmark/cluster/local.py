"""``LocalCluster``: a real local cluster on this machine, supervised from Python.

``start()`` launches the controller (node 0) and N brokers (nodes 1..N) as separate processes,
each binding a free port, and writes ``<data-dir>/cluster.json`` (pids, addresses, ports).
``kill(id, signal)`` and ``start_node(id)`` are fault drills: a restarted node gets its previous
port back, so the bootstrap address stays valid. ``stop()`` SIGTERMs every node (brokers do a
controlled shutdown). ``status()`` gives
``{"bootstrap": ..., "nodes": [{"id", "role", "pid", "address", "alive", "state"}, ...]}``
(``state`` is running / stopped (SIGSTOP) / dead) plus, when the controller answers, each
broker's fenced flag and broker epoch, its image's ``metadata_offset`` and
``metadata_applied`` (``[[offset, wall-clock ms], ...]``: when it reached each of its latest
offsets, as its last heartbeat said), the controller's ``metadata_commits`` (``[[end offset,
wall-clock ms], ...]``: when records were committed), and each node's Prometheus address
(``"metrics": "http://host:port/metrics"``).

With ``controllers=N`` (N > 1) the controllers form a quorum (``--controller-quorum-voters``):
node 0 and nodes 1001..1000+N-1, each its own process and data dir (``controller``,
``controller-1001``, ...), on ports chosen before the first start and kept (the voter set names
them); brokers get every controller's address and follow the active one. ``status()`` then marks
each controller ``"active": true|false`` and ``quorum()`` gives DescribeQuorum's view (leader,
epoch, HW, each voter's LEO and lag).

With ``combined=True`` every node runs ``process.roles=broker,controller`` (role
``"broker,controller"``): nodes 1..N are brokers and, together, the quorum's voters (each a
``cluster_member --controller-data-dir controller-N --controller-quorum-voters ...``, its
controller port fixed before the first start as ``controller_port``); there is no node 0.

``floodmark cluster`` (``floodmark.cli.cluster``) is the command-line front end; tests,
benchmarks, the demos and the dashboard use the class directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from floodmark.cluster.layout import CLIENT_PROPERTIES, STATE_FILE
from floodmark.cluster.node_env import node_env
from floodmark.cluster.secure import ClusterSecurity
from floodmark.cluster.waiting import LIMIT_S, STALL_MS, Stalled, process_progress, wait_progress
from floodmark.controller import (
    bootstrap_bindings,
    format_directory,
    new_directory_id,
    rpc,
    scram,
)
from floodmark.errors import ErrorCode, FloodmarkError
from floodmark.ports import free_port
from floodmark.security import PLAINTEXT, ClientSecurity
from floodmark.storage import RealFileSystem

CONTROLLER_ID = 0
COMBINED_ROLE = "broker,controller"  # Kafka's process.roles of a combined node
_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_METRICS = re.compile(r"metrics on https?://(\S+):(\d+)/metrics")

# Local-cluster defaults: loopback, so detection can be much quicker than Kafka's
# (broker.session.timeout.ms 9000, replica.lag.time.max.ms 30000).
BROKER_DEFAULTS = {
    "broker.heartbeat.interval.ms": "200",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "group.initial.rebalance.delay.ms": "100",
}
CONTROLLER_DEFAULTS = {
    "broker.session.timeout.ms": "2000",
    "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.ms": "10000",
    # KIP-966 eligible leader replicas and the unclean-shutdown rule (0 turns them off): an
    # acknowledged write survives a power cut of the last ISR member.
    "eligible.leader.replicas.version": "1",
}


METRICS_PORT_OFFSET = 100  # with a base port: node N's /metrics on base + 100 + N
# A controller quorum: controller k (k >= 1) is node 1000 + k; with a base port it listens on
# base + 200 + k and serves /metrics on base + 300 + k (node 0 keeps base and base + 100).
QUORUM_NODE_BASE = 1000
QUORUM_PORT_OFFSET = 200
QUORUM_METRICS_PORT_OFFSET = 300
MAX_CONTROLLERS = 9
METADATA_LOG_SETTINGS = ("metadata.log.segment.bytes",
                         "metadata.log.max.record.bytes.between.snapshots")
# Loopback quorum timeouts (Kafka: election 1000, fetch 2000, backoff 1000, request 2000).
CONTROLLER_QUORUM_DEFAULTS = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "500",
    "controller.quorum.request.timeout.ms": "1000",
}
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


# A stopping node that shows no progress (CPU time, output) this long is SIGKILLed.
STOP_STALL_MS = 10_000


class _Exited(Exception):
    """The node's process ended before it was listening."""


class ClusterError(FloodmarkError, RuntimeError):
    """What a user asked of the cluster cannot be done; the message is one line (a node's log
    tail, when there is one, is attached as a note)."""


def pid_state(pid: int) -> str:
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


def _read_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot read {path}: {exc}") from None
    if not isinstance(state, dict):
        raise ClusterError(f"{path} is not a cluster state file")
    return state


def has_role(node: dict[str, Any], role: str) -> bool:
    """Does the node run ``role`` (``broker`` or ``controller``; a combined node runs both)?"""
    return role in str(node["role"]).split(",")


def controller_node_id(index: int) -> int:
    """The node id of a local cluster's controller number ``index`` (0, 1001, 1002, ...)."""
    return CONTROLLER_ID if index == 0 else QUORUM_NODE_BASE + index


def _free_port(host: str) -> int:
    try:
        return free_port(host)
    except OSError as exc:
        raise ClusterError(f"cannot bind a port on {host}: {exc.strerror or exc}") from None


def load_cluster(data_dir: str | Path) -> LocalCluster:
    """The cluster a ``floodmark cluster up`` left in ``data_dir``; ClusterError if none. Nodes
    it (re)starts outlive this process, as the others of that cluster do."""
    if not (Path(data_dir) / STATE_FILE).is_file():
        raise ClusterError(f"no cluster in {data_dir} (start one with `floodmark cluster up "
                           f"--data-dir {data_dir}`)")
    return LocalCluster(data_dir, die_with_supervisor=False)


class LocalCluster:
    def __init__(self, data_dir: str | Path, brokers: int = 3,
                 broker_settings: dict[str, str] | None = None,
                 controller_settings: dict[str, str] | None = None,
                 metrics: bool = True, *, base_port: int | None = None,
                 listen_host: str = "127.0.0.1", advertised_host: str | None = None,
                 controller: str | None = None, first_broker_id: int = 1,
                 controllers: int = 1, combined: bool = False,
                 die_with_supervisor: bool = True, security: str | None = None,
                 racks: Sequence[str] = (), features: Mapping[str, int] | None = None) -> None:
        """A new cluster's shape (ignored when ``data_dir`` already holds one):

        - ``metrics``: every node serves Prometheus ``/metrics`` on a port of its own;
        - ``base_port``: stable ports, the controller on ``base_port``, broker N on
          ``base_port + N`` (and its /metrics on ``base_port + 100 + N``); default: any free
          port, kept across restarts;
        - ``listen_host``: the address every node binds (``0.0.0.0``: every interface);
          ``advertised_host``: the one clients and other brokers are told (default: the listen
          host, or this machine's host name (gethostname) for a wildcard);
        - ``controller``: ``HOST:PORT`` of a controller elsewhere (another machine's cluster):
          this directory then runs brokers only, ``first_broker_id`` and up;
        - ``controllers``: how many controller processes (more than one: a quorum);
        - ``combined``: no controller processes: every broker is also a voter of the quorum
          (``process.roles=broker,controller``; ``controllers`` and ``controller`` unused);
        - ``security``: a secured cluster (``cluster.secure.MODES``): ``ssl``, TLS client
          listeners and mTLS between nodes; ``sasl_ssl``, SASL_SSL + SCRAM-SHA-512 on the
          client and inter-broker listeners, mTLS on the controller channel, ACLs on;
          certificates of a throwaway CA under ``tls/``;
        - ``racks``: ``broker.rack`` of each broker, round-robin in id order (brokers added
          later continue the round-robin);
        - ``features``: the feature levels its metadata log starts at (``kafka-storage format
          --feature``; None: the controller's defaults, ``floodmark.features.BOOTSTRAP``);
        - ``broker_settings``: every broker's settings; ``{node_id}`` in a value is the
          broker's id (``log.dirs=/disks/b{node_id}-a,/disks/b{node_id}-b``).

        ``die_with_supervisor`` (not part of the cluster's state): the nodes this object starts
        end when this process does, however it ends (``floodmark.lifeline``), so a killed test
        run or benchmark leaves no cluster behind; False for nodes that outlive it (``floodmark
        cluster up``, ``cluster start``, the dashboard's drills on a user's cluster).
        """
        self.die_with_supervisor = die_with_supervisor
        self.data_dir = Path(data_dir).resolve()
        self.state_path = self.data_dir / STATE_FILE
        self.state: dict[str, Any] = {}
        if self.state_path.exists():
            self.state = _read_state(self.state_path)
        if not self.state.get("nodes"):
            bset = {**BROKER_DEFAULTS,
                    "default.replication.factor": str(min(3, brokers)),
                    **(broker_settings or {})}
            if combined:
                controller, controllers = None, 0
            cset = {**CONTROLLER_DEFAULTS,
                    **(CONTROLLER_QUORUM_DEFAULTS if controllers > 1 or combined else {}),
                    **(controller_settings or {})}
            if advertised_host is None:
                advertised_host = (socket.gethostname() if listen_host in WILDCARD_HOSTS
                                   else listen_host)
            self.state = {
                "data_dir": str(self.data_dir),
                "broker_settings": bset,
                "controller_settings": cset,
                "metrics": metrics,
                "listen_host": listen_host,
                "advertised_host": advertised_host,
                "base_port": base_port,
                "controller": controller,
                "combined": combined,
                "nodes": {},
            }
            if security is not None:
                self.state["security"] = security
            if racks:
                self.state["racks"] = list(racks)
            if features is not None:
                self.state["features"] = dict(features)
            if controller is None:
                for k in range(controllers):
                    node_id = controller_node_id(k)
                    self.state["nodes"][str(node_id)] = self._new_node("controller", node_id)
            role = COMBINED_ROLE if combined else "broker"
            for i in range(first_broker_id, first_broker_id + brokers):
                self.state["nodes"][str(i)] = self._new_node(role, i)
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def _new_node(self, role: str, node_id: int) -> dict[str, Any]:
        base = self.state.get("base_port")
        offset, metrics_offset = node_id, METRICS_PORT_OFFSET + node_id
        if role == "controller" and node_id > QUORUM_NODE_BASE:
            offset = QUORUM_PORT_OFFSET + node_id - QUORUM_NODE_BASE
            metrics_offset = QUORUM_METRICS_PORT_OFFSET + node_id - QUORUM_NODE_BASE
        node: dict[str, Any] = {"role": role, "port": 0 if base is None else base + offset,
                                "pid": None}
        if base is not None:
            node["metrics_port"] = base + metrics_offset
        if role == COMBINED_ROLE:  # its controller's port: the voter set names it
            node["controller_port"] = 0 if base is None else base + QUORUM_PORT_OFFSET + node_id
        racks = self.state.get("racks")
        if racks and has_role(node, "broker"):  # round-robin over the brokers made so far
            made = sum(1 for n in self.state["nodes"].values() if has_role(n, "broker"))
            node["rack"] = racks[made % len(racks)]
        return node

    def add_brokers(self, count: int) -> list[int]:
        """Grow the cluster to ``count`` brokers (new ids after the highest); never shrinks."""
        ids = self.broker_ids
        if count < len(ids):
            raise ClusterError(
                f"this cluster has {len(ids)} brokers ({', '.join(map(str, ids))}); it does not "
                f"shrink to {count} (its partitions have replicas there): stop one with "
                "`floodmark cluster kill ID`")
        new = list(range(max(ids, default=0) + 1, max(ids, default=0) + 1 + count - len(ids)))
        for i in new:
            self.state["nodes"][str(i)] = self._new_node("broker", i)
        return new

    @property
    def fixed_ports(self) -> bool:
        return self.state.get("base_port") is not None

    @property
    def listen_host(self) -> str:
        return str(self.state.get("listen_host") or "127.0.0.1")

    @property
    def advertised_host(self) -> str:
        return str(self.state.get("advertised_host") or self.listen_host)

    @property
    def security(self) -> ClusterSecurity | None:
        """The cluster's security (``cluster up --security``), None for a plaintext one."""
        mode = self.state.get("security")
        if not mode:
            return None
        return ClusterSecurity.of(str(mode), self.data_dir, self.listen_host,
                                  self.advertised_host)

    @property
    def channel_security(self) -> ClientSecurity:
        """How this directory's tools call its controllers (the admin's certificate)."""
        sec = self.security
        return sec.admin_channel() if sec is not None else PLAINTEXT

    @property
    def client_security(self) -> ClientSecurity:
        """How a client of the brokers' bootstrap listener connects (``client.properties``)."""
        sec = self.security
        return (ClientSecurity.from_properties(sec.client_properties()) if sec is not None
                else PLAINTEXT)

    @property
    def has_controller(self) -> bool:
        """Does this directory run the controller (rather than join one elsewhere)?"""
        return bool(self.controller_ids)

    @property
    def controller_ids(self) -> list[int]:
        """This directory's controllers (node 0, then 1001, 1002, ... of a quorum)."""
        return sorted(int(i) for i, n in self.state["nodes"].items() if has_role(n, "controller"))

    @property
    def combined(self) -> bool:
        """Are the controllers combined nodes (``process.roles=broker,controller``)?"""
        return bool(self.state.get("combined"))

    @property
    def is_quorum(self) -> bool:
        return len(self.controller_ids) > 1 or self.combined

    @property
    def quorum_voters(self) -> str:
        """``controller.quorum.voters``: ``id@host:port,...``."""
        return ",".join(f"{c}@{self.controller_endpoint(c)}" for c in self.controller_ids)

    @property
    def node_ids(self) -> list[int]:
        return sorted(int(i) for i in self.state["nodes"])

    # -- state -------------------------------------------------------------------------------------
    def _save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        os.replace(tmp, self.state_path)

    def reload(self) -> None:
        if self.state_path.exists():
            self.state = _read_state(self.state_path)

    @property
    def broker_ids(self) -> list[int]:
        return sorted(int(i) for i, n in self.state["nodes"].items() if has_role(n, "broker"))

    def _node(self, node_id: int) -> dict[str, Any]:
        node = self.state["nodes"].get(str(node_id))
        if not isinstance(node, dict):
            raise ClusterError(f"no node {node_id} in this cluster (nodes: "
                               f"{', '.join(map(str, self.node_ids))})")
        return node

    def node(self, node_id: int) -> dict[str, Any]:
        return dict(self._node(node_id))

    def address(self, node_id: int) -> str:
        """The node's address: a broker's (combined nodes too) or a controller's."""
        return f"{self.advertised_host}:{self._node(node_id)['port']}"

    def controller_endpoint(self, node_id: int) -> str:
        """Where the node's controller listens: a combined node's own port for it, else the
        node's ``address`` (so a subclass that places nodes elsewhere moves both)."""
        node = self._node(node_id)
        if "controller_port" not in node:
            return self.address(node_id)
        return f"{self.advertised_host}:{node['controller_port']}"

    @property
    def controller_address(self) -> str:
        """Where to call the controller: the active one of a quorum (the first controller
        while none is active), or the one controller."""
        remote = self.state.get("controller")
        if remote:
            return str(remote)
        if self.is_quorum:
            active = self.active_controller()
            return self.controller_endpoint(self.controller_ids[0] if active is None else active)
        return self.controller_endpoint(CONTROLLER_ID)

    @property
    def controller_bootstrap(self) -> str:
        """Every controller's address (what brokers are given: they follow the active one)."""
        remote = self.state.get("controller")
        if remote:
            return str(remote)
        return ",".join(self.controller_endpoint(c) for c in self.controller_ids)

    @property
    def features(self) -> dict[str, int]:
        """The feature levels this cluster was made with (empty: the defaults)."""
        return {str(k): int(v) for k, v in (self.state.get("features") or {}).items()}

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(b) for b in self.broker_ids)

    def pid(self, node_id: int) -> int | None:
        pid = self._node(node_id).get("pid")
        return int(pid) if pid else None

    def node_state(self, node_id: int) -> str:
        proc = self._procs.get(node_id)
        if proc is not None and proc.poll() is not None:
            return "dead"
        pid = self.pid(node_id)
        return pid_state(pid) if pid else "dead"

    # -- processes ---------------------------------------------------------------------------------
    def _command(self, node_id: int) -> list[str]:
        n = self._node(node_id)
        listen = f"{self.listen_host}:{n['port']}"
        if n["role"] == "controller":
            quorum = (["--node-id", str(node_id)] if self.is_quorum else [])
            secure = self.security
            sets = [] if secure is None else [
                f"--set={k}={v}" for k, v in secure.controller_settings(node_id).items()]
            return [sys.executable, "-m", "floodmark.controller",
                    "--data-dir", str(self.data_dir / self._controller_dir(node_id)),
                    "--listen", listen, *quorum, *self._controller_args(),
                    *self._metrics_args(n), *sets]
        cmd = [sys.executable, "-m", "floodmark.broker.cluster_member",
               "--node-id", str(node_id), "--controller", self.controller_bootstrap,
               "--data-dir", str(self.data_dir / f"broker-{node_id}"),
               "--listen", listen, *self._metrics_args(n)]
        if has_role(n, "controller"):  # combined: this process is also a voter
            cmd += ["--controller-data-dir", str(self.controller_dir(node_id)),
                    *self._controller_args()]
        if self.advertised_host != self.listen_host:
            cmd += ["--advertised-host", self.advertised_host]
        secure = self.security
        if secure is not None:
            host = self._node_listen_host(node_id)
            for k, v in secure.broker_settings(node_id, host, n["port"]).items():
                cmd += ["--set", f"{k}={v}"]
            secrets_file = secure.broker_config_file()
            if secrets_file is not None:  # the JAAS entry: a file, not a flag (ps shows flags)
                cmd += ["--config", str(secrets_file)]
        # after the security mode's: the last --set of a name wins, so a setting the user gave
        # (`cluster up --security sasl_ssl --set listener.name.client.sasl.enabled.mechanisms=
        # SCRAM-SHA-512,PLAIN`) replaces the mode's
        for k, v in self.state["broker_settings"].items():
            cmd += ["--set", f"{k}={str(v).replace('{node_id}', str(node_id))}"]
        if n.get("rack"):
            cmd += ["--set", f"broker.rack={n['rack']}"]
        return cmd

    def _node_listen_host(self, node_id: int) -> str:
        """The host a node's listeners bind (the same for every node here)."""
        return self.listen_host

    def _controller_args(self) -> list[str]:
        """A controller's settings as flags (Kafka's names with dashes): the same for a
        controller process and a combined node (both parse them with
        ``floodmark.controller.startup``)."""
        c = self.state["controller_settings"]
        args: list[str] = []
        if self.is_quorum:
            args = ["--controller-quorum-voters", self.quorum_voters]
            for name in CONTROLLER_QUORUM_DEFAULTS:  # a new quorum's state has them all
                if name in c:
                    args += ["--" + name.replace(".", "-"), str(c[name])]
        for name in (*METADATA_LOG_SETTINGS, "eligible.leader.replicas.version"):
            if name in c:  # Kafka's names, passed when set (older state files lack some)
                args += ["--" + name.replace(".", "-"), str(c[name])]
        for name, level in sorted(self.features.items()):  # only a new metadata log reads them
            args += ["--feature", f"{name}={level}"]
        min_isr = self.state["broker_settings"].get("min.insync.replicas")
        if min_isr is not None:  # the brokers' cluster default, for the ELR
            args += ["--min-insync-replicas", str(min_isr)]
        return [*args,
                "--broker-session-timeout-ms", str(c["broker.session.timeout.ms"]),
                "--unclean-leader-election-enable", str(c["unclean.leader.election.enable"]),
                "--auto-leader-rebalance-enable", str(c["auto.leader.rebalance.enable"]),
                "--leader-imbalance-check-interval-ms",
                str(c["leader.imbalance.check.interval.ms"])]

    def _metrics_args(self, node: dict[str, Any]) -> list[str]:
        if not self.state.get("metrics", True):
            return []
        return ["--metrics-listen", f"{self.listen_host}:{node.get('metrics_port', 0)}"]

    @staticmethod
    def _controller_dir(node_id: int) -> str:
        return "controller" if node_id == CONTROLLER_ID else f"controller-{node_id}"

    def controller_dir(self, node_id: int) -> Path:
        """A controller's data dir (its metadata log and quorum state)."""
        return self.data_dir / self._controller_dir(node_id)

    def _log_path(self, node_id: int) -> Path:
        n = self._node(node_id)
        name = (f"broker-{node_id}" if has_role(n, "broker")
                else self._controller_dir(node_id))
        return self.data_dir / "logs" / f"{name}.log"

    def log_path(self, node_id: int) -> Path:
        """The node's log file (stdout and stderr of every start, appended)."""
        return self._log_path(node_id)

    def _launch(self, node_id: int) -> tuple[subprocess.Popen[bytes], Path, int]:
        log_path = self._log_path(node_id)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        start = log_path.stat().st_size if log_path.exists() else 0
        env = node_env(supervised=self.die_with_supervisor)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(self._command(node_id), stdout=out, stderr=out,
                                    stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self._procs[node_id] = proc
        return proc, log_path, start

    def _await_listening(self, node_id: int, proc: subprocess.Popen[bytes], log_path: Path,
                         start: int, limit_s: float) -> None:
        """Until the node prints where it listens; ClusterError (the node killed) when it
        exits first, stops making progress (no output, no CPU time) for ``STALL_MS``, or is
        still starting after ``limit_s``."""
        text = ""
        # A combined node prints its controller's line first; it is up once its broker is.
        want = "broker" if has_role(self._node(node_id), "broker") else "controller"

        def listening() -> bool:
            nonlocal text
            with open(log_path, "rb") as fh:
                fh.seek(start)
                text = fh.read().decode(errors="replace")
            for line in text.splitlines():
                metrics = _METRICS.search(line) if "INFO" not in line else None
                if metrics and line.startswith("floodmark"):
                    self.state["nodes"][str(node_id)]["metrics_port"] = int(metrics.group(2))
                if ("floodmark" in line and "listening on" in line and "INFO" not in line
                        and want in line):
                    m = _LISTENING.search(line)
                    if m:
                        n = self.state["nodes"][str(node_id)]
                        n["port"] = int(m.group(2))
                        n["pid"] = proc.pid
                        self._save()
                        return True
            if proc.poll() is not None:
                raise _Exited
            return False

        try:
            wait_progress(listening, lambda: process_progress(proc.pid, log_path),
                          what=f"node {node_id} starting", limit_s=limit_s)
            return
        except _Exited:
            reason = next((line.split(": ", 1)[-1] for line in reversed(text.splitlines())
                           if "Error" in line or "error" in line), "no answer")
        except Stalled as exc:
            reason = str(exc)
        proc.kill()
        proc.wait(5)
        error = ClusterError(f"node {node_id} did not start: {reason.strip()[:300]} "
                             f"(log: {log_path})")
        error.add_note(text[-3000:])
        raise error

    def start_node(self, node_id: int, timeout_s: float = LIMIT_S) -> None:
        """Start a stopped node on its old port; ``timeout_s`` bounds the whole start (it
        fails sooner when the node stops making progress)."""
        if self.node_state(node_id) != "dead":
            raise ClusterError(f"node {node_id} is already running (pid {self.pid(node_id)})")
        proc, path, start = self._launch(node_id)
        self._await_or_rebind(node_id, proc, path, start, timeout_s)

    def _await_or_rebind(self, node_id: int, proc: subprocess.Popen[bytes], path: Path,
                         start: int, timeout_s: float) -> None:
        try:
            self._await_listening(node_id, proc, path, start, timeout_s)
        except ClusterError as exc:
            node = self._node(node_id)
            if ("address already in use" not in str(exc).lower() or not node["port"]
                    or self.fixed_ports or (self.is_quorum and has_role(node, "controller"))):
                raise
            # Its old port was taken meanwhile: any free port (the controller keeps brokers'
            # registered addresses current; a moved controller needs its brokers restarted).
            node["port"] = 0
            proc, path, start = self._launch(node_id)
            self._await_listening(node_id, proc, path, start, timeout_s)

    def _format_controllers(self) -> None:
        """A new quorum's first formation: every controller data dir gets its directory id
        and the bootstrap bindings of every voter (``directory_id.format_directory``, Kafka's
        ``kafka-storage format --initial-controllers``). Only when no controller dir exists
        yet: a restart never formats (a deleted data dir comes back on a new directory id, an
        observer until the quorum re-admits it)."""
        dirs = {c: self.controller_dir(c) for c in self.controller_ids}
        if not self.is_quorum or any(d.exists() for d in dirs.values()):
            return
        ids = {c: new_directory_id() for c in dirs}
        bootstrap = bootstrap_bindings(ids)
        for c, d in dirs.items():
            format_directory(RealFileSystem(), str(d), ids[c], bootstrap)

    def start(self, timeout_s: float = LIMIT_S) -> LocalCluster:
        """Start every node; ``timeout_s`` bounds each node's start (it fails sooner when a
        node stops making progress)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.state["supervisor_pid"] = os.getpid()
        self._save()
        secure = self.security
        if secure is not None:
            secure.prepare(self.node_ids)  # the CA and certificates a new node lacks
        self._format_controllers()
        if self.is_quorum:
            for c in self.controller_ids:  # the voter set names every port: fix them now
                node = self._node(c)
                key = "controller_port" if "controller_port" in node else "port"
                if not node[key]:
                    node[key] = _free_port(self.listen_host)
            self._save()
        # Controller processes first; combined nodes start with the brokers (together: each
        # one's broker registers once a majority of them has elected an active controller).
        own = [c for c in self.controller_ids if c not in self.broker_ids]
        controllers = [(c, *self._launch(c)) for c in own]
        for c, proc, path, start in controllers:
            self._await_or_rebind(c, proc, path, start, timeout_s)
        if own and self.is_quorum:
            self.wait_active_controller(timeout_s)
        # The SCRAM users before the brokers when the controllers run on their own (the
        # brokers' first replica fetches then log in at once); combined nodes after.
        users_made = False
        if secure is not None and (own or not self.has_controller):
            self.make_scram_users(secure, timeout_s)
            users_made = True
        launched = [(b, *self._launch(b)) for b in self.broker_ids]
        for b, proc, path, start in launched:
            self._await_or_rebind(b, proc, path, start, timeout_s)
        if secure is not None and not users_made:
            self.make_scram_users(secure, timeout_s)
        return self

    def make_scram_users(self, secure: ClusterSecurity, timeout_s: float) -> None:
        """``--security sasl_ssl``: the SCRAM credentials of the admin and of the nodes'
        user, made through the active controller over the controller channel (mTLS, the
        admin certificate): the passwords never leave ``D/tls``, and no command line carries
        them. Again at every start (a new salt, the same password): a cluster whose metadata
        lost them gets them back."""
        users = secure.scram_users()
        if not users:
            return
        args = scram.alterations_to_json([], [scram.Upsertion(
            u.name, int(u.mechanism), u.iterations, u.salt, u.salted_password)
            for u in users])
        deadline = time.monotonic() + timeout_s
        last = "no controller answered"
        while True:
            active = self.active_controller() if self.is_quorum else None
            address = (self.controller_endpoint(active) if active is not None
                       else self.controller_address)
            try:
                answer = rpc.blocking_call(address, "alter_scram_credentials", args, 10.0,
                                           self.channel_security)
            except rpc.RpcError as exc:
                answer, last = {}, str(exc)
            result = answer.get("result")
            if isinstance(result, dict):
                refused = [r for r in scram.results_from_json(result["results"])
                           if r.error is not ErrorCode.NONE]
                if not refused:
                    return
                last = f"{refused[0].error.name}: {refused[0].message or ''}"
            elif "error" in answer:
                last = f"{ErrorCode(int(answer['error'])).name}: {answer.get('message') or ''}"
            if time.monotonic() >= deadline:
                raise RuntimeError(f"cluster up --security {secure.mode.name}: the SCRAM "
                                   f"users could not be made ({last})")
            time.sleep(0.2)

    def kill(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        pid = self.pid(node_id)
        if pid is None or self.node_state(node_id) == "dead":
            raise ClusterError(f"node {node_id} is not running")
        os.kill(pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.wait_dead(node_id)

    def wait_dead(self, node_id: int, timeout_s: float = LIMIT_S, *,
                  stall_ms: int = STALL_MS) -> bool:
        """Until the node's process has ended: False when it stops making progress (under a CPU
        second, no output) for ``stall_ms``, or is still alive after ``timeout_s``."""
        pid = self.pid(node_id)
        proc = self._procs.get(node_id)

        def dead() -> bool:
            if proc is not None:
                return proc.poll() is not None
            return pid is None or pid_state(pid) == "dead"

        def progress() -> dict[str, object]:
            return {} if pid is None else process_progress(pid, self._log_path(node_id))

        try:
            wait_progress(dead, progress, what=f"node {node_id} ending", stall_ms=stall_ms,
                          limit_s=timeout_s, step_s=0.02)
        except Stalled:
            return False
        return True

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGCONT anything stopped, SIGTERM everyone (brokers first), SIGKILL stragglers: a
        node that stops making progress on its way out for ``STOP_STALL_MS`` (or is alive
        after ``timeout_s``)."""
        for node_id in self.broker_ids:
            pid = self.pid(node_id)
            if pid is None or self.node_state(node_id) == "dead":
                continue
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        own = [c for c in self.controller_ids if c not in self.broker_ids]
        for node_id in [*self.broker_ids, *own]:
            if node_id in own:
                # Brokers first (their controlled shutdown needs the controller), then it.
                pid = self.pid(node_id)
                if pid is not None and self.node_state(node_id) != "dead":
                    try:
                        os.kill(pid, signal.SIGCONT)
                        os.kill(pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            if not self.wait_dead(node_id, timeout_s, stall_ms=STOP_STALL_MS):
                pid = self.pid(node_id)
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.wait_dead(node_id, 5.0, stall_ms=5_000)
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.wait(5)
        self._procs.clear()

    # -- queries -----------------------------------------------------------------------------------
    def describe_quorum(self, node_id: int, timeout_s: float = 1.0) -> dict[str, Any] | None:
        """One controller's DescribeQuorum answer; None when it does not answer (a stopped
        process is not asked: it would only time out)."""
        if self.node_state(node_id) != "running":
            return None
        try:
            answer = rpc.blocking_call(self.controller_endpoint(node_id), "describe_quorum", {},
                                       timeout_s, self.channel_security)
        except rpc.RpcError:
            return None
        result = answer.get("result")
        return result if isinstance(result, dict) else None

    def active_controller(self, timeout_s: float = 1.0) -> int | None:
        """The controller that says it is active (a quorum leader whose epoch is committed)."""
        for c in self.controller_ids:
            d = self.describe_quorum(c, timeout_s)
            if d is not None and d.get("active"):
                return c
        return None

    def wait_active_controller(self, timeout_s: float = LIMIT_S, *,
                               besides: int | None = None) -> int:
        """Wait until a controller (other than ``besides``) is active; ClusterError when the
        controllers stop making progress (no new epoch, offset or output for ``STALL_MS``) or
        none is active within ``timeout_s`` in all."""
        def active() -> tuple[int] | None:  # (node 0 is falsy: wrapped)
            found = self.active_controller()
            return (found,) if found is not None and found != besides else None

        def progress() -> dict[str, object]:
            values: dict[str, object] = {}
            for c in self.controller_ids:
                d = self.describe_quorum(c) or {}
                values[f"controller {c} (role, epoch, LEO)"] = (
                    d.get("role"), d.get("leader_epoch"), d.get("log_end_offset"))
                if (pid := self.pid(c)) is not None:
                    values.update(process_progress(pid, self._log_path(c)))
            return values

        try:
            (found,) = wait_progress(active, progress, what="waiting for an active controller",
                                     limit_s=timeout_s, step_s=0.02)
        except Stalled as exc:
            raise ClusterError(f"no active controller: {exc} (logs: "
                               f"{self.data_dir / 'logs'})") from None
        return found

    def quorum(self) -> dict[str, Any]:
        """The quorum as its leader sees it: ``leader_id``, ``leader_epoch``,
        ``high_watermark``, ``voters`` (each ``voter_id``, ``log_end_offset``, ``lag``,
        ``last_fetch_ms_ago``, ``directory_id``, plus the supervisor's ``address`` and process
        ``state``), ``observers`` (voter ids on a new data dir, not counted until re-admitted:
        ``voter_id``, ``directory_id``, ``log_end_offset``), ``voter_directories`` (the
        committed bindings), and ``controllers``: each one's own answer (role, epoch, leader,
        LEO, HW, active, ``directory_id``, ``is_voter``) or ``None``."""
        answers = {c: self.describe_quorum(c) for c in self.controller_ids}
        leaders = [d for d in answers.values() if d is not None and d.get("role") == "leader"]
        view = max(leaders, key=lambda d: int(d["leader_epoch"]), default=None)
        if view is None:
            view = next((d for d in answers.values() if d is not None), None)
        voters = []
        for v in (view or {}).get("voters", []):
            vid = int(v["voter_id"])
            entry = dict(v)
            if str(vid) in self.state["nodes"]:
                entry["address"] = self.controller_endpoint(vid)
                entry["state"] = self.node_state(vid)
            voters.append(entry)
        return {
            "leader_id": view.get("leader_id") if view and leaders else None,
            "leader_epoch": view.get("leader_epoch") if view else None,
            "high_watermark": view.get("high_watermark") if view and leaders else None,
            "voters": voters,
            # KIP-853: voter ids the leader sees on a new data dir (not counted until it
            # re-admits them), and the committed voter -> directory id bindings.
            "observers": list((view or {}).get("observers", [])) if leaders else [],
            "voter_directories": list((view or {}).get("voter_directories", [])),
            "controllers": {
                str(c): None if d is None else {
                    k: d.get(k) for k in ("role", "leader_id", "leader_epoch",
                                          "high_watermark", "log_end_offset", "active",
                                          "directory_id", "is_voter")}
                for c, d in answers.items()},
        }

    def controller_status(self, timeout_s: float = 2.0) -> dict[str, Any] | None:
        """The controller's ``status`` (of a quorum: the active controller's, or while none is
        active any running controller's committed image)."""
        if self.is_quorum and not self.state.get("controller"):
            active = self.active_controller()
            order = [*([] if active is None else [active]),
                     *(c for c in self.controller_ids
                       if c != active and self.node_state(c) == "running")]
            addresses = [self.controller_endpoint(c) for c in order]
        else:
            addresses = [self.controller_address]
        for address in addresses:
            try:
                answer = rpc.blocking_call(address, "status", {}, timeout_s,
                                           self.channel_security)
            except rpc.RpcError:
                continue
            result = answer.get("result")
            if isinstance(result, dict):
                return result
        return None

    def status(self) -> dict[str, Any]:
        ctl = self.controller_status()
        registered = {b["id"]: b for b in (ctl or {}).get("brokers", [])}
        active: dict[int, bool] = {}
        for c in self.controller_ids:
            d = (self.describe_quorum(c) if self.is_quorum
                 else ctl.get("quorum") if ctl is not None and self.node_state(c) == "running"
                 else None)
            active[c] = bool(d and d.get("active"))
        nodes = []
        for node_id in self.node_ids:
            n = self.state["nodes"][str(node_id)]
            state = self.node_state(node_id)
            entry: dict[str, Any] = {"id": node_id, "role": n["role"], "pid": n.get("pid"),
                                     "address": self.address(node_id),
                                     "alive": state != "dead", "state": state}
            if n.get("metrics_port"):
                entry["metrics"] = f"http://{self.advertised_host}:{n['metrics_port']}/metrics"
            if n.get("rack"):
                entry["rack"] = n["rack"]  # its broker.rack (cluster up --racks)
            if has_role(n, "controller"):
                entry["active"] = active.get(node_id, False)
                if has_role(n, "broker"):  # combined: where its controller listens
                    entry["controller_address"] = self.controller_endpoint(node_id)
            if node_id in registered:
                entry["fenced"] = registered[node_id]["fenced"]
                entry["broker_epoch"] = registered[node_id]["broker_epoch"]
                # Metadata records this broker could not apply (skipped): offset and reason.
                entry["unapplied_records"] = registered[node_id].get("unapplied_records", [])
                entry["unapplied_records_total"] = registered[node_id].get(
                    "unapplied_records_total", 0)
                # The broker's image (its last heartbeat): next offset, and when it reached
                # each of its latest offsets ([[offset, wall-clock ms], ...]).
                if "metadata_offset" in registered[node_id]:
                    entry["metadata_offset"] = registered[node_id]["metadata_offset"]
                    entry["metadata_applied"] = registered[node_id].get("metadata_applied", [])
            nodes.append(entry)
        out: dict[str, Any] = {"bootstrap": self.bootstrap, "data_dir": str(self.data_dir),
                               "controller": self.controller_address, "nodes": nodes}
        secure = self.security
        if secure is not None:  # bootstrap names the client listener; how to speak to it:
            out["security"] = secure.mode.name
            out["client_properties"] = str(self.data_dir / CLIENT_PROPERTIES)
        if self.is_quorum:
            out["controllers"] = self.controller_bootstrap
        if ctl is not None:
            out["metadata_offset"] = ctl["metadata_offset"]
            if "metadata_commits" in ctl:  # (an older controller does not report them)
                out["metadata_commits"] = ctl["metadata_commits"]
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
