"""kafka-python 3.0.12 (idempotent by default) against a real floodmark broker process."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from tests.compat.dataset import CODECS, TOPIC_CONFIGS, all_messages, canonical, messages
from tests.compat.kafka_python_group import subscribe_when_known as _subscribe

pytestmark = pytest.mark.compat

TOPIC = "kp-compat"
PARTITIONS = 2


def _produce(bootstrap: str, msgs, codec: str | None) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                             compression_type=None if codec in (None, "none") else codec,
                             max_request_size=3 << 20)
    futures = [producer.send(TOPIC, key=k, value=v, headers=list(h)) for k, v, h in msgs]
    producer.flush(30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    return offsets


def _records(consumer: KafkaConsumer, want: int, timeout_s: float = 30.0):
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        for _tp, recs in consumer.poll(timeout_ms=500).items():
            got.extend(recs)
    return got


def _as_messages(records):
    return [(r.key, r.value, tuple((k, v) for k, v in r.headers)) for r in records]


def test_kafka_python_full_flow(broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, topic_configs=TOPIC_CONFIGS)])
    assert TOPIC in admin.list_topics()
    desc = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    assert "max.message.bytes" in str(desc)
    admin.close()

    expected = all_messages("kp")
    per_codec = len(messages("x"))
    for i, codec in enumerate(CODECS):
        _produce(broker.bootstrap, expected[i * per_codec:(i + 1) * per_codec], codec)
    _produce(broker.bootstrap, expected[-1:], None)

    # By assignment, from the beginning.
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             max_partition_fetch_bytes=4 << 20, fetch_max_bytes=8 << 20)
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got = _records(consumer, len(expected))
    assert canonical(_as_messages(got)) == canonical(expected)
    end = consumer.end_offsets(tps)
    begin = consumer.beginning_offsets(tps)
    assert sum(end.values()) == len(expected) and all(v == 0 for v in begin.values())
    by_time = consumer.offsets_for_times({tp: 0 for tp in tps})
    assert all(by_time[tp] is not None and by_time[tp].offset == 0 for tp in tps if end[tp] > 0)
    consumer.close()

    # By group, with commits.
    group = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-group",
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          max_partition_fetch_bytes=4 << 20, fetch_max_bytes=8 << 20)
    _subscribe(group, TOPIC, set(range(PARTITIONS)))
    got = _records(group, len(expected), timeout_s=60)
    assert canonical(_as_messages(got)) == canonical(expected)
    group.commit()
    committed = {tp: group.committed(tp) for tp in tps}
    assert committed == end
    group.close()

    # Restart mid-way: what was acknowledged survives a clean restart and a crash.
    broker.restart()
    more = messages("kp-after-restart")
    _produce(broker.bootstrap, more, "zstd")
    broker.restart(crash=True)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             max_partition_fetch_bytes=4 << 20, fetch_max_bytes=8 << 20)
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got = _records(consumer, len(expected) + len(more))
    assert canonical(_as_messages(got)) == canonical(expected + more)
    consumer.close()
    group = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-group",
                          enable_auto_commit=False)
    assert {tp: group.committed(tp) for tp in tps} == end  # committed offsets survived too
    group.close()


def test_kafka_python_admin_partitions_and_groups(broker) -> None:
    from kafka.admin import NewPartitions

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-admin", 1, 1)])
    admin.create_partitions({"kp-admin": NewPartitions(total_count=3)})
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert consumer.partitions_for_topic("kp-admin") == {0, 1, 2}
    consumer.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("kp-admin", value=b"x", partition=2).get(timeout=30)
    producer.close()
    group = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-admin-g",
                          auto_offset_reset="earliest")
    _subscribe(group, "kp-admin", {0, 1, 2})
    got = _records(group, 1)
    assert [r.value for r in got] == [b"x"]
    listed = admin.list_groups()
    assert "kp-admin-g" in str(listed)
    desc = admin.describe_groups(["kp-admin-g"])
    assert "Stable" in str(desc) and "kp-admin-g" in str(desc)
    group.close()
    admin.delete_topics(["kp-admin"])
    assert "kp-admin" not in admin.list_topics()
    admin.close()


def test_kafka_python_log_append_time_topic(broker) -> None:
    """The broker rewrites maxTimestamp (inside the CRC) for LogAppendTime topics; kafka-python
    checks CRCs on consume, so this also proves the CRC is recomputed."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-lat", 1, 1,
                                  topic_configs={"message.timestamp.type": "LogAppendTime"})])
    admin.close()
    before = int(time.time() * 1000)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    meta = producer.send("kp-lat", value=b"x", timestamp_ms=1000).get(timeout=30)
    producer.close()
    assert meta.timestamp >= before  # the broker's append time, not the client's 1000
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, check_crcs=True)
    consumer.assign([TopicPartition("kp-lat", 0)])
    consumer.seek_to_beginning()
    (rec,) = _records(consumer, 1)
    consumer.close()
    assert rec.value == b"x" and rec.timestamp_type == 1 and rec.timestamp == meta.timestamp


@pytest.mark.parametrize("pinned", [(3, 7), (3, 9)], ids=["kafka-3.7", "kafka-3.9"])
def test_kafka_python_pinned_to_a_release(broker, pinned: tuple[int, int]) -> None:
    """``api_version`` pinned: kafka-python sends that release's versions without asking
    ApiVersions (3.7: ListOffsets v8, JoinGroup v9; 3.9: ListOffsets v9, Produce v11, ListGroups
    v5, InitProducerId v5). Issue 23: ListOffsets v8 once closed the connection and the client
    retried it forever."""
    topic = f"kp-pinned-{pinned[0]}-{pinned[1]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, api_version=pinned)
    admin.create_topics([NewTopic(topic, 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=pinned, acks="all")
    offsets = [producer.send(topic, value=b"v%d" % i).get(timeout=30).offset for i in range(3)]
    producer.close()
    assert offsets == [0, 1, 2]
    tp = TopicPartition(topic, 0)
    group = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=pinned,
                          group_id=f"{topic}-g", auto_offset_reset="earliest",
                          enable_auto_commit=False, request_timeout_ms=20_000)
    _subscribe(group, topic, {0})
    got = _records(group, 3)
    assert [r.value for r in got] == [b"v0", b"v1", b"v2"]
    assert group.end_offsets([tp]) == {tp: 3} and group.beginning_offsets([tp]) == {tp: 0}
    group.commit()
    assert group.committed(tp) == 3
    assert f"{topic}-g" in str(admin.list_groups())
    assert "Stable" in str(admin.describe_groups([f"{topic}-g"]))
    group.close()
    admin.close()
