"""A voter's role as explicit types (KIP-595's states plus KIP-996's Prospective).

===========  =====================================================================  ==========
role         what it means                                                          leaves by
===========  =====================================================================  ==========
Unattached   knows the epoch, no leader; may have voted (``voted_for``)             election
                                                                                    timeout ->
                                                                                    Prospective
Prospective  lost its leader (or never had one): asks for pre-votes, epoch          majority of
             unchanged, nobody's state changes                                      pre-votes ->
                                                                                    Candidate
Candidate    bumped the epoch, voted for itself, asks for votes                     majority ->
                                                                                    Leader;
                                                                                    timeout ->
                                                                                    Prospective
Leader       won the epoch: wrote the epoch's first record, answers fetches,        newer epoch;
             commits at the voters' majority end offset                             check-quorum
                                                                                    -> Resigned
Follower     fetches from ``leader_id``                                             fetch
                                                                                    timeout ->
                                                                                    Prospective
Resigned     was leader of ``epoch`` (shut down gracefully, lost its quorum, or     election
             restarted): tells the voters to elect someone else, votes for nobody   timeout ->
             in this epoch                                                          Prospective
===========  =====================================================================  ==========

Any role moves to a newer epoch when a message carries one: Follower if the message names the
leader, else Unattached. ``ElectionState`` is what the ``quorum-state`` file keeps (an fsynced
write before any message that depends on it leaves the voter).
"""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.constants import NO_LEADER
from floodmark.controller.quorum.voter_history import VoterHistory
from floodmark.controller.quorum.voter_set import Bindings


@dataclass(frozen=True, slots=True)
class ElectionState:
    """Persisted: the epoch, the leader known for it, this voter's vote in it, the
    committed voter bindings (``voter_set``: which data dir each voter is) and the
    ``voter_set`` records of its log (``voter_history``: the voter set in force)."""

    epoch: int = 0
    leader_id: int = NO_LEADER
    voted_for: int = NO_LEADER
    directories: Bindings = ()
    voter_sets: VoterHistory = ()


@dataclass(frozen=True, slots=True)
class Unattached:
    epoch: int
    voted_for: int
    election_deadline_ms: int


@dataclass(frozen=True, slots=True)
class Prospective:
    epoch: int
    voted_for: int  # a vote already cast in this epoch stays cast
    leader_id: int  # the leader of this epoch it lost touch with (NO_LEADER: none)
    granted: frozenset[int]
    rejected: frozenset[int]
    election_deadline_ms: int
    next_retry_ms: int


@dataclass(frozen=True, slots=True)
class Candidate:
    epoch: int
    granted: frozenset[int]
    rejected: frozenset[int]
    election_deadline_ms: int
    next_retry_ms: int


@dataclass(frozen=True, slots=True)
class VoterProgress:
    """What the leader knows of one voter: its log end offset (the fetch offset of its last
    accepted fetch; -1 unknown) and when it last fetched."""

    voter_id: int
    log_end_offset: int = -1
    last_fetch_ms: int = -1
    acknowledged: bool = False  # answered BeginQuorumEpoch or fetched in this epoch
    directory_id: str = ""  # the data dir its last fetch named ("": unknown)
    observed_offset: int = -1
    """Its last fetch offset, counted or not: an observer on a new directory (not counted
    towards the HW) is re-admitted once this reaches the HW."""


MAX_OBSERVERS = 16


@dataclass(frozen=True, slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int  # the offset of this epoch's first record (the leader-change record)
    progress: tuple[VoterProgress, ...]  # the other voters, by id
    check_quorum_deadline_ms: int
    next_begin_epoch_ms: int
    binding: tuple[int, str, int] | None = None
    """A ``voters`` record appended and not yet committed: (voter id, directory, offset)."""
    observers: tuple[VoterProgress, ...] = ()
    """Replicas outside the voter set that fetch (a controller waiting to be added, a voter
    just removed): their fetch offset (``observed_offset``) and data dir, newest last, at most
    ``MAX_OBSERVERS``. AddRaftVoter admits only one of them that has caught up."""

    def voter(self, voter_id: int) -> VoterProgress | None:
        for p in self.progress:
            if p.voter_id == voter_id:
                return p
        return None

    def observer(self, replica_id: int) -> VoterProgress | None:
        for p in self.observers:
            if p.voter_id == replica_id:
                return p
        return None


@dataclass(frozen=True, slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline_ms: int  # no successful fetch by then: the leader is gone (fetch timeout)
    has_fetched: bool  # a fetch succeeded since it became follower (KIP-996's pre-vote rule)
    leader_resigned: bool  # EndQuorumEpoch: the next election skips the pre-vote
    voted_for: int
    next_fetch_ms: int
    fetch_sent_ms: int  # -1: no fetch in flight
    snapshot: tuple[int, int, int] | None = None
    """A FetchSnapshot transfer under way: (end offset, epoch, bytes held); a lost answer
    resumes it at the bytes held rather than starting over (KIP-630)."""
    leader_disconnected: bool = False
    """The shell saw this voter's connection to the leader close (its process is likely
    gone): it no longer vouches for the leader in pre-votes, and asks for one itself after a
    short random delay rather than the fetch timeout. A fetch answered clears it."""


@dataclass(frozen=True, slots=True)
class Resigned:
    epoch: int
    preferred_successors: tuple[int, ...]
    unacknowledged: frozenset[int]  # voters that have not answered EndQuorumEpoch
    election_deadline_ms: int
    next_retry_ms: int


Role = Unattached | Prospective | Candidate | Leader | Follower | Resigned


def role_name(role: Role) -> str:
    return type(role).__name__.lower()


def leader_of(role: Role, node_id: int) -> int:
    """The leader this role knows for its epoch (NO_LEADER if none)."""
    if isinstance(role, Leader | Resigned):
        return node_id
    if isinstance(role, Follower):
        return role.leader_id
    if isinstance(role, Prospective):
        return role.leader_id
    return NO_LEADER


def voted_for(role: Role, node_id: int) -> int:
    """The vote this role holds in its epoch (NO_LEADER if none)."""
    if isinstance(role, Candidate | Leader | Resigned):
        return node_id
    return role.voted_for
