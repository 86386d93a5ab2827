"""Writing transactions without a transaction coordinator: transactional batches built with
floodmark's records encoder, sent as Produce with a transactional id, and ended with
WriteTxnMarkers through floodmark's client (``client.transactions``); read back with real
consumers in read_committed mode.

A Produce of transactional batches must name a transactional id (Kafka refuses the whole
request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise), and a leader that verifies
transactions (KIP-890 part 1) asks that id's coordinator, which knows nothing of these
hand-made transactions: the brokers these helpers write to run with ``NO_VERIFICATION``, as a
Kafka broker would have to."""

from __future__ import annotations

import time
import uuid
from typing import Any

from floodmark.client.cluster import ClusterClient
from floodmark.records import Record, build_batch

API_PRODUCE = 0
API_INIT_PRODUCER_ID = 22
# The setting of the brokers ``produce(..., transactional=True)`` writes to: as a dict
# (``LocalCluster``'s broker settings) and as flags (``BrokerProcess``).
UNVERIFIED = {"transaction.partition.verification.enable": "false"}
NO_VERIFICATION = tuple(a for k, v in UNVERIFIED.items() for a in ("--set", f"{k}={v}"))


def new_producer_id(cluster: ClusterClient) -> int:
    resp = cluster.request_any(API_INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout": 60_000,
        "producer_id": -1, "producer_epoch": -1})
    assert int(resp.error_code) == 0
    return int(resp.producer_id)


def produce(cluster: ClusterClient, topic: str, partition: int, values: list[bytes], *,
            producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
            transactional: bool = False) -> tuple[int, int]:
    """One batch, acks=all, to the partition's leader; returns (error code, base offset). A
    transactional batch goes with the transactional id ``txn-helpers-<producer id>``."""
    now = int(time.time() * 1000)
    batch = build_batch([Record(i, now, None, v) for i, v in enumerate(values)],
                        producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=base_sequence, is_transactional=transactional)

    def once() -> tuple[int, int]:
        leader = cluster.leader(topic, partition)
        resp = cluster.request_node(leader, API_PRODUCE, 9, {
            "transactional_id": f"txn-helpers-{producer_id}" if transactional else None,
            "acks": -1,
            "timeout": 30_000, "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": batch}]}]})
        p = resp.responses[0].partition_responses[0]
        return int(p.error_code), int(p.base_offset)

    return once()


def create_topic(bootstrap: str, topic: str, partitions: int = 1, replication: int = 1,
                 **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication, config=dict(configs))]
                        )[topic].result(30)


def end_transaction(p: Any, commit: bool, *, attempts: int = 20, backoff_s: float = 0.2
                    ) -> None:
    """``commit_transaction`` / ``abort_transaction`` of a confluent-kafka producer, asked again
    on retriable errors (a coordinator that moved or is still loading)."""
    from confluent_kafka import KafkaException

    for _ in range(attempts):
        try:
            if commit:
                p.commit_transaction(60)
            else:
                p.abort_transaction(60)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            time.sleep(backoff_s)
    raise AssertionError(f"the transaction never ended ({attempts} attempts)")


def read_committed_confluent(bootstrap: str, topic: str, partition: int, until: bytes,
                             timeout_s: float = 60.0) -> list[bytes]:
    """Values a librdkafka read_committed consumer sees from offset 0 up to and including the
    value ``until`` (fails if it never comes: progress stopped)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "topic.metadata.refresh.interval.ms": 1000})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    out.append(m.value())
            if until in out:
                return out
    finally:
        c.close()
    raise AssertionError(f"read_committed consumer never reached {until!r}; saw {out}")


def read_committed_kafka_python(bootstrap: str, topic: str, partition: int, until: bytes,
                                timeout_s: float = 60.0) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                      enable_auto_commit=False, group_id=None, metadata_max_age_ms=1000)
    tp = TopicPartition(topic, partition)
    c.assign([tp])
    c.seek(tp, 0)
    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            polled: dict[Any, list[Any]] = c.poll(timeout_ms=500)
            for records in polled.values():
                out.extend(r.value for r in records)
            if until in out:
                return out
    finally:
        c.close()
    raise AssertionError(f"kafka-python read_committed never reached {until!r}; saw {out}")
