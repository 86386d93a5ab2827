"""Broker semantics over the wire: idempotence, delayed fetch, fencing, min ISR, durability."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from floodmark.client import KafkaConnection
from floodmark.records import Record, build_batch, simple_batch

pytestmark = pytest.mark.integration


def create(conn: KafkaConnection, topic: str, partitions: int = 1, **configs: str) -> None:
    resp = conn.request(19, 7, {"topics": [{"name": topic, "num_partitions": partitions,
                                             "replication_factor": 1, "configs": [
                                                 {"name": k.replace("_", "."), "value": v}
                                                 for k, v in configs.items()]}],
                                "timeout": 5000})
    assert resp.topics[0].error_code == 0, resp


def produce(conn: KafkaConnection, topic: str, records: bytes, acks: int = -1, partition: int = 0):
    resp = conn.request(0, 9, {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


def list_offset(conn: KafkaConnection, topic: str, timestamp: int, epoch: int = -1,
                replica_id: int = -1):
    resp = conn.request(2, 7, {"replica_id": replica_id, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": epoch,
                                        "timestamp": timestamp}]}]})
    return resp.topics[0].partitions[0]


def fetch_body(topic: str, offset: int, *, wait_ms: int = 0, min_bytes: int = 1,
               epoch: int = -1) -> dict:
    return {"replica_id": -1, "max_wait": wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": epoch,
                                                 "fetch_offset": offset, "last_fetched_epoch": -1,
                                                 "log_start_offset": -1,
                                                 "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def idem_batch(pid: int, epoch: int, seq: int, n: int = 3) -> bytes:
    return build_batch([Record(i, 1000 + i, None, b"v%d" % (seq + i)) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_idempotent_duplicates_and_sequence_errors_survive_restart(broker) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        create(conn, "idem")
        init = conn.request(22, 4, {"transactional_id": None, "transaction_timeout": -1,
                                    "producer_id": -1, "producer_epoch": -1})
        assert init.error_code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
        pid = int(init.producer_id)
        assert produce(conn, "idem", idem_batch(pid, 0, 0)).base_offset == 0
        assert produce(conn, "idem", idem_batch(pid, 0, 3)).base_offset == 3
        dup = produce(conn, "idem", idem_batch(pid, 0, 0))  # retry of the first batch
        assert dup.error_code == 0 and dup.base_offset == 0
        assert produce(conn, "idem", idem_batch(pid, 0, 9)).error_code == 45  # gap: out of order
        assert list_offset(conn, "idem", -1).offset == 6  # nothing appended by either
    broker.restart(crash=True)
    with KafkaConnection(broker.bootstrap) as conn:
        dup = produce(conn, "idem", idem_batch(pid, 0, 3))  # state rebuilt from the log
        assert dup.error_code == 0 and dup.base_offset == 3
        assert produce(conn, "idem", idem_batch(pid, 0, 6)).base_offset == 6
        assert list_offset(conn, "idem", -1).offset == 9
        again = conn.request(22, 4, {"transactional_id": None, "transaction_timeout": -1,
                                     "producer_id": -1, "producer_epoch": -1})
        assert int(again.producer_id) != pid  # ids are never reused after a crash


def test_delayed_fetch_waits_then_wakes_on_append(broker) -> None:
    with KafkaConnection(broker.bootstrap) as conn, KafkaConnection(broker.bootstrap) as prod:
        create(conn, "longpoll")
        t0 = time.monotonic()
        resp = conn.request(1, 12, fetch_body("longpoll", 0, wait_ms=400, min_bytes=1))
        waited = time.monotonic() - t0
        assert resp.responses[0].partitions[0].records in (b"", None)
        assert 0.35 <= waited < 3.0  # honoured fetch.max.wait.ms
        corr = conn.send(1, 12, fetch_body("longpoll", 0, wait_ms=10_000, min_bytes=1))
        time.sleep(0.2)
        t0 = time.monotonic()
        assert produce(prod, "longpoll", simple_batch([b"wake"])).error_code == 0
        resp = conn.receive(1, 12, corr)
        assert time.monotonic() - t0 < 2.0  # woken by the append, not by the 10 s timeout
        part = resp.responses[0].partitions[0]
        assert part.high_watermark == 1 and len(part.records) > 0


def test_leader_epoch_fencing_and_offset_for_leader_epoch(broker) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        create(conn, "fence")
        produce(conn, "fence", simple_batch([b"a", b"b"]))
        part = conn.request(1, 12, fetch_body("fence", 0, epoch=7)).responses[0].partitions[0]
        assert part.error_code == 75  # UNKNOWN_LEADER_EPOCH: the client is ahead of us
        assert list_offset(conn, "fence", -1, epoch=7).error_code == 75
        ok = list_offset(conn, "fence", -1, epoch=0)
        assert ok.error_code == 0 and ok.offset == 2 and ok.leader_epoch == 0
        resp = conn.request(23, 4, {"replica_id": -1, "topics": [{"topic": "fence", "partitions": [
            {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]})
        p = resp.topics[0].partitions[0]
        assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 2)


def test_list_offsets_by_timestamp(broker) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        create(conn, "times")
        produce(conn, "times", build_batch([Record(i, 1000 * (i + 1), None, b"x") for i in range(5)]))
        assert list_offset(conn, "times", 0).offset == 0
        assert list_offset(conn, "times", 2500).offset == 2
        hit = list_offset(conn, "times", 3000)
        assert (hit.offset, hit.timestamp) == (2, 3000)
        assert list_offset(conn, "times", 10_000).offset == -1
        assert list_offset(conn, "times", -2).offset == 0
        top = list_offset(conn, "times", -3)
        assert (top.offset, top.timestamp) == (4, 5000)


def test_min_insync_replicas_is_capped_at_replication_factor(broker) -> None:
    """Kafka 4 (KIP-966): the effective min ISR is min(min.insync.replicas, RF), so an RF=1
    topic with min.insync.replicas=2 still accepts acks=all, and its HW moves."""
    with KafkaConnection(broker.bootstrap) as conn:
        create(conn, "minisr", min_insync_replicas="2")
        assert produce(conn, "minisr", simple_batch([b"x"]), acks=-1).error_code == 0
        assert produce(conn, "minisr", simple_batch([b"y"]), acks=1).error_code == 0
        assert list_offset(conn, "minisr", -1).offset == 2
        assert list_offset(conn, "minisr", -1, replica_id=-2).offset == 2


def test_metadata_and_data_survive_clean_restart_with_checkpoints(broker) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        create(conn, "durable", partitions=3)
        for p in range(3):
            produce(conn, "durable", simple_batch([b"r%d" % p] * (p + 1)), partition=p)
    broker.restart()
    data_dir = Path(broker.data_dir)
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "log-start-offset-checkpoint"):
        text = (data_dir / name).read_text()
        assert "durable 2 3" in text or name != "replication-offset-checkpoint"
    with KafkaConnection(broker.bootstrap) as conn:
        meta = conn.request(3, 12, {"topics": [{"name": "durable"}],
                                    "allow_auto_topic_creation": False})
        assert len(meta.topics[0].partitions) == 3
        for p in range(3):
            resp = conn.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "durable", "partitions": [{"partition_index": p,
                                                    "current_leader_epoch": -1,
                                                    "timestamp": -1}]}]})
            assert resp.topics[0].partitions[0].offset == p + 1


def test_torn_tail_is_truncated_on_recovery(broker) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        create(conn, "torn")
        produce(conn, "torn", simple_batch([b"keep"] * 4))
    broker.kill()
    seg = Path(broker.data_dir) / "torn-0" / "00000000000000000000.log"
    with open(seg, "ab") as fh:  # a half-written batch after the crash
        fh.write(simple_batch([b"torn"] * 3)[:40])
        fh.flush()
        os.fsync(fh.fileno())
    broker.start(port=broker.port or 0)
    with KafkaConnection(broker.bootstrap) as conn:
        assert list_offset(conn, "torn", -1).offset == 4
        assert produce(conn, "torn", simple_batch([b"next"])).base_offset == 4


def test_retention_deletes_old_segments_below_hw(broker_factory) -> None:
    b = broker_factory("--set", "log.retention.check.interval.ms=500")
    with KafkaConnection(b.bootstrap) as conn:
        create(conn, "ret", segment_bytes="1024", retention_bytes="2048")
        for i in range(20):
            produce(conn, "ret", simple_batch([b"x" * 300], timestamp_ms=1000 + i))
        deadline = time.monotonic() + 10
        start = 0
        while time.monotonic() < deadline and start == 0:
            time.sleep(0.2)
            start = list_offset(conn, "ret", -2).offset
        assert start > 0  # old segments were deleted and the log start moved
        assert list_offset(conn, "ret", -1).offset == 20
        part = conn.request(1, 12, fetch_body("ret", 0)).responses[0].partitions[0]
        assert part.error_code == 1 and part.log_start_offset == start


def test_sigint_is_a_clean_shutdown(broker_factory) -> None:
    import signal

    b = broker_factory()
    with KafkaConnection(b.bootstrap) as conn:
        create(conn, "sigint")
        produce(conn, "sigint", simple_batch([b"a"]))
    assert b.stop(signal.SIGINT) == 0
    assert "closed cleanly (checkpoints written)" in b.log_text()
    assert "sigint 0 1" in (Path(b.data_dir) / "replication-offset-checkpoint").read_text()
