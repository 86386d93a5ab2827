"""Per replica LEO, HW, log start and epoch cache of a local cluster's topic, each read from that
replica's own broker, with the controller's registration of every partition."""

from __future__ import annotations

from typing import Any

from floodmark.client import read_replica_state
from floodmark.cluster.local import LocalCluster


def describe_replicas(cluster: LocalCluster, topic: str) -> list[dict[str, Any]]:
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
                entry.update(read_replica_state(cluster.address(r), topic, int(index),
                                           int(reg["leader_epoch"]), cluster.client_security))
            except (OSError, RuntimeError) as exc:
                entry["error"] = str(exc)
            replicas.append(entry)
        out.append({"partition": int(index), "leader": reg["leader"],
                    "leader_epoch": reg["leader_epoch"],
                    "partition_epoch": reg["partition_epoch"], "isr": reg["isr"],
                    "elr": reg.get("elr", []),
                    "replicas": replicas})
    return out
