"""DeleteRecords on a 3-broker cluster answers when the *low watermark* — the smallest log start
offset over the leader and every replica on a live broker — reached the requested offset (Kafka's
delayed delete-records), not when the leader alone moved; a live replica that cannot follow makes
it time out with REQUEST_TIMED_OUT; a fenced one is not waited for. Also: every replica's
partition directory records the topic's id (partition.metadata)."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client import KafkaConnection
from floodmark.client.replica_state import read_replica_state
from floodmark.storage.fs import RealFileSystem
from floodmark.storage.partition_metadata import read_partition_metadata
from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "lowwm"


def _produce(bootstrap: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(TOPIC, value=b"r%d" % i, partition=0)
    assert p.flush(30) == 0


def _log_starts(cluster, nodes) -> dict[int, int]:  # type: ignore[no-untyped-def]
    return {n: read_replica_state(cluster.address(n), TOPIC, 0, 5)["log_start_offset"] for n in nodes}


def _delete(conn: KafkaConnection, offset: int, timeout_ms: int) -> tuple[int, int, float]:
    t0 = time.monotonic()
    answer = conn.request(21, 2, {"timeout": timeout_ms, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "offset": offset}]}]})
    part = answer.topics[0].partitions[0]
    return int(part.error_code), int(part.low_watermark), time.monotonic() - t0


def test_delete_records_waits_for_every_replica(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    stopped = -1
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "1"})]
                            )[TOPIC].result(30)
        _produce(cluster.bootstrap, 40)
        leader = cluster.leader_of(TOPIC)
        followers = [b for b in cluster.broker_ids if b != leader]
        with KafkaConnection(cluster.address(leader)) as conn:
            tid = uuid.UUID(str(conn.request(3, 12, {"topics": [
                {"name": TOPIC, "topic_id": None}]}).topics[0].topic_id))
        ids = {read_partition_metadata(RealFileSystem(),
                                       str(cluster.partition_dir(b, TOPIC, 0)))
               for b in cluster.broker_ids}
        assert ids == {tid}

        # A real client: the answer means every replica is there, at the moment it comes.
        result = admin.delete_records([TopicPartition(TOPIC, 0, 10)])
        assert next(iter(result.values())).result(30).low_watermark == 10
        assert _log_starts(cluster, cluster.broker_ids) == {b: 10 for b in cluster.broker_ids}

        # A live follower that cannot follow (SIGSTOP): REQUEST_TIMED_OUT after the request's
        # timeout, with the leader's own log start; the leader did move.
        stopped = followers[0]
        cluster.kill(stopped, signal.SIGSTOP)
        with KafkaConnection(cluster.address(leader)) as conn:
            error, low, took = _delete(conn, 20, 400)
        assert (error, low) == (7, 20) and took >= 0.35
        assert _log_starts(cluster, [leader]) == {leader: 20}
        # Once it runs again it follows, and the same request succeeds.
        cluster.kill(stopped, signal.SIGCONT)
        resumed, stopped = stopped, -1

        def leader_sees_it_live() -> bool:
            # (If the pause outlived its session it was fenced; the leader must know it is back.)
            with KafkaConnection(cluster.address(leader)) as conn:
                meta = conn.request(3, 12, {"topics": []})
            return resumed in {int(b.node_id) for b in meta.brokers}

        wait_until(leader_sees_it_live, 30, "the resumed follower live again")
        with KafkaConnection(cluster.address(leader)) as conn:
            error, low, _ = _delete(conn, 20, 30_000)
        assert (error, low) == (0, 20)
        assert _log_starts(cluster, cluster.broker_ids) == {b: 20 for b in cluster.broker_ids}

        # A dead (fenced) replica is not waited for.
        cluster.kill(followers[1], signal.SIGKILL)
        wait_until(lambda: followers[1] not in (cluster.partition_registration(TOPIC) or {}
                                                ).get("isr", [followers[1]]), 30,
                   "the dead follower fenced out of the ISR")
        with KafkaConnection(cluster.address(leader)) as conn:
            error, low, took = _delete(conn, 30, 30_000)
        assert (error, low) == (0, 30) and took < 10
        # Not the leader: NOT_LEADER_OR_FOLLOWER at once.
        with KafkaConnection(cluster.address(followers[0])) as conn:
            assert _delete(conn, 35, 30_000)[0] == 6
    finally:
        if stopped > 0:
            cluster.kill(stopped, signal.SIGCONT)
        cluster.stop()
