"""Test helpers that talk to a broker with librdkafka (confluent-kafka), independently of the
connector under test: create/delete topics, produce records and learn their offsets."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Produced:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...]


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    a = admin(bootstrap)  # keep a reference: the futures die with their client
    a.create_topics([NewTopic(topic, partitions, 1)], request_timeout=15)[topic].result(timeout=30)
    # wait until metadata shows every partition with a leader (bounded)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = a.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready")


def delete_topic(bootstrap: str, topic: str) -> None:
    a = admin(bootstrap)
    a.delete_topics([topic], request_timeout=15)[topic].result(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = a.list_topics(timeout=5)
        if topic not in md.topics:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not deleted")


def produce(
    bootstrap: str,
    topic: str,
    n: int,
    *,
    partitions: int,
    start: int = 0,
    base_ts_ms: int = 1_700_000_000_000,
    headers: bool = True,
    flush_every: int = 0,
) -> list[Produced]:
    """Produce n records round-robin over partitions; values are unique (``v<i>``).

    Every 7th record has a null key; every 3rd carries two headers (one with a null value).
    Returns what the broker acknowledged, with the offsets it assigned.
    """
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})
    out: list[Produced] = []
    errors: list[str] = []
    sent_headers: dict[bytes, tuple[tuple[str, bytes | None], ...]] = {}

    def cb(err, msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(str(err))
            return
        out.append(Produced(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                            msg.timestamp()[1], sent_headers[msg.value()]))

    for i in range(start, start + n):
        hdrs = [("src", b"test"), ("nothing", None)] if headers and i % 3 == 0 else None
        sent_headers[b"v%d" % i] = tuple(hdrs or ())
        p.produce(topic, value=b"v%d" % i, key=None if i % 7 == 0 else b"k%d" % (i % 11),
                  partition=i % partitions, timestamp=base_ts_ms + i, headers=hdrs,
                  on_delivery=cb)
        if flush_every and (i + 1) % flush_every == 0:
            p.flush(30)
    assert p.flush(60) == 0, "not every record was acknowledged"
    assert not errors, errors
    assert len(out) == n
    return sorted(out, key=lambda r: (r.partition, r.offset))
