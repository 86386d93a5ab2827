"""AlterPartitionReassignments on a real 4-broker cluster (issue 9, Build 1), with kafka-python's
admin, while a confluent-kafka acks=all idempotent producer writes throughout: a replica moves
from broker 1 (the leader) to broker 4. The move waits while broker 4 is down
(ListPartitionReassignments shows it), a cancellation reverts it, and started again with
broker 4 back it completes: broker 4 catches up and joins the ISR through the ordinary
AlterPartition path, leadership leaves broker 1 at a new leader epoch, broker 1 deletes its
copy. Afterwards every acknowledged record is read back once at its offset, and the replicas'
segment files (broker 4's included) are identical below the HW.

kafka-python's admin keeps the ``controller_id`` of its first Metadata answer; a floodmark broker,
as a KRaft broker (KIP-590), names a random live broker there. The admin client is made after
broker 4 is fenced in every broker's metadata, so it never picks the broker the test killed.
Waits fail only when progress stops (the ISR, broker 4's log, the acknowledgements)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient

from tests.cluster.helpers import (
    AckLog,
    dir_bytes,
    high_watermark,
    log_digest,
    metadata_brokers,
    prefix_below,
    producer_thread,
    replica_batches,
    start_cluster,
    wait_progress,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "move-t"


def test_move_a_replica_under_acks_all_load(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "admin9-reassign", brokers=4)
    stop = threading.Event()
    acks = AckLog()
    producer: threading.Thread | None = None
    kp: KafkaAdminClient | None = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2, 3]])])[TOPIC].result(30)
        wait_until(lambda: cluster.leader_of(TOPIC) == 1, 30, "broker 1 to lead")
        producer = producer_thread(cluster.bootstrap, TOPIC, acks, stop)
        wait_progress(lambda: acks.count() >= 300, acks.count, 30, "acknowledged writes")

        # Broker 4 is down: the move starts and waits for it.
        cluster.kill(4)
        def fenced_everywhere() -> bool:
            views = [metadata_brokers(cluster.address(b)) for b in (1, 2, 3)]
            return all(v is not None and 4 not in v[0] for v in views)

        wait_until(fenced_everywhere, 60, "broker 4 fenced in every broker's metadata")
        # controller_id is a live broker, not always the one asked (KIP-590 forwarding).
        named = [metadata_brokers(cluster.address(b)) for b in (1, 2, 3) for _ in range(10)]
        assert {v[1] for v in named if v is not None} <= {1, 2, 3}
        assert len({v[1] for v in named if v is not None}) > 1
        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
        tp = KTopicPartition(TOPIC, 0)
        assert kp.list_partition_reassignments() == {}
        assert kp.alter_partition_reassignments({tp: [2, 3, 4]}) == {tp: None}
        assert kp.list_partition_reassignments() == {tp: {
            "replicas": [2, 3, 4, 1], "adding_replicas": [4], "removing_replicas": [1]}}
        reg = cluster.partition_registration(TOPIC)
        assert reg is not None and reg["replicas"] == [2, 3, 4, 1] and reg["leader"] == 1
        # Cancelled: back to the original assignment, nothing in progress.
        assert kp.alter_partition_reassignments({tp: None}) == {tp: None}
        assert kp.list_partition_reassignments() == {}
        reg = cluster.partition_registration(TOPIC)
        assert reg is not None and reg["replicas"] == [1, 2, 3] and reg["leader"] == 1
        errors = kp.alter_partition_reassignments({tp: None})
        assert errors[tp] is not None and errors[tp].__name__ == "NoReassignmentInProgressError"

        # Again, and broker 4 comes back: it catches up, joins the ISR, the move completes.
        before = acks.count()
        assert kp.alter_partition_reassignments({tp: [2, 3, 4]}) == {tp: None}
        assert tp in kp.list_partition_reassignments()
        cluster.start_node(4)

        def moved() -> bool:
            reg = cluster.partition_registration(TOPIC)
            return bool(reg and reg["replicas"] == [2, 3, 4] and sorted(reg["isr"]) == [2, 3, 4])

        def progress() -> tuple[object, ...]:
            reg = cluster.partition_registration(TOPIC) or {}
            return (reg.get("replicas"), reg.get("isr"), dir_bytes(cluster.partition_dir(4, TOPIC)))

        wait_progress(moved, progress, 30, "the reassignment to complete")
        reg = cluster.partition_registration(TOPIC)
        assert reg is not None and reg["leader"] in (2, 3, 4) and reg["leader_epoch"] >= 1
        assert kp.list_partition_reassignments() == {}
        wait_until(lambda: not cluster.partition_dir(1, TOPIC).exists(), 30,
                   "broker 1 to delete its copy")
        assert acks.count() > before, "no write was acknowledged during the move"
        wait_progress(lambda: acks.count() >= before + 300, acks.count, 30, "writes after the move")
    finally:
        stop.set()
        if producer is not None:
            producer.join(150)
        if kp is not None:
            kp.close()
    try:
        # Every acknowledged value once, at its offset.
        assert not acks.failed, acks.failed[:5]
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "admin9-verify",
                      "enable.auto.commit": False})
        hw = high_watermark(c, TOPIC)
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        fresh: dict[int, bytes] = {}
        idle = 0
        while len(fresh) < hw and idle < 40:  # stops only when 20 s pass without progress
            batch = [m for m in c.consume(1000, 0.5) if m.error() is None]
            idle = 0 if batch else idle + 1
            for msg in batch:
                assert msg.offset() not in fresh, "an offset delivered twice"
                fresh[msg.offset()] = msg.value()
        c.close()
        assert sorted(fresh) == list(range(hw))
        for offset, value in acks.acked:
            assert fresh.get(offset) == value, f"acked {value!r}@{offset} lost"
        assert len(set(fresh.values())) == len(fresh), "duplicates"
        # The new replica holds exactly the leader's segment bytes below the HW.
        wait_until(lambda: len({log_digest(cluster, b, TOPIC) for b in (2, 3, 4)}) == 1, 60,
                   "the replicas to converge")
        prefixes = {b: prefix_below(replica_batches(cluster, b, TOPIC), hw) for b in (2, 3, 4)}
        assert len(set(prefixes.values())) == 1 and prefixes[4]
        assert not cluster.partition_dir(1, TOPIC).exists()
    finally:
        cluster.stop()
