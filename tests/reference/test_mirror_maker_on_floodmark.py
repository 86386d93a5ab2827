"""MirrorMaker 2 (Kafka Connect's MirrorSourceConnector, MirrorCheckpointConnector and
MirrorHeartbeatConnector, 4.1.1 from Maven Central, in its dedicated mode) replicating one
floodmark broker (cluster ``A``) to another (``B``).

MM2 exercises what a Connect deployment needs from the brokers: its workers' group (protocol
type ``connect``, the classic coordinator), compacted config/offset/status topics, topics it
creates with configs copied from the source (DescribeConfigs, CreateTopics), offset syncs, and
consumer-group offsets written on the target for a group that has no members there.

Checked: every record of ``orders`` (keys, values, headers, timestamps) arrives in ``A.orders``
on B in order per partition, records produced while MM2 runs follow; the group ``billing``'s
offsets committed on A are translated to B, never ahead of what A committed (so a consumer
moved to B re-reads at worst, never skips); B holds the heartbeats and checkpoints topics. Waits
fail only when replication stops making progress.

On demand (a JVM and Maven's first fetch): ``./dev test-slow
tests/reference/test_mirror_maker_on_floodmark.py``."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerProcess
from tests.reference.kafka_node import REPO, KafkaUnavailable, fetch_maven_jars

pytestmark = [pytest.mark.slow, pytest.mark.integration]

CONNECT_DIR = REPO / "tools" / "kafka-connect"
TOPIC, GROUP, PARTITIONS = "orders", "billing", 2
FIRST, CONSUMED, MORE = 400, 250, 100
STALL_S = 90.0


def _records(bootstrap: str, topic: str, want: int, group: str = "reader",
             log: Path | None = None
             ) -> dict[int, list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]]:
    """Each partition's records, read from the start until ``want`` in all (fails when none
    arrive and ``log``, MM2's log, does not grow for STALL_S)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: dict[int, list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]] = {}
    got, last = 0, time.monotonic()
    log_size = 0
    try:
        while got < want:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.setdefault(msg.partition(), []).append(
                    (msg.key(), msg.value(), list(msg.headers() or []), msg.timestamp()[1]))
                got, last = got + 1, time.monotonic()
            if log is not None and log.stat().st_size > log_size:
                log_size, last = log.stat().st_size, time.monotonic()
            assert time.monotonic() - last < STALL_S, f"{topic}: {got} of {want} records"
    finally:
        consumer.close()
    return out


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True})
    for i in range(start, start + count):
        producer.produce(TOPIC, key=f"k{i % 37}".encode(), value=f"order-{i}".encode(),
                         headers=[("n", str(i).encode())], partition=i % PARTITIONS,
                         timestamp=1_700_000_000_000 + i)
    assert producer.flush(60) == 0


def _topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics)


def test_mirror_maker_replicates_records_and_group_offsets(tmp_path: Path) -> None:
    try:
        fetch_maven_jars(CONNECT_DIR / "pom.xml", CONNECT_DIR / "lib")
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    a = BrokerProcess(tmp_path / "a").start()
    b = BrokerProcess(tmp_path / "b").start()
    mm2: subprocess.Popen[bytes] | None = None
    log = tmp_path / "mm2.log"
    try:
        admin = AdminClient({"bootstrap.servers": a.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        _produce(a.bootstrap, 0, FIRST)
        # The group reads 250 records on A and commits them.
        consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": GROUP,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([TOPIC])
        read, last = 0, time.monotonic()
        while read < CONSUMED:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read, last = read + 1, time.monotonic()
            assert time.monotonic() - last < STALL_S
        consumer.commit(asynchronous=False)
        committed_a = {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)}
        consumer.close()
        assert sum(committed_a.values()) == CONSUMED

        config = tmp_path / "mm2.properties"
        config.write_text("\n".join([
            "clusters = A, B",
            f"A.bootstrap.servers = {a.bootstrap}",
            f"B.bootstrap.servers = {b.bootstrap}",
            "A->B.enabled = true", f"A->B.topics = {TOPIC}", f"A->B.groups = {GROUP}",
            "B->A.enabled = false",
            *(f"{name}.replication.factor = 1" for name in (
                "offset-syncs.topic", "heartbeats.topic", "checkpoints.topic",
                "config.storage", "offset.storage", "status.storage")),
            "replication.factor = 1",
            "sync.group.offsets.enabled = true", "sync.group.offsets.interval.seconds = 1",
            "emit.checkpoints.interval.seconds = 1", "emit.heartbeats.interval.seconds = 1",
            "refresh.topics.interval.seconds = 2", "refresh.groups.interval.seconds = 2",
            "offset.lag.max = 0", "tasks.max = 2", ""]))
        with log.open("wb") as out:
            mm2 = subprocess.Popen(
                ["java", "-Xmx512m",
                 f"-Dlog4j2.configurationFile={CONNECT_DIR}/log4j2.properties",
                 "-cp", f"{CONNECT_DIR / 'lib'}/*", "org.apache.kafka.connect.mirror.MirrorMaker",
                 str(config)], stdout=out, stderr=subprocess.STDOUT)

        def alive() -> None:
            assert mm2 is not None and mm2.poll() is None, _tail(log)

        source = _records(a.bootstrap, TOPIC, FIRST)
        mirrored = _records(b.bootstrap, f"A.{TOPIC}", FIRST, log=log)
        alive()
        assert mirrored == source

        # Records produced while MM2 runs follow.
        _produce(a.bootstrap, FIRST, MORE)
        assert _records(b.bootstrap, f"A.{TOPIC}", FIRST + MORE, group="reader-2") == \
            _records(a.bootstrap, TOPIC, FIRST + MORE, group="reader-2")

        # The group's offsets, translated to B: there, never ahead of A's.
        probe = Consumer({"bootstrap.servers": b.bootstrap, "group.id": GROUP,
                          "enable.auto.commit": False})
        try:
            deadline = time.monotonic() + STALL_S
            translated: dict[int, int] = {}
            while time.monotonic() < deadline:
                alive()
                translated = {tp.partition: tp.offset for tp in probe.committed(
                    [TopicPartition(f"A.{TOPIC}", p) for p in range(PARTITIONS)], timeout=30)
                    if tp.offset >= 0}
                if len(translated) == PARTITIONS and all(
                        translated[p] == committed_a[p] for p in range(PARTITIONS)):
                    break
                time.sleep(0.5)
        finally:
            probe.close()
        assert len(translated) == PARTITIONS, f"no translated offsets on B: {_tail(log)}"
        for p in range(PARTITIONS):
            assert 0 < translated[p] <= committed_a[p], (translated, committed_a)
        topics_b = _topics(b.bootstrap)
        assert {"heartbeats", "A.checkpoints.internal", f"A.{TOPIC}"} <= topics_b, topics_b
        alive()
    finally:
        if mm2 is not None:
            mm2.terminate()
            try:
                mm2.wait(30)
            except subprocess.TimeoutExpired:
                mm2.kill()
                mm2.wait(10)
        a.stop()
        b.stop()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
