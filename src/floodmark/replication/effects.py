"""The values the partition core (``replication.partition``) exchanges with whoever drives it:
the ``Effect`` values it returns for the caller to apply in order, the requests a follower builds
(``FollowerFetch``, ``EpochQuery``), the leader's ``FetchDecision`` on a follower fetch, and the
``FollowerAction`` a follower takes on a ``FetchResponse``. Plain frozen values, no rules."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from floodmark.errors import ErrorCode
from floodmark.replication.election import AlterPartitionRequest
from floodmark.replication.epochs import EpochEndOffset
from floodmark.replication.purgatory import CompleteProduce

# -- effects -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssignEpoch:
    """Record (epoch, start_offset) in the epoch cache, durably, before accepting writes."""

    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class TruncateTo:
    """Remove every offset >= ``offset``; then call ``Partition.after_truncate``."""

    offset: int
    reason: str


@dataclass(frozen=True, slots=True)
class HighWatermarkChanged:
    old: int
    new: int


@dataclass(frozen=True, slots=True)
class ProposeIsr:
    """Send AlterPartition with this request; answer with ``handle_alter_partition_response``."""

    request: AlterPartitionRequest


@dataclass(frozen=True, slots=True)
class WakeFollowerFetches:
    """Ask the core again for the follower fetches parked on this partition: the leader
    appended (they have records now) or stopped leading (they are answered its error). Kafka's
    ``tryCompleteDelayedRequests``; the runner re-runs ``handle_follower_fetch`` for each."""


@dataclass(frozen=True, slots=True)
class FlushLog:
    """The periodic flush check is due (``schedule.PeriodicWork.FLUSH``): the runner applies
    its log's flush policy (``Log.maybe_flush``; the simulator's OS writes its page cache
    back) and records the recovery point."""


@dataclass(frozen=True, slots=True)
class CheckpointHighWatermark:
    """The periodic HW checkpoint is due (``schedule.PeriodicWork.CHECKPOINT``): write
    ``high_watermark`` to ``replication-offset-checkpoint`` (a broker writes every partition's
    in one file, once per tick)."""

    high_watermark: int


Effect = (AssignEpoch | TruncateTo | HighWatermarkChanged | CompleteProduce | ProposeIsr
          | WakeFollowerFetches | FlushLog | CheckpointHighWatermark)


# -- requests and answers ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FollowerFetch:
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    log_start_offset: int
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class EpochQuery:
    """OffsetsForLeaderEpoch from a follower (epoch-offset mode, and legacy fallbacks)."""

    replica_id: int
    current_leader_epoch: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchDecision:
    """The leader's answer to a follower fetch, minus the bytes (the caller reads them).

    Read ``[read_from, read_upto)`` (whole batches) when ``error`` is NONE and ``diverging`` is None.
    ``high_watermark`` is the snapshot taken before the follower's fetch was recorded.
    """

    error: ErrorCode
    leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging: EpochEndOffset | None = None
    read_from: int = -1
    read_upto: int = -1
    effects: tuple[Effect, ...] = ()

    @property
    def has_data(self) -> bool:
        return (
            self.error is ErrorCode.NONE
            and self.diverging is None
            and self.read_upto > self.read_from
        )


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """What a follower needs from a fetch response (the records travel separately)."""

    error: ErrorCode
    request_leader_epoch: int  # the epoch the follower sent (stale responses are dropped)
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging: EpochEndOffset | None = None
    has_records: bool = False
    fetch_offset: int = -1
    """The request's fetch offset (-1: not checked). An answer to a request built from a log
    that has moved since (a truncation by new metadata) describes a log that is gone."""


class FollowerActionKind(enum.Enum):
    APPEND = "append"  # append the records as follower, then after_follower_append
    TRUNCATE = "truncate"  # truncate to ``offset``, then after_truncate, then fetch again
    TRUNCATE_FULLY = "truncate-fully"  # truncate_fully_and_start_at(``offset``)
    RETRY = "retry"  # fetch again (after a backoff if ``backoff``)
    STOP = "stop"  # fenced: wait for metadata
    IGNORE = "ignore"  # stale response for an older epoch


class NextFetch(enum.Enum):
    """When a follower sends its next request, after an answer was carried out."""

    NOW = "now"
    AFTER_BACKOFF = "after-backoff"  # replica.fetch.backoff.ms
    ON_NEW_METADATA = "on-new-metadata"  # fenced: the next metadata restarts fetching


@dataclass(frozen=True, slots=True)
class FollowerAction:
    kind: FollowerActionKind
    offset: int = -1
    backoff: bool = False
    reason: str = ""

    @property
    def next_fetch(self) -> NextFetch:
        """The one rule both fetch loops (the broker's ``ReplicaFetcherThread``, the simulator's
        broker) follow after an answer to a fetch or an epoch query."""
        if self.kind is FollowerActionKind.STOP:
            return NextFetch.ON_NEW_METADATA
        return NextFetch.AFTER_BACKOFF if self.backoff else NextFetch.NOW
