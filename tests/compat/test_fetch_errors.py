"""Issue 9, bug 1: a Fetch answer for a partition with an error carries empty records, never null.
librdkafka rejected the whole response ("invalid MessageSetSize -1") and re-fetched in a tight
loop instead of acting on the error; a consumer that starts past the log end must instead get
OFFSET_OUT_OF_RANGE, reset to the earliest offset and read the records."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.compat


def test_consumer_past_the_end_resets_and_reads(broker) -> None:  # type: ignore[no-untyped-def]
    topic = "fetch-errors"
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(5):
        p.produce(topic, value=b"r%d" % i, partition=0)
    assert p.flush(30) == 0
    errors: list[str] = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fe",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "error_cb": lambda e: errors.append(str(e))})
    try:
        c.assign([TopicPartition(topic, 0, 1000)])  # past the log end: OFFSET_OUT_OF_RANGE
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [b"r%d" % i for i in range(5)], (got, errors[:3])
    finally:
        c.close()
