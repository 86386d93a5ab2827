"""A leader cut off from the controller, after the controller has moved its partition and an
idempotent producer has written its next sequences at the new leader, must not answer that
producer's next batch with OUT_OF_ORDER_SEQUENCE_NUMBER (found by ``floodmark chaos run``, all
faults, seed 14: librdkafka treats that answer as fatal, and kafka-python's idempotent producer
stayed stuck).

Kafka's stale leader answers the sequence error too (its broker ignores ``isFenced`` while
RUNNING and judges sequences by its own producer state until it applies the metadata that moves
the partition), but the error claims what that broker cannot know: that it leads and the
producer skipped sequences. floodmark's broker knows its controller session lapsed
(``replication/controller_session.py``), so it answers NOT_LEADER_OR_FOLLOWER: retriable, the client
refreshes its metadata and retries the same sequences at the real leader. After the heal it
answers the same until its metadata has caught up, and then as a follower.

Real processes in network namespaces: a controller and three brokers; a producer id, sequences
0-2 at the first leader, the leader cut off from the controller and the other brokers while the
client still reaches it, sequences 3-5 at the leader the controller elects, then sequence 6 at
the cut-off broker. Before the fix it answered OUT_OF_ORDER_SEQUENCE_NUMBER.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from floodmark.chaos.netns import run_in
from floodmark.chaos.nodes import host_of
from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch
from tests.chaos.stale_leader_lab import STALL_S, stale_leader_lab
from tests.cluster.helpers import cluster_progress, wait_until

pytestmark = pytest.mark.integration

PRODUCE, INIT_PRODUCER_ID = 0, 22
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
             ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def _batch(pid: int, seq: int, n: int = 3) -> bytes:
    return build_batch([Record(i, 1000 + i, None, b"v%d" % (seq + i)) for i in range(n)],
                       producer_id=pid, producer_epoch=0, base_sequence=seq)


def _produce(address: str, records: bytes) -> ErrorCode:
    with KafkaConnection(address) as conn:
        resp = conn.request(PRODUCE, 9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": "q", "partition_data": [{"index": 0, "records": records}]}]})
    return ErrorCode(int(resp.responses[0].partition_responses[0].error_code))


def test_stale_leader_answers_not_leader_for_sequences_a_newer_leader_took(
        tmp_path: Path) -> None:
    with stale_leader_lab(tmp_path, "stseq", "q", {"min.insync.replicas": "2"}) as lab:
        cluster, clients = lab.cluster, lab.clients
        old = int(lab.leader()["leader"])

        def init() -> int:
            with KafkaConnection(cluster.address(old)) as conn:
                resp = conn.request(INIT_PRODUCER_ID, 4, {
                    "transactional_id": None, "transaction_timeout": -1,
                    "producer_id": -1, "producer_epoch": -1})
            assert resp.error_code == 0, resp
            return int(resp.producer_id)

        pid = run_in(clients, init, 30)

        def write(address: str, seq: int) -> ErrorCode:
            """Produce until answered with something other than a retriable error."""
            answers: list[ErrorCode] = []

            def once() -> bool:
                answers.append(run_in(clients, lambda: _produce(address, _batch(pid, seq)), 30))
                return answers[-1] not in RETRIABLE

            wait_until(once, STALL_S, f"sequence {seq} at {address}: {answers[-5:]}", 0.2,
                       progress=lambda: cluster_progress(cluster))
            return answers[-1]

        assert write(cluster.address(old), 0) is ErrorCode.NONE
        first, moved = lab.cut_off_leader()
        assert int(first["leader"]) == old, first
        new = int(moved["leader"])
        assert write(cluster.address(new), 3) is ErrorCode.NONE

        # The cut-off broker still believes it leads; its producer state ends at 2.
        stale = run_in(clients, lambda: _produce(cluster.address(old), _batch(pid, 6)), 30)
        assert stale is ErrorCode.NOT_LEADER_OR_FOLLOWER, stale.name

        lab.lab.heal(host_of(old))
        # Healed: as long as it answers at all, never the fatal sequence error; once its
        # metadata has caught up it is a follower (NOT_LEADER_OR_FOLLOWER).
        answers: list[ErrorCode] = []

        def follower() -> bool:
            answers.append(run_in(
                clients, lambda: _produce(cluster.address(old), _batch(pid, 6)), 30))
            part = lab.registration()
            return bool(part and old in part.get("isr", []))  # back in the ISR: caught up

        wait_until(follower, STALL_S, "the healed broker back in the ISR", 0.2,
                   progress=lambda: cluster_progress(cluster))
        answers.append(run_in(clients, lambda: _produce(cluster.address(old),
                                                          _batch(pid, 6)), 30))
        assert ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER not in answers, answers
        assert answers[-1] is ErrorCode.NOT_LEADER_OR_FOLLOWER, answers
        # And the producer goes on at the real leader, where its sequences continue.
        assert write(cluster.address(new), 6) is ErrorCode.NONE
