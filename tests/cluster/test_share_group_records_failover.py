"""KIP-932's group-coordinator records through a SIGKILL of the group coordinator (real broker
processes, floodmark's client and kio's messages): two members join a share group over a
three-partition topic; the coordinator initializes the share state of the three partitions at
their share coordinators (InitializeShareGroupState, at the group epoch, start offset -1: the
share coordinators answer ReadShareGroupStateSummary with that state epoch) and records them
(``ShareGroupStatePartitionMetadata``). Its broker is SIGKILLed; the new coordinator replays
the group's records (the target assignment and its epoch among them): both members go on with
their member epochs and get the same assignment, the group and assignment epochs have not
moved (no rebalance), and the partitions are not initialized a second time."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.cluster import LocalCluster
from floodmark.errors import ErrorCode
from floodmark.wire.api_table import ApiKey
from tests.cluster.helpers import SESSION_TIMEOUT_MS, cluster_progress, wait_until

pytestmark = pytest.mark.integration
TOPIC, GROUP, PARTITIONS = "share-records", "share-records-g", 3


def coordinator(cluster: LocalCluster, key: str, key_type: int) -> int:
    """The node coordinating ``key`` (-1: none known yet)."""
    for b in cluster.broker_ids:
        if cluster.node_state(b) != "running":
            continue
        try:
            with KafkaConnection(cluster.address(b), timeout_s=5) as c:
                r = c.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type,
                                                           "coordinator_keys": [key]})
        except (OSError, RequestFailed):
            continue
        found = r.coordinators[0]
        return int(found.node_id) if found.error_code == 0 else -1
    return -1


def heartbeat(cluster: LocalCluster, node: int, member: str, epoch: int, **extra: Any) -> Any:
    """A ShareGroupHeartbeat to ``node``, asked again while the coordinator is still loading
    (COORDINATOR_LOAD_IN_PROGRESS is retriable: a client retries it too), for at most 30 s."""
    deadline = time.monotonic() + 30
    while True:
        with KafkaConnection(cluster.address(node), timeout_s=10) as c:
            answer = c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
                "group_id": GROUP, "member_id": member, "member_epoch": epoch, **extra})
        if (answer.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                or time.monotonic() > deadline):
            return answer
        time.sleep(0.1)


def describe(cluster: LocalCluster, node: int) -> Any:
    with KafkaConnection(cluster.address(node), timeout_s=10) as c:
        return c.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": [GROUP], "include_authorized_operations": False}).groups[0]


def state_epoch(cluster: LocalCluster, topic_id: uuid.UUID, p: int) -> int | None:
    """The share coordinator's state epoch of the partition (None: no state or no answer)."""
    node = coordinator(cluster, f"{GROUP}:{topic_id}:{p}", 2)
    if node < 0:
        return None
    with KafkaConnection(cluster.address(node), timeout_s=5) as c:
        r = c.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, {"group_id": GROUP, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": p, "leader_epoch": -1}]}]})
    part = r.results[0].partitions[0]
    if part.error_code != 0 or (part.start_offset < 0 and part.state_epoch == 0):
        return None
    return int(part.state_epoch)


def initialized_lines(cluster: LocalCluster, node: int) -> int:
    text = cluster.log_path(node).read_text(errors="replace")
    return sum(1 for line in text.splitlines()
               if f"share group {GROUP} state_epoch=" in line and "initialized" in line)


@pytest.mark.timeout(120)
def test_share_group_records_survive_a_coordinator_sigkill(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "c", 3, {"group.share.enable": "true", "replica.lag.time.max.ms": "2000"},
        {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}).start()
    try:
        with KafkaConnection(cluster.bootstrap, timeout_s=10) as c:
            created = c.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
                {"name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 3,
                 "assignments": [], "configs": []}], "timeout": 10_000,
                "validate_only": False}).topics[0]
            assert created.error_code == 0, created
            topic_id = created.topic_id
        node = wait_until(lambda: coordinator(cluster, GROUP, 0) + 1, 30, "a coordinator") - 1
        epochs: dict[str, int] = {}
        assignments: dict[str, set[int]] = {}
        for member in ("a", "b"):
            h = heartbeat(cluster, node, member, 0, subscribed_topic_names=[TOPIC])
            assert h.error_code == 0, h
            epochs[member] = h.member_epoch
            assignments[member] = {p for t in h.assignment.topic_partitions
                                   for p in t.partitions}
        for member in ("a", "b"):  # both learn the assignment of the group's last epoch
            h = heartbeat(cluster, node, member, epochs[member])
            assert h.error_code == 0, h
            epochs[member] = h.member_epoch
            if h.assignment is not None:
                assignments[member] = {p for t in h.assignment.topic_partitions
                                       for p in t.partitions}
        before = describe(cluster, node)
        assert before.error_code == 0 and before.group_epoch == 2, before
        assert sorted(p for ps in assignments.values() for p in ps) == [0, 1, 2]
        # the share state of the three partitions is initialized at the group epoch of a's
        # join (b's join subscribed to nothing new)
        wait_until(lambda: all(state_epoch(cluster, topic_id, p) == 1
                               for p in range(PARTITIONS)), 30, "the share state initialized")
        wait_until(lambda: initialized_lines(cluster, node), 30, "the outcome recorded")
        cluster.kill(node)
        new = wait_until(lambda: (lambda n: n + 1 if n not in (-1, node) else 0)(
            coordinator(cluster, GROUP, 0)), 30, "a new coordinator",
            progress=lambda: cluster_progress(cluster)) - 1

        def goes_on(member: str) -> Any:
            h = heartbeat(cluster, new, member, epochs[member])
            return h if h.error_code == 0 else None  # loading: COORDINATOR_LOAD_IN_PROGRESS

        for member in ("a", "b"):
            h = wait_until(lambda m=member: goes_on(m), 30, f"{member}'s heartbeat answered")
            assert h.member_epoch == epochs[member], (member, h)
            assert h.assignment is not None
            assert {p for t in h.assignment.topic_partitions for p in t.partitions} \
                == assignments[member]
        after = describe(cluster, new)
        assert (after.group_epoch, after.assignment_epoch) == (
            before.group_epoch, before.assignment_epoch), "no rebalance"
        assert initialized_lines(cluster, new) == 0, "initialized once, not again"
        print(f"coordinator {node} SIGKILLed, {new} took over: group epoch "
              f"{after.group_epoch}, assignment epoch {after.assignment_epoch}, members "
              f"{epochs}")
    finally:
        cluster.stop()
