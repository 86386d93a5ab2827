"""Kafka's own Java consumer (kafka-clients 4.1.1, the reference implementation of both group
protocols) in a group on a 3-broker floodmark cluster: ``group.protocol=consumer`` (KIP-848,
ConsumerGroupHeartbeat) and ``classic`` (JoinGroup/SyncGroup).

Two members (``tests/reference/clients/GroupConsumer.java``, compiled by the test) share a
6-partition topic, committing synchronously after each poll. The broker that coordinates the
group is SIGKILLed while records keep coming, then started again; later one member leaves and the
other takes every partition. Checked:

- every record is delivered (each partition's offsets 0..end-1 all seen: nothing skipped);
- a member never moves backwards within one assignment of a partition (its offsets there
  strictly increase);
- a record is delivered twice only at a hand-over (at most one poll's worth per partition and
  hand-over: the records after the last commit);
- the group's committed offsets end at the log end of every partition.

Waits fail only when consumption stops. On demand (two JVMs per protocol):
``./dev test-slow tests/reference/test_java_consumer_groups_on_floodmark.py``."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.cluster import ClusterClient
from floodmark.cluster import LocalCluster
from tests.cluster.helpers import start_cluster
from tests.reference.kafka_node import KAFKA_DIR, LIB, KafkaUnavailable, fetch_jars

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SOURCE = Path(__file__).with_name("clients") / "GroupConsumer.java"
TOPIC, PARTITIONS = "java-group", 6
STALL_S = 90.0
MAX_POLL_RECORDS = 100


class Member:
    def __init__(self, classpath: str, bootstrap: str, group: str, protocol: str, name: str,
                 log: Path) -> None:
        self.name = name
        self.lines: list[str] = []
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m",
             f"-Dlog4j2.configurationFile={KAFKA_DIR}/log4j2-tools.properties",
             "-cp", classpath, "GroupConsumer", bootstrap, group, TOPIC, protocol, name],
            stdout=subprocess.PIPE, stderr=self._log, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def records(self) -> list[tuple[int, int]]:
        return [(int(p), int(o)) for kind, p, o in
                (line.split() for line in list(self.lines) if line.startswith("REC "))
                if kind == "REC"]

    def assigned(self) -> set[int]:
        """Partitions owned now, from the rebalance callbacks."""
        owned: set[int] = set()
        for line in list(self.lines):
            kind, _, rest = line.partition(" ")
            if kind not in ("ASSIGNED", "REVOKED", "LOST"):
                continue
            parts = {int(p) for p in rest.split(",") if p}
            if kind == "ASSIGNED":
                owned |= parts
            elif kind in ("REVOKED", "LOST"):
                owned -= parts
        return owned

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def _compile(out: Path) -> str:
    if shutil.which("javac") is None:
        pytest.skip("the Java consumer needs javac (a JDK 17)")
    try:
        fetch_jars()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    subprocess.run(["javac", "-nowarn", "-cp", f"{LIB}/*", "-d", str(out), str(SOURCE)],
                   check=True, timeout=300, capture_output=True)
    return f"{out}:{LIB}/*"


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 120_000})
    for i in range(start, start + count):
        producer.produce(TOPIC, key=str(i).encode(), value=b"v")
        producer.poll(0)
    assert producer.flush(150) == 0


def _wait_consumed(members: list[Member], total: int) -> None:
    """Until the members together have seen ``total`` distinct records (fails when the count
    does not grow for STALL_S)."""
    last, seen = time.monotonic(), -1
    while True:
        distinct = len({r for m in members for r in m.records()})
        if distinct >= total:
            return
        if distinct > seen:
            seen, last = distinct, time.monotonic()
        assert time.monotonic() - last < STALL_S, (
            f"{distinct} of {total} records consumed; "
            + "; ".join(f"{m.name}: {m.lines[-6:]}" for m in members))
        time.sleep(0.2)


def _coordinator(cluster: LocalCluster, group: str) -> int:
    with ClusterClient(cluster.bootstrap) as client:
        return client.coordinator(group)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_java_consumers_share_a_topic_through_a_coordinator_sigkill(tmp_path: Path,
                                                                    protocol: str) -> None:
    classpath = _compile(tmp_path / "classes")
    cluster = start_cluster(tmp_path / "cluster")
    group = f"java-{protocol}"
    members: list[Member] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(60)
        _produce(cluster.bootstrap, 0, 1500)
        members = [Member(classpath, cluster.bootstrap, group, protocol, f"m{i}",
                          tmp_path / f"m{i}.log") for i in (1, 2)]
        _wait_consumed(members, 1500)
        both_own = [m.assigned() for m in members]
        assert set().union(*both_own) == set(range(PARTITIONS)), both_own

        victim = _coordinator(cluster, group)
        cluster.kill(victim)
        _produce(cluster.bootstrap, 1500, 1500)
        cluster.start_node(victim)
        _wait_consumed(members, 3000)

        members[0].stop()
        _produce(cluster.bootstrap, 3000, 1000)
        _wait_consumed(members, 4000)
        assert members[1].assigned() == set(range(PARTITIONS)), members[1].lines[-10:]
        members[1].stop()

        # Nothing skipped: every partition's offsets 0..end-1 were delivered.
        delivered = Counter(r for m in members for r in m.records())
        ends = {p: 1 + max(o for (q, o) in delivered if q == p) for p in range(PARTITIONS)}
        assert sum(ends.values()) == 4000
        for p in range(PARTITIONS):
            missing = [o for o in range(ends[p]) if (p, o) not in delivered]
            assert not missing, (p, missing[:10])
        # Never backwards within one assignment.
        for m in members:
            last: dict[int, int] = {}
            for line in m.lines:
                kind, _, rest = line.partition(" ")
                if kind in ("ASSIGNED", "REVOKED", "LOST"):
                    for p in (int(x) for x in rest.split(",") if x):
                        last.pop(p, None)
                elif kind == "REC":
                    p, o = (int(x) for x in rest.split())
                    assert o > last.get(p, -1), (m.name, p, o, last.get(p))
                    last[p] = o
        # Twice only at a hand-over, and at most one poll's worth.
        doubles = sum(n - 1 for n in delivered.values() if n > 1)
        handovers = sum(1 for m in members for line in m.lines
                        if line.startswith(("REVOKED", "LOST"))) + 1
        assert doubles <= handovers * MAX_POLL_RECORDS, (doubles, handovers)
        # The group's commits end at the log end.
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        committed = admin.list_consumer_group_offsets([request])[group].result(30)
        assert {tp.partition: tp.offset for tp in committed.topic_partitions} == ends
    finally:
        for m in members:
            m.stop()
        cluster.stop()

