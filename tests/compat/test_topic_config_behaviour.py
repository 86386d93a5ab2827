"""Issue 23's topic configs that change what a real broker does, with real clients: the topic's
compression.type re-compresses what producers send (read back by confluent-kafka and
kafka-python; the codec checked in the stored batches' attributes), KIP-937's timestamp bounds
refuse records too far in the past or future with INVALID_TIMESTAMP, and segment.ms rolls the
active segment on time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka.errors import InvalidTimestampError  # type: ignore[import-untyped]

from floodmark.compression import Compression
from floodmark.records import iter_batches
from tests.cluster.helpers import wait_until

pytestmark = pytest.mark.compat


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def _segments(data_dir: Path, topic: str) -> list[Path]:
    dirs = list(data_dir.rglob(f"{topic}-0"))
    assert len(dirs) == 1, dirs
    return sorted(dirs[0].glob("*.log"))


def _stored_codecs(data_dir: Path, topic: str) -> list[Compression]:
    return [h.compression for seg in _segments(data_dir, topic)
            for _, h in iter_batches(seg.read_bytes())]


def _confluent_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-cg",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def test_compression_type_recompresses_what_producers_send(broker: Any) -> None:
    topic = "tc-zstd"
    _create(broker.bootstrap, topic, {"compression.type": "zstd",
                                      "compression.zstd.level": "10"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4",
                  "enable.idempotence": True, "linger.ms": 5})
    for i in range(20):
        p.produce(topic, key=b"k%d" % i, value=b"confluent-%d" % i)
    assert p.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
    for i in range(20):
        kp.send(topic, value=b"kafka-python-%d" % i)
    kp.flush(30)
    kp.close()
    p2 = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "none"})
    p2.produce(topic, value=b"plain")
    assert p2.flush(30) == 0
    expected = ([b"confluent-%d" % i for i in range(20)]
                + [b"kafka-python-%d" % i for i in range(20)] + [b"plain"])
    codecs = _stored_codecs(broker.data_dir, topic)
    assert codecs and set(codecs) == {Compression.ZSTD}, codecs
    assert _confluent_values(broker.bootstrap, topic, len(expected)) == expected
    kc = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                       enable_auto_commit=False, consumer_timeout_ms=10_000)
    got: list[bytes] = []
    for m in kc:
        got.append(m.value)
        if len(got) == len(expected):
            break
    kc.close()
    assert got == expected


def test_timestamps_outside_the_bounds_are_refused(broker: Any) -> None:
    topic = "tc-ts"
    _create(broker.bootstrap, topic, {"message.timestamp.before.max.ms": "60000",
                                      "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    errors: list[str | None] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 20000})
    for ts in (now, now - 3_600_000, now + 3_600_000):
        p.produce(topic, value=b"%d" % ts, timestamp=ts,
                  on_delivery=lambda err, _m: errors.append(err.name() if err else None))
        p.flush(30)
    assert errors == [None, "INVALID_TIMESTAMP", "INVALID_TIMESTAMP"]
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    with pytest.raises(InvalidTimestampError):
        kp.send(topic, value=b"late", timestamp_ms=now + 3_600_000).get(timeout=30)
    kp.close()
    assert _confluent_values(broker.bootstrap, topic, 1) == [b"%d" % now]


def test_segment_ms_rolls_the_active_segment(broker: Any) -> None:
    topic = "tc-roll"
    _create(broker.bootstrap, topic, {"segment.ms": "100"})
    p = Producer({"bootstrap.servers": broker.bootstrap})
    sent = 0

    def rolled() -> bool:
        nonlocal sent
        assert sent < 200, "200 records and still one segment"
        p.produce(topic, value=b"r%d" % sent)
        p.flush(10)
        sent += 1
        return len(_segments(broker.data_dir, topic)) >= 2

    wait_until(rolled, 20, "a second segment", step_s=0.05)
    assert _confluent_values(broker.bootstrap, topic, sent) == [b"r%d" % i for i in range(sent)]


def test_transactional_batches_keep_their_markers_when_recompressed(broker: Any) -> None:
    topic = "tc-txn-gzip"
    _create(broker.bootstrap, topic, {"compression.type": "gzip"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tc-txn",
                  "compression.type": "snappy"})
    p.init_transactions(30)
    for committed in (True, False, True):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=b"%s-%d" % (b"keep" if committed else b"drop", i))
        if committed:
            p.commit_transaction(30)
        else:
            assert p.flush(30) == 0  # sent, so the abort has records to mark
            p.abort_transaction(30)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "tc-txn-cg",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 6 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [b"keep-%d" % i for i in range(3)] * 2
    # read_committed got the last transaction's records: every marker is in the log
    data = b"".join(seg.read_bytes() for seg in _segments(broker.data_dir, topic))
    headers = [h for _, h in iter_batches(data)]
    assert {h.compression for h in headers if not h.is_control} == {Compression.GZIP}
    assert all(h.is_transactional for h in headers)
    assert sum(h.is_control for h in headers) == 3  # commit, abort, commit markers
