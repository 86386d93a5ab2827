"""Leader-epoch fencing (KIP-320): which error a request gets before any state is touched.

Requests that carry the sender's view of the leader epoch (Fetch, OffsetsForLeaderEpoch,
ListOffsets, AlterPartition) are compared with the receiving broker's local epoch:

========================================  ==========================
request epoch ``c`` vs local epoch ``l``   error
========================================  ==========================
``c`` absent (-1) or ``c == l``             NONE (then the role check)
``l > c`` (sender is stale)                FENCED_LEADER_EPOCH
``l < c`` (this broker is stale)           UNKNOWN_LEADER_EPOCH
not the leader where a leader is needed   NOT_LEADER_OR_FOLLOWER
OffsetsForLeaderEpoch asks for an epoch     UNKNOWN_LEADER_EPOCH
newer than ``l``
========================================  ==========================

The last row: a requester that read a record of an epoch newer than this leader's own has proof
that a later leader exists, whatever ``current_leader_epoch`` it sends (librdkafka sends -1 or
the epoch of the stale metadata it followed). Kafka answers "no such epoch, end offset -1", which
librdkafka treats as log truncation and resets the consumer's position (found by ``floodmark
chaos run``, isolate-then-kill); UNKNOWN_LEADER_EPOCH is retriable and makes the client refresh
its metadata instead.

Produce carries no epoch, so a stale leader is fenced only by NOT_LEADER_OR_FOLLOWER and by its
frozen high watermark (its ISR still contains the new leader, which never fetches from it).
A fenced request never updates follower state on the leader.
"""

from __future__ import annotations

from floodmark.errors import ErrorCode
from floodmark.replication.epochs import UNDEFINED_EPOCH


def check_leader_epoch(local_leader_epoch: int, request_leader_epoch: int) -> ErrorCode:
    """Compare the epoch a request carries with the local one (``Partition.checkCurrentLeaderEpoch``)."""
    if request_leader_epoch == UNDEFINED_EPOCH:
        return ErrorCode.NONE
    if request_leader_epoch < local_leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if request_leader_epoch > local_leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def check_leader_request(
    local_leader_epoch: int, request_leader_epoch: int, *, is_leader: bool
) -> ErrorCode:
    """Epoch check first, then "must be the leader" (the order Kafka applies them in)."""
    error = check_leader_epoch(local_leader_epoch, request_leader_epoch)
    if error is not ErrorCode.NONE:
        return error
    if not is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.NONE


def check_epoch_query(
    local_leader_epoch: int, current_leader_epoch: int, requested_epoch: int, *, is_leader: bool
) -> ErrorCode:
    """Fencing for OffsetsForLeaderEpoch on the leader (see the table's last row)."""
    error = check_leader_request(local_leader_epoch, current_leader_epoch, is_leader=is_leader)
    if error is ErrorCode.NONE and requested_epoch > local_leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return error


def check_replica_fetch(
    local_leader_epoch: int,
    request_leader_epoch: int,
    *,
    is_leader: bool,
    replica_id: int,
    replicas: tuple[int, ...],
    request_broker_epoch: int,
    registered_broker_epoch: int,
) -> ErrorCode:
    """Fencing for a follower Fetch, including the replica-set and broker-epoch (KIP-903) checks."""
    if replica_id not in replicas:
        if request_leader_epoch != UNDEFINED_EPOCH:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    error = check_leader_request(local_leader_epoch, request_leader_epoch, is_leader=is_leader)
    if error is not ErrorCode.NONE:
        return error
    if (
        request_broker_epoch != -1
        and registered_broker_epoch != -1
        and request_broker_epoch < registered_broker_epoch
    ):
        # A fetch from an older incarnation of that broker (it restarted since): ignore it.
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.NONE
