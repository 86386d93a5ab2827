"""DescribeProducers (KIP-664) on a real broker: the producers of a partition from its
producer state, through kafka-python's admin client (a real client library) and at the wire for
the refusals (Kafka's admin client retries an unknown topic until its timeout). Kafka's own
``kafka-transactions describe-producers``: tests/reference/test_kafka_tools_on_floodmark.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode

pytestmark = pytest.mark.integration

API = 61


@pytest.fixture
def conn(broker: Any) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as c:
        yield c


def _topic(c: KafkaConnection, partitions: int = 2) -> str:
    name = f"dp-{uuid.uuid4().hex[:8]}"
    r = c.request(19, 7, {"topics": [{"name": name, "num_partitions": partitions,
                                      "replication_factor": 1, "assignments": [],
                                      "configs": []}],
                          "timeout": 10_000, "validate_only": False})
    assert int(r.topics[0].error_code) == 0
    return name


def _ask(c: KafkaConnection, topics: dict[str, list[int]]) -> dict[tuple[str, int], Any]:
    r = c.request(API, 0, {"topics": [{"name": n, "partition_indexes": p}
                                      for n, p in topics.items()]})
    return {(t.name, int(p.partition_index)): p for t in r.topics for p in t.partitions}


def test_each_producer_of_a_partition(conn: KafkaConnection, broker: Any) -> None:
    topic = _topic(conn)
    producers = []
    for n in (3, 5):
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                      "linger.ms": 0})
        for i in range(n):
            p.produce(topic, b"v", partition=0, timestamp=1_600_000_000_000 + 10 * n + i)
            assert p.flush(30) == 0  # one batch each: the last sequence is n - 1
        producers.append(p)
    answer = _ask(conn, {topic: [0, 1]})
    p0, p1 = answer[(topic, 0)], answer[(topic, 1)]
    assert (int(p0.error_code), int(p1.error_code), p1.active_producers) == (0, 0, ())
    assert sorted((s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
                   s.current_txn_start_offset) for s in p0.active_producers) == [
        (0, 2, 1_600_000_000_032, -1, -1), (0, 4, 1_600_000_000_054, -1, -1)]
    assert len({s.producer_id for s in p0.active_producers}) == 2


def test_kafka_python_admin_describe_producers(conn: KafkaConnection, broker: Any) -> None:
    kafka_admin = pytest.importorskip("kafka.admin")
    topic = _topic(conn, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    p.produce(topic, b"v", partition=0, timestamp=1_650_000_000_000)
    assert p.flush(30) == 0
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        from kafka.structs import TopicPartition
        result = admin.describe_producers([TopicPartition(topic, 0)])
    finally:
        admin.close()
    [state] = result[TopicPartition(topic, 0)].active_producers
    assert (state.producer_epoch, state.last_sequence, state.last_timestamp,
            state.coordinator_epoch, state.current_transaction_start_offset) == (
        0, 0, 1_650_000_000_000, -1, -1)


def test_refusals_per_topic_and_partition(conn: KafkaConnection) -> None:
    topic = _topic(conn, 1)
    answer = _ask(conn, {topic: [0, 7], "dp-no-such-topic": [0], "bad/name": [0]})
    assert {k: int(p.error_code) for k, p in answer.items()} == {
        (topic, 0): 0, (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("dp-no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("bad/name", 0): ErrorCode.INVALID_TOPIC_EXCEPTION}
    assert answer[("dp-no-such-topic", 0)].error_message == \
        "This server does not host this topic-partition."
