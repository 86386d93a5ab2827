"""The quorum's requests and answers (KIP-595's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch).

Values only; the shell carries them (an asyncio connection, or the simulator's network). A fetch
answer names the offsets to read (``read_from``, ``read_upto``); the records travel beside it.
Every answer carries the sender's epoch and the leader it knows (-1: none), so any message from a
newer epoch moves the receiver forward (KIP-595's "common response handling").
"""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.controller.quorum.voter_history import VoterHistory
from floodmark.controller.quorum.voter_set import Bindings
from floodmark.errors import ErrorCode
from floodmark.replication import EpochEndOffset


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """Vote (or, with ``pre_vote``, KIP-996's pre-vote: a question that changes nobody's state).

    ``candidate_epoch``: the epoch the candidate campaigns in (a pre-vote: the prospective's
    current epoch, not yet bumped). ``last_epoch``/``last_epoch_end_offset``: the epoch of the
    candidate's last record and its log end offset, compared with the voter's own log."""

    candidate_epoch: int
    candidate_id: int
    last_epoch: int
    last_epoch_end_offset: int
    pre_vote: bool = False
    candidate_directory_id: str = ""  # KIP-853: the candidate's data dir


@dataclass(frozen=True, slots=True)
class VoteResponse:
    voter_id: int
    epoch: int
    leader_id: int
    vote_granted: bool
    pre_vote: bool = False
    voter_directory_id: str = ""  # KIP-853: the data dir that voted


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """The new leader announces itself (resent until each voter answers or fetches)."""

    leader_epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    voter_id: int
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """A resigning leader asks the voters to elect someone else, best successors first."""

    leader_epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    voter_id: int
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class QuorumFetchRequest:
    """A voter (or an observer: a broker) pulling the metadata log from the leader."""

    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int = 0
    replica_directory_id: str = ""  # KIP-853: the fetcher's data dir


@dataclass(frozen=True, slots=True)
class QuorumFetchResponse:
    """The leader's answer. Records ``[read_from, read_upto)`` travel beside it when
    ``error`` is NONE and ``diverging`` is None; ``fetch_offset`` echoes the request so an
    answer to a log that has moved since is dropped."""

    error: ErrorCode
    leader_epoch: int
    leader_id: int
    fetch_offset: int
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging: EpochEndOffset | None = None
    read_from: int = -1
    read_upto: int = -1
    snapshot_end_offset: int = -1
    """KIP-630's SnapshotId: the fetch offset is below the leader's log start; load this
    snapshot (FetchSnapshot), then fetch from its end offset. -1: none."""
    snapshot_epoch: int = -1
    voter_directories: Bindings = ()
    """The leader's committed voter bindings (``voter_set``), for the fetcher to keep."""
    voter_sets: VoterHistory = ()
    """The leader's ``voter_set`` entries (``voter_history``): the fetcher takes those of the
    records it is sent (before appending them), or all below a snapshot's end offset."""

    @property
    def has_records(self) -> bool:
        return (self.error is ErrorCode.NONE and self.diverging is None
                and self.snapshot_end_offset < 0 and self.read_upto > self.read_from)


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """KIP-630 FetchSnapshot: the bytes of the leader's snapshot from ``position``."""

    replica_id: int
    current_leader_epoch: int
    snapshot_end_offset: int
    snapshot_epoch: int
    position: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """A chunk of the snapshot (``size`` bytes in all) from ``position`` travels beside it when
    ``error`` is NONE (SNAPSHOT_NOT_FOUND: the leader has a newer one; fetch again)."""

    error: ErrorCode
    leader_epoch: int
    leader_id: int
    snapshot_end_offset: int
    snapshot_epoch: int
    size: int = -1
    position: int = -1


QuorumRequest = (VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest
                 | QuorumFetchRequest | FetchSnapshotRequest)
QuorumResponse = (VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse
                  | QuorumFetchResponse | FetchSnapshotResponse)
QuorumMessage = QuorumRequest | QuorumResponse
