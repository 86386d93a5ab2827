"""Replica fetches over the wire, probed by hand: KIP-903 broker-epoch fencing, leader-epoch
fencing, and DivergingEpoch for a follower whose last epoch the leader never had."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode
from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration


def test_replica_fetch_fencing_and_divergence(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("w", 1, 3)])["w"].result(20)
        wait_until(lambda: cluster.leader_of("w") > 0, 10, "leader")
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(10):
            p.produce("w", value=b"%d" % i, partition=0)
        assert p.flush(20) == 0
        st = cluster.controller_status()
        assert st is not None
        reg = st["topics"]["w"]["0"]
        leader = reg["leader"]
        follower = next(r for r in reg["replicas"] if r != leader)
        epoch = next(b["broker_epoch"] for b in st["brokers"] if b["id"] == follower)
        topic_id = cluster_topic_id(cluster.address(leader))

        def fetch(replica_epoch: int, leader_epoch: int, offset: int, last_epoch: int) -> object:
            with KafkaConnection(cluster.address(leader)) as conn:
                resp = conn.request(1, 15, {
                    "replica_state": {"replica_id": follower, "replica_epoch": replica_epoch},
                    "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "rack_id": "",
                    "forgotten_topics_data": [],
                    "topics": [{"topic_id": topic_id, "partitions": [{
                        "partition": 0, "current_leader_epoch": leader_epoch,
                        "fetch_offset": offset, "last_fetched_epoch": last_epoch,
                        "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]})
            return resp.responses[0].partitions[0]

        ok = fetch(epoch, reg["leader_epoch"], 0, -1)
        assert ok.error_code == 0 and ok.records  # type: ignore[attr-defined]
        stale = fetch(epoch - 1, reg["leader_epoch"], 0, -1)  # an older incarnation
        assert stale.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # type: ignore[attr-defined]
        old = fetch(epoch, reg["leader_epoch"] - 1, 0, -1) if reg["leader_epoch"] > 0 else None
        if old is not None:
            assert old.error_code == ErrorCode.FENCED_LEADER_EPOCH  # type: ignore[attr-defined]
        newer = fetch(epoch, reg["leader_epoch"] + 1, 0, -1)
        assert newer.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH  # type: ignore[attr-defined]
        # A follower whose log runs past the leader's in the current epoch diverges at the
        # leader's end of that epoch (its LEO): DivergingEpoch, no records.
        div = fetch(epoch, reg["leader_epoch"], 12, reg["leader_epoch"])
        assert div.error_code == 0 and not div.records  # type: ignore[attr-defined]
        assert div.diverging_epoch.end_offset == 10  # type: ignore[attr-defined]
        assert div.diverging_epoch.epoch == reg["leader_epoch"]  # type: ignore[attr-defined]
        # An epoch above anything the leader knows cannot be answered: OFFSET_OUT_OF_RANGE.
        far = fetch(epoch, reg["leader_epoch"], 12, reg["leader_epoch"] + 5)
        assert far.error_code == ErrorCode.OFFSET_OUT_OF_RANGE  # type: ignore[attr-defined]
    finally:
        cluster.stop()


def cluster_topic_id(address: str) -> object:
    with KafkaConnection(address) as conn:
        md = conn.request(3, 12, {"topics": [{"name": "w", "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})
    return md.topics[0].topic_id
