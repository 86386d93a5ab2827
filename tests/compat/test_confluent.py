"""confluent-kafka 2.16 (librdkafka 2.16) against a real floodmark broker process."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.compat.dataset import CODECS, TOPIC_CONFIGS, all_messages, canonical, messages

pytestmark = pytest.mark.compat

TOPIC = "ck-compat"
PARTITIONS = 2
CONSUMER_CONF = {"enable.auto.commit": False, "fetch.max.bytes": 8 << 20,
                 "max.partition.fetch.bytes": 4 << 20, "receive.message.max.bytes": 16 << 20}


def _produce(bootstrap: str, msgs, codec: str, idempotent: bool = False) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "compression.type": codec, "message.max.bytes": 3 << 20,
                  "enable.idempotence": idempotent})
    errors: list[object] = []
    acked: list[int] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(msg.offset())

    for k, v, h in msgs:
        p.produce(TOPIC, key=k, value=v, headers=list(h), on_delivery=on_delivery)
    assert p.flush(30) == 0
    assert not errors, errors
    assert len(acked) == len(msgs)


def _consume(consumer: Consumer, want: int, timeout_s: float = 30.0):
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=1000, timeout=0.5):
            if m.error() is None:
                got.append((m.key(), m.value(), tuple(m.headers() or ())))
    return got


def test_confluent_full_flow(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=TOPIC_CONFIGS)])
    fs[TOPIC].result(20)
    assert TOPIC in admin.list_topics(timeout=10).topics
    res = admin.describe_configs([ConfigResource("topic", TOPIC)])
    configs = next(iter(res.values())).result(20)
    assert configs["max.message.bytes"].value == "2097152"

    expected = all_messages("ck")
    n = len(messages("x"))
    for i, codec in enumerate(CODECS):
        _produce(broker.bootstrap, expected[i * n:(i + 1) * n], codec, idempotent=i % 2 == 1)
    _produce(broker.bootstrap, expected[-1:], "none")

    tps = [TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-assign", **CONSUMER_CONF})
    c.assign(tps)
    got = _consume(c, len(expected))
    assert canonical(got) == canonical(expected)
    marks = [c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10) for p in range(PARTITIONS)]
    assert all(lo == 0 for lo, _ in marks) and sum(hi for _, hi in marks) == len(expected)
    times = c.offsets_for_times([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)], timeout=10)
    assert all(t.offset == 0 for t in times)
    c.close()

    g = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-group",
                  "auto.offset.reset": "earliest", **CONSUMER_CONF})
    g.subscribe([TOPIC])
    got = _consume(g, len(expected), timeout_s=60)
    assert canonical(got) == canonical(expected)
    g.commit(asynchronous=False)
    committed = g.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    assert sorted(t.offset for t in committed) == sorted(hi for _, hi in marks)
    g.close()

    broker.restart()
    more = messages("ck-after-restart")
    _produce(broker.bootstrap, more, "lz4", idempotent=True)
    broker.restart(crash=True)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-assign2", **CONSUMER_CONF})
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = _consume(c, len(expected) + len(more))
    assert canonical(got) == canonical(expected + more)
    c.close()
    g = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-group", **CONSUMER_CONF})
    committed = g.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    assert sorted(t.offset for t in committed) == sorted(hi for _, hi in marks)
    g.close()


def test_confluent_produce_to_unknown_topic_without_autocreate(broker_factory) -> None:
    b = broker_factory("--set", "auto.create.topics.enable=false")
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "message.timeout.ms": 3000})
    errors: list[object] = []
    p.produce("no-such-topic", value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None
    with pytest.raises(KafkaException):
        raise KafkaException(errors[0])


def test_confluent_two_consumers_share_a_group(broker) -> None:
    topic = "ck-shared"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(20)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(400):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 4)
    assert p.flush(30) == 0
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": "ck-shared-group",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10000}
    a, b = Consumer(conf), Consumer(conf)
    a.subscribe([topic])
    b.subscribe([topic])
    seen: dict[str, set[bytes]] = {"a": set(), "b": set()}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(seen["a"] | seen["b"]) < 400:
        for name, c in (("a", a), ("b", b)):
            for m in c.consume(num_messages=500, timeout=0.2):
                if m.error() is None:
                    seen[name].add(m.value())
    assert len(seen["a"] | seen["b"]) == 400
    # Both members got partitions once the rebalance settled.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (a.assignment() and b.assignment()):
        a.consume(timeout=0.2)
        b.consume(timeout=0.2)
    parts_a = {tp.partition for tp in a.assignment()}
    parts_b = {tp.partition for tp in b.assignment()}
    assert parts_a and parts_b and not parts_a & parts_b and parts_a | parts_b == {0, 1, 2, 3}
    a.close()
    b.close()
