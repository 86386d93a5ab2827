"""Kafka's own Java producer (kafka-clients 4.1.1) runs transactions on floodmark with
transaction version 2 (KIP-890 part 2), read back by confluent-kafka under read_committed.

The producer (``tests/reference/clients/TxnProducer.java``, compiled by the test) runs rounds of
one committed transaction (a record on each of two partitions, and the group's offset through
``sendOffsetsToTransaction``) and one aborted transaction. Checked, each from what the parts
themselves say, not from a guess:

- the client negotiated transaction version 2 (its TransactionManager says so: floodmark's
  ApiVersions finalizes ``transaction.version`` 2), so it sent Produce v12, EndTxn v5 and
  TxnOffsetCommit v5 and no AddPartitionsToTxn or AddOffsetsToTxn;
- every transaction end bumped the producer epoch: the client holds epoch 1, 2, 3, ... after
  each one, the coordinator (DescribeTransactions) holds the last, and every marker in the
  partitions carries the bumped epoch of its transaction;
- read_committed shows exactly the committed records, in order, and none of the aborted ones;
  the group's committed offset is the last transaction's.

Default suite: one broker (one JVM, about 30 s with javac on a loaded machine; skipped without
Java or Maven). ``-m slow``: three brokers, RF 3, a partition led by each (the leaders that are
not the coordinator add their partition over the wire, AddPartitionsToTxn v5).
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.connection import KafkaConnection
from floodmark.client.fetch import FetchClient
from floodmark.constants import READ_UNCOMMITTED
from floodmark.records import iter_batches, read_end_txn_marker
from tests.cluster.helpers import start_cluster
from tests.jvm import SHORT_RUN_JVM_OPTS
from tests.reference.kafka_node import KAFKA_DIR, LIB, KafkaUnavailable, fetch_jars

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).with_name("clients") / "TxnProducer.java"
ROUNDS = 4
API_DESCRIBE_TRANSACTIONS = 65


def _compile(out: Path) -> str:
    if shutil.which("javac") is None:
        pytest.skip("the Java producer needs javac (a JDK 17)")
    try:
        fetch_jars()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    subprocess.run(["javac", "-nowarn", "-cp", f"{LIB}/*", "-d", str(out), str(SOURCE)],
                   check=True, timeout=300, capture_output=True)
    return f"{out}:{LIB}/*"


def _read_committed(bootstrap: str, topic: str, partition: int, end: int | None,
                    isolation: str = "read_committed") -> list[str]:
    """Every record read_committed (or ``isolation``) returns from ``partition`` up to its
    stable end ``end`` (None: the end ListOffsets answers, when the test cannot know it)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[str] = []
    try:
        if end is None:
            _low, end = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                       timeout=30)
        position = 0
        idle = 0
        while position < end and idle < 50:  # bounded: 50 empty polls of 0.2 s each in a row
            msg = consumer.poll(0.2)
            if msg is None:
                idle += 1
                position = consumer.position([TopicPartition(topic, partition)])[0].offset
                continue
            idle = 0
            assert msg.error() is None, msg.error()
            values.append(bytes(msg.value() or b"").decode())
            position = msg.offset() + 1
    finally:
        consumer.close()
    return values


def _markers(bootstrap: str, topic: str, partition: int) -> list[tuple[int, bool]]:
    """(producer epoch, committed) of every transaction marker in the partition, in order."""
    reader = FetchClient(bootstrap, client_id="markers", isolation_level=READ_UNCOMMITTED)
    try:
        fetched = reader.fetch(topic, partition, 0, max_bytes=1 << 20)
    finally:
        reader.close()
    out = []
    for _, header in iter_batches(bytes(fetched.records)):
        if header.attributes & 0x20:
            marker = read_end_txn_marker(header)
            out.append((int(header.producer_epoch), bool(marker.committed)))
    return out


def _run_and_check(bootstrap: str, tmp_path: Path, partitions: int, replicas: int, *,
                   remote_leaders: bool = False, unflushed_aborts: bool = False) -> None:
    classpath = _compile(tmp_path / "classes")
    topic, txn_id, group = (f"java-txn-{uuid.uuid4().hex[:8]}", f"tx-{uuid.uuid4().hex[:8]}",
                            f"g-{uuid.uuid4().hex[:8]}")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(30)

    log = tmp_path / "producer.log"
    with log.open("wb") as err:
        done = subprocess.run(
            ["java", "-Xmx256m", *SHORT_RUN_JVM_OPTS,
             f"-Dlog4j2.configurationFile={KAFKA_DIR}/log4j2-tools.properties",
             "-cp", classpath, "TxnProducer", bootstrap, topic, txn_id, group, str(ROUNDS),
             str(partitions), *(["unflushed-aborts"] if unflushed_aborts else [])],
            stdout=subprocess.PIPE, stderr=err, text=True, timeout=180, check=False)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[-1:] == ["DONE"], (lines, log.read_text()[-3000:])

    # negotiated: the client's own TransactionManager says transaction version 2
    assert "TV2 true" in lines, lines
    # the epoch after InitProducerId, then after each of the 2 * ROUNDS transaction ends
    held = [tuple(int(x) for x in line.split()[1:]) for line in lines if line.startswith("EPOCH")]
    pid, first = held[0]
    assert held == [(pid, e) for e in range(first, first + 2 * ROUNDS + 1)], held

    with KafkaConnection(bootstrap, client_id="describe") as conn:
        coordinator = conn.request(10, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
        found = coordinator.coordinators[0]
    with KafkaConnection(f"{found.host}:{found.port}", client_id="describe") as conn:
        described = conn.request(API_DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]})
    state = described.transaction_states[0]
    if remote_leaders:  # some partition's leader is not the coordinator: it added over the wire
        leaders = {p.leader for p in admin.list_topics(topic, timeout=30).topics[topic]
                   .partitions.values()}
        assert leaders - {int(found.node_id)}, (leaders, found.node_id)
    assert (int(state.error_code), int(state.producer_id), int(state.producer_epoch),
            state.transaction_state) == (0, pid, held[-1][1], "CompleteAbort")

    # every marker carries the epoch its EndTxn bumped to: commit at first+1, abort at +2, ...
    expected_markers = [(first + 1 + k, k % 2 == 0) for k in range(2 * ROUNDS)]
    for p in range(partitions):
        markers = _markers(bootstrap, topic, p)
        if unflushed_aborts:  # an abort whose record was never sent marks no partition
            expected = [m for m in expected_markers if m[1] or m in markers]
            assert markers == expected, (p, markers)
        else:
            assert markers == expected_markers, p

    # each partition: a record and a marker per transaction (fewer with unflushed aborts: an
    # abort that sent nothing wrote nothing, so the end is the log's; reading up to 4 * ROUNDS
    # there waited out the read's 10 s of idle polls)
    end = 4 * ROUNDS
    assert _read_committed(bootstrap, topic, 0, None if unflushed_aborts else end) == [
        f"commit-{i}" for i in range(ROUNDS)]
    if not unflushed_aborts:
        # every record the producer flushed is in the log, the aborted ones too: the first
        # batch of each aborted transaction, sent right after a commit while its markers land,
        # was refused INVALID_TXN_STATE before the version 2 guard outlived them
        written = _read_committed(bootstrap, topic, 0, end, isolation="read_uncommitted")
        assert written == [v for i in range(ROUNDS) for v in (f"commit-{i}", f"abort-{i}")]
    for p in range(1, partitions):
        assert _read_committed(bootstrap, topic, p, end) == [f"side-{i}" for i in range(ROUNDS)]

    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    committed = offsets[group].result(30).topic_partitions
    assert [(tp.topic, tp.partition, tp.offset) for tp in committed] == [(topic, 0, ROUNDS)]


def test_java_producer_runs_transaction_version_2(broker: Any, tmp_path: Path) -> None:
    """One broker: it is the coordinator and every partition's leader."""
    _run_and_check(broker.bootstrap, tmp_path, partitions=2, replicas=1)


def test_java_producer_aborts_right_after_a_commit(broker: Any, tmp_path: Path) -> None:
    """Each commit followed at once by a transaction aborted without a flush (librdkafka's 0098
    test 2, "rapid abort / committing"): the abort's EndTxn reaches the coordinator while the
    commit's markers may still be written, and is answered CONCURRENT_TRANSACTIONS (retried by
    the client) as Kafka 4.1.1 answers it, not INVALID_TXN_STATE (fatal for the producer)."""
    _run_and_check(broker.bootstrap, tmp_path, partitions=1, replicas=1, unflushed_aborts=True)


@pytest.mark.slow
def test_java_producer_runs_transaction_version_2_on_three_brokers(tmp_path: Path) -> None:
    """Three brokers, a partition led by each: the leaders that are not the coordinator add
    their partition with AddPartitionsToTxn v5 over the wire, and the markers reach each."""
    cluster = start_cluster(tmp_path / "cluster", 3)
    try:
        _run_and_check(cluster.bootstrap, tmp_path, partitions=3, replicas=3,
                       remote_leaders=True)
    finally:
        cluster.stop()
