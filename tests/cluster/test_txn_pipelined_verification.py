"""A transactional producer that pipelines small batches keeps its order through the leader's
verification of each new transaction (KIP-890 part 1; broker/produce_order.py).

Found by confluent-kafka-python's own integration suite (``test_commit_transaction``, 3 brokers):
librdkafka sent seq 0-2, then 3 and 4 while the first batch waited for the coordinator; the
first batch opened the transaction, seq 5 arrived and was appended at once, ahead of 3 and 4
still waiting, and was refused OUT_OF_ORDER_SEQUENCE_NUMBER: a fatal error for the producer
("sequence desynchronization"), in 3 of 7 fresh runs. Here every transaction starts that race
again on each partition whose leader is not the coordinator."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "pipelined"
PARTITIONS = 4
TRANSACTIONS = 12
PER_TRANSACTION = 120


def test_pipelined_batches_of_new_transactions_keep_their_order(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        wait_until(lambda: all(cluster.leader_of(TOPIC, p) > 0 for p in range(PARTITIONS)), 30,
                   "leaders")
        fatal: list[str] = []

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                fatal.append(err.str())

        # linger.ms=0: a request per message or few, five in flight, while the first batch of
        # each partition waits for the coordinator's verification.
        p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "pipelined",
                      "linger.ms": 0, "error_cb": on_error})
        p.init_transactions(60)
        sent = 0
        for t in range(TRANSACTIONS):
            p.begin_transaction()
            for i in range(PER_TRANSACTION):
                p.produce(TOPIC, b"t%02d-%03d" % (t, i), partition=i % PARTITIONS)
                p.poll(0)
                time.sleep(0.002)
            sent += PER_TRANSACTION
            p.commit_transaction(60)
            assert not fatal, fatal
        # Every committed record is read back, each once.
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "pipelined-check",
                      "isolation.level": "read_committed", "enable.auto.commit": False})
        c.assign([TopicPartition(TOPIC, q, 0) for q in range(PARTITIONS)])
        seen: list[bytes] = []
        last = (-1, time.monotonic())
        while len(seen) < sent:
            seen.extend(m.value() for m in c.consume(500, 0.5) if m.error() is None)
            if len(seen) != last[0]:
                last = (len(seen), time.monotonic())
            assert time.monotonic() - last[1] < 30, f"read {len(seen)} of {sent}, then nothing"
        c.close()
        assert sorted(seen) == sorted(b"t%02d-%03d" % (t, i) for t in range(TRANSACTIONS)
                                      for i in range(PER_TRANSACTION))
    finally:
        cluster.stop()
