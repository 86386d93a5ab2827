"""The set-up the stale-leader tests share: a controller and three brokers in network namespaces
(plus a client namespace), one topic, and its leader cut off from the controller and the other
brokers until the controller has elected another, while clients still reach it."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from floodmark.chaos.netns import Lab, LabError, check_available, namespace_executor, run_in
from floodmark.chaos.nodes import LabCluster, host_of
from floodmark.controller.client import ControllerClient
from tests.cluster.helpers import cluster_progress, wait_until

STALL_S = 30  # a wait fails when the cluster shows no progress (output, CPU) this long


@dataclass
class StaleLeaderLab:
    lab: Lab
    cluster: LabCluster
    clients: concurrent.futures.ThreadPoolExecutor
    topic: str

    def registration(self) -> dict[str, Any] | None:
        """The controller's registration of partition 0, asked from the client namespace."""
        def ask() -> dict[str, Any] | None:
            status = self.cluster.controller_status()
            part = (status or {}).get("topics", {}).get(self.topic, {}).get("0")
            return part if isinstance(part, dict) else None

        return run_in(self.clients, ask, 10)  # type: ignore[no-any-return]

    def leader(self, *, besides: int | None = None) -> dict[str, Any]:
        """Wait for a registration with a leader (other than ``besides``)."""
        def found() -> dict[str, Any] | None:
            part = self.registration()
            return part if part and part["leader"] not in (-1, besides) else None

        return wait_until(found, STALL_S, f"a leader of {self.topic}-0 other than {besides}",
                          0.2, progress=lambda: cluster_progress(self.cluster))  # type: ignore[no-any-return]

    def cut_off_leader(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Isolate the current leader from the controller and the other brokers; returns the
        registrations before and after the controller moved the partition."""
        first = self.leader()
        old = int(first["leader"])
        self.lab.isolate(host_of(old), ["ctl", *(f"b{i}" for i in (1, 2, 3) if i != old)])
        return first, self.leader(besides=old)


@contextmanager
def stale_leader_lab(tmp_path: Path, prefix: str, topic: str,
                     topic_configs: dict[str, str] | None = None) -> Iterator[StaleLeaderLab]:
    """The lab with ``topic`` (one partition, RF=3) created; healed and killed on the way out."""
    try:
        check_available()
    except LabError as exc:
        pytest.skip(str(exc))
    with Lab(["ctl", "b1", "b2", "b3", "clients"], prefix=prefix) as lab:
        cluster = LabCluster(lab, tmp_path / "cluster", 3, {"replica.lag.time.max.ms": "3000"},
                             {"broker.session.timeout.ms": "2000",
                              "auto.leader.rebalance.enable": "false"})
        clients = namespace_executor(lab.ns("clients"))
        try:
            cluster.start()
            admin = ControllerClient(cluster.controller_address, -1)
            run_in(clients, lambda: asyncio.run(
                admin.create_topic(topic, 1, 3, topic_configs or {})), 30)
            yield StaleLeaderLab(lab, cluster, clients, topic)
        finally:
            clients.shutdown(wait=False)
            lab.heal()
            cluster.kill_all()
