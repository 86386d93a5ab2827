"""Incremental fetch sessions (KIP-227) against a real broker: the wire rules with a raw client,
then kafka-python (sessions on by default) consuming 32 partitions while records keep arriving,
beside librdkafka (no sessions) on the same topic: both read every record exactly once."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from floodmark.client import KafkaConnection
from tests.cluster.helpers import LogLines

pytestmark = pytest.mark.compat


def _fetch(conn: KafkaConnection, version: int, session_id: int, epoch: int,
           parts: list[tuple[Any, int, int]], forgotten: list[tuple[Any, int]] = ()) -> Any:  # type: ignore[assignment]
    """parts: (topic name or id, partition, fetch offset)."""
    by_id = version >= 13
    key = "topic_id" if by_id else "topic"
    topics: dict[Any, list[dict[str, int]]] = {}
    for t, index, offset in parts:
        topics.setdefault(t, []).append({"partition": index, "fetch_offset": offset,
                                         "partition_max_bytes": 1 << 20})
    gone: dict[Any, list[int]] = {}
    for t, index in forgotten:
        gone.setdefault(t, []).append(index)
    return conn.request(1, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "session_id": session_id, "session_epoch": epoch,
        "topics": [{key: t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [{key: t, "partitions": ps} for t, ps in gone.items()]})


def _answered(resp: Any, by_id: bool = False) -> dict[tuple[Any, int], tuple[int, int, int]]:
    """(topic, partition) -> (error, high watermark, record bytes) of every answered partition."""
    return {((uuid.UUID(str(t.topic_id)) if by_id else t.topic), int(p.partition_index)):
            (int(p.error_code), int(p.high_watermark), len(p.records or b""))
            for t in resp.responses for p in t.partitions}


@pytest.mark.parametrize("version", [7, 12, 13, 16, 18])
def test_session_wire_rules(broker, version: int) -> None:  # type: ignore[no-untyped-def]
    topic = f"sess-wire-{version}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for part in range(3):
        p.produce(topic, value=b"first", partition=part)
    assert p.flush(30) == 0
    by_id = version >= 13
    with KafkaConnection(broker.bootstrap) as conn:
        meta = conn.request(3, 12, {"topics": [{"name": topic, "topic_id": None}]})
        t = uuid.UUID(str(meta.topics[0].topic_id)) if by_id else topic
        # Full fetch asking for a session: every partition answered, a session id back.
        full = _fetch(conn, version, 0, 0, [(t, i, 0) for i in range(3)])
        sid = int(full.session_id)
        assert sid > 0 and int(full.error_code) == 0
        assert {k: v[:2] for k, v in _answered(full, by_id).items()} == {
            (t, i): (0, 1) for i in range(3)}
        # Epoch 1: the fetch offsets move past the record; nothing new -> nothing answered.
        resp = _fetch(conn, version, sid, 1, [(t, i, 1) for i in range(3)])
        assert int(resp.session_id) == sid and _answered(resp, by_id) == {}
        # A record on partition 2 only: only partition 2 is answered (epoch 2, empty request).
        p.produce(topic, value=b"second", partition=2)
        assert p.flush(30) == 0
        resp = _fetch(conn, version, sid, 2, [])
        got = _answered(resp, by_id)
        assert list(got) == [(t, 2)] and got[(t, 2)][:2] == (0, 2) and got[(t, 2)][2] > 0
        # Forget partition 0, move 2 past its record: nothing to say.
        resp = _fetch(conn, version, sid, 3, [(t, 2, 2)], forgotten=[(t, 0)])
        assert _answered(resp, by_id) == {}
        # Wrong epoch, unknown session, names/ids switched: top-level errors, no partitions.
        resp = _fetch(conn, version, sid, 9, [])
        assert (int(resp.error_code), int(resp.session_id), len(resp.responses)) == (71, 0, 0)
        resp = _fetch(conn, version, sid + 1 if sid < 2**31 - 1 else 1, 1, [])
        assert int(resp.error_code) == 70
        other = 12 if by_id else 13
        if other >= 7:
            resp = _fetch(conn, other, sid, 4, [])
            assert int(resp.error_code) == 106  # FETCH_SESSION_TOPIC_ID_ERROR
        # The session is still at epoch 4; closing it (epoch -1) answers as a plain full fetch.
        resp = _fetch(conn, version, sid, -1, [(t, 1, 0)])
        assert int(resp.session_id) == 0 and list(_answered(resp, by_id)) == [(t, 1)]
        assert int(_fetch(conn, version, sid, 4, []).error_code) == 70


def test_kafka_python_sessions_across_many_partitions(broker) -> None:  # type: ignore[no-untyped-def]
    topic, partitions, rounds = "sess-many", 32, 25
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    expected = {(i % partitions, b"r%03d-%02d" % (i // partitions, i % partitions))
                for i in range(rounds * partitions)}
    handler = LogLines()
    fetcher_log = logging.getLogger("kafka.consumer.fetcher")
    fetcher_log.addHandler(handler)
    old_level = fetcher_log.level
    fetcher_log.setLevel(logging.DEBUG)
    seen_kp: list[tuple[int, bytes]] = []
    seen_rd: list[tuple[int, bytes]] = []
    stop = threading.Event()

    def kafka_python() -> None:
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                          fetch_max_wait_ms=100, max_partition_fetch_bytes=4096)
        c.assign([KTopicPartition(topic, i) for i in range(partitions)])
        c.seek_to_beginning()
        while not stop.is_set():
            for records in c.poll(timeout_ms=200).values():
                seen_kp.extend((r.partition, r.value) for r in records)
        c.close()

    def librdkafka() -> None:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "sess-many-rd",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        while not stop.is_set():
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                seen_rd.append((msg.partition(), msg.value()))
        c.close()

    threads = [threading.Thread(target=kafka_python, daemon=True),
               threading.Thread(target=librdkafka, daemon=True)]
    try:
        for th in threads:
            th.start()
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2})
        for rnd in range(rounds):  # records keep arriving on a few partitions at a time
            for part in range(partitions):
                p.produce(topic, value=b"r%03d-%02d" % (rnd, part), partition=part)
                if part % 8 == 7:
                    p.flush(30)
                    time.sleep(0.02)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 90
        while (len(seen_kp) < len(expected) or len(seen_rd) < len(expected)) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # anything delivered twice would show up now
    finally:
        stop.set()
        for th in threads:
            th.join(30)
        fetcher_log.removeHandler(handler)
        fetcher_log.setLevel(old_level)
    for seen in (seen_kp, seen_rd):
        assert len(seen) == len(expected) and set(seen) == expected
        for part in range(partitions):  # in offset order within each partition
            values = [v for q, v in seen if q == part]
            assert values == sorted(values)
    created = [line for line in handler.lines if "created a new incremental fetch session" in line]
    incremental = [line for line in handler.lines
                   if "sent an incremental fetch response for session" in line]
    refused = [line for line in handler.lines if "invalid" in line or "unable to process" in line]
    assert created and len(incremental) >= rounds, (len(created), len(incremental))
    assert not refused, refused[:3]


def test_incremental_answer_with_a_fenced_partition_names_the_leader(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """v16 incremental session, two topics, one partition fenced (an old leader epoch): the
    answer holds only that partition, with KIP-951's current leader and endpoint."""
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for name in ("fenced-a", "fenced-b"):
        admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    b.restart()  # a new incarnation: leader epochs move past 0
    with KafkaConnection(b.bootstrap) as conn:
        meta = conn.request(3, 12, {"topics": [{"name": n, "topic_id": None}
                                               for n in ("fenced-a", "fenced-b")]})
        ids = {t.name: t.topic_id for t in meta.topics}
        epoch = int(meta.topics[0].partitions[0].leader_epoch)
        assert epoch >= 1

        def request(session_id: int, epoch_: int, topics: list[dict[str, Any]]) -> Any:
            return conn.request(1, 16, {"max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                                        "session_id": session_id, "session_epoch": epoch_,
                                        "topics": topics, "forgotten_topics_data": []})

        full = request(0, 0, [{"topic_id": ids[n], "partitions": [
            {"partition": i, "fetch_offset": 0, "partition_max_bytes": 1024,
             "current_leader_epoch": epoch} for i in range(2)]} for n in ("fenced-a", "fenced-b")])
        sid = int(full.session_id)
        assert sid > 0
        resp = request(sid, 1, [{"topic_id": ids["fenced-b"], "partitions": [
            {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1024,
             "current_leader_epoch": epoch - 1}]}])
    assert int(resp.error_code) == 0 and int(resp.session_id) == sid
    (t,) = resp.responses
    (part,) = t.partitions
    assert (t.topic_id, int(part.partition_index), int(part.error_code)) == (ids["fenced-b"], 1, 74)
    assert (int(part.current_leader.leader_id), int(part.current_leader.leader_epoch)) == (
        1, epoch)
    assert [int(n.port) for n in resp.node_endpoints] == [b.port]
