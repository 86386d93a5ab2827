"""confluent-kafka's transactional producer against a real floodmark broker process, end to end:
the transaction coordinator (InitProducerId with a transactional.id, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, the markers it writes) and the partition side (control
batches, the LSO, read_committed Fetch), checked by read_committed consumers that must see
exactly the committed records."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from floodmark.client.connection import KafkaConnection
from tests.compat.txn_helpers import create_topic

pytestmark = pytest.mark.compat

BROKER_FLAGS = ("--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")


def _producer(bootstrap: str, txn_id: str, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "linger.ms": 5, **conf})


def _values(bootstrap: str, topic: str, partitions: int, isolation: str,
            end_offsets: dict[int, int] | None = None, timeout_s: float = 60.0) -> list[bytes]:
    """Every value a consumer in ``isolation`` reads from the start until it has reached the
    partition's end (its position past the last offset: markers included); fails when its
    position stops moving."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "v-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "isolation.level": isolation})
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    c.assign(tps)
    if end_offsets is None:
        end_offsets = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                       for p in range(partitions)}
    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for m in c.consume(500, 0.3):
                if m.error() is None:
                    out.append(m.value())
            positions = {tp.partition: tp.offset for tp in c.position(tps)}
            if all(positions[p] >= end_offsets[p] for p in range(partitions)):
                return out
    finally:
        c.close()
    raise AssertionError(f"{isolation} consumer never reached {end_offsets}; saw {len(out)}")


def _describe(bootstrap: str, txn_id: str) -> Any:
    with KafkaConnection(bootstrap) as conn:
        for _ in range(50):  # the coordinator may be loading, or moved: ask again
            resp = conn.request(10, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
            if int(resp.coordinators[0].error_code) == 0:
                break
            time.sleep(0.1)
        return conn.request(65, 0, {"transactional_ids": [txn_id]}).transaction_states[0]


def _wait_state(bootstrap: str, txn_id: str, states: set[str], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = _describe(bootstrap, txn_id)
        if last.transaction_state in states:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{txn_id} never reached {states}; last {last}")


def _send(p: Producer, topic: str, values: list[bytes], partition: int | None = None) -> None:
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % 2 if partition is None else partition,
                  on_delivery=report)
    assert p.flush(30) == 0
    assert not errors, errors


@pytest.fixture
def txn_broker(broker_factory: Callable[..., Any]) -> Any:
    return broker_factory(*BROKER_FLAGS)


def test_commit_and_abort_read_committed_sees_exactly_the_committed(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    topic = "txn-out"
    create_topic(bootstrap, topic, partitions=2)
    p = _producer(bootstrap, "txn-commit-abort")
    p.init_transactions(30)
    committed: list[bytes] = []
    everything: list[bytes] = []
    for round_, commit in enumerate([True, False, True, False, True]):
        values = [f"r{round_}-{i}".encode() for i in range(20)]
        p.begin_transaction()
        _send(p, topic, values)
        everything += values
        if commit:
            p.commit_transaction(30)
            committed += values
        else:
            p.abort_transaction(30)
    state = _wait_state(bootstrap, "txn-commit-abort", {"CompleteCommit"})
    assert state.producer_epoch == 0 and not state.topics
    assert sorted(_values(bootstrap, topic, 2, "read_committed")) == sorted(committed)
    assert sorted(_values(bootstrap, topic, 2, "read_uncommitted")) == sorted(everything)
    # ListTransactions names it, in its state.
    with KafkaConnection(bootstrap) as conn:
        listed = conn.request(66, 1, {"state_filters": ["CompleteCommit"],
                                      "producer_id_filters": [], "duration_filter": -1})
    assert [t.transactional_id for t in listed.transaction_states] == ["txn-commit-abort"]


def test_consume_transform_produce_with_send_offsets(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "ctp-in", partitions=2)
    create_topic(bootstrap, "ctp-out", partitions=2)
    inputs = [f"in-{i}".encode() for i in range(300)]
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, v in enumerate(inputs):
        plain.produce("ctp-in", value=v, partition=i % 2)
    assert plain.flush(30) == 0
    group = "ctp-group"

    def consumer() -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "session.timeout.ms": 6000})
        c.subscribe(["ctp-in"])
        return c

    c = consumer()
    p = _producer(bootstrap, "ctp-txn")
    p.init_transactions(30)
    seen = 0
    aborted_once = False
    deadline = time.monotonic() + 90
    while seen < len(inputs) and time.monotonic() < deadline:
        batch = [m for m in c.consume(50, 0.5) if m.error() is None]
        if not batch:
            continue
        p.begin_transaction()
        for m in batch:
            p.produce("ctp-out", value=m.value().replace(b"in-", b"out-"),
                      partition=m.partition())
        p.send_offsets_to_transaction(c.position(c.assignment()),
                                      c.consumer_group_metadata(), 30)
        if not aborted_once and seen > 50:
            # One aborted round: its outputs never become visible and its offsets are not
            # committed, so a new consumer of the group reads those inputs again.
            aborted_once = True
            p.abort_transaction(30)
            c.close()
            c = consumer()
            continue
        p.commit_transaction(30)
        seen += len(batch)
    c.close()
    assert aborted_once and seen == len(inputs), seen
    out = _values(bootstrap, "ctp-out", 2, "read_committed")
    assert sorted(out) == sorted(v.replace(b"in-", b"out-") for v in inputs)
    # The group's committed offsets are the ends of the input partitions.
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "isolation.level": "read_committed"})
    try:
        offsets = check.committed([TopicPartition("ctp-in", 0), TopicPartition("ctp-in", 1)], 20)
        assert [tp.offset for tp in offsets] == [150, 150]
    finally:
        check.close()


def test_a_zombie_producer_is_fenced_by_a_newer_one(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    topic = "zombie-out"
    create_topic(bootstrap, topic, partitions=1)
    zombie = _producer(bootstrap, "zombie-txn")
    zombie.init_transactions(30)
    zombie.begin_transaction()
    _send(zombie, topic, [b"zombie-1"], partition=0)
    # The same transactional.id starts again elsewhere: its InitProducerId aborts the zombie's
    # open transaction and bumps the epoch.
    fresh = _producer(bootstrap, "zombie-txn")
    fresh.init_transactions(30)
    state = _describe(bootstrap, "zombie-txn")
    assert state.producer_epoch == 2  # 0: zombie, 1: the fencing abort, 2: the new producer
    with pytest.raises(KafkaException) as caught:
        zombie.produce(topic, value=b"zombie-2", partition=0)
        zombie.commit_transaction(30)
    assert caught.value.args[0].fatal() or "fenced" in str(caught.value).lower()
    fresh.begin_transaction()
    _send(fresh, topic, [b"fresh-1"], partition=0)
    fresh.commit_transaction(30)
    assert _values(bootstrap, topic, 1, "read_committed") == [b"fresh-1"]


def test_a_transaction_past_its_timeout_is_aborted(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    topic = "timeout-out"
    create_topic(bootstrap, topic, partitions=1)
    p = _producer(bootstrap, "timeout-txn", **{"transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    _send(p, topic, [b"abandoned-1", b"abandoned-2"], partition=0)
    state = _wait_state(bootstrap, "timeout-txn", {"CompleteAbort"})
    assert state.producer_epoch == 1  # fenced by the abort
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    # The records are aborted; the LSO moved past them (the read_committed consumer reaches the
    # end of the partition) and it sees none of them.
    assert _values(bootstrap, topic, 1, "read_committed") == []
    # The transactional.id is usable again by a new producer.
    again = _producer(bootstrap, "timeout-txn")
    again.init_transactions(30)
    again.begin_transaction()
    _send(again, topic, [b"after"], partition=0)
    again.commit_transaction(30)
    assert _values(bootstrap, topic, 1, "read_committed") == [b"after"]


def test_init_transactions_refusals(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    p = _producer(bootstrap, "too-long", **{"transaction.timeout.ms": 900_001})
    with pytest.raises(KafkaException) as caught:
        p.init_transactions(20)
    assert "INVALID_TRANSACTION_TIMEOUT" in str(caught.value) or \
        "transaction timeout" in str(caught.value).lower()


def _offset_fetch(bootstrap: str, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    """(error code, committed offset) of partition 0, OffsetFetch v7."""
    with KafkaConnection(bootstrap) as conn:
        resp = conn.request(9, 7, {"group_id": group, "require_stable": require_stable,
                                   "topics": [{"name": topic, "partition_indexes": [0]}]})
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.committed_offset)


def test_transactional_offsets_are_pending_until_the_commit(txn_broker: Any) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, "stable-in", partitions=1)
    create_topic(bootstrap, "stable-out", partitions=1)
    group = "stable-group"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    p = _producer(bootstrap, "stable-txn")
    p.init_transactions(30)
    p.begin_transaction()
    _send(p, "stable-out", [b"x"], partition=0)
    p.send_offsets_to_transaction([TopicPartition("stable-in", 0, 5)],
                                  c.consumer_group_metadata(), 30)
    # Pending: a read_committed consumer (require_stable) is told to ask again; a plain
    # OffsetFetch sees no committed offset yet.
    assert _offset_fetch(bootstrap, group, "stable-in", True) == (88, -1)  # UNSTABLE_OFFSET_COMMIT
    assert _offset_fetch(bootstrap, group, "stable-in", False) == (0, -1)
    p.commit_transaction(30)
    _wait_state(bootstrap, "stable-txn", {"CompleteCommit"})
    assert _offset_fetch(bootstrap, group, "stable-in", True) == (0, 5)
    # An aborted one is dropped: the committed offset stays 5.
    p.begin_transaction()
    _send(p, "stable-out", [b"y"], partition=0)
    p.send_offsets_to_transaction([TopicPartition("stable-in", 0, 9)],
                                  c.consumer_group_metadata(), 30)
    p.abort_transaction(30)
    _wait_state(bootstrap, "stable-txn", {"CompleteAbort"})
    assert _offset_fetch(bootstrap, group, "stable-in", True) == (0, 5)
    c.close()


def test_aiokafka_and_kafka_python_transactional_producers(txn_broker: Any) -> None:
    """Two more clients, older request versions (aiokafka: AddPartitionsToTxn/EndTxn v0,
    TxnOffsetCommit v0): commit and abort, checked by a librdkafka read_committed consumer."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    bootstrap = txn_broker.bootstrap
    topic = "other-clients"
    create_topic(bootstrap, topic, partitions=2)

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-txn")
        await p.start()
        try:
            async with p.transaction():
                for i in range(10):
                    await p.send(topic, f"aio-commit-{i}".encode(), partition=i % 2)
            await p.begin_transaction()
            for i in range(10):
                await p.send(topic, f"aio-abort-{i}".encode(), partition=i % 2)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(aio())
    kp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn")
    kp.init_transactions()
    kp.begin_transaction()
    for i in range(10):
        kp.send(topic, f"kp-commit-{i}".encode(), partition=i % 2)
    kp.commit_transaction()
    kp.begin_transaction()
    for i in range(10):
        kp.send(topic, f"kp-abort-{i}".encode(), partition=i % 2)
    kp.flush()  # kafka-python aborts locally what it has not sent yet: send it first
    kp.abort_transaction()
    kp.close()
    for txn_id, state in (("aio-txn", "CompleteAbort"), ("kp-txn", "CompleteAbort")):
        _wait_state(bootstrap, txn_id, {state})
    expected = [f"{who}-commit-{i}".encode() for who in ("aio", "kp") for i in range(10)]
    assert sorted(_values(bootstrap, topic, 2, "read_committed")) == sorted(expected)
