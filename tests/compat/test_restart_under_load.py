"""Restart (clean and crash) while an idempotent producer is sending: every acknowledged record
is there afterwards, exactly once, in order per partition."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.compat


@pytest.mark.parametrize("crash", [False, True])
def test_restart_mid_produce_loses_and_duplicates_nothing(broker_factory, crash: bool) -> None:
    b = broker_factory()
    topic = "under-load"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
    acked: list[tuple[int, int, bytes]] = []
    failed: list[object] = []
    stop = threading.Event()

    def on_delivery(err, msg) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            failed.append(err)

    def produce() -> None:
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 2,
                      "enable.idempotence": True, "message.timeout.ms": 60000,
                      "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})
        i = 0
        while not stop.is_set() and i < 200_000:
            try:
                p.produce(topic, value=b"m%08d" % i, partition=i % 2, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            p.poll(0.0005 if i % 100 == 0 else 0)
        p.flush(60)

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(1.0)
    b.restart(crash=crash)
    time.sleep(1.5)
    stop.set()
    t.join(90)
    assert not t.is_alive()
    assert acked, "nothing was acknowledged"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "verify",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(2)])
    stored: dict[int, list[bytes]] = {0: [], 1: []}
    _, hi0 = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    _, hi1 = c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10)
    deadline = time.monotonic() + 60
    while len(stored[0]) + len(stored[1]) < hi0 + hi1 and time.monotonic() < deadline:
        for m in c.consume(num_messages=10000, timeout=0.5):
            if m.error() is None:
                stored[m.partition()].append(m.value())
    c.close()
    for p in (0, 1):
        values = stored[p]
        assert len(values) == len(set(values)), "duplicates stored"
        numbers = [int(v[1:]) for v in values]
        assert numbers == sorted(numbers), "out of order"
    by_partition = {p: set(stored[p]) for p in (0, 1)}
    missing = [(p, o, v) for p, o, v in acked if v not in by_partition[p]]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    for p, o, v in acked:  # acknowledged offsets are where the record really is
        assert stored[p][o] == v
