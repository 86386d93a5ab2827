"""Issue 9, build 2: log compaction on a real broker, with real clients.

A compacted topic with small segments and min.cleanable.dirty.ratio=0.01 takes many updates to
a few keys (confluent-kafka, acks=all, delivery reports give each record's offset). Once the
broker reports a cleaning, the topic is read back from offset 0 (confluent-kafka and
kafka-python): fewer records than written, every record read is the one written at its offset,
and key by key the latest value survives at its original offset. The same holds after a SIGKILL
and restart (recovery accepts the gaps). A record without a key is refused with INVALID_RECORD
and a KIP-467 per-record error; DescribeConfigs lists the compaction configs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
)

from floodmark.client import KafkaConnection
from floodmark.records import Record, build_batch

pytestmark = pytest.mark.compat

TOPIC = "compacted"
KEYS = 8
UPDATES = 1500


def _produce_updates(bootstrap: str) -> dict[int, tuple[bytes, bytes | None]]:
    """Every acknowledged record: offset -> (key, value)."""
    written: dict[int, tuple[bytes, bytes | None]] = {}
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            written[msg.offset()] = (msg.key(), msg.value())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                  "batch.num.messages": 20})
    for i in range(UPDATES):
        key = b"key-%d" % (i % KEYS)
        value: bytes | None = b"value-%d-%s" % (i, b"x" * 40)
        if i == UPDATES - 3:
            value = None  # a tombstone, still the latest record of its key
        p.produce(TOPIC, key=key, value=value, partition=0, on_delivery=report)
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors[:3]
    assert len(written) == UPDATES
    return written


def _read_back_confluent(bootstrap: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    """Every record from offset 0 up to ``end`` (exclusive), with confluent-kafka."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-check",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    got: list[tuple[int, bytes, bytes | None]] = []
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            offset, key = msg.offset(), msg.key()
            assert offset is not None and key is not None
            got.append((offset, key, msg.value()))
            if offset == end - 1:
                break
    finally:
        c.close()
    return got


def _read_back_kafka_python(bootstrap: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KPTopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    got: list[tuple[int, bytes, bytes | None]] = []
    try:
        tp = KPTopicPartition(TOPIC, 0)
        c.assign([tp])
        c.seek(tp, 0)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not got or got[-1][0] < end - 1):
            for records in c.poll(timeout_ms=500).values():
                got.extend((r.offset, r.key, r.value) for r in records)
    finally:
        c.close()
    return got


def _check(read: list[tuple[int, bytes, bytes | None]],
           written: dict[int, tuple[bytes, bytes | None]]) -> None:
    offsets = [o for o, _k, _v in read]
    assert offsets == sorted(set(offsets)), "offsets must be strictly increasing"
    for offset, key, value in read:
        assert written[offset] == (key, value), f"offset {offset} moved or changed"
    latest: dict[bytes, int] = {}
    for offset, (key, _value) in sorted(written.items()):
        latest[key] = offset
    survivors = {o: (k, v) for o, k, v in read}
    for key, offset in latest.items():
        assert survivors.get(offset) == written[offset], f"latest record of {key!r} is gone"


def _wait_for_cleaning(broker: Any, timeout_s: float = 40.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = [line for line in broker.log_text().splitlines()
                 if f"partition {TOPIC}-0" in line and " cleaned (" in line]
        if lines:
            return str(lines[-1])
        time.sleep(0.2)
    raise AssertionError("no cleaning within the time limit; log tail:\n"
                         + broker.log_text()[-2000:])


def test_compacted_topic_keeps_the_latest_value_per_key_at_its_offset(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory("--set", "log.cleaner.backoff.ms=300")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})])[TOPIC].result(30)

    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.cleanable.dirty.ratio"].value == "0.01"
    assert configs["delete.retention.ms"].value == "86400000"
    assert configs["max.compaction.lag.ms"].value == "9223372036854775807"
    offsets_resource = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets")
    internal = admin.describe_configs([offsets_resource])[offsets_resource].result(30)
    assert internal["cleanup.policy"].value == "compact"

    written = _produce_updates(broker.bootstrap)
    line = _wait_for_cleaning(broker)
    print(line)

    read = _read_back_confluent(broker.bootstrap, UPDATES)
    assert 0 < len(read) < UPDATES
    _check(read, written)
    _check(_read_back_kafka_python(broker.bootstrap, UPDATES), written)
    print(f"read back {len(read)} of {UPDATES} records after cleaning")

    # A crash and restart: recovery keeps the cleaned segments (and their gaps) as they are.
    broker.restart(crash=True)
    again = _read_back_confluent(broker.bootstrap, UPDATES)
    _check(again, written)
    assert len(again) <= len(read)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    finally:
        c.close()
    assert (low, high) == (0, UPDATES)  # the log end offset never moves

    # A record without a key: INVALID_RECORD, with the per-record error (KIP-467).
    delivery: list[Any] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0})
    p.produce(TOPIC, value=b"no key", partition=0,
              on_delivery=lambda err, msg: delivery.append(err))
    p.flush(30)
    assert len(delivery) == 1 and delivery[0] is not None
    assert delivery[0].code() == KafkaError.INVALID_RECORD, delivery[0]
    batch = build_batch([Record(0, 1, b"k", b"ok"), Record(1, 1, None, b"keyless")])
    with KafkaConnection(broker.bootstrap) as conn:
        resp = conn.request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
    part = resp.responses[0].partition_responses[0]
    assert int(part.error_code) == 87  # INVALID_RECORD
    assert "without key" in part.error_message
    assert [int(e.batch_index) for e in part.record_errors] == [1]


def test_topic_cli_creates_and_describes_a_compacted_topic(broker) -> None:  # type: ignore[no-untyped-def]
    def fm(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "floodmark.cli", *args,
                              "--bootstrap-server", broker.bootstrap],
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        return out.stdout

    fm("topic", "create", "cli-compacted", "--config", "cleanup.policy=compact,delete",
       "--config", "delete.retention.ms=1000")
    desc = json.loads(fm("topic", "describe", "cli-compacted", "--json"))
    assert desc["configs"]["cleanup.policy"] == "compact,delete"
    assert desc["configs"]["delete.retention.ms"] == "1000"
    assert "cleanup.policy=compact,delete" in fm("topic", "describe", "cli-compacted")
    out = subprocess.run([sys.executable, "-m", "floodmark.cli", "topic", "create", "bad-policy",
                          "--config", "cleanup.policy=shred", "--bootstrap-server",
                          broker.bootstrap], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode != 0
