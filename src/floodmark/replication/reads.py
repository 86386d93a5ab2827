"""The read rule for a Fetch that is not a follower's, written once for the broker and the
simulator: who may read (fenced by ``current_leader_epoch``, KIP-320; the leader, or for a
consumer Fetch v11+ any replica, KIP-392), from where (``OFFSET_OUT_OF_RANGE`` outside [log start, log end]), up to where (Kafka's
``FetchIsolation``: the log end for replicas and tools, the high watermark for READ_UNCOMMITTED
consumers, the last stable offset for READ_COMMITTED ones), and, for READ_COMMITTED, the aborted
transactions overlapping what was read (the client skips their records).

``read_bound`` is the pure decision; ``read_for_fetch`` carries it out against a log that can
read whole batches and search its aborted-transaction index (``floodmark.storage.Log`` fits).
A leader that stepped down for clients (``replication.lease``) answers a consumer
NOT_LEADER_OR_FOLLOWER before anything else; a replica or tool (``LOG_END``) still reads.
A follower's fetch on the leader is another rule (``Partition.handle_follower_fetch``: it records
the follower's progress and may answer a diverging epoch).

Fetching from the closest replica (KIP-392), as Kafka 4.x does it (``ReplicaManager.readFromLog``,
``Partition.fetchRecords``):

* ``leader_only`` is Kafka's ``fetchOnlyLeader``: True for a consumer Fetch before v11 (no
  client metadata) and for replicas; a consumer Fetch v11+ may be served by a follower.
* A follower serves up to its **own** high watermark (its LSO under READ_COMMITTED), which it
  learned from the leader and which is never above the leader's. An offset above that but
  within its log (the follower is behind the leader) reads nothing: the Fetch waits, as at the
  leader, until the follower's HW passes it. An offset past its log end is
  OFFSET_OUT_OF_RANGE; a client fetching from a follower takes that as "go back to the leader"
  (librdkafka and the Java consumer both do), not as a reset.
* A replica that is neither leader nor follower (the partition left this broker, or no
  metadata yet) answers NOT_LEADER_OR_FOLLOWER; an epoch mismatch FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH, checked first. ListOffsets stays leader-only (Kafka's too).
* On the leader, with a ``ReplicaSelection`` (``replica.selector.class`` set), a consumer whose
  rack holds a better replica gets no records, the leader's offsets and that replica's id in
  ``preferred_read_replica`` (``replication.replica_selector``), before the range check.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication import fencing
from floodmark.replication.partition import FollowerState, LogView, Partition
from floodmark.replication.producer_state import AbortedTxn
from floodmark.replication.replica_selector import ReplicaSelection, preferred_read_replica


class FetchIsolation(enum.Enum):
    """How far a read may go (Kafka's ``FetchIsolation``)."""

    LOG_END = "log-end"  # a replica or a debug tool (replica_id >= 0)
    HIGH_WATERMARK = "high-watermark"  # a READ_UNCOMMITTED consumer
    TXN_COMMITTED = "txn-committed"  # a READ_COMMITTED consumer

    @classmethod
    def of(cls, replica_id: int, read_committed: bool) -> FetchIsolation:
        if replica_id >= 0:
            return cls.LOG_END
        return cls.TXN_COMMITTED if read_committed else cls.HIGH_WATERMARK


@dataclass(frozen=True, slots=True)
class ReadBound:
    """The decision: ``error``, the partition's offsets to answer with (-1 when fenced), and the
    range ``[read_from, read_upto)`` that may be read (whole batches) when ``error`` is NONE.
    ``preferred_read_replica`` >= 0: read nothing, tell the consumer to read from that replica
    (KIP-392)."""

    error: ErrorCode
    isolation: FetchIsolation
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    read_from: int = -1
    read_upto: int = -1
    preferred_read_replica: int = -1

    @property
    def has_data(self) -> bool:
        return self.error is ErrorCode.NONE and self.read_upto > self.read_from


def read_bound(partition: Partition, log: LogView, fetch_offset: int, current_leader_epoch: int,
               isolation: FetchIsolation, *, stepped_down: bool = False, leader_only: bool = True,
               selection: ReplicaSelection | None = None) -> ReadBound:
    """Fence, range-check and bound a read at ``fetch_offset``. ``stepped_down``: this broker
    stepped down for clients (``replication.lease.steps_down``). ``leader_only``: Kafka's
    ``fetchOnlyLeader`` (False: a follower may serve this consumer, KIP-392). ``selection``: the
    consumer's rack and the brokers' racks, when ``replica.selector.class`` is set."""
    if stepped_down and isolation is not FetchIsolation.LOG_END:
        return ReadBound(ErrorCode.NOT_LEADER_OR_FOLLOWER, isolation)
    may_serve = partition.is_leader or (not leader_only
                                        and isinstance(partition.role, FollowerState))
    error = fencing.check_leader_request(partition.leader_epoch, current_leader_epoch,
                                         is_leader=may_serve)
    if error is not ErrorCode.NONE:
        return ReadBound(error, isolation)
    hw = partition.high_watermark
    lso = partition.last_stable_offset
    log_start = log.log_start_offset
    leo = log.log_end_offset
    if selection is not None and isolation is not FetchIsolation.LOG_END:
        preferred = preferred_read_replica(partition, leo, fetch_offset, selection)
        if preferred >= 0:  # Kafka skips the read (and its range check) then
            return ReadBound(ErrorCode.NONE, isolation, hw, lso, log_start, leo, fetch_offset,
                             fetch_offset, preferred)
    if not log_start <= fetch_offset <= leo:
        return ReadBound(ErrorCode.OFFSET_OUT_OF_RANGE, isolation, hw, lso, log_start, leo)
    upto = (leo if isolation is FetchIsolation.LOG_END
            else lso if isolation is FetchIsolation.TXN_COMMITTED else hw)
    return ReadBound(ErrorCode.NONE, isolation, hw, lso, log_start, leo, fetch_offset, upto)


class ReadRecords(Protocol):
    """What one read returns (``floodmark.storage.reads.ReadInfo`` fits)."""

    @property
    def records(self) -> bytes | memoryview: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def file_slice(self) -> object: ...


class ReadableLog(LogView, Protocol):
    def read(self, start_offset: int, max_bytes: int, max_offset_exclusive: int | None = None,
             *, lazy_min_bytes: int | None = None) -> ReadRecords: ...

    def collect_aborted_transactions(self, fetch_offset: int,
                                     upper_bound_offset: int) -> Sequence[AbortedTxn]: ...


@dataclass(frozen=True, slots=True)
class FetchRead:
    """A read carried out: ``records`` None when nothing was read; ``aborted`` (READ_COMMITTED
    only, else None) the aborted transactions overlapping what was read; ``error`` the bound's
    error, or the storage's when the read itself failed."""

    bound: ReadBound
    error: ErrorCode
    records: ReadRecords | None = None
    aborted: tuple[AbortedTxn, ...] | None = None


def read_for_fetch(partition: Partition, log: ReadableLog, fetch_offset: int,
                   current_leader_epoch: int, isolation: FetchIsolation, max_bytes: int | None,
                   *, lazy_min_bytes: int | None = None, stepped_down: bool = False,
                   leader_only: bool = True,
                   selection: ReplicaSelection | None = None) -> FetchRead:
    """Decide and read (``read_bound``). ``max_bytes`` None: the response has no room left, nothing is read
    (the first partition with data may still exceed a small ``max_bytes`` by one whole batch,
    KIP-74: the storage's rule)."""
    bound = read_bound(partition, log, fetch_offset, current_leader_epoch, isolation,
                       stepped_down=stepped_down, leader_only=leader_only, selection=selection)
    if bound.error is not ErrorCode.NONE:
        return FetchRead(bound, bound.error)
    committed = isolation is FetchIsolation.TXN_COMMITTED
    if not bound.has_data or max_bytes is None:
        return FetchRead(bound, ErrorCode.NONE, aborted=() if committed else None)
    try:
        info = log.read(fetch_offset, max_bytes, bound.read_upto, lazy_min_bytes=lazy_min_bytes)
    except KafkaError as exc:
        return FetchRead(bound, exc.code)
    aborted: tuple[AbortedTxn, ...] | None = None
    if committed:
        aborted = (tuple(log.collect_aborted_transactions(fetch_offset, info.next_offset))
                   if info.next_offset > fetch_offset else ())
    return FetchRead(bound, ErrorCode.NONE, info, aborted)
