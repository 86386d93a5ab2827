"""What the quorum core asks its shell to do, as values, applied in order.

``TruncateTo`` and ``HighWatermarkChanged`` are the replication core's own effects (one meaning
in both places). ``QuorumDriver`` is the one interpreter of these for a real ``Log``.
"""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.controller.quorum.messages import (
    FetchSnapshotResponse,
    QuorumFetchResponse,
    QuorumMessage,
)
from floodmark.controller.quorum.roles import ElectionState
from floodmark.controller.quorum.voter_history import Endpoints, Voters
from floodmark.replication import HighWatermarkChanged, TruncateTo


@dataclass(frozen=True, slots=True)
class PersistElectionState:
    """Write the ``quorum-state`` file durably before anything after this effect is sent."""

    state: ElectionState


@dataclass(frozen=True, slots=True)
class Send:
    destination: int
    message: QuorumMessage


@dataclass(frozen=True, slots=True)
class AppendLeaderChange:
    """A new leader's first act: append (as leader of ``epoch``) the record that opens its epoch
    (KRaft's LeaderChangeMessage), flush, then ``QuorumCore.after_leader_append``. Committing it
    is what lets the leader commit anything (the epoch-start rule in ``rules``)."""

    epoch: int
    leader_id: int
    voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AppendVoters:
    """Append (as leader of ``epoch``) a ``voters`` record binding ``voter_id`` to the data dir
    ``directory_id`` (KIP-853's VotersRecord, one voter at a time), flush, then
    ``QuorumCore.after_leader_append``. The binding holds once the record is committed."""

    epoch: int
    voter_id: int
    directory_id: str


@dataclass(frozen=True, slots=True)
class AppendVoterSet:
    """Append (as leader of ``epoch``) a ``voter_set`` record naming every voter (KIP-853's
    VotersRecord: the set after one voter was added or removed), flush, then
    ``QuorumCore.after_leader_append``. In force from the append on (``voter_history``).
    ``endpoints``: the voters' controller listeners it names (UpdateRaftVoter changes one)."""

    epoch: int
    voters: Voters
    endpoints: Endpoints = ()


@dataclass(frozen=True, slots=True)
class AppendFetched:
    """Append the records that came with ``response`` as follower, flush them (a voter reports
    only what is on its disk), then ``QuorumCore.after_follower_append``."""

    response: QuorumFetchResponse


@dataclass(frozen=True, slots=True)
class AppendSnapshotChunk:
    """Store the snapshot chunk that came with ``response``; once the whole snapshot is in,
    check it, make the log restart empty at its end offset (in its epoch), load it, and tell
    the core with ``QuorumCore.after_snapshot_chunk``."""

    response: FetchSnapshotResponse


@dataclass(frozen=True, slots=True)
class RoleChanged:
    """The voter's role changed (the controller starts or stops writing on this)."""

    role: str
    epoch: int
    leader_id: int


QuorumEffect = (PersistElectionState | Send | AppendLeaderChange | AppendFetched | TruncateTo
                | HighWatermarkChanged | RoleChanged | AppendSnapshotChunk | AppendVoters
                | AppendVoterSet)

__all__ = ["AppendFetched", "AppendLeaderChange", "AppendSnapshotChunk", "AppendVoterSet",
           "AppendVoters", "HighWatermarkChanged", "PersistElectionState",
           "QuorumEffect", "RoleChanged", "Send", "TruncateTo"]
