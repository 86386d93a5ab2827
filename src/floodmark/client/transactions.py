"""The partition side of a transaction, as a client sends it: WriteTxnMarkers (API key 27) to a
partition's leader, which ends a producer's transaction there with a COMMIT or ABORT marker.

Kafka's transaction coordinator is the one that sends it; this is for tools and tests that
drive partitions directly (and for anything that must end a transaction it knows to be decided).
Leadership errors and timeouts are retried against the current leader until the cluster client's
timeout; NONE means the marker is replicated like an acks=all write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from floodmark.client.cluster import RETRIABLE, ClusterClient, Retriable, error_text
from floodmark.client.connection import RequestFailed
from floodmark.errors import ErrorCode

API_WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1


class MarkerRefused(RequestFailed):
    """The leader refused the marker for good (a fenced producer or coordinator epoch)."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(f"{what}: {error_text(code)}")
        self.code = code


def write_txn_markers_body(producer_id: int, producer_epoch: int, committed: bool,
                           coordinator_epoch: int,
                           partitions: Iterable[tuple[str, int]]) -> dict[str, Any]:
    """The WriteTxnMarkers request of one producer's marker on ``partitions`` (what the
    transaction coordinator, ``broker.txn_coordinator``, sends each partition leader)."""
    topics: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        topics.setdefault(topic, []).append(index)
    return {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                         "transaction_result": committed,
                         "topics": [{"name": t, "partition_indexes": p}
                                    for t, p in topics.items()],
                         "coordinator_epoch": coordinator_epoch}]}


def write_txn_marker(cluster: ClusterClient, topic: str, partition: int, producer_id: int,
                     producer_epoch: int, *, committed: bool, coordinator_epoch: int = 0) -> None:
    """End ``producer_id``'s transaction on ``topic``-``partition``; returns once the leader
    answered NONE. Raises ``MarkerRefused`` (INVALID_PRODUCER_EPOCH,
    TRANSACTION_COORDINATOR_FENCED...) or ``Retriable`` when out of time."""
    what = (f"{'COMMIT' if committed else 'ABORT'} marker of producer {producer_id} on "
            f"{topic}-{partition}")

    def once() -> None:
        leader = cluster.leader(topic, partition)
        try:
            resp = cluster.request_node(
                leader, API_WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, write_txn_markers_body(
                    producer_id, producer_epoch, committed, coordinator_epoch,
                    [(topic, partition)]))
        except RequestFailed as exc:  # the leader went away: ask the new one
            raise Retriable(ErrorCode.LEADER_NOT_AVAILABLE, f"{what}: {exc}") from exc
        code = int(resp.markers[0].topics[0].partitions[0].error_code)
        if code in RETRIABLE:
            raise Retriable(ErrorCode(code), what)
        if code:
            raise MarkerRefused(code, what)

    cluster.retry(once)
