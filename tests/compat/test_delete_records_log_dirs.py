"""Issue 9: DeleteRecords moves the log start offset (the reference documents' low watermark)
and DescribeLogDirs reports every replica's size, with confluent-kafka's AdminClient and
kafka-python's admin; on a 3-broker cluster the followers follow the leader's log start."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.replica_state import read_replica_state
from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.compat


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=b"r%d" % i, partition=0)
    assert p.flush(30) == 0


def _first_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lw-reader",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        low, _high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        c.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        for _ in range(100):
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                assert msg.offset() == low
                return int(msg.offset())
        raise AssertionError("nothing read")
    finally:
        c.close()


def test_delete_records_and_describe_log_dirs(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("lw", 1, 1)])["lw"].result(30)
    _produce(broker.bootstrap, "lw", 20)
    done = admin.delete_records([TopicPartition("lw", 0, 12)])
    result = next(iter(done.values())).result(30)
    assert result.low_watermark == 12
    assert _first_offset(broker.bootstrap, "lw") == 12
    # Beyond the high watermark: OFFSET_OUT_OF_RANGE, and nothing moves.
    with pytest.raises(KafkaException) as beyond:
        next(iter(admin.delete_records([TopicPartition("lw", 0, 99)]).values())).result(30)
    assert "OFFSET_OUT_OF_RANGE" in str(beyond.value)
    # A compacted-only topic refuses (POLICY_VIOLATION), as Kafka does.
    admin.create_topics([NewTopic("lw-compact", 1, 1, config={"cleanup.policy": "compact"})]
                        )["lw-compact"].result(30)
    with pytest.raises(KafkaException) as policy:
        next(iter(admin.delete_records([TopicPartition("lw-compact", 0, 0)]).values())
             ).result(30)
    assert "POLICY_VIOLATION" in str(policy.value)

    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        answer = kp.delete_records({KTopicPartition("lw", 0): 15})
        assert answer[KTopicPartition("lw", 0)]["low_watermark"] == 15
        dirs = kp.describe_log_dirs()
    finally:
        kp.close()
    assert _first_offset(broker.bootstrap, "lw") == 15
    text = str(dirs)
    assert "lw" in text and "partition_size" in text


def test_followers_follow_the_leaders_log_start(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("lwr", 1, 3, config={"min.insync.replicas": "2"})]
                            )["lwr"].result(30)
        _produce(cluster.bootstrap, "lwr", 30)
        result = next(iter(admin.delete_records([TopicPartition("lwr", 0, 10)]).values())
                      ).result(30)
        assert result.low_watermark == 10
        _produce(cluster.bootstrap, "lwr", 5)  # the next fetch answers carry the log start

        def starts() -> dict[int, int] | None:
            out = {}
            for node in (1, 2, 3):
                try:
                    out[node] = read_replica_state(cluster.address(node), "lwr", 0, 5)[
                        "log_start_offset"]
                except (OSError, RuntimeError):
                    return None
            return out if all(v == 10 for v in out.values()) else None

        wait_until(starts, 60, "every replica's log start offset at 10")
    finally:
        cluster.stop()


def test_elect_leaders_preferred_and_unclean_on_a_cluster(tmp_path: Path) -> None:
    """ElectLeaders with confluent-kafka's AdminClient: PREFERRED brings the first assigned
    replica back after a restart (automatic rebalancing off); UNCLEAN is refused while a leader
    lives (ELECTION_NOT_NEEDED) and elects an out-of-sync replica of a leaderless partition."""
    from confluent_kafka import ElectionType

    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("el", 1, 3, config={"min.insync.replicas": "1"})]
                            )["el"].result(30)
        _produce(cluster.bootstrap, "el", 5)
        preferred = cluster.leader_of("el")
        assert preferred > 0
        cluster.kill(preferred)
        wait_until(lambda: cluster.leader_of("el") not in (-1, preferred), 60, "a new leader")
        cluster.start_node(preferred)
        wait_until(lambda: preferred in (cluster.partition_registration("el") or {}).get(
            "isr", []), 60, "the restarted replica back in the ISR")
        assert cluster.leader_of("el") != preferred  # nothing moves it back by itself
        done = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("el", 0)]
                                   ).result(30)
        assert [e for e in done.values()] == [None]
        assert cluster.leader_of("el") == preferred
        again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("el", 0)]
                                    ).result(30)
        assert "ELECTION_NOT_NEEDED" in str(next(iter(again.values())))

        # UNCLEAN while the leader lives: not needed.
        live = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("el", 0)]).result(30)
        assert "ELECTION_NOT_NEEDED" in str(next(iter(live.values())))
        # The ISR shrinks to the leader alone, the leader dies: leaderless, and the replicas that
        # come back are outside the ISR. UNCLEAN elects one of them.
        others = [n for n in (1, 2, 3) if n != preferred]
        for n in others:
            cluster.kill(n)
        wait_until(lambda: (cluster.partition_registration("el") or {}).get("isr") == [preferred],
                   60, "the ISR shrunk to the leader alone")
        cluster.kill(preferred)
        wait_until(lambda: cluster.leader_of("el") == -1, 60, "the partition leaderless")
        for n in others:
            cluster.start_node(n)

        def elected() -> bool:
            result = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("el", 0)]
                                         ).result(30)
            error = next(iter(result.values()))
            assert error is None or "ELIGIBLE_LEADERS_NOT_AVAILABLE" in str(error), error
            return error is None

        wait_until(elected, 60, "an unclean election once a replica is back", step_s=0.5)
        assert cluster.leader_of("el") in others
    finally:
        cluster.stop()


def test_manual_replica_assignment_on_a_cluster(tmp_path: Path) -> None:
    """CreateTopics and CreatePartitions with the operator's replica placement (the first
    replica leads), Kafka's checks on it, and ListPartitionReassignments answered (empty)."""
    from confluent_kafka.admin import NewPartitions

    cluster = start_cluster(tmp_path / "c")
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("ma", 2, replica_assignment=[[2, 3], [3, 1]])]
                            )["ma"].result(30)
        regs = [cluster.partition_registration("ma", p) or {} for p in (0, 1)]
        assert [r.get("replicas") for r in regs] == [[2, 3], [3, 1]]
        assert [r.get("leader") for r in regs] == [2, 3]
        admin.create_partitions([NewPartitions("ma", 3, replica_assignment=[[1, 2]])]
                                )["ma"].result(30)
        new = cluster.partition_registration("ma", 2) or {}
        assert new.get("replicas") == [1, 2] and new.get("leader") == 1
        _produce(cluster.bootstrap, "ma", 3)
        for bad, why in (([[1, 9]], "not registered"), ([[1, 1]], "repeat"),
                         ([[1, 2], [3]], "replicas, the topic has")):
            with pytest.raises(KafkaException) as refused:
                admin.create_topics([NewTopic("ma-bad", len(bad), replica_assignment=bad)]
                                    )["ma-bad"].result(30)
            assert "INVALID_REPLICA_ASSIGNMENT" in str(refused.value) and why in str(
                refused.value)

        from kafka.admin import KafkaAdminClient

        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
        try:
            assert not kp.list_partition_reassignments()
        finally:
            kp.close()
    finally:
        cluster.stop()
