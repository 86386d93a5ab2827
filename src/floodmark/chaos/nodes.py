"""The chaos run's cluster: the project's local-cluster supervisor, with every node in a network
namespace of its own.

This module is the one place ``floodmark.chaos`` imports the supervisor from (it is moving
packages); everything else in ``chaos/`` imports ``LabCluster`` and ``read_partition_values``
from here.
"""

from __future__ import annotations

import signal
from pathlib import Path

from floodmark.chaos.netns import Lab
from floodmark.cluster import CONTROLLER_ID, LocalCluster
from floodmark.cluster.diff import read_partition_values

__all__ = [
    "BROKER_PORT",
    "CONTROLLER_ID",
    "CONTROLLER_PORT",
    "LabCluster",
    "host_of",
    "read_partition_values",
]

BROKER_PORT = 9092
CONTROLLER_PORT = 9093


def host_of(node_id: int) -> str:
    """The lab host name of a node: ``ctl`` for the controller, ``b<id>`` for brokers."""
    return "ctl" if node_id == CONTROLLER_ID else f"b{node_id}"


class LabCluster(LocalCluster):
    """``LocalCluster`` whose nodes run inside ``lab``'s namespaces (``ip netns exec`` execs, so
    pids are the nodes' own) and listen on their namespace's address with a fixed port."""

    def __init__(self, lab: Lab, data_dir: str | Path, brokers: int,
                 broker_settings: dict[str, str], controller_settings: dict[str, str]) -> None:
        super().__init__(data_dir, brokers, broker_settings, controller_settings, metrics=False)
        self.lab = lab
        for node_id, node in self.state["nodes"].items():
            node["port"] = CONTROLLER_PORT if int(node_id) == CONTROLLER_ID else BROKER_PORT

    def address(self, node_id: int) -> str:
        return f"{self.lab.address[host_of(node_id)]}:{self.state['nodes'][str(node_id)]['port']}"

    def _command(self, node_id: int) -> list[str]:
        argv = super()._command(node_id)
        at = argv.index("--listen")
        argv[at + 1] = self.address(node_id)
        return self.lab.command(host_of(node_id), argv)

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
