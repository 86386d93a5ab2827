"""Issue 13, finding 6, on real processes: the retry of an idempotent batch that the leader already
holds is never answered NOT_ENOUGH_REPLICAS, even when the ISR is below min.insync.replicas.

The chaos run's only duplicate: a retry reached a leader whose ISR was below min ISR, Kafka's
order (min ISR before the producer state) answered NOT_ENOUGH_REPLICAS, "not persisted" to
librdkafka, which later resent the record under a bumped producer epoch: written twice.

3 brokers, RF=3, min.insync.replicas=2. A committed record first (sequence 0). Both followers are
SIGSTOPped; floodmark's own client sends one idempotent batch (sequence 1) to the leader: it is
appended but cannot be committed, and its acks=all answer times out. The controller fences the
silent followers, so the ISR shrinks to the leader alone (a batch with a sequence gap is then
answered NOT_ENOUGH_REPLICAS: the leader's own view). Now the very same bytes again (same
producer id, epoch and sequence): the retry must wait for the high watermark like the original,
not be refused. After SIGCONT the followers rejoin, and the retry is answered NONE at the
original offset; every replica holds the record once.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.cluster import ClusterClient
from floodmark.client.producer import (
    API_INIT_PRODUCER_ID,
    API_PRODUCE,
    INIT_PRODUCER_ID_VERSION,
    PRODUCE_VERSION,
)
from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from tests.cluster.helpers import healed, replica_values, start_cluster, wait_progress, wait_until

pytestmark = pytest.mark.integration

TOPIC = "retry-min-isr"
PROBE = b"probe"
PARKED_TIMEOUT_MS = 1500  # how long the leader holds an acks=all answer it cannot give


def _produce(client: ClusterClient, leader: int, batch: bytes,
             timeout_ms: int) -> tuple[ErrorCode, int]:
    """One acks=all Produce of ``batch`` to partition 0: (error, base offset)."""
    body = {"transactional_id": None, "acks": -1, "timeout": timeout_ms,
            "topic_data": [{"name": TOPIC,
                            "partition_data": [{"index": 0, "records": batch}]}]}
    resp = client.request_node(leader, API_PRODUCE, PRODUCE_VERSION, body)
    p = resp.responses[0].partition_responses[0]
    return ErrorCode(int(p.error_code)), int(p.base_offset)


def _registration(cluster: Any) -> tuple[int, tuple[int, ...]]:
    reg = cluster.partition_registration(TOPIC) or {"leader": -1, "isr": []}
    return int(reg["leader"]), tuple(sorted(reg["isr"]))


def test_retry_below_min_isr_waits_for_the_high_watermark_and_is_written_once(
        tmp_path: Path) -> None:
    # Leadership stays where it is (no preferred-leader election when the followers return).
    cluster = start_cluster(tmp_path / "c", **{"leader.imbalance.check.interval.ms": "600000"})
    stopped: list[int] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                            )[TOPIC].result(30)
        wait_until(lambda: _registration(cluster)[1] == (1, 2, 3), 60, "a full ISR")
        leader = _registration(cluster)[0]
        followers = [b for b in cluster.broker_ids if b != leader]

        client = ClusterClient(cluster.bootstrap, timeout_s=60)
        client.metadata([TOPIC])
        init = client.request_any(API_INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, {
            "transactional_id": None, "transaction_timeout": 60_000,
            "producer_id": -1, "producer_epoch": -1})
        assert int(init.error_code) == 0
        pid, epoch = int(init.producer_id), int(init.producer_epoch)

        def batch(value: bytes, sequence: int) -> bytes:
            return simple_batch([value], timestamp_ms=int(time.time() * 1000), producer_id=pid,
                                producer_epoch=epoch, base_sequence=sequence)

        # Committed history: sequence 0, every replica in the ISR. The controller's ISR is
        # full from the creation on; the leader may not have opened the new partition's log
        # yet (off its event loop, as a Kafka broker applies metadata after CreateTopics is
        # answered): NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION, nothing appended.
        def first_write() -> bool:
            code, offset = _produce(client, leader, batch(b"base", 0), 30_000)
            if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                return False
            assert (code, offset) == (ErrorCode.NONE, 0)
            return True

        wait_until(first_write, 30, "the first write")

        for b in followers:
            proc = cluster.pid(b)
            assert proc is not None
            os.kill(proc, signal.SIGSTOP)
            stopped.append(proc)
        probe = batch(PROBE, 1)  # built once: every attempt below sends these very bytes
        first = _produce(client, leader, probe, PARKED_TIMEOUT_MS)
        assert first[0] is ErrorCode.REQUEST_TIMED_OUT, first  # appended, not committed

        # The controller fences the silent followers: the ISR is the leader alone (< min ISR 2).
        wait_until(lambda: _registration(cluster) == (leader, (leader,)), 60,
                   "the ISR shrunk to the leader")
        gap = batch(b"gap", 7)  # never appended: its answer shows the leader's own ISR view
        wait_until(lambda: _produce(client, leader, gap, PARKED_TIMEOUT_MS)[0]
                   is ErrorCode.NOT_ENOUGH_REPLICAS, 30,
                   "the leader refusing new writes with NOT_ENOUGH_REPLICAS")

        retry = _produce(client, leader, probe, PARKED_TIMEOUT_MS)
        assert retry[0] is not ErrorCode.NOT_ENOUGH_REPLICAS, (
            "a retry of a batch in the leader's log was told NOT_ENOUGH_REPLICAS (not persisted)")
        assert retry[0] is ErrorCode.REQUEST_TIMED_OUT, retry  # it waited for the HW

        for proc in stopped:
            os.kill(proc, signal.SIGCONT)
        stopped.clear()
        answers: list[tuple[ErrorCode, int]] = []

        def retried() -> bool:
            answers.append(_produce(client, leader, probe, PARKED_TIMEOUT_MS))
            return answers[-1][0] is ErrorCode.NONE

        wait_progress(retried, lambda: _registration(cluster), 30,
                      "the retry answered once the followers are back in the ISR")
        assert answers[-1] == (ErrorCode.NONE, 1), answers  # the original offset
        assert ErrorCode.NOT_ENOUGH_REPLICAS not in [code for code, _ in answers], answers

        wait_progress(lambda: healed(cluster, TOPIC), lambda: _registration(cluster), 30,
                      "every replica's log identical")
        for b in cluster.broker_ids:
            values = replica_values(cluster, b, TOPIC)
            assert values == {0: b"base", 1: PROBE}, (b, values)
        client.close()
    finally:
        for proc in stopped:
            os.kill(proc, signal.SIGCONT)
        cluster.stop()
