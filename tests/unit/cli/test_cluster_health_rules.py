"""``cluster health`` and ``topic list``'s filters read one Metadata answer by one rule set
(cli/partition_health.py, cli/health.py): pure, on hand-made answers."""

from __future__ import annotations

from types import SimpleNamespace as NS

from floodmark.cli.health import health_of
from floodmark.cli.partition_health import describe_line, partition_views


def meta(brokers: list[int], parts: list[tuple[str, int, int, list[int], list[int]]],
         controller_id: int = 1) -> NS:
    topics: dict[str, list[NS]] = {}
    for topic, index, leader, replicas, isr in parts:
        topics.setdefault(topic, []).append(NS(partition_index=index, leader_id=leader,
                                               replica_nodes=replicas, isr_nodes=isr))
    return NS(controller_id=controller_id, brokers=[NS(node_id=b) for b in brokers],
              topics=[NS(name=t, error_code=0, partitions=ps) for t, ps in topics.items()]
              + [NS(name="gone", error_code=3, partitions=[])])


def test_a_healthy_cluster() -> None:
    h = health_of(meta([1, 2, 3], [("a", 0, 1, [1, 2, 3], [1, 2, 3])]))
    assert h.healthy and h.all_nodes == (1, 2, 3) and h.nodes_down == ()
    assert h.as_json()["unhealthy_reasons"] == []


def test_down_leaderless_and_under_replicated() -> None:
    m = meta([1, 3], [("a", 1, 1, [1, 2, 3], [1, 3]), ("a", 0, 3, [1, 2, 3], [1, 2, 3]),
                      ("solo", 0, -1, [2], []), ("b", 0, 2, [2, 1], [2, 1])])
    h = health_of(m, known_brokers=frozenset({4}))
    assert not h.healthy and h.all_nodes == (1, 2, 3, 4) and h.nodes_down == (2, 4)
    # sorted by topic then partition; a leader that is not live counts as none (Kafka's rule)
    assert [(p.topic, p.partition) for p in h.leaderless_partitions] == [("b", 0), ("solo", 0)]
    assert [(p.topic, p.partition) for p in h.under_replicated_partitions] == [
        ("a", 1), ("solo", 0)]
    j = h.as_json()
    assert j["healthy"] is False and j["controller_id"] == 1
    assert j["leaderless_partitions"] == [{"topic": "b", "partition": 0},
                                          {"topic": "solo", "partition": 0}]
    assert j["unhealthy_reasons"] == ["nodes_down", "leaderless_partitions",
                                      "under_replicated_partitions"]


def test_an_unreachable_listed_broker_is_down() -> None:
    h = health_of(meta([1, 2], [("a", 0, 2, [1, 2], [1, 2])]), unreachable=frozenset({2}))
    assert h.nodes_down == (2,) and [p.topic for p in h.leaderless_partitions] == ["a"]


def test_min_isr_and_describe_line() -> None:
    [p] = partition_views(meta([1, 2], [("t", 0, -1, [1, 2], [1])]))
    assert p.under_min_isr(2) and not p.under_min_isr(1) and p.at_min_isr(1)
    assert describe_line(p) == "Topic: t\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: 1"
