"""Telling the controller which log directory holds each replica (AssignReplicasToDirs, API 73,
KIP-858), for a broker with several ``log.dirs``.

The storage notes every replica it places or moves (``Storage.unassigned``); before each
heartbeat the broker compares those with the metadata's ``directories`` and asks the controller
to record the ones that differ, at most ``MAX_ASSIGNMENTS`` a request. A replica leaves the set
when the metadata shows it where it is; an unanswered or refused request is simply asked again
next time. With the assignment in the metadata, a failed directory's replicas go offline
through it: the heartbeat names the directory, the controller finds its replicas.
"""

from __future__ import annotations

from collections.abc import Callable

PartitionKey = tuple[str, int]
MAX_ASSIGNMENTS = 1000
"""Partitions per AssignReplicasToDirs request (the rest go with the next heartbeat)."""


def pending(unassigned: set[PartitionKey], actual: Callable[[PartitionKey], str | None],
            recorded: Callable[[PartitionKey], str | None],
            limit: int = MAX_ASSIGNMENTS) -> dict[str, list[PartitionKey]]:
    """The assignments to ask for: directory id -> replicas, for replicas whose recorded
    directory is not the actual one. Replicas recorded where they are, or no longer hosted
    (``actual`` None), leave ``unassigned``."""
    out: dict[str, list[PartitionKey]] = {}
    count = 0
    for key in sorted(unassigned):
        where = actual(key)
        if where is None or recorded(key) == where:
            unassigned.discard(key)
            continue
        if count < limit:
            out.setdefault(where, []).append(key)
            count += 1
    return out


def request_directories(assignments: dict[str, list[PartitionKey]]) -> list[dict[str, object]]:
    """The request's ``directories`` (Kafka's shape, topic names for topic ids)."""
    return [{"id": directory_id, "topics": [
        {"name": name, "partitions": [{"partition_index": p} for t, p in keys if t == name]}
        for name in sorted({t for t, _ in keys})]}
        for directory_id, keys in sorted(assignments.items())]
