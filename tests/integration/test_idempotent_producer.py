"""floodmark.client's idempotent producer against a real broker, read back with librdkafka."""

from __future__ import annotations

import uuid

import pytest

from floodmark.client.cluster import ClusterClient
from floodmark.client.partitioner import partition_for_key
from floodmark.client.producer import IdempotentProducer

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[object]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t-" + uuid.uuid4().hex,
                  "enable.auto.commit": False})
    assigned = [TopicPartition(topic, p, 0) for p in range(partitions)]
    c.assign(assigned)
    # The producers have flushed: every record is below these ends, and the read stops when
    # it reached them all (before, it always waited out its three empty polls: 6 s a call).
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)}
    out: list[object] = []
    empty = 0
    while empty < 3 and any(  # bounded: three empty polls of 2 s in a row
            ends[tp.partition] > max(tp.offset, 0) for tp in c.position(assigned)):
        batch = c.consume(1000, 2.0)
        if not batch:
            empty += 1
            continue
        empty = 0
        out.extend(m for m in batch if m.error() is None)
    c.close()
    assert len(out) >= expected
    return out


def test_records_keys_headers_and_murmur2_partitions(broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"p-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap, topic, 3)
    with ClusterClient(broker.bootstrap) as cluster:
        producer = IdempotentProducer(cluster)
        for i in range(3000):
            key = None if i % 5 == 0 else b"k%d" % (i % 37)
            producer.send(topic, b"v%d" % i, key=key,
                          headers=[("n", b"%d" % i), ("none", None)] if i % 2 else ())
        acked = producer.flush()
    assert sum(acked.values()) == 3000
    got = _read_all(broker.bootstrap, topic, 3, 3000)
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(3000))
    for m in got:
        if m.key() is not None:  # the Java client's partition for the key
            assert m.partition() == partition_for_key(m.key(), 3)
        i = int(m.value()[1:])
        assert (m.headers() or []) == ([("n", b"%d" % i), ("none", None)] if i % 2 else [])


def test_a_resent_batch_keeps_its_sequence_and_is_written_once(broker) -> None:  # type: ignore[no-untyped-def]
    """The answer to a Produce is lost (what a broken connection or a timeout does): the
    producer sends the same batch again. Same producer id, epoch and sequence: the broker
    keeps one copy and the producer counts it acknowledged."""
    topic = f"p-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap, topic, 1)
    with ClusterClient(broker.bootstrap) as cluster:
        producer = IdempotentProducer(cluster)
        for i in range(100):
            producer.send(topic, b"v%d" % i, partition=0)
        q = producer._queues[(topic, 0)]
        producer._close_batch(q)
        batch = q.ready[0]
        assert producer.flush() == {(topic, 0): 100}
        q.ready.append(batch)  # as if the answer had never arrived
        assert producer.flush() == {(topic, 0): 100}  # DUPLICATE_SEQUENCE_NUMBER counts as sent
        for i in range(100, 150):  # the sequence goes on after the resend
            producer.send(topic, b"v%d" % i, partition=0)
        assert producer.flush() == {(topic, 0): 50}
    got = _read_all(broker.bootstrap, topic, 1, 150)
    assert [m.value() for m in got] == [b"v%d" % i for i in range(150)]
    assert [m.offset() for m in got] == list(range(150))


def test_batches_go_while_records_are_sent_and_close_leaves_the_shared_client_clean(broker) -> None:  # type: ignore[no-untyped-def]
    """Full batches are sent as they close, before ``flush`` (up to five in flight per
    connection); ``close`` with answers still in flight closes those connections, so the next
    request on the shared client reads its own answer, not one of the abandoned ones."""
    topic = f"p-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap, topic, 1)
    value = b"x" * 64 * 1024  # 8 records close a batch
    with ClusterClient(broker.bootstrap) as cluster:
        first = IdempotentProducer(cluster)
        assert first.max_in_flight == 5
        for _ in range(40):
            first.send(topic, value, partition=0)
        assert any(first._requests.values())  # on their way before any flush
        first.close()
        assert not any(first._requests.values())
        second = IdempotentProducer(cluster)
        for i in range(10):
            second.send(topic, b"after-%d" % i, partition=0)
        assert second.flush() == {(topic, 0): 10}
        assert first.flush() == {(topic, 0): 40}  # what was abandoned goes again, same sequences
    got = _read_all(broker.bootstrap, topic, 1, 50)
    assert len(got) == 50
    assert sorted(m.value() for m in got if m.value() != value) == sorted(
        b"after-%d" % i for i in range(10))
