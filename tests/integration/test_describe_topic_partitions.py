"""DescribeTopicPartitions (KIP-966) on a real broker: a topic's partitions, paged by the
response partition limit with the cursor, unknown topics, and the requests Kafka refuses
(its answers, field for field, are compared with Kafka's by the differential scenario
``describe_topic_partitions``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode

pytestmark = pytest.mark.integration

API, CREATE_TOPICS = 75, 19


@pytest.fixture
def conn(broker: Any) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as c:
        yield c


def _create(c: KafkaConnection, partitions: int, name: str | None = None) -> str:
    name = name or f"dtp-{uuid.uuid4().hex[:8]}"
    r = c.request(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": partitions,
                                                 "replication_factor": 1, "assignments": [],
                                                 "configs": []}],
                                     "timeout": 10_000, "validate_only": False})
    assert int(r.topics[0].error_code) == 0
    return name


def _ask(c: KafkaConnection, names: list[str], limit: int = 2000,
         cursor: tuple[str, int] | None = None) -> Any:
    return c.request(API, 0, {"topics": [{"name": n} for n in names],
                              "response_partition_limit": limit,
                              "cursor": None if cursor is None else {
                                  "topic_name": cursor[0], "partition_index": cursor[1]}})


def _pages(r: Any) -> tuple[list[tuple[str, list[int]]], tuple[str, int] | None]:
    cursor = r.next_cursor
    return ([(t.name, [p.partition_index for p in t.partitions]) for t in r.topics],
            None if cursor is None else (cursor.topic_name, cursor.partition_index))


def test_a_topic_and_its_partitions(conn: KafkaConnection) -> None:
    name = _create(conn, 3)
    r = _ask(conn, [name])
    [t] = r.topics
    assert (int(t.error_code), t.name, t.is_internal, t.topic_id.int != 0) == (0, name, False,
                                                                                True)
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes,
             p.eligible_leader_replicas) for p in t.partitions] == [
        (i, 1, (1,), (1,), ()) for i in range(3)]
    assert r.next_cursor is None


def test_paging_follows_the_cursor(conn: KafkaConnection) -> None:
    run = uuid.uuid4().hex[:8]
    a, b = _create(conn, 3, f"dtp-{run}-a"), _create(conn, 2, f"dtp-{run}-b")  # a, b in order
    assert _pages(_ask(conn, [b, a], 2)) == ([(a, [0, 1])], (a, 2))
    assert _pages(_ask(conn, [a, b], 2, (a, 2))) == ([(a, [2]), (b, [0])], (b, 1))
    # The limit reached exactly at a topic's end: the next page starts at the next topic.
    assert _pages(_ask(conn, [a, b], 3)) == ([(a, [0, 1, 2])], (b, 0))
    assert _pages(_ask(conn, [a, b], 10, (b, 0))) == ([(b, [0, 1])], None)
    # A limit below 1 counts as 1.
    assert _pages(_ask(conn, [a], 0)) == ([(a, [0])], (a, 1))


def test_unknown_topics_and_refused_cursors(conn: KafkaConnection) -> None:
    name = _create(conn, 1)
    r = _ask(conn, [name, "no-such-topic-dtp", "bad/name"])
    assert {t.name: int(t.error_code) for t in r.topics} == {
        name: 0, "no-such-topic-dtp": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION}
    # A cursor on a topic not asked for, a negative cursor partition: the request is refused,
    # each topic named INVALID_REQUEST (Kafka's error response), and the broker serves on.
    for cursor in (("elsewhere", 0), (name, -1)):
        r = _ask(conn, [name], 10, cursor)
        assert [(t.name, int(t.error_code), len(t.partitions)) for t in r.topics] == [
            (name, ErrorCode.INVALID_REQUEST, 0)]
    assert [int(t.error_code) for t in _ask(conn, [name]).topics] == [0]
