"""KIP-345 static group membership with confluent-kafka (``group.instance.id``): a member that
restarts within its session takes its place back without a rebalance — the other member is
never revoked — and the old member id is fenced (issue 9, Build 3)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.compat


def _consumer(bootstrap: str, instance: str, events: list[str]) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "static-g",
                  "group.instance.id": instance, "session.timeout.ms": 30000,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["static-t"],
                on_assign=lambda _c, parts: events.append(
                    f"assign {sorted(p.partition for p in parts)}"),
                on_revoke=lambda _c, parts: events.append(
                    f"revoke {sorted(p.partition for p in parts)}"))
    return c


def _poll_until(consumers: list[Consumer], done: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done():
        for c in consumers:
            c.poll(0.1)
    assert done(), "timed out"


def test_static_member_restart_does_not_rebalance(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("static-t", 4, 1)])["static-t"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        p.produce("static-t", value=b"%d" % i, partition=i % 4)
    assert p.flush(30) == 0
    a_events: list[str] = []
    b_events: list[str] = []
    a = _consumer(broker.bootstrap, "member-a", a_events)
    b = _consumer(broker.bootstrap, "member-b", b_events)

    def both_assigned() -> bool:
        return (len(a.assignment()) + len(b.assignment()) == 4
                and bool(a.assignment()) and bool(b.assignment()))

    _poll_until([a, b], both_assigned)
    a_parts = sorted(tp.partition for tp in a.assignment())
    settled_b = list(b_events)
    a.close()  # a static member leaves no LeaveGroup: the group keeps its place
    a2_events: list[str] = []
    a2 = _consumer(broker.bootstrap, "member-a", a2_events)
    _poll_until([a2, b], lambda: bool(a2.assignment()))
    assert sorted(tp.partition for tp in a2.assignment()) == a_parts
    for _ in range(20):  # give a rebalance, if any, the time to reach b
        b.poll(0.1)
        a2.poll(0.1)
    assert b_events == settled_b, f"the other member was rebalanced: {b_events}"
    desc = admin.describe_consumer_groups(["static-g"])["static-g"].result(30)
    assert str(desc.state).upper().endswith("STABLE") and len(desc.members) == 2
    assert sorted(m.group_instance_id for m in desc.members) == ["member-a", "member-b"]
    a2.close()
    b.close()
