"""Which partitions are in trouble, read from one Metadata answer: the one place for the rules
``topic list --under-replicated-partitions|--under-min-isr-partitions|--at-min-isr-partitions|
--unavailable-partitions`` (kafka-topics.sh's filters) and ``cluster health`` (rpk's) share.

- under-replicated: fewer in-sync replicas than replicas;
- under min ISR / at min ISR: fewer in-sync replicas than (as many as) the topic's
  ``min.insync.replicas``;
- unavailable (leaderless): no leader, or a leader that is not a live broker (Kafka's rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    leader: int  # -1: none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    def unavailable(self, live_brokers: frozenset[int]) -> bool:
        return self.leader < 0 or self.leader not in live_brokers

    def under_min_isr(self, min_insync_replicas: int) -> bool:
        return len(self.isr) < min_insync_replicas

    def at_min_isr(self, min_insync_replicas: int) -> bool:
        return len(self.isr) == min_insync_replicas

    def as_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "leader": self.leader,
                "replicas": list(self.replicas), "isr": list(self.isr)}


def partition_views(meta: Any) -> list[PartitionView]:
    """Every partition of every topic the answer lists without an error, in topic order."""
    out = []
    for t in sorted(meta.topics, key=lambda t: str(t.name)):
        if int(t.error_code):
            continue
        for p in sorted(t.partitions, key=lambda p: int(p.partition_index)):
            out.append(PartitionView(str(t.name), int(p.partition_index), int(p.leader_id),
                                     tuple(int(r) for r in p.replica_nodes),
                                     tuple(int(r) for r in p.isr_nodes)))
    return out


def live_brokers(meta: Any) -> frozenset[int]:
    return frozenset(int(b.node_id) for b in meta.brokers)


def describe_line(p: PartitionView) -> str:
    """kafka-topics.sh --describe's partition line."""
    leader = "none" if p.leader < 0 else str(p.leader)
    return (f"Topic: {p.topic}\tPartition: {p.partition}\tLeader: {leader}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
