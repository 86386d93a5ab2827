"""Issue 9 admin APIs with real admin clients: DescribeCluster (KIP-700), DeleteGroups and
OffsetDelete (KIP-496), through confluent-kafka's AdminClient and kafka-python's admin."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.compat


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


def test_describe_cluster_with_both_admin_clients(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    desc = admin.describe_cluster(request_timeout=30).result(30)
    assert desc.cluster_id and len(desc.nodes) == 1
    node = desc.nodes[0]
    assert f"{node.host}:{node.port}" == broker.bootstrap
    assert desc.controller is not None and desc.controller.id == node.id

    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        cluster = kp.describe_cluster()
        assert cluster["cluster_id"] == desc.cluster_id
        assert [b["broker_id"] for b in cluster["brokers"]] == [node.id]  # via DescribeCluster
        assert cluster["controller_id"] == node.id
    finally:
        kp.close()


def test_delete_group_offsets_then_the_group(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("gdel", 2, 1)])["gdel"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("gdel", value=b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    _commit(broker.bootstrap, "g-del", "gdel", {0: 5, 1: 4})
    assert _committed(broker.bootstrap, "g-del", "gdel", 2) == {0: 5, 1: 4}

    # OffsetDelete of one partition (kafka-python; confluent-kafka's Python binding has no
    # call for it): only that offset goes.
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    answer = kp.delete_group_offsets("g-del", [KTopicPartition("gdel", 1)])
    assert [(tp.partition, err.__name__) for tp, err in answer.items()] == [(1, "NoError")]
    assert _committed(broker.bootstrap, "g-del", "gdel", 2) == {0: 5, 1: -1001}

    # An active member subscribed to the topic protects its offsets (GROUP_SUBSCRIBED_TO_TOPIC).
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-del",
                       "session.timeout.ms": 6000, "enable.auto.commit": False})
    member.subscribe(["gdel"])
    deadline = time.monotonic() + 60
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.2)
    assert member.assignment(), "the member never joined"
    refused = kp.delete_group_offsets("g-del", [KTopicPartition("gdel", 0)])
    assert [err.__name__ for err in refused.values()] == ["GroupSubscribedToTopicError"]
    assert _committed(broker.bootstrap, "g-del", "gdel", 2)[0] == 5
    # A group with members cannot be deleted (NON_EMPTY_GROUP).
    with pytest.raises(Exception) as non_empty:
        admin.delete_consumer_groups(["g-del"])["g-del"].result(30)
    assert "NON_EMPTY" in str(non_empty.value).upper()
    member.close()  # leaves the group

    admin.delete_consumer_groups(["g-del"])["g-del"].result(30)
    assert _committed(broker.bootstrap, "g-del", "gdel", 2) == {0: -1001, 1: -1001}
    listed = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert "g-del" not in listed
    with pytest.raises(Exception) as missing:
        admin.delete_consumer_groups(["never-was"])["never-was"].result(30)
    assert "GROUP_ID_NOT_FOUND" in str(missing.value).upper()
    kp.close()


def test_deleted_offsets_stay_deleted_after_a_restart(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("gkeep", 1, 1)])["gkeep"].result(30)
    _commit(b.bootstrap, "g-gone", "gkeep", {0: 3})
    _commit(b.bootstrap, "g-kept", "gkeep", {0: 7})
    admin.delete_consumer_groups(["g-gone"])["g-gone"].result(30)
    b.restart()
    assert _committed(b.bootstrap, "g-gone", "gkeep", 1) == {0: -1001}
    assert _committed(b.bootstrap, "g-kept", "gkeep", 1) == {0: 7}
