"""KIP-932 at a real leader whose leader epoch moves on while it keeps the partition: the
leader of a one-replica partition is paused (SIGSTOP) until the controller fences it (the
partition goes leaderless, a new epoch), then resumed: unfenced, it is elected again at a later
epoch, with the share partition still in its memory and member a's records locked there.

Before the fix the broker loaded the share partition again from the share coordinator at the
new epoch, where a's records were stored AVAILABLE (a lock is never stored), and handed them to
member b while a still held them. Now the same leader keeps its share partition (the
coordinator holds the state it stored itself): b gets nothing of what a holds, a's ACCEPT is
taken, and the share-partition start offset moves past them.
"""

from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.cluster import LocalCluster
from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch
from floodmark.wire.api_table import ApiKey
from tests.cluster.helpers import SESSION_TIMEOUT_MS, cluster_progress, wait_until

pytestmark = pytest.mark.integration
TOPIC, GROUP, RECORDS, ACCEPT = "epoch-bump", "epoch-bump-g", 6, 1


def leader_epoch_at(address: str) -> int:
    """The partition's leader epoch as the broker at ``address`` knows it (-1: not leader)."""
    with KafkaConnection(address, timeout_s=5) as c:
        md = c.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                             "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
    return int(md.topics[0].partitions[0].leader_epoch)


def share_fetch(c: KafkaConnection, member: str, epoch: int, topic_id: uuid.UUID,
                acks: tuple[tuple[int, int], ...] = ()) -> Any:
    resp = c.request(ApiKey.SHARE_FETCH, 1, {
        "group_id": GROUP, "member_id": member, "share_session_epoch": epoch, "max_wait": 0,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
        "topics": [{"topic_id": topic_id, "partitions": [{
            "partition_index": 0, "acknowledgement_batches": [
                {"first_offset": f, "last_offset": last, "acknowledge_types": [ACCEPT]}
                for f, last in acks]}]}],
        "forgotten_topics_data": []})
    assert resp.error_code == 0, resp
    return resp.responses[0].partitions[0]


def held(p: Any) -> set[int]:
    assert p.error_code == 0 and p.acknowledge_error_code == 0, p
    return {o for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1)}


@pytest.mark.timeout(90)
def test_a_leader_epoch_bump_at_the_same_leader_keeps_the_locks(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "c", 3,
        {"group.share.enable": "true", "share.auto.offset.reset": "earliest",
         "group.share.record.lock.duration.ms": "60000"},
        {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}).start()
    paused = -1
    try:
        with KafkaConnection(cluster.bootstrap, timeout_s=10) as c:
            created = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                 "assignments": [], "configs": []}], "timeout": 10_000,
                "validate_only": False}).topics[0]
            assert created.error_code == 0, created
            topic_id = created.topic_id
        leader = wait_until(lambda: max(cluster.leader_of(TOPIC), 0), 30, "a leader")
        address = cluster.address(leader)
        first_epoch = wait_until(lambda: leader_epoch_at(address) + 1, 30, "leading") - 1
        with KafkaConnection(address, timeout_s=10) as c:
            batch = build_batch([Record(i, 0, None, b"v%d" % i) for i in range(RECORDS)])

            def produced() -> bool:
                # NOT_LEADER_OR_FOLLOWER while the broker applies its leadership (or its
                # controller session is in doubt on a loaded machine), UNKNOWN_TOPIC_OR_PARTITION
                # while it has not opened the new partition's log yet (opened off its event
                # loop, as a Kafka broker applies the metadata after the controller answered
                # CreateTopics): nothing was appended
                resp = c.request(ApiKey.PRODUCE, 9, {"acks": -1, "timeout": 10_000,
                                                     "topic_data": [{"name": TOPIC,
                                                                     "partition_data": [
                                                         {"index": 0, "records": batch}]}]})
                code = int(resp.responses[0].partition_responses[0].error_code)
                assert code in (0, int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                                int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)), code
                return code == 0

            wait_until(produced, 30, "the records produced")
            assert held(share_fetch(c, "a", 0, topic_id)) == set(range(RECORDS))
        # the leader pauses until the controller fences it, and comes back
        cluster.kill(leader, signal.SIGSTOP)
        paused = leader
        wait_until(lambda: cluster.leader_of(TOPIC) != leader, 30, "the leader fenced",
                   progress=lambda: cluster_progress(cluster))
        cluster.kill(leader, signal.SIGCONT)
        paused = -1

        def leads_again() -> bool:
            try:
                return leader_epoch_at(address) > first_epoch
            except (OSError, RequestFailed):  # still catching up after the pause
                return False

        wait_until(leads_again, 30, "the same broker leading at a later epoch")
        with KafkaConnection(address, timeout_s=10) as c:
            # the share partition's state is read from its share coordinator first (which
            # may have moved off the paused broker): retriable errors until then
            served = wait_until(lambda: (lambda p: p if p.error_code == 0 else None)(
                share_fetch(c, "b", 0, topic_id)), 30, "the share partition served")
            again = held(served)
            assert not again, f"a's locked records handed to b: {sorted(again)}"
            p = share_fetch(c, "a", 1, topic_id, ((0, RECORDS - 1),))
            assert p.acknowledge_error_code == 0, p
            assert not held(share_fetch(c, "b", 1, topic_id)), "accepted: never again"
        print(f"leader {leader} leader_epoch {first_epoch} -> {leader_epoch_at(address)}: "
              f"{RECORDS} records locked by a kept, accepted once")
    finally:
        if paused >= 0:
            cluster.kill(paused, signal.SIGCONT)
        cluster.stop()
