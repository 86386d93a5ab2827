"""The chaos run's cluster: the project's local-cluster supervisor, with every node in a network
namespace of its own.

This module is the one place ``floodmark.chaos`` imports the supervisor from (it is moving
packages); everything else in ``chaos/`` imports ``LabCluster`` and ``read_partition_values``
from here.
"""

from __future__ import annotations

import dataclasses
import re
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floodmark.chaos.netns import Lab, namespace_executor, run_in
from floodmark.cluster import (
    CLIENT_PROPERTIES,
    CONTROLLER_ID,
    LIMIT_S,
    ClusterSecurity,
    LocalCluster,
    read_partition_values,
)
from floodmark.controller import rpc

if TYPE_CHECKING:
    from floodmark.records import BatchHeader, Record

__all__ = [
    "BROKER_PORT",
    "CONTROLLER_ID",
    "CONTROLLER_PORT",
    "LabCluster",
    "host_of",
    "read_partition_data",
    "read_partition_values",
]

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
# Further voters of a controller quorum: node ids 1001, 1002, ... (hosts ctl2, ctl3, ...).
EXTRA_CONTROLLER_BASE = 1000


def controller_ids(controllers: int) -> list[int]:
    return [CONTROLLER_ID, *(EXTRA_CONTROLLER_BASE + k for k in range(1, controllers))]


def host_of(node_id: int) -> str:
    """The lab host name of a node: ``ctl``, ``ctl2``, ... for controllers, ``b<id>`` for
    brokers."""
    if node_id == CONTROLLER_ID:
        return "ctl"
    if node_id > EXTRA_CONTROLLER_BASE:
        return f"ctl{node_id - EXTRA_CONTROLLER_BASE + 1}"
    return f"b{node_id}"


class LabCluster(LocalCluster):
    """``LocalCluster`` whose nodes run inside ``lab``'s namespaces (``ip netns exec`` execs, so
    pids are the nodes' own) and listen on their namespace's address with a fixed port."""

    def __init__(self, lab: Lab, data_dir: str | Path, brokers: int,
                 broker_settings: dict[str, str], controller_settings: dict[str, str],
                 controllers: int = 1, security: str | None = None) -> None:
        """``controllers`` > 1: a controller quorum (``--controller-quorum-voters``);
        ``security``: ``cluster up``'s modes (``cluster.secure.MODES``), the nodes'
        certificates naming their lab addresses."""
        super().__init__(data_dir, brokers, broker_settings, controller_settings, metrics=False,
                         security=security)
        self.lab = lab
        for node_id in controller_ids(controllers)[1:]:
            self.state["nodes"][str(node_id)] = self._new_node("controller", node_id)
        for node in self.state["nodes"].values():
            node["port"] = CONTROLLER_PORT if node["role"] == "controller" else BROKER_PORT

    @property
    def controller_ids(self) -> list[int]:
        return sorted(int(i) for i, n in self.state["nodes"].items() if n["role"] == "controller")

    @property
    def security(self) -> ClusterSecurity | None:
        """``LocalCluster``'s, with every lab address in the certificates (nodes check the
        host they dial, so do the clients)."""
        sec = super().security
        if sec is None:
            return None
        return dataclasses.replace(sec, hosts=tuple(sorted({*sec.hosts,
                                                            *self.lab.address.values()})))

    def _node_listen_host(self, node_id: int) -> str:
        return self.lab.address[host_of(node_id)]

    @property
    def client_properties_path(self) -> Path | None:
        """What the workload's clients read (``--command-config``), None when plaintext."""
        return None if self.security is None else self.data_dir / CLIENT_PROPERTIES

    def address(self, node_id: int) -> str:
        return f"{self.lab.address[host_of(node_id)]}:{self.state['nodes'][str(node_id)]['port']}"

    def controller_endpoint(self, node_id: int) -> str:
        """A controller's address in its namespace (what ``controller_bootstrap`` gives the
        brokers; the lab has no combined nodes)."""
        return self.address(node_id)

    @property
    def controller_address(self) -> str:
        """Every controller (brokers try each until the active one answers)."""
        return ",".join(self.address(c) for c in self.controller_ids)

    def _command(self, node_id: int) -> list[str]:
        argv = super()._command(node_id)
        at = argv.index("--listen")
        argv[at + 1] = self.address(node_id)
        if self.state["nodes"][str(node_id)]["role"] == "controller" and len(
                self.controller_ids) > 1:
            argv[argv.index("--data-dir") + 1] = str(self.data_dir / f"controller-{node_id}")
            voters = ",".join(f"{c}@{self.address(c)}" for c in self.controller_ids)
            argv += ["--node-id", str(node_id), "--controller-quorum-voters", voters]
        return self.lab.command(host_of(node_id), argv)

    def _log_path(self, node_id: int) -> Path:
        if node_id > EXTRA_CONTROLLER_BASE:
            return self.data_dir / "logs" / f"controller-{node_id}.log"
        return super()._log_path(node_id)

    def start(self, timeout_s: float = LIMIT_S) -> LabCluster:
        """Every controller at once (a quorum needs a majority to elect), then the brokers;
        ``timeout_s`` bounds each node's start (it fails sooner when a node stops moving)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._save()
        secure = self.security
        if secure is not None:
            secure.prepare(self.node_ids)
        for group in (self.controller_ids, self.broker_ids):
            launched = [(n, *self._launch(n)) for n in group]
            for n, proc, path, start in launched:
                self._await_or_rebind(n, proc, path, start, timeout_s)
            if secure is not None and group == self.controller_ids:
                self._make_scram_users_in_lab(secure, timeout_s)  # before the brokers log in
        return self

    def _make_scram_users_in_lab(self, secure: ClusterSecurity, timeout_s: float) -> None:
        """``make_scram_users`` from the first controller's namespace (the lab's addresses are
        not reachable from the machine's own)."""
        executor = namespace_executor(self.lab.ns(host_of(CONTROLLER_ID)))
        try:
            run_in(executor, lambda: self.make_scram_users(secure, timeout_s), timeout_s + 15)
        finally:
            executor.shutdown(wait=False, cancel_futures=True)

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGCONT and SIGTERM the brokers (their controlled shutdown needs the controllers),
        then every controller; SIGKILL whoever outlives ``timeout_s``."""
        for group in (self.broker_ids, self.controller_ids):
            for node_id in group:
                proc = self._procs.get(node_id)
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGCONT)
                    proc.terminate()
            for node_id in group:
                proc = self._procs.get(node_id)
                if proc is None:
                    continue
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)

    def controller_status(self, timeout_s: float = 2.0) -> dict[str, Any] | None:
        """The active controller's status (None while no controller is active or reachable)."""
        for node_id in self.controller_ids:
            try:
                answer = rpc.blocking_call(self.address(node_id), "status", {}, timeout_s,
                                           self.channel_security)
            except rpc.RpcError:
                continue
            result = answer.get("result")
            if isinstance(result, dict) and result.get("active", True):
                return result
        return None

    def kill_all(self) -> None:
        """SIGKILL every node this supervisor started that is still there (the last resort of
        every exit path; a normal end stops them gently first)."""
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self._procs.values():
            proc.wait(10)

    def signal(self, node_id: int, sig: signal.Signals) -> None:
        """SIGSTOP / SIGCONT / SIGKILL one node (a kill waits until it is gone)."""
        self.kill(node_id, sig)


def iter_data_records(partition_dir: str | Path) -> Iterator[tuple[BatchHeader, Record]]:
    """(batch header, record) of every data record in a partition directory's segment files,
    in file order (read-only; control batches, the transaction markers, skipped)."""
    from floodmark.records import decode_batch, iter_batches

    for seg in sorted(Path(partition_dir).glob("*.log")):
        data = seg.read_bytes()
        for pos, header in iter_batches(data, validate=False):
            if header.is_control:
                continue
            _header, records = decode_batch(memoryview(data)[pos:], validate=False)
            for r in records:
                yield header, r


def read_stored_commits(data_dir: str | Path, group: str) -> dict[str, list[int]]:
    """The offsets ``group`` committed, per ``topic-partition``, in the order its coordinator
    stored them in ``__consumer_offsets`` (read-only; the fullest replica of the group's
    partition; deletions, tombstones, skipped)."""
    from floodmark.broker import decode_key, decode_value, partition_for
    from floodmark.metadata import OFFSETS_TOPIC

    count = len(list(Path(data_dir).glob(f"{OFFSETS_TOPIC}-*")))
    stored: dict[str, list[int]] = {}
    if count == 0:
        return stored
    partition_dir = Path(data_dir) / f"{OFFSETS_TOPIC}-{partition_for(group, count)}"
    for _header, r in iter_data_records(partition_dir):
        key = None if r.key is None else decode_key(r.key)
        if key is None or key[0] != group or r.value is None:
            continue
        stored.setdefault(f"{key[1]}-{key[2]}", []).append(decode_value(r.value).offset)
    return stored


_CONVERSION = re.compile(r"^(?P<when>\S+ \S+) .*group (?P<group>\S+): (?P<kind>up|down)graded "
                         r"from a .*?generation (?P<generation>\d+)")


def read_conversions(log_paths: Sequence[str | Path], group: str) -> dict[str, Any]:
    """KIP-848's online migrations of ``group`` as its coordinators logged them (the broker's
    ``upgraded from a classic group`` / ``downgraded from a consumer group`` lines): how many
    of each, and each one's time (the log's), kind and generation, in time order."""
    events: list[list[Any]] = []
    for path in log_paths:
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if "graded from a" not in line:
                continue
            m = _CONVERSION.match(line)
            if m is None or m["group"] != group:
                continue
            events.append([m["when"], f"{m['kind']}grade", int(m["generation"])])
    events.sort()
    return {"upgrade": sum(1 for e in events if e[1] == "upgrade"),
            "downgrade": sum(1 for e in events if e[1] == "downgrade"), "events": events}


def read_partition_data(partition_dir: str | Path) -> dict[int, bytes | None]:
    """offset -> value of every data record in a partition directory's segment files
    (read-only): ``read_partition_values`` without control batches (transaction markers), which
    no consumer is given."""
    return {r.offset: r.value for _header, r in iter_data_records(partition_dir)}
