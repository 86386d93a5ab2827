"""``EmbeddedCluster``: a real local cluster for a test (a controller process and N broker
processes, ``floodmark.cluster.LocalCluster``)::

    with EmbeddedCluster(brokers=3) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        ...
        leader = cluster.leader_of("orders", 0)
        cluster.kill(leader)          # SIGKILL; returns once the process is gone
        cluster.wait_serving()        # until the survivors lead every partition
        cluster.restart(leader)       # same port; returns once every broker serves again

Topics created by clients get ``default.replication.factor`` = min(3, brokers).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from floodmark.cluster import LIMIT_S, STALL_MS, ClusterError, LocalCluster, process_progress
from floodmark.testing.data_dirs import DataDir
from floodmark.testing.serving import wait_serving


class EmbeddedCluster:
    def __init__(self, brokers: int = 3, *, data_dir: Path | str | None = None,
                 broker_settings: Mapping[str, str] | None = None,
                 controller_settings: Mapping[str, str] | None = None,
                 metrics: bool = False, keep_data: bool = False,
                 timeout_s: float = LIMIT_S, stall_ms: int = STALL_MS) -> None:
        """``brokers``: how many broker processes (ids 1..N; the controller is node 0);
        ``data_dir``: where the cluster keeps its data and logs (default: a temporary
        directory, removed on ``stop`` unless ``keep_data``); ``broker_settings`` /
        ``controller_settings``: Kafka-named settings (``{"min.insync.replicas": "2"}``);
        ``metrics``: each node serves Prometheus ``/metrics``; ``timeout_s``/``stall_ms``:
        every wait's overall bound and how long it may see no progress before it fails."""
        if brokers < 1:
            raise ValueError(f"brokers={brokers}: a cluster has at least one broker")
        self._dir = DataDir(data_dir, prefix="floodmark-cluster-", keep=keep_data)
        self.cluster = LocalCluster(self._dir.path, brokers, dict(broker_settings or {}),
                                    dict(controller_settings or {}), metrics=metrics)
        self.timeout_s = timeout_s
        self.stall_ms = stall_ms
        self._started = False

    # -- what a test uses ------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ``127.0.0.1:PORT``, comma-separated (each keeps its port across
        restarts)."""
        return self.cluster.bootstrap

    @property
    def broker_ids(self) -> list[int]:
        return self.cluster.broker_ids

    @property
    def data_dir(self) -> Path:
        return self._dir.path

    def address(self, broker_id: int) -> str:
        return self.cluster.address(broker_id)

    def log_path(self, node_id: int) -> Path:
        """A node's log (broker ids, or 0 for the controller)."""
        return self.cluster.log_path(node_id)

    def alive(self, broker_id: int) -> bool:
        return self.cluster.node_state(broker_id) != "dead"

    def running_brokers(self) -> list[int]:
        return [b for b in self.broker_ids if self.cluster.node_state(b) == "running"]

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The partition's leader as the controller has it (-1: none, or no such partition)."""
        return self.cluster.leader_of(topic, partition)

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> EmbeddedCluster:
        """Start the controller and every broker; return once the cluster serves."""
        try:
            self.cluster.start(self.timeout_s)
        except BaseException:
            self.cluster.stop()
            raise
        self._started = True
        self.wait_serving()
        return self

    def kill(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        """Crash one broker (SIGKILL: nothing flushed, no controlled shutdown) and wait until its
        process is gone; ``sig=signal.SIGTERM`` is a controlled shutdown instead. The survivors
        take over its partitions once the controller's session for it expires
        (``broker.session.timeout.ms``): ``wait_serving()`` waits for that."""
        if broker_id not in self.broker_ids:
            raise ClusterError(f"no broker {broker_id} (brokers: {self.broker_ids})")
        self.cluster.kill(broker_id, sig)

    def restart(self, broker_id: int, *, clean: bool = False, in_sync: bool = False) -> None:
        """Kill the broker if it runs (SIGKILL; ``clean``: SIGTERM), start it on its old port,
        and return once the cluster serves again (``in_sync``: and every ISR is full again)."""
        if self.alive(broker_id):
            self.kill(broker_id, signal.SIGTERM if clean else signal.SIGKILL)
        self.cluster.start_node(broker_id, self.timeout_s)
        self.wait_serving(in_sync=in_sync)

    def wait_serving(self, *, in_sync: bool = False) -> None:
        """Until every running broker answers Metadata listing all of them, and every partition
        has a leader among them (``in_sync``: and an ISR holding every replica); NotServing when
        the cluster stops making progress (no new answer, CPU time or log output for
        ``stall_ms``)."""
        def brokers() -> dict[int, str]:
            return {b: self.cluster.address(b) for b in self.running_brokers()}

        wait_serving(brokers, self._progress, in_sync=in_sync, stall_ms=self.stall_ms,
                     timeout_s=self.timeout_s)

    def _progress(self) -> dict[str, object]:
        values: dict[str, object] = {}
        for node_id in self.cluster.node_ids:
            pid = self.cluster.pid(node_id)
            if pid is not None and self.cluster.node_state(node_id) != "dead":
                values.update(process_progress(pid, self.cluster.log_path(node_id)))
        return values

    def stop(self) -> None:
        """Stop every node (brokers first, a controlled shutdown; SIGKILL for one that hangs);
        the temporary data dir is removed."""
        self.cluster.stop()
        self._dir.release()

    def __enter__(self) -> EmbeddedCluster:
        return self if self._started else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"EmbeddedCluster(brokers={self.broker_ids}, running={self.running_brokers()}, "
                f"bootstrap_servers={self.bootstrap_servers!r})")
