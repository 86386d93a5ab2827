"""Fetch v13+ (KIP-516): topics addressed by topic id, on the hot path. librdkafka 2.16 (confluent-
kafka) negotiates v16 and consumes by id; every version 4..18 returns the same records; an id the
broker does not know gets UNKNOWN_TOPIC_ID (never null records); a consumer of a topic that is
deleted and re-created (new id) goes on with the new topic's records."""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client import KafkaConnection
from floodmark.wire.api_table import SUPPORTED, ApiKey
from tests.cluster.helpers import LogLines

pytestmark = pytest.mark.compat


def _poll(c: Consumer, n: int, timeout_s: float = 60) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.value()))
    return got


def test_librdkafka_fetches_by_topic_id(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "by-id"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    sent = {(i % 4, b"v%d" % i) for i in range(400)}
    for part, value in sent:
        p.produce(topic, value=value, partition=part)
    assert p.flush(30) == 0
    handler = LogLines()
    logger = logging.getLogger("compat9.rdkafka")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "by-id",
                  "debug": "protocol", "logger": logger})
    try:
        c.assign([TopicPartition(topic, i, 0) for i in range(4)])
        got = _poll(c, len(sent))
    finally:
        c.close()
        logger.removeHandler(handler)
    assert sorted(got) == sorted(sent)
    top = SUPPORTED[ApiKey.FETCH].max_version
    versions = {int(line.split("FetchRequest (v")[1].split(",")[0])
                for line in handler.lines if "Sent FetchRequest (v" in line}
    assert versions and min(versions) >= 13 and max(versions) <= top, versions


def test_every_fetch_version_reads_the_same_records(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "fetch-versions"
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce(topic, value=b"r%d" % i, partition=0)
    assert p.flush(30) == 0
    with KafkaConnection(broker.bootstrap) as conn:
        meta = conn.request(3, 12, {"topics": [{"name": topic, "topic_id": None}]})
        tid = uuid.UUID(str(meta.topics[0].topic_id))
        records = set()
        rng = SUPPORTED[ApiKey.FETCH]
        for version in range(rng.min_version, rng.max_version + 1):
            answer = conn.request(1, version, {
                "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                "session_epoch": -1, "topics": [{"topic": topic, "topic_id": tid, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
            (t,) = answer.responses
            if version >= 13:
                assert uuid.UUID(str(t.topic_id)) == tid
            else:
                assert t.topic == topic
            (part,) = t.partitions
            assert (int(part.error_code), int(part.high_watermark)) == (0, 20)
            records.add(bytes(part.records))
        assert len(records) == 1 and len(records.pop()) > 0
        for version, stranger in ((v, u) for v in range(13, rng.max_version + 1)
                                  for u in (uuid.uuid4(), uuid.UUID(int=0))):
            answer = conn.request(1, version, {
                "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_epoch": -1,
                "topics": [{"topic_id": stranger, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
            (t,) = answer.responses
            assert (t.topic_id or uuid.UUID(int=0)) == stranger  # kio reads the zero id as None
            (part,) = t.partitions
            assert int(part.error_code) == 100  # UNKNOWN_TOPIC_ID
            assert part.records == b""  # empty, never null


def test_consumer_follows_a_recreated_topic(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "recreated"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(5):
        p.produce(topic, value=b"old%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "recreated",
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
    try:
        c.subscribe([topic])
        assert [v for _, v in _poll(c, 5)] == [b"old%d" % i for i in range(5)]
        admin.delete_topics([topic])[topic].result(30)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for i in range(3):
            p.produce(topic, value=b"new%d" % i)
        assert p.flush(30) == 0
        assert [v for _, v in _poll(c, 3)] == [b"new%d" % i for i in range(3)]
    finally:
        c.close()
