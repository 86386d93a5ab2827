"""The local-cluster supervisor: a controller and N brokers as real processes on this machine
(``LocalCluster``), per-replica descriptions and data-dir diffing. ``floodmark cluster`` is its
command-line front end (``floodmark.cli.cluster``).

The face's names load ``cluster.local`` on first use, so importing a small part of the package
(``cluster.layout``, ``cluster.waiting``) does not load the supervisor and its TLS tooling."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.cluster.describe import describe_replicas
    from floodmark.cluster.diff import (
        lost_offsets,
        offset_runs,
        partitions_on_disk,
        read_partition_values,
    )
    from floodmark.cluster.layout import CLIENT_PROPERTIES, DEFAULT_DATA_DIR, STATE_FILE
    from floodmark.cluster.local import (
        CONTROLLER_ID,
        MAX_CONTROLLERS,
        QUORUM_METRICS_PORT_OFFSET,
        QUORUM_PORT_OFFSET,
        ClusterError,
        LocalCluster,
        load_cluster,
        pid_state,
    )
    from floodmark.cluster.secure import MODES, ClusterSecurity
    from floodmark.cluster.single import BrokerProcess
    from floodmark.cluster.waiting import (
        LIMIT_S,
        STALL_MS,
        Stalled,
        process_progress,
        wait_progress,
    )

__all__ = [
    "CLIENT_PROPERTIES",
    "CONTROLLER_ID",
    "DEFAULT_DATA_DIR",
    "LIMIT_S",
    "MAX_CONTROLLERS",
    "MODES",
    "QUORUM_METRICS_PORT_OFFSET",
    "QUORUM_PORT_OFFSET",
    "STALL_MS",
    "STATE_FILE",
    "BrokerProcess",
    "ClusterError",
    "ClusterSecurity",
    "LocalCluster",
    "Stalled",
    "describe_replicas",
    "load_cluster",
    "lost_offsets",
    "offset_runs",
    "partitions_on_disk",
    "pid_state",
    "process_progress",
    "read_partition_values",
    "wait_progress",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
