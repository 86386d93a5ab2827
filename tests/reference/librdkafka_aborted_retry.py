"""The lost committed record of the chaos transactional workload, reproduced through librdkafka
(confluent-kafka) on any 3-broker cluster, deterministically.

1. A topic of one partition, replicas [leader L, follower F], ``min.insync.replicas=2``, where
   neither L nor F is the transaction coordinator (whose log has one replica).
2. A transaction: a record "pre" delivered (the partition is in the transaction), then F is
   paused (SIGSTOP) and a record "first" is sent: L appends it and waits for F, librdkafka's
   request times out (``request.timeout.ms``) and the record waits for its retry
   (``retry.backoff.ms`` 30 s): appended at the leader, never acknowledged.
3. F resumed; ``abort_transaction()``: librdkafka purges the queued retry (no epoch bump: the
   record did not time out) and the coordinator writes the ABORT marker.
4. A new transaction with a record "second", ``commit_transaction()``; a read_committed
   consumer reads the partition.

librdkafka 2.16 sends "second" with the producer id, epoch and sequence of "first". The
outcome says what the leader answered and whether "second" can be read.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import confluent_kafka as ck

from floodmark.client.connection import KafkaConnection
from floodmark.client.fetch import FetchClient, visible_records
from floodmark.constants import READ_COMMITTED, READ_UNCOMMITTED

CREATE_TOPICS, FIND_COORDINATOR, METADATA = 19, 10, 3


@dataclass(frozen=True)
class RetryOutcome:
    first_offset: int  # where "first" is in the log (the ABORT marker follows it)
    first_report: str  # its delivery report: purged by the abort
    abort_ok: bool
    second_error: str | None
    second_offset: int  # what the leader answered for "second"
    commit_ok: bool
    committed_values: tuple[bytes, ...]
    log_end: int
    sequences: tuple[str, ...]  # librdkafka's Produce lines: MsgId, BaseSeq, PID

    @property
    def lost_acknowledged_record(self) -> bool:
        return (self.second_error is None and self.commit_ok
                and b"second" not in self.committed_values)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _until(pred: object, what: str, timeout_s: float = 60.0, poll: ck.Producer | None = None
           ) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}")
        if poll is not None:
            poll.poll(0.05)
        else:
            time.sleep(0.05)


def run(bootstrap: str, pids: Mapping[int, int]) -> RetryOutcome:
    """The scenario on the 3-broker cluster at ``bootstrap`` whose brokers run as ``pids``
    (node id -> pid; the follower is paused and resumed by signal)."""
    tag = uuid.uuid4().hex[:8]
    topic, txn_id = f"rdk-retry-{tag}", f"rdk-retry-{tag}"
    first_address = bootstrap.split(",")[0]
    with KafkaConnection(first_address, client_id="rdk-retry-setup") as conn:
        found: list[object] = []

        def coordinator() -> bool:
            c = conn.request(FIND_COORDINATOR, 4, {"key_type": 1,
                                                   "coordinator_keys": [txn_id]}).coordinators[0]
            found[:] = [c]
            return int(c.error_code) == 0
        _until(coordinator, "a transaction coordinator")
        coord = int(found[0].node_id)  # type: ignore[attr-defined]
        leader, follower = [n for n in sorted(pids) if n != coord][:2]
        created = conn.request(CREATE_TOPICS, 5, {
            "topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                        "assignments": [{"partition_index": 0,
                                         "broker_ids": [leader, follower]}],
                        "configs": [{"name": "min.insync.replicas", "value": "2"}]}],
            "timeout": 10_000, "validate_only": False})
        assert int(created.topics[0].error_code) == 0, created
    reader = FetchClient(bootstrap, client_id="rdk-retry-reader", isolation_level=READ_COMMITTED)
    try:
        _until(lambda: reader.partitions_for(topic) == [0], f"{topic} in the metadata")

        lines = _Lines()
        log = logging.getLogger(f"rdk-retry-{tag}")
        log.addHandler(lines)
        log.setLevel(logging.DEBUG)
        log.propagate = False
        reports: dict[bytes, tuple[str | None, int]] = {}

        def delivered(err: ck.KafkaError | None, msg: ck.Message) -> None:
            offset = msg.offset()  # None for a purged record
            reports[bytes(msg.value() or b"")] = (str(err) if err else None,
                                                  -1 if offset is None else int(offset))

        producer = ck.Producer({
            "bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
            "request.timeout.ms": 2000, "message.timeout.ms": 60_000,
            "transaction.timeout.ms": 60_000,
            "retry.backoff.ms": 30_000, "retry.backoff.max.ms": 30_000,
            "debug": "msg,eos", "logger": log})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"pre", partition=0, on_delivery=delivered)
        assert producer.flush(30) == 0 and reports[b"pre"][0] is None, reports
        os.kill(pids[follower], signal.SIGSTOP)
        try:
            mark = len(lines.lines)
            producer.produce(topic, b"first", partition=0, on_delivery=delivered)
            # progress: librdkafka gives up on the in-flight Produce and queues a retry
            _until(lambda: any("Timed out ProduceRequest in flight" in line
                               or "retrying" in line.lower() for line in lines.lines[mark:]),
                   "the Produce of 'first' timed out", poll=producer)
        finally:
            os.kill(pids[follower], signal.SIGCONT)
        try:
            producer.abort_transaction(60)
            abort_ok = True
        except ck.KafkaException:
            abort_ok = False
        producer.begin_transaction()
        producer.produce(topic, b"second", partition=0, on_delivery=delivered)
        try:
            producer.commit_transaction(60)
            commit_ok = True
        except ck.KafkaException:
            commit_ok = False
        producer.flush(10)

        _until(lambda: (b := reader.bounds(topic, 0)).last_stable_offset == b.high_watermark,
               "the last marker")
        bounds = reader.bounds(topic, 0)
        fetched = reader.fetch(topic, 0, 0, max_bytes=1 << 20)
        values = tuple(bytes(r.value or b"")
                       for r in visible_records(fetched, 0, READ_COMMITTED))
        # where "first" went: the uncommitted read of the log
        plain = FetchClient(bootstrap, client_id="rdk-retry-reader")
        try:
            raw = plain.fetch(topic, 0, 0, max_bytes=1 << 20)
            all_values = {bytes(r.value or b""): r.offset
                          for r in visible_records(raw, 0, READ_UNCOMMITTED)}
        finally:
            plain.close()
    finally:
        reader.close()
    produce_lines = tuple(line.split(": ", 2)[-1] for line in lines.lines
                          if "Produce MessageSet" in line)
    second = reports.get(b"second", ("no delivery report", -1))
    return RetryOutcome(all_values.get(b"first", -1), str(reports.get(b"first", ("?",))[0]),
                        abort_ok, second[0], second[1], commit_ok, values,
                        bounds.high_watermark, produce_lines)
