"""``floodmark cluster health`` (as ``rpk cluster health``): the controller the brokers name,
every node and the ones down, leaderless and under-replicated partitions, healthy yes/no; one
screen or ``--json``; exit status 0 when healthy, 1 when not.

Asked over the wire (one Metadata request, then ApiVersions to each broker it lists), so it works
on any cluster floodmark's tools reach. Every node: the listed brokers, every replica a partition
names and, with ``--data-dir``, every broker of that local cluster (a dead broker that holds no
replica is known only from there). Down: a node Metadata does not list, or a listed one that
does not answer within ``PROBE_TIMEOUT_S``.
Healthy: no node down, no leaderless and no under-replicated partition (rpk's rule).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from floodmark.cli.common import add_bootstrap, bootstrap_of, security_of
from floodmark.cli.partition_health import PartitionView, live_brokers, partition_views
from floodmark.client import ClusterClient, RequestFailed
from floodmark.cluster import load_cluster

PROBE_TIMEOUT_S = 10.0
"""How long a broker may take to answer before ``health`` counts it down."""


@dataclass(frozen=True)
class Health:
    controller_id: int
    all_nodes: tuple[int, ...]
    nodes_down: tuple[int, ...]
    leaderless_partitions: tuple[PartitionView, ...]
    under_replicated_partitions: tuple[PartitionView, ...]

    @property
    def unhealthy_reasons(self) -> list[str]:
        return [name for name, bad in (("nodes_down", self.nodes_down),
                                       ("leaderless_partitions", self.leaderless_partitions),
                                       ("under_replicated_partitions",
                                        self.under_replicated_partitions)) if bad]

    @property
    def healthy(self) -> bool:
        return not self.unhealthy_reasons

    def as_json(self) -> dict[str, Any]:
        def names(ps: tuple[PartitionView, ...]) -> list[dict[str, Any]]:
            return [{"topic": p.topic, "partition": p.partition} for p in ps]
        return {"healthy": self.healthy, "unhealthy_reasons": self.unhealthy_reasons,
                "controller_id": self.controller_id, "all_nodes": list(self.all_nodes),
                "nodes_down": list(self.nodes_down),
                "leaderless_partitions": names(self.leaderless_partitions),
                "under_replicated_partitions": names(self.under_replicated_partitions)}


def health_of(meta: Any, known_brokers: frozenset[int] = frozenset(),
              unreachable: frozenset[int] = frozenset()) -> Health:
    """The health a Metadata answer shows (``known_brokers``: nodes known from elsewhere;
    ``unreachable``: listed brokers that did not answer, so not live)."""
    live = live_brokers(meta) - unreachable
    views = partition_views(meta)
    nodes = live | known_brokers | {r for p in views for r in p.replicas}
    return Health(
        controller_id=int(meta.controller_id), all_nodes=tuple(sorted(nodes)),
        nodes_down=tuple(sorted(nodes - live)),
        leaderless_partitions=tuple(p for p in views if p.unavailable(live)),
        under_replicated_partitions=tuple(p for p in views if p.under_replicated))


def _unreachable(cluster: ClusterClient, listed: frozenset[int]) -> frozenset[int]:
    """The listed brokers that do not answer ApiVersions. Metadata is not enough: floodmark
    lists a fenced broker for 30 s more (docs/cluster.md), so a dead one would look up."""
    down = set()
    for node in sorted(listed):
        try:
            cluster.request_node(node, 18, 3, {"client_software_name": "floodmark-cli",
                                               "client_software_version": "health"})
        except RequestFailed:
            down.add(node)
    return frozenset(down)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("health", help="healthy or not: controller, nodes down, leaderless and "
                                      "under-replicated partitions (exit 1 when unhealthy)")
    p.add_argument("--json", action="store_true",
                   help='{"healthy", "controller_id", "all_nodes", "nodes_down", '
                        '"leaderless_partitions", "under_replicated_partitions", ...}')
    add_bootstrap(p)
    p.set_defaults(func=cluster_health)


def cluster_health(args: argparse.Namespace) -> int:
    known = (frozenset(load_cluster(args.data_dir).broker_ids) if args.data_dir
             else frozenset())
    with ClusterClient(bootstrap_of(args), security=security_of(args),
                       timeout_s=PROBE_TIMEOUT_S) as cluster:
        meta = cluster.metadata(None)
        health = health_of(meta, known, _unreachable(cluster, live_brokers(meta)))
    if args.json:
        print(json.dumps(health.as_json()))
        return 0 if health.healthy else 1

    def parts(ps: tuple[PartitionView, ...]) -> str:
        return f"({len(ps)}): [" + " ".join(f"{p.topic}-{p.partition}" for p in ps) + "]"

    def ids(xs: tuple[int, ...]) -> str:
        return "[" + " ".join(map(str, xs)) + "]"

    rows = [("Healthy:", "yes" if health.healthy else "no"),
            ("Unhealthy reasons:", "[" + " ".join(health.unhealthy_reasons) + "]"),
            ("Controller ID:", str(health.controller_id)),
            ("All nodes:", ids(health.all_nodes)),
            ("Nodes down:", ids(health.nodes_down)),
            ("Leaderless partitions", parts(health.leaderless_partitions)),
            ("Under-replicated partitions", parts(health.under_replicated_partitions))]
    print("CLUSTER HEALTH")
    print("==============")
    width = max(len(k) for k, _v in rows) + 2
    for k, v in rows:
        print(f"{k.ljust(width)}{v}")
    return 0 if health.healthy else 1
