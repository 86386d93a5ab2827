"""A differential scenario: a new record sent with the (producer id, epoch, sequence) of a batch
that an aborted transaction left in the log. What does the partition leader answer?

The case comes from the chaos transactional workload (docs/chaos.md): librdkafka appended a
transactional batch (P, E, S) at a leader that went away before acknowledging it; the
application aborted; librdkafka purged the retry and put a *new* record at the same (P, E, S) in
the next transaction. A leader that answers it as a duplicate of the aborted batch (success, the
aborted batch's offset) makes the next commit "commit" a record that is in no log.

Driven on the wire with floodmark's own client (kio request classes over ``KafkaConnection``),
request by request, so that the same bytes go to real Kafka and to floodmark:

    FindCoordinator -> InitProducerId(txn id) -> AddPartitionsToTxn(t-0)
    -> Produce "aborted" (P, E, seq 0) -> EndTxn(ABORT) -> wait for the ABORT marker (LSO)
    -> AddPartitionsToTxn(t-0) -> Produce "committed" (P, E, seq 0)   <- the answer in question
    -> EndTxn(COMMIT) -> wait for the COMMIT marker -> read_committed Fetch from 0

Two protocols (``Protocol``). ``V1``: the requests librdkafka-era clients send (Produce v9,
AddPartitionsToTxn v3, EndTxn v3: the transaction protocol before KIP-890 part 2, where the
epoch stays the same from one transaction to the next). ``V2``: KIP-890 part 2,
``transaction.version=2``: no AddPartitionsToTxn (a Produce v12 adds its partition), and
EndTxn v5 bumps the epoch and answers the new one; the second record is still sent with the
old (P, E, S), as the faulty client would.
``python -m tests.reference.aborted_duplicate [--v2] BOOTSTRAP [BOOTSTRAP...]`` prints the
answers of each broker side by side.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from floodmark.client.connection import KafkaConnection
from floodmark.client.fetch import FetchClient, visible_records
from floodmark.constants import READ_COMMITTED
from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch

PRODUCE, FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN, CREATE_TOPICS = (
    0, 10, 22, 24, 26, 19)


@dataclass(frozen=True)
class Protocol:
    name: str
    init_producer_id_version: int
    produce_version: int
    end_txn_version: int
    add_partitions: bool  # the client sends AddPartitionsToTxn (before KIP-890 part 2)


V1 = Protocol("transaction.version 1 (EndTxn v3)", 4, 9, 3, add_partitions=True)
V2 = Protocol("transaction.version 2 (EndTxn v5, KIP-890 part 2)", 5, 12, 5, add_partitions=False)

# What a transactional client waits out and asks again (the coordinator is busy or moving).
BUSY = frozenset(int(c) for c in (
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    """What one broker answered, step by step (error codes are Kafka's numbers)."""

    producer_id: int
    producer_epoch: int
    aborted_produce_error: int
    aborted_produce_offset: int
    abort_error: int
    epoch_after_abort: int  # what EndTxn v5 answers (-1: the version has no such field)
    end_after_abort: int  # the log end once the ABORT marker is in (LSO = HW)
    second_produce_error: int
    second_produce_offset: int
    commit_error: int
    end_after_commit: int
    committed_values: tuple[bytes, ...]  # read_committed, whole partition

    @property
    def second_record_readable(self) -> bool:
        return b"committed" in self.committed_values

    @property
    def answered_as_duplicate(self) -> bool:
        """Success pointing at the aborted batch's offset: the new record was not written."""
        return (self.second_produce_error == 0
                and self.second_produce_offset == self.aborted_produce_offset)

    @property
    def lost_acknowledged_record(self) -> bool:
        """Produce and commit both answered success, and the record is not there."""
        return (self.second_produce_error == 0 and self.commit_error == 0
                and not self.second_record_readable)


def _until(ask: Callable[[], T], done: Callable[[T], bool], what: str,
           timeout_s: float = 30.0) -> T:
    deadline = time.monotonic() + timeout_s
    answer = ask()
    while not done(answer):
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}: last answer {answer}")
        time.sleep(0.05)
        answer = ask()
    return answer


def _code(resp: Any) -> int:
    return int(resp.error_code)


def _produce(conn: KafkaConnection, version: int, txn_id: str, topic: str, pid: int, epoch: int,
             seq: int, value: bytes) -> tuple[int, int]:
    batch = build_batch([Record(0, int(time.time() * 1000), None, value)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    resp = conn.request(PRODUCE, version, {
        "transactional_id": txn_id, "acks": -1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    p = resp.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def _add_partition(conn: KafkaConnection, txn_id: str, topic: str, pid: int, epoch: int) -> int:
    def ask() -> int:
        resp = conn.request(ADD_PARTITIONS, 3, {
            "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        return int(resp.results_by_topic_v3_and_below[0].results_by_partition[0]
                   .partition_error_code)
    return _until(ask, lambda c: c not in BUSY, f"AddPartitionsToTxn {topic}-0 answered")


def _end_txn(conn: KafkaConnection, version: int, txn_id: str, pid: int, epoch: int,
             commit: bool) -> tuple[int, int]:
    """(error code, the producer epoch the answer gives: v5+, else -1)."""
    resp = _until(lambda: conn.request(END_TXN, version, {
        "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
        "committed": commit}), lambda r: _code(r) not in BUSY, "EndTxn answered")
    return _code(resp), int(getattr(resp, "producer_epoch", -1))


def _stable_end(reader: FetchClient, topic: str, at_least: int) -> int:
    """Wait until the LSO reaches the HW and the HW is at least ``at_least`` (the marker is
    in and the transaction no longer open); returns that offset."""
    bounds = _until(lambda: reader.bounds(topic, 0),
                    lambda b: b.high_watermark >= at_least
                    and b.last_stable_offset == b.high_watermark,
                    f"the marker in {topic}-0 (LSO = HW >= {at_least})")
    return bounds.high_watermark


def run(bootstrap: str, *, protocol: Protocol = V1, topic: str | None = None,
        txn_id: str | None = None) -> Outcome:
    """The scenario against the cluster at ``bootstrap``: transaction requests to the
    coordinator FindCoordinator names, Produce to the partition's leader (a new topic, one
    partition, one replica)."""
    p = protocol
    topic = topic or f"dup-abort-{uuid.uuid4().hex[:8]}"
    txn_id = txn_id or f"dup-abort-{uuid.uuid4().hex[:8]}"
    with ExitStack() as stack:
        conn = stack.enter_context(KafkaConnection(bootstrap, client_id="aborted-duplicate"))
        created = conn.request(CREATE_TOPICS, 5, {
            "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout": 10_000, "validate_only": False})
        assert int(created.topics[0].error_code) in (0, ErrorCode.TOPIC_ALREADY_EXISTS), created
        reader = FetchClient(bootstrap, client_id="aborted-duplicate-reader",
                             isolation_level=READ_COMMITTED)
        stack.callback(reader.close)
        _stable_end(reader, topic, 0)  # the partition has a leader that serves
        host, port = reader.cluster.brokers[reader.cluster.leader(topic, 0)]
        leader = stack.enter_context(KafkaConnection(f"{host}:{port}",
                                                     client_id="aborted-duplicate"))
        # Kafka creates __transaction_state on the first FindCoordinator for a txn id.
        found = _until(lambda: conn.request(FIND_COORDINATOR, 4, {
            "key_type": 1, "coordinator_keys": [txn_id]}).coordinators[0],
            lambda c: int(c.error_code) == 0, "a transaction coordinator")
        coord = stack.enter_context(KafkaConnection(f"{found.host}:{found.port}",
                                                    client_id="aborted-duplicate"))
        init = _until(lambda: coord.request(INIT_PRODUCER_ID, p.init_producer_id_version, {
            "transactional_id": txn_id, "transaction_timeout": 60_000,
            "producer_id": -1, "producer_epoch": -1}),
            lambda r: _code(r) not in BUSY, "InitProducerId answered")
        assert _code(init) == 0, init
        pid, epoch = int(init.producer_id), int(init.producer_epoch)

        if p.add_partitions:
            assert _add_partition(coord, txn_id, topic, pid, epoch) == 0
        first = _until(lambda: _produce(leader, p.produce_version, txn_id, topic, pid, epoch,
                                        0, b"aborted"),
                       lambda a: a[0] not in BUSY, "the first Produce answered")
        abort, epoch_after_abort = _end_txn(coord, p.end_txn_version, txn_id, pid, epoch,
                                            commit=False)
        end_after_abort = _stable_end(reader, topic, first[1] + 2)  # batch + marker

        if p.add_partitions:
            assert _add_partition(coord, txn_id, topic, pid, epoch) == 0
        # The faulty client's record: a new value at the aborted batch's (P, E, S).
        second = _produce(leader, p.produce_version, txn_id, topic, pid, epoch, 0, b"committed")
        # The commit with the epoch the coordinator now holds (V2: the bumped one).
        commit_epoch = epoch_after_abort if epoch_after_abort >= 0 else epoch
        commit, _ = _end_txn(coord, p.end_txn_version, txn_id, pid, commit_epoch, commit=True)
        # A commit that succeeds writes a COMMIT marker on the partition (asynchronously).
        end_after_commit = _stable_end(reader, topic, end_after_abort + (commit == 0))

        fetched = reader.fetch(topic, 0, 0, max_bytes=1 << 20)
        values = tuple(bytes(r.value or b"") for r in visible_records(fetched, 0, READ_COMMITTED))
    return Outcome(pid, epoch, first[0], first[1], abort, epoch_after_abort, end_after_abort,
                   second[0], second[1], commit, end_after_commit, values)


def _name(code: int) -> str:
    try:
        return f"{code} {ErrorCode(code).name}"
    except ValueError:
        return str(code)


def side_by_side(outcomes: dict[str, Outcome]) -> str:
    """A table: one row per step, one column per broker."""
    rows = [("step", *outcomes)]
    for f in fields(Outcome):
        cells = []
        for o in outcomes.values():
            value = getattr(o, f.name)
            cells.append(_name(value) if f.name.endswith("_error") else str(value))
        rows.append((f.name, *cells))
    for prop in ("answered_as_duplicate", "second_record_readable", "lost_acknowledged_record"):
        rows.append((prop, *(str(getattr(o, prop)) for o in outcomes.values())))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def main(argv: Sequence[str]) -> int:
    protocol = V2 if argv[:1] == ["--v2"] else V1
    argv = argv[1:] if protocol is V2 else argv
    if not argv:
        print("usage: python -m tests.reference.aborted_duplicate [--v2] BOOTSTRAP...",
              file=sys.stderr)
        return 2
    print(f"{protocol.name}\n" + side_by_side({b: run(b, protocol=protocol) for b in argv}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
