"""The transaction coordinator's APIs on the wire, version by version, against a real broker:
what a client that is not librdkafka would send (floodmark's own client, kio-encoded)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode

pytestmark = pytest.mark.integration

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 10, 22, 24, 25, 26
DESCRIBE_TXNS, LIST_TXNS, CREATE_TOPICS = 65, 66, 19


def _until(ask: Callable[[], Any], done: Callable[[Any], bool], what: str) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = ask()
        if done(answer):
            return answer
        time.sleep(0.05)
    raise AssertionError(f"never {what}: {answer}")


@pytest.fixture
def conn(broker: Any) -> Any:
    with KafkaConnection(broker.bootstrap) as c:
        c.request(CREATE_TOPICS, 4, {"topics": [{"name": "wire-txn", "num_partitions": 2,
                                                 "replication_factor": 1, "assignments": [],
                                                 "configs": []}],
                                     "timeout": 5000, "validate_only": False})
        yield c


def _init(conn: Any, txn_id: str, version: int = 4, **kw: Any) -> Any:
    body = {"transactional_id": txn_id, "transaction_timeout": kw.pop("timeout_ms", 60_000),
            "producer_id": kw.pop("producer_id", -1), "producer_epoch": kw.pop("epoch", -1)}
    return _until(lambda: conn.request(INIT_PRODUCER_ID, version, body),
                  lambda r: int(r.error_code) != ErrorCode.CONCURRENT_TRANSACTIONS, "initialised")


def _add_v3(conn: Any, txn_id: str, pid: int, epoch: int, topics: dict[str, list[int]],
            version: int = 3) -> dict[tuple[str, int], int]:
    resp = conn.request(ADD_PARTITIONS, version, {
        "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": p} for t, p in topics.items()]})
    return {(str(t.name), int(p.partition_index)): int(p.partition_error_code)
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def _end(conn: Any, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return int(conn.request(END_TXN, version, {"transactional_id": txn_id, "producer_id": pid,
                                               "producer_epoch": epoch,
                                               "committed": commit}).error_code)


def _state(conn: Any, txn_id: str) -> Any:
    return conn.request(DESCRIBE_TXNS, 0, {"transactional_ids": [txn_id]}).transaction_states[0]


def test_find_coordinator_for_a_transactional_id(conn: Any, broker: Any) -> None:
    v4 = conn.request(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["a", "b"]})
    assert [int(c.error_code) for c in v4.coordinators] == [0, 0]
    assert {int(c.port) for c in v4.coordinators} == {broker.port}
    v1 = conn.request(FIND_COORDINATOR, 1, {"key": "a", "key_type": 1})
    assert int(v1.error_code) == 0 and int(v1.port) == broker.port
    bad = conn.request(FIND_COORDINATOR, 4, {"key_type": 7, "coordinator_keys": ["a"]})
    assert int(bad.coordinators[0].error_code) == ErrorCode.INVALID_REQUEST


def test_a_transaction_on_the_wire_and_its_refusals(conn: Any) -> None:
    r = _init(conn, "wire-1")
    assert int(r.error_code) == 0
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    # Unknown topic: nothing is added, the rest OPERATION_NOT_ATTEMPTED; internal topics refused.
    assert _add_v3(conn, "wire-1", pid, epoch, {"wire-txn": [0], "nope": [0]}) == {
        ("wire-txn", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _add_v3(conn, "wire-1", pid, epoch, {"__consumer_offsets": [0]}) == {
        ("__consumer_offsets", 0): ErrorCode.INVALID_REQUEST}
    assert _add_v3(conn, "wire-1", pid + 1, epoch, {"wire-txn": [0]}) == {
        ("wire-txn", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert _add_v3(conn, "wire-1", pid, epoch, {"wire-txn": [0, 1]}) == {
        ("wire-txn", 0): 0, ("wire-txn", 1): 0}
    offsets = conn.request(ADD_OFFSETS, 3, {"transactional_id": "wire-1", "producer_id": pid,
                                            "producer_epoch": epoch, "group_id": "wire-group"})
    assert int(offsets.error_code) == 0
    s = _state(conn, "wire-1")
    assert s.transaction_state == "Ongoing"
    assert sorted((t.topic, p) for t in s.topics for p in t.partitions) == [
        ("__consumer_offsets", 0), ("wire-txn", 0), ("wire-txn", 1)]
    # KIP-890 verify_only (v4+): in the transaction or not, nothing added.
    v4 = conn.request(ADD_PARTITIONS, 4, {"transactions": [
        {"transactional_id": "wire-1", "producer_id": pid, "producer_epoch": epoch,
         "verify_only": True, "topics": [{"name": "wire-txn", "partitions": [1]}]},
        {"transactional_id": "wire-1", "producer_id": pid, "producer_epoch": epoch,
         "verify_only": True, "topics": [{"name": "__consumer_offsets", "partitions": [0]}]}]})
    assert [[int(p.partition_error_code) for t in r.topic_results for p in t.results_by_partition]
            for r in v4.results_by_transaction] == [[0], [0]]
    assert _end(conn, "wire-1", pid, epoch, True) == 0
    done = _until(lambda: _state(conn, "wire-1"), lambda s: s.transaction_state == "CompleteCommit",
                  "committed")
    assert not done.topics
    assert _end(conn, "wire-1", pid, epoch, True) == 0  # a retry of a finished commit
    assert _end(conn, "wire-1", pid, epoch, False) == ErrorCode.INVALID_TXN_STATE
    # A new producer with the same id: the old epoch is fenced, as the request version says it.
    assert int(_init(conn, "wire-1").producer_epoch) == epoch + 1
    assert _end(conn, "wire-1", pid, epoch, True, version=2) == ErrorCode.PRODUCER_FENCED
    assert _end(conn, "wire-1", pid, epoch, True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _add_v3(conn, "wire-1", pid, epoch, {"wire-txn": [0]}, version=1) == {
        ("wire-txn", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    too_long = _init(conn, "wire-2", timeout_ms=10**9)
    assert int(too_long.error_code) == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    unknown = _state(conn, "never-used")
    assert int(unknown.error_code) == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_list_transactions_filters(conn: Any) -> None:
    a = _init(conn, "list-a")
    b = _init(conn, "list-b")
    assert _add_v3(conn, "list-b", int(b.producer_id), int(b.producer_epoch),
                   {"wire-txn": [0]}) == {("wire-txn", 0): 0}

    def listed(**filters: Any) -> Any:
        body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, **filters}
        return conn.request(LIST_TXNS, 1, body)

    names = {t.transactional_id: t.transaction_state for t in listed().transaction_states}
    assert names["list-a"] == "Empty" and names["list-b"] == "Ongoing"
    ongoing = listed(state_filters=["Ongoing"]).transaction_states
    assert "list-b" in {t.transactional_id for t in ongoing}
    assert "list-a" not in {t.transactional_id for t in ongoing}
    by_pid = listed(producer_id_filters=[int(a.producer_id)]).transaction_states
    assert [t.transactional_id for t in by_pid] == ["list-a"]
    odd = listed(state_filters=["Sleeping"])
    assert list(odd.unknown_state_filters) == ["Sleeping"] and not odd.transaction_states
    assert not listed(duration_filter=3_600_000).transaction_states  # none that old


def _produce_txn(conn: Any, txn_id: str | None, pid: int, epoch: int, seq: int,
                 partition: int = 0) -> int:
    from floodmark.records import Record, build_batch

    batch = build_batch([Record(0, int(time.time() * 1000), None, b"v")], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    resp = conn.request(0, 9, {"transactional_id": txn_id, "acks": -1, "timeout": 10_000,
                               "topic_data": [{"name": "wire-txn", "partition_data": [
                                   {"index": partition, "records": batch}]}]})
    return int(resp.responses[0].partition_responses[0].error_code)


def test_kip_890_a_leader_verifies_a_transaction_before_its_first_batch(conn: Any) -> None:
    r = _init(conn, "verify-1")
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    # Not added to the transaction: refused, and nothing opens on the partition (a batch that
    # arrives after its transaction ended would otherwise hold the LSO back for good).
    assert _produce_txn(conn, "verify-1", pid, epoch, 0) == ErrorCode.INVALID_TXN_STATE
    assert _add_v3(conn, "verify-1", pid, epoch, {"wire-txn": [0]}) == {("wire-txn", 0): 0}
    assert _produce_txn(conn, "verify-1", pid, epoch, 0) == 0
    assert _produce_txn(conn, "verify-1", pid, epoch, 1) == 0  # open here now: no question
    assert _end(conn, "verify-1", pid, epoch, False) == 0
    _until(lambda: _state(conn, "verify-1"), lambda s: s.transaction_state == "CompleteAbort",
           "aborted")
    # A late batch of the aborted transaction (its producer's retry): refused.
    assert _produce_txn(conn, "verify-1", pid, epoch, 2) == ErrorCode.INVALID_TXN_STATE
    # The zombie of an older epoch: fenced.
    r2 = _init(conn, "verify-1")
    assert _add_v3(conn, "verify-1", pid, int(r2.producer_epoch), {"wire-txn": [1]}) == {
        ("wire-txn", 1): 0}
    assert _produce_txn(conn, "verify-1", pid, epoch, 0, partition=1) == \
        ErrorCode.INVALID_PRODUCER_EPOCH


def _offsets(conn: Any, topic: str, partition: int) -> tuple[int, int]:
    """(high watermark, last stable offset): ListOffsets latest, read_uncommitted and
    read_committed."""
    def latest(isolation: int) -> int:
        resp = conn.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1,
                                            "current_leader_epoch": -1}]}]})
        return int(resp.topics[0].partitions[0].offset)
    return latest(0), latest(1)


def _produce_plain(conn: Any, topic: str, partition: int) -> int:
    from floodmark.records import Record, build_batch

    batch = build_batch([Record(0, int(time.time() * 1000), None, b"plain")])
    resp = conn.request(0, 9, {"transactional_id": None, "acks": -1, "timeout": 10_000,
                               "topic_data": [{"name": topic, "partition_data": [
                                   {"index": partition, "records": batch}]}]})
    return int(resp.responses[0].partition_responses[0].error_code)


def _late_produce(conn: Any, txn_id: str, topic: str) -> Any:
    """A producer's raw Produce of a transactional batch for partition 0 of ``topic``, which
    its transaction never added (a late retry after the transaction ended looks the same)."""
    from floodmark.records import Record, build_batch

    r = _init(conn, txn_id)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    batch = build_batch([Record(0, int(time.time() * 1000), None, b"late")], producer_id=pid,
                        producer_epoch=epoch, base_sequence=0, is_transactional=True)
    resp = conn.request(0, 9, {"transactional_id": txn_id, "acks": -1, "timeout": 10_000,
                               "topic_data": [{"name": topic, "partition_data": [
                                   {"index": 0, "records": batch}]}]})
    return resp.responses[0].partition_responses[0]


def _create(conn: Any, topic: str) -> None:
    conn.request(CREATE_TOPICS, 4, {"topics": [{"name": topic, "num_partitions": 1,
                                                "replication_factor": 1, "assignments": [],
                                                "configs": []}],
                                    "timeout": 5000, "validate_only": False})


def test_kip_890_a_late_batch_never_added_is_refused_and_holds_no_lso(conn: Any) -> None:
    _create(conn, "late-txn")
    answer = _late_produce(conn, "late-1", "late-txn")
    assert int(answer.error_code) == ErrorCode.INVALID_TXN_STATE
    assert answer.error_message == "Partition was not added to the transaction"
    assert _produce_plain(conn, "late-txn", 0) == 0
    # nothing of the late batch is in the log, and nothing holds the LSO back
    assert _offsets(conn, "late-txn", 0) == (1, 1)


def test_without_verification_the_same_batch_hangs_the_lso(broker_factory: Any) -> None:
    """Why the guard exists (transaction versions 0 and 1, verification off as before Kafka
    3.6): the batch is appended and opens a transaction no coordinator knows of; the LSO stays
    at it while the partition's HW moves on."""
    b = broker_factory("--set", "transaction.partition.verification.enable=false")
    with KafkaConnection(b.bootstrap) as c:
        _create(c, "late-txn")
        assert int(_late_produce(c, "late-2", "late-txn").error_code) == 0
        assert _produce_plain(c, "late-txn", 0) == 0
        assert _offsets(c, "late-txn", 0) == (2, 0)


def test_transactional_records_without_a_transactional_id_refuse_the_whole_request(
        conn: Any) -> None:
    """Kafka's ``KafkaApis.handleProduceRequest``: a Produce whose records are transactional
    but which names no transactional id is refused whole, every partition (the plain one
    beside it too) TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and nothing is appended; with the id
    the same bytes are verified as usual (the partition was not added: INVALID_TXN_STATE)."""
    from floodmark.records import Record, build_batch

    r = _init(conn, "no-id-1")
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    now = int(time.time() * 1000)
    txn = build_batch([Record(0, now, None, b"t")], producer_id=pid, producer_epoch=epoch,
                      base_sequence=0, is_transactional=True)
    plain = build_batch([Record(0, now, None, b"p")])
    before = (_offsets(conn, "wire-txn", 0), _offsets(conn, "wire-txn", 1))
    resp = conn.request(0, 9, {"transactional_id": None, "acks": -1, "timeout": 10_000,
                               "topic_data": [{"name": "wire-txn", "partition_data": [
                                   {"index": 0, "records": txn}, {"index": 1, "records": plain}]}]})
    answers = {int(p.index): (int(p.error_code), int(p.base_offset))
               for t in resp.responses for p in t.partition_responses}
    denied = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    assert answers == {0: (denied, -1), 1: (denied, -1)}
    assert (_offsets(conn, "wire-txn", 0), _offsets(conn, "wire-txn", 1)) == before
    assert _produce_txn(conn, "no-id-1", pid, epoch, 0) == ErrorCode.INVALID_TXN_STATE
