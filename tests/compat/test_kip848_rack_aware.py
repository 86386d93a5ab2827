"""KIP-848's ``uniform`` assignor with racks, through a real client: brokers in racks a, b, c,
a topic whose partitions each have one replica (two per rack), and two librdkafka members with
``client.rack`` a and b (``group.protocol=consumer``). Each member gets the partitions in its
own rack, and the rack-c partitions are shared so that the loads stay even."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster

pytestmark = [pytest.mark.compat, pytest.mark.integration]

TOPIC, GROUP = "racked", "racked-g"


def test_members_get_the_partitions_of_their_own_rack(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", 3, {"group.consumer.heartbeat.interval.ms": "300"},
                           racks=("a", "b", "c")).start()
    members: dict[str, Consumer] = {}
    try:
        rack_of = {i: cluster.state["nodes"][str(i)]["rack"] for i in cluster.broker_ids}
        by_rack = {"a": [], "b": [], "c": []}  # type: dict[str, list[int]]
        assignment = []
        for p in range(6):
            broker = sorted(rack_of)[p % 3]
            assignment.append([broker])
            by_rack[rack_of[broker]].append(p)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 6, replica_assignment=assignment)])[TOPIC].result(30)
        for rack in ("a", "b"):
            c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                          "group.protocol": "consumer", "client.rack": rack,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
            c.subscribe([TOPIC])
            members[rack] = c

        def assigned() -> dict[str, set[int]]:
            return {r: {tp.partition for tp in c.assignment()} for r, c in members.items()}

        seen, last_change = None, time.monotonic()
        for _ in range(10_000):  # until every partition is owned once and the owners agree
            for c in members.values():
                c.poll(0.05)
            a = assigned()
            if set().union(*a.values()) == set(range(6)) and not a["a"] & a["b"] \
                    and len(a["a"]) == len(a["b"]) == 3:
                break
            if a != seen:
                seen, last_change = a, time.monotonic()
            assert time.monotonic() - last_change < 45, f"no progress: {a}"
        a = assigned()
        assert set(by_rack["a"]) <= a["a"], (a, by_rack)
        assert set(by_rack["b"]) <= a["b"], (a, by_rack)
        assert len(a["a"] & set(by_rack["c"])) == len(a["b"] & set(by_rack["c"])) == 1, a
    finally:
        for c in members.values():
            c.close()
        cluster.stop()
