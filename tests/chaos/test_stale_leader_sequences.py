"""A leader cut off from the controller, after the controller has moved its partition and an
idempotent producer has written its next sequences at the new leader, must not answer that
producer's next batch with OUT_OF_ORDER_SEQUENCE_NUMBER (found by ``floodmark chaos run``, all
faults, seed 14: librdkafka treats that answer as fatal, and kafka-python's idempotent producer
stayed stuck).

Kafka's stale leader answers the sequence error too (its broker ignores ``isFenced`` while
RUNNING and judges sequences by its own producer state until it applies the metadata that moves
the partition), but the error claims what that broker cannot know: that it leads and the
producer skipped sequences. floodmark's broker knows its controller session lapsed
(``broker/controller_session.py``), so it answers NOT_LEADER_OR_FOLLOWER: retriable, the client
refreshes its metadata and retries the same sequences at the real leader. After the heal it
answers the same until its metadata has caught up, and then as a follower.

Real processes in network namespaces: a controller and three brokers; a producer id, sequences
0-2 at the first leader, the leader cut off from the controller and the other brokers while the
client still reaches it, sequences 3-5 at the leader the controller elects, then sequence 6 at
the cut-off broker. Before the fix it answered OUT_OF_ORDER_SEQUENCE_NUMBER.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from floodmark.chaos.netns import Lab, LabError, check_available, namespace_executor, run_in
from floodmark.chaos.nodes import LabCluster, host_of
from floodmark.client.connection import KafkaConnection
from floodmark.controller.client import ControllerClient
from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch

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
    try:
        check_available()
    except LabError as exc:
        pytest.skip(str(exc))
    with Lab(["ctl", "b1", "b2", "b3", "clients"], prefix="stseq") as lab:
        cluster = LabCluster(lab, tmp_path / "cluster", 3, {"replica.lag.time.max.ms": "3000"},
                             {"broker.session.timeout.ms": "2000",
                              "auto.leader.rebalance.enable": "false"})
        clients = namespace_executor(lab.ns("clients"))
        try:
            cluster.start()
            admin = ControllerClient(cluster.controller_address, -1)

            def registration() -> dict[str, Any] | None:
                status = cluster.controller_status()
                part = (status or {}).get("topics", {}).get("q", {}).get("0")
                return part if isinstance(part, dict) else None

            def until(what: str, done: Any, timeout_s: float = 60) -> Any:
                deadline = time.monotonic() + timeout_s
                while time.monotonic() < deadline:
                    value = done()
                    if value:
                        return value
                    time.sleep(0.2)
                raise AssertionError(f"no progress: {what}")

            run_in(clients, lambda: asyncio.run(
                admin.create_topic("q", 1, 3, {"min.insync.replicas": "2"})), 30)
            first = until("a leader", lambda: (lambda r: r if r and r["leader"] > 0 else None)(
                run_in(clients, registration, 10)))
            old = int(first["leader"])

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
                    answers.append(run_in(clients, lambda: _produce(address, _batch(pid, seq)),
                                          30))
                    return answers[-1] not in RETRIABLE

                until(f"sequence {seq} at {address}: {answers[-5:]}", once)
                return answers[-1]

            assert write(cluster.address(old), 0) is ErrorCode.NONE
            others = [f"b{i}" for i in (1, 2, 3) if i != old]
            lab.isolate(host_of(old), ["ctl", *others])
            moved = until("a new leader", lambda: (
                lambda r: r if r and r["leader"] not in (old, -1) else None)(
                run_in(clients, registration, 10)), 30)
            new = int(moved["leader"])
            assert write(cluster.address(new), 3) is ErrorCode.NONE

            # The cut-off broker still believes it leads; its producer state ends at 2.
            stale = run_in(clients, lambda: _produce(cluster.address(old), _batch(pid, 6)), 30)
            assert stale is ErrorCode.NOT_LEADER_OR_FOLLOWER, stale.name

            lab.heal(host_of(old))
            # Healed: as long as it answers at all, never the fatal sequence error; once its
            # metadata has caught up it is a follower (NOT_LEADER_OR_FOLLOWER).
            answers: list[ErrorCode] = []

            def follower() -> bool:
                answers.append(run_in(
                    clients, lambda: _produce(cluster.address(old), _batch(pid, 6)), 30))
                part = run_in(clients, registration, 10)
                return bool(part and old in part.get("isr", []))  # back in the ISR: caught up

            until("the healed broker back in the ISR", follower, 60)
            answers.append(run_in(clients, lambda: _produce(cluster.address(old),
                                                              _batch(pid, 6)), 30))
            assert ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER not in answers, answers
            assert answers[-1] is ErrorCode.NOT_LEADER_OR_FOLLOWER, answers
            # And the producer goes on at the real leader, where its sequences continue.
            assert write(cluster.address(new), 6) is ErrorCode.NONE
        finally:
            clients.shutdown(wait=False)
            lab.heal()
            cluster.kill_all()
