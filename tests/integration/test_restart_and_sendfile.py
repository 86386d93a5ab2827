"""Broker-level checks of issue 3's follow-ups: the clean-shutdown marker (written on SIGTERM,
absent after SIGKILL, removed while running) and large fetches served through sendfile to a
real client with CRC checks, identical to the copying path (FLOODMARK_SENDFILE=0)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.storage.clean_shutdown import CLEAN_SHUTDOWN_FILE

RECORDS = 3_000


def produce(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(20)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": 262144, "enable.idempotence": False})
    for i in range(RECORDS):
        p.produce(topic, value=(b"%06d" % i) * 200, partition=i % partitions)
    assert p.flush(30) == 0


def consume_all(bootstrap: str, topic: str, partitions: int = 2) -> list[tuple[int, int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"v-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "check.crcs": True,
                  "fetch.max.bytes": 4 << 20, "max.partition.fetch.bytes": 2 << 20})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 60
    while len(out) < RECORDS and time.monotonic() < deadline:
        for m in c.consume(num_messages=1000, timeout=0.5):
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.value()))
    c.close()
    return sorted(out)


def test_clean_shutdown_marker_and_data_across_restarts(broker_factory) -> None:
    b = broker_factory()
    marker = Path(b.data_dir) / CLEAN_SHUTDOWN_FILE
    produce(b.bootstrap, "marked")
    before = consume_all(b.bootstrap, "marked")
    assert len(before) == RECORDS
    assert not marker.exists()
    b.stop()
    assert marker.exists()  # SIGTERM: everything flushed, checkpoints written
    b.start()
    assert not marker.exists()  # consumed at start: a crash from now on is unclean
    assert consume_all(b.bootstrap, "marked") == before
    b.kill()
    assert not marker.exists()
    b.start()
    assert consume_all(b.bootstrap, "marked") == before
    b.stop()
    assert marker.exists()


@pytest.mark.parametrize("sendfile", ["1", "0"])
def test_large_fetches_are_identical_with_and_without_sendfile(
    broker_factory, monkeypatch: pytest.MonkeyPatch, sendfile: str
) -> None:
    monkeypatch.setenv("FLOODMARK_SENDFILE", sendfile)
    b = broker_factory()
    produce(b.bootstrap, "big")
    got = consume_all(b.bootstrap, "big")
    assert len(got) == RECORDS
    per_partition: dict[int, list[int]] = {0: [], 1: []}
    for partition, offset, value in got:
        per_partition[partition].append(offset)
        assert value == value[:6] * 200
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))
    assert {int(v[:6]) for _, _, v in got} == set(range(RECORDS))
    b.stop()
    stats = re.search(r"sent by sendfile=(\d+)", b.log_text())
    if sendfile == "1":
        assert stats is not None
        # 3,000 x 1.2 KB records: most of the ~3.6 MB fetched went out by sendfile.
        assert int(stats.group(1)) > 3_000_000
    else:
        assert stats is None
