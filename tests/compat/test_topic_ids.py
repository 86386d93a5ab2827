"""Topic ids (KIP-516): one UUID per topic, decided by the controller at creation, the same in
CreateTopics v7, Metadata v10+ (confluent-kafka's describe_topics), the partition directories'
``partition.metadata`` files and DeleteTopics v6; stable across restarts; a directory recording
another topic's id is refused for that partition only (one log line), the others are served."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client import KafkaConnection
from floodmark.storage.partition_metadata import topic_id_from_kafka, topic_id_to_kafka

pytestmark = pytest.mark.compat


def _file_id(data_dir, topic: str, partition: int) -> uuid.UUID:  # type: ignore[no-untyped-def]
    lines = (data_dir / f"{topic}-{partition}" / "partition.metadata").read_text().splitlines()
    assert lines[0] == "version: 0"
    return topic_id_from_kafka(lines[1].removeprefix("topic_id: "))


def _confluent_id(bootstrap: str, topic: str) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    tid = desc.topic_id
    msb, lsb = tid.get_most_significant_bits(), tid.get_least_significant_bits()
    return uuid.UUID(int=((msb % 2**64) << 64) | (lsb % 2**64))


def _metadata_id(conn: KafkaConnection, topic: str, version: int = 13) -> uuid.UUID:
    answer = conn.request(3, version, {"topics": [{"name": topic, "topic_id": None}]})
    (t,) = answer.topics
    assert int(t.error_code) == 0
    return uuid.UUID(str(t.topic_id))


def test_topic_id_everywhere_and_stable(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    with KafkaConnection(b.bootstrap) as conn:
        created = conn.request(19, 7, {"timeout": 30_000, "topics": [
            {"name": "ids", "num_partitions": 2, "replication_factor": 1}]})
        tid = uuid.UUID(str(created.topics[0].topic_id))
        assert tid.int != 0
        for version in (10, 12, 13):
            assert _metadata_id(conn, "ids", version) == tid
        # Asked for by id (name null): answered by id and name; an unknown id: UNKNOWN_TOPIC_ID.
        other = uuid.uuid4()
        answer = conn.request(3, 12, {"topics": [{"name": None, "topic_id": tid},
                                                 {"name": None, "topic_id": other}]})
        got = {uuid.UUID(str(t.topic_id)): (t.name, int(t.error_code)) for t in answer.topics}
        assert got == {tid: ("ids", 0), other: (None, 100)}
    assert _confluent_id(b.bootstrap, "ids") == tid
    assert _file_id(b.data_dir, "ids", 0) == _file_id(b.data_dir, "ids", 1) == tid

    # Restarts keep the id; a partition whose file is gone (created before topic ids were
    # persisted) gets the metadata's id again, not a new one.
    (b.data_dir / "ids-1" / "partition.metadata").unlink()
    b.restart()
    assert _file_id(b.data_dir, "ids", 1) == tid
    b.restart(crash=True)
    with KafkaConnection(b.bootstrap) as conn:
        assert _metadata_id(conn, "ids") == tid
        # DeleteTopics v6 by id.
        answer = conn.request(20, 6, {"timeout": 30_000,
                                      "topics": [{"name": None, "topic_id": tid}]})
        (r,) = answer.responses
        assert (r.name, int(r.error_code)) == ("ids", 0)
        answer = conn.request(3, 12, {"topics": [{"name": None, "topic_id": tid}]})
        assert int(answer.topics[0].error_code) == 100
    assert not (b.data_dir / "ids-0").exists()


def test_a_directory_of_another_topic_is_refused_not_served(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("mixed", 2, 1)])["mixed"].result(30)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for part in (0, 1):
        p.produce("mixed", value=b"before-%d" % part, partition=part)
    assert p.flush(30) == 0
    b.stop()
    stranger = uuid.uuid4()
    (b.data_dir / "mixed-1" / "partition.metadata").write_text(
        f"version: 0\ntopic_id: {topic_id_to_kafka(stranger)}\n")
    b.start(port=b.port)
    lines = [line for line in b.log_text().splitlines() if "mixed-1 not opened" in line]
    assert len(lines) == 1 and "belongs to topic id" in lines[0], lines
    assert "Traceback" not in b.log_text()
    # Partition 0 is served as before (produce and consume with a real client); partition 1's
    # data is left alone on disk for the operator.
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    p.produce("mixed", value=b"after-0", partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "mixed",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("mixed", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [b"before-0", b"after-0"]
    finally:
        c.close()
    assert (b.data_dir / "mixed-1" / "00000000000000000000.log").stat().st_size > 0
    assert _file_id(b.data_dir, "mixed", 1) == stranger
