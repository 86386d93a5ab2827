"""``QuorumCore``: one voter of the controller quorum, sans-I/O (KIP-595 + KIP-996 pre-vote).

The shell owns the metadata log (a ``floodmark.storage.Log``), the ``quorum-state`` file, the
clock, the sockets and the random source; it passes ``now_ms`` and a read-only view of the log,
and applies the returned effects in order (``QuorumDriver`` does that for a real log). Driving::

    core = QuorumCore(config, stored_election_state, rng)
    effects = core.start(log, now_ms)
    effects = core.handle(src_id, message, log, now_ms)    # any request or answer
    effects = core.tick(log, now_ms)                       # at core.next_deadline_ms() or later
    effects = core.after_leader_append(log, now_ms)        # leader: after append + flush
    effects = core.after_follower_append(log, response)    # follower: after AppendFetched
    effects = core.after_truncate(log)                     # after TruncateTo
    effects = core.resign(log, now_ms)                     # leader: graceful shutdown
    effects = core.leader_disconnected(leader_id, now_ms)  # the leader's connection closed
    core.snapshot_written(end_offset, epoch, size)         # a snapshot exists (KIP-630)
    effects = core.after_snapshot_chunk(log, response, received, complete, now_ms)

Safety rests on four rules, each in one place: a vote is persisted before it is sent and is
given once per epoch (``_on_vote``); a voter votes only for a log at least as new as its own
(``rules.log_is_up_to_date``); the leader commits at the majority end offset and only past the
first record of its own epoch (``rules.leader_high_watermark``); a follower accepts records
only after the leader has checked its (fetch offset, last fetched epoch) with the replication
layer's ``validate_fetch`` and cuts its log only where ``truncation_point`` says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from floodmark.constants import NO_LEADER
from floodmark.controller.quorum.effects import (
    AppendFetched,
    AppendLeaderChange,
    AppendSnapshotChunk,
    AppendVoters,
    AppendVoterSet,
    HighWatermarkChanged,
    PersistElectionState,
    QuorumEffect,
    RoleChanged,
    Send,
    TruncateTo,
)
from floodmark.controller.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    QuorumFetchRequest,
    QuorumFetchResponse,
    QuorumMessage,
    VoteRequest,
    VoteResponse,
)
from floodmark.controller.quorum.roles import (
    MAX_OBSERVERS,
    Candidate,
    ElectionState,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Role,
    Unattached,
    VoterProgress,
    leader_of,
    role_name,
    voted_for,
)
from floodmark.controller.quorum.rules import (
    QuorumLogView,
    last_log_epoch,
    leader_high_watermark,
    log_is_up_to_date,
    majority,
)
from floodmark.controller.quorum.voter_history import (
    Endpoints,
    VoterHistory,
    VoterSetEntry,
    appended,
    endpoints_in_force,
    in_force,
    latest_entry,
    replace_from,
    trimmed,
    truncated,
    uncommitted,
    voters_of,
    with_endpoint,
)
from floodmark.controller.quorum.voter_set import (
    Bindings,
    VoterDirectory,
    accepts,
    admission_candidate,
    directory_of,
    merge,
)
from floodmark.errors import ErrorCode
from floodmark.replication import (
    FetchValidation,
    Truncation,
    fencing,
    truncation_point,
    validate_fetch,
)

# The quorum always runs the safe rule; the historical modes are for partitions' stories.
MODE = Truncation.LEADER_EPOCH
RETAINED_SNAPSHOTS = 2  # as many as the shell keeps (controller.snapshot.RETAINED)


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """Kafka's ``controller.quorum.*`` settings (milliseconds)."""

    node_id: int
    voters: tuple[int, ...]
    """The bootstrap voter set (controller.quorum.voters ids; one voter is a valid quorum),
    in force until the log holds a ``voter_set`` record (KIP-853). A node outside it starts
    as an observer (a controller waiting for AddRaftVoter)."""
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    fetch_idle_backoff_ms: int = 0
    """A follower's pause after an answer without records (0 when the leader long-polls)."""

    def __post_init__(self) -> None:
        if not self.voters or len(set(self.voters)) != len(self.voters):
            raise ValueError(f"controller.quorum.voters must list distinct ids: {self.voters}")
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that has not heard a majority fetch for this long resigns (KIP-595)."""
        return self.fetch_timeout_ms * 3 // 2


@dataclass(frozen=True, slots=True)
class VoterDescription:
    voter_id: int
    log_end_offset: int
    last_fetch_ms: int
    directory_id: str = ""


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """DescribeQuorum: what this voter knows (the voters' progress only on the leader)."""

    node_id: int
    role: str
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[VoterDescription, ...]
    directory_id: str = ""  # this voter's data dir
    is_voter: bool = True  # False: on a data dir the quorum does not know (an observer)
    directories: Bindings = ()  # the committed voter bindings it knows
    observers: tuple[VoterDescription, ...] = ()
    """On the leader: voter ids fetching from a new data dir, not counted until re-admitted."""


class QuorumCore:
    """One voter. Mutable; every method returns the effects to apply, in order."""

    def __init__(self, config: QuorumConfig, stored: ElectionState,
                 rng: random.Random, directory_id: str = "") -> None:
        self.config = config
        self.rng = rng
        self.directory_id = directory_id  # this voter's data dir ("": none, KIP-595 only)
        self._stored = stored
        self.high_watermark = 0
        self.role: Role = Unattached(stored.epoch, stored.voted_for, 0)
        self.latest_snapshot: tuple[int, int, int] | None = None  # (end offset, epoch, size)
        self._snapshots: dict[tuple[int, int], int] = {}  # the retained ones -> size
        self.voters: tuple[int, ...] = tuple(sorted(config.voters))
        """The voter set in force (``voter_history``): the latest ``voter_set`` record in the
        log, else the bootstrap set; kept current by ``_refresh_voters``."""

    # -- views ---------------------------------------------------------------------------------
    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def epoch(self) -> int:
        return self.role.epoch

    @property
    def leader_id(self) -> int:
        return leader_of(self.role, self.node_id)

    @property
    def is_leader(self) -> bool:
        return isinstance(self.role, Leader)

    @property
    def election_state(self) -> ElectionState:
        return self._stored

    @property
    def directories(self) -> Bindings:
        """The committed voter bindings this voter knows (``voter_set``)."""
        return self._stored.directories

    @property
    def voter_sets(self) -> VoterHistory:
        """The ``voter_set`` records of this voter's log (``voter_history``)."""
        return self._stored.voter_sets

    @property
    def others(self) -> tuple[int, ...]:
        """The voters in force but this node."""
        return tuple(v for v in self.voters if v != self.node_id)

    @property
    def in_voter_set(self) -> bool:
        return self.node_id in self.voters

    @property
    def is_voter(self) -> bool:
        """This node is in the voter set in force, on the data dir the quorum knows it by (else
        an observer: one not added yet, removed, or back on a new data dir)."""
        return self.in_voter_set and accepts(self.directories, self.node_id, self.directory_id)

    def voter_endpoints(self, log: QuorumLogView) -> dict[int, str]:
        """The voters' controller listeners as the voter set in force names them (KIP-853's
        VotersRecord endpoints; a voter not named: its ``controller.quorum.voters`` address)."""
        return endpoints_in_force(self.voter_sets, log.log_end_offset)

    def refresh_voters(self, log: QuorumLogView) -> None:
        """Recompute the voter set in force from the log end offset (the model checker calls
        it when it rebuilds a running core from its values)."""
        self.voters = in_force(self.voter_sets, log.log_end_offset, self.config.voters)

    def _set_voter_sets(self, history: VoterHistory, log: QuorumLogView,
                        effects: list[QuorumEffect]) -> None:
        """Record the log's ``voter_set`` entries (written before the records they describe
        are appended) and the set in force they give."""
        history = trimmed(history, log.log_start_offset)
        if history != self._stored.voter_sets:
            self._stored = replace(self._stored, voter_sets=history)
            effects.append(PersistElectionState(self._stored))
        self.refresh_voters(log)

    def _set_directories(self, directories: Bindings, effects: list[QuorumEffect]) -> None:
        if directories != self._stored.directories:
            self._stored = replace(self._stored, directories=directories)
            effects.append(PersistElectionState(self._stored))

    def describe(self, log: QuorumLogView) -> QuorumDescription:
        voters: list[VoterDescription] = []
        observers: list[VoterDescription] = []
        role = self.role
        if isinstance(role, Leader):
            if self.in_voter_set:
                voters.append(VoterDescription(self.node_id, log.recovery_point, -1,
                                               self.directory_id))
            observers.extend(VoterDescription(p.voter_id, p.observed_offset, p.last_fetch_ms,
                                              p.directory_id) for p in role.observers)
            for p in role.progress:  # (not fetched yet in this epoch: a voter, directory unknown)
                if not p.directory_id or accepts(self.directories, p.voter_id, p.directory_id):
                    voters.append(VoterDescription(p.voter_id, p.log_end_offset,
                                                   p.last_fetch_ms, p.directory_id))
                else:
                    observers.append(VoterDescription(p.voter_id, p.observed_offset, -1,
                                                      p.directory_id))
        return QuorumDescription(self.node_id, role_name(role), self.leader_id, self.epoch,
                                 self.high_watermark, tuple(sorted(voters,
                                                                   key=lambda v: v.voter_id)),
                                 self.directory_id, self.is_voter, self.directories,
                                 tuple(observers))

    def next_deadline_ms(self) -> int:
        """When ``tick`` next has something to do."""
        role = self.role
        if isinstance(role, Unattached):
            return role.election_deadline_ms
        if isinstance(role, Resigned) and not role.unacknowledged:
            return role.election_deadline_ms
        if isinstance(role, Prospective | Candidate | Resigned):
            return min(role.election_deadline_ms, role.next_retry_ms)
        if isinstance(role, Leader):
            return min(role.check_quorum_deadline_ms, role.next_begin_epoch_ms)
        if role.fetch_sent_ms >= 0:
            return min(role.fetch_deadline_ms, role.fetch_sent_ms + self.config.request_timeout_ms)
        return min(role.fetch_deadline_ms, role.next_fetch_ms)

    # -- transitions ---------------------------------------------------------------------------
    def _election_deadline(self, now_ms: int) -> int:
        """Randomized: between one and two election timeouts from now (Raft §5.2)."""
        timeout = self.config.election_timeout_ms
        return now_ms + timeout + self.rng.randint(0, timeout)

    def _become(self, role: Role, effects: list[QuorumEffect]) -> None:
        old = self.role
        self.role = role
        state = ElectionState(role.epoch, leader_of(role, self.node_id),
                              voted_for(role, self.node_id), self._stored.directories,
                              self._stored.voter_sets)
        if state != self._stored:
            self._stored = state
            effects.append(PersistElectionState(state))
        if (type(old) is not type(role) or old.epoch != role.epoch
                or leader_of(old, self.node_id) != state.leader_id):
            effects.append(RoleChanged(role_name(role), role.epoch, state.leader_id))

    def _to_unattached(self, epoch: int, now_ms: int, effects: list[QuorumEffect]) -> None:
        self._become(Unattached(epoch, NO_LEADER, self._election_deadline(now_ms)), effects)

    def _to_follower(self, epoch: int, leader_id: int, now_ms: int,
                     effects: list[QuorumEffect]) -> None:
        vote = voted_for(self.role, self.node_id) if epoch == self.epoch else NO_LEADER
        self._become(Follower(epoch, leader_id, now_ms + self.config.fetch_timeout_ms,
                              has_fetched=False, leader_resigned=False, voted_for=vote,
                              next_fetch_ms=now_ms, fetch_sent_ms=-1), effects)

    def _to_prospective(self, log: QuorumLogView, now_ms: int,
                        effects: list[QuorumEffect]) -> None:
        """KIP-996: ask whether an election could be won before disturbing anyone."""
        role = self.role
        if not self.is_voter:  # an observer never stands: it looks for the leader instead
            self._seek_leader(log, now_ms, effects)
            return
        if len(self.voters) == 1:
            self._to_candidate(log, now_ms, effects)
            return
        lost = role.leader_id if isinstance(role, Follower | Prospective) else NO_LEADER
        vote = voted_for(role, self.node_id)  # a vote cast in this epoch stays cast
        self._become(Prospective(role.epoch, vote, lost, frozenset({self.node_id}), frozenset(),
                                 self._election_deadline(now_ms), now_ms), effects)
        self._send_vote_requests(log, now_ms, effects)

    def _to_candidate(self, log: QuorumLogView, now_ms: int,
                      effects: list[QuorumEffect]) -> None:
        self._become(Candidate(self.epoch + 1, frozenset({self.node_id}), frozenset(),
                               self._election_deadline(now_ms), now_ms), effects)
        self._send_vote_requests(log, now_ms, effects)

    def _seek_leader(self, log: QuorumLogView, now_ms: int,
                     effects: list[QuorumEffect]) -> None:
        """An observer (outside the voter set) that knows no leader: Unattached, it asks one
        voter at a time with a fetch; any answer names the leader it knows (KIP-853's observer
        discovery), and the next timeout asks another."""
        role = self.role
        self._become(Unattached(role.epoch, voted_for(role, self.node_id),
                                self._election_deadline(now_ms)), effects)
        others = self.others
        if others:
            target = others[self.rng.randint(0, len(others) - 1)]
            effects.append(Send(target, QuorumFetchRequest(
                self.node_id, self.epoch, log.log_end_offset, last_log_epoch(log),
                log.log_start_offset, replica_directory_id=self.directory_id)))

    def _to_leader(self, log: QuorumLogView, now_ms: int, effects: list[QuorumEffect]) -> None:
        # Entries a leader once sent beyond what this log received describe nothing here.
        self._set_voter_sets(truncated(self.voter_sets, log.log_end_offset), log, effects)
        epoch = self.epoch
        others = self.others
        self._become(Leader(epoch, log.log_end_offset,
                            tuple(VoterProgress(v) for v in others),
                            now_ms + self.config.check_quorum_timeout_ms,
                            now_ms + self.config.request_timeout_ms), effects)
        effects.append(AppendLeaderChange(epoch, self.node_id, self.voters))
        effects.extend(Send(v, BeginQuorumEpochRequest(epoch, self.node_id)) for v in others)

    def _to_resigned(self, log: QuorumLogView, now_ms: int, effects: list[QuorumEffect]) -> None:
        role = self.role
        successors: tuple[int, ...] = self.others
        if isinstance(role, Leader):  # the most caught-up voters first
            successors = tuple(p.voter_id for p in sorted(
                role.progress, key=lambda p: (-p.log_end_offset, p.voter_id)))
        self._become(Resigned(role.epoch, successors, frozenset(successors),
                              self._election_deadline(now_ms), now_ms), effects)
        self._send_end_quorum_epoch(now_ms, effects)

    def _observe(self, epoch: int, leader_id: int, now_ms: int,
                 effects: list[QuorumEffect]) -> None:
        """Any message: a newer epoch moves this voter to it; a leader named for the current
        epoch is followed by a voter that did not know one."""
        if epoch > self.epoch:
            if leader_id not in (NO_LEADER, self.node_id):
                self._to_follower(epoch, leader_id, now_ms, effects)
            else:
                self._to_unattached(epoch, now_ms, effects)
        elif (epoch == self.epoch and leader_id not in (NO_LEADER, self.node_id)
              and isinstance(self.role, Unattached | Prospective | Candidate)):
            self._to_follower(epoch, leader_id, now_ms, effects)

    # -- start, timers -------------------------------------------------------------------------
    def start(self, log: QuorumLogView, now_ms: int) -> list[QuorumEffect]:
        """The role after a (re)start, from the ``quorum-state`` file: a leader comes back
        Resigned (its followers may have moved on), a follower follows the leader it knew."""
        effects: list[QuorumEffect] = []
        stored = self._stored
        self.refresh_voters(log)
        single = self.is_voter and len(self.voters) == 1
        if stored.leader_id == self.node_id:
            self.role = Resigned(stored.epoch, self.others, frozenset(self.others),
                                 self._election_deadline(now_ms), now_ms)
            effects.append(RoleChanged("resigned", stored.epoch, self.node_id))
            if single:
                self._to_prospective(log, now_ms, effects)
            else:
                self._send_end_quorum_epoch(now_ms, effects)
        elif stored.leader_id != NO_LEADER:
            self.role = Follower(stored.epoch, stored.leader_id,
                                 now_ms + self.config.fetch_timeout_ms, False, False,
                                 stored.voted_for, now_ms, -1)
            effects.append(RoleChanged("follower", stored.epoch, stored.leader_id))
        else:
            self.role = Unattached(stored.epoch, stored.voted_for,
                                   self._election_deadline(now_ms))
            effects.append(RoleChanged("unattached", stored.epoch, NO_LEADER))
            if single:
                self._to_prospective(log, now_ms, effects)
        effects.extend(self.tick(log, now_ms))
        return effects

    def tick(self, log: QuorumLogView, now_ms: int) -> list[QuorumEffect]:
        effects: list[QuorumEffect] = []
        role = self.role
        if isinstance(role, Unattached):
            if now_ms >= role.election_deadline_ms:
                self._to_prospective(log, now_ms, effects)
        elif isinstance(role, Prospective | Candidate):
            if now_ms >= role.election_deadline_ms:
                self._to_prospective(log, now_ms, effects)  # a new round, a new timeout
            elif now_ms >= role.next_retry_ms:
                self._send_vote_requests(log, now_ms, effects)
        elif isinstance(role, Resigned):
            if now_ms >= role.election_deadline_ms:
                self._to_prospective(log, now_ms, effects)
            elif now_ms >= role.next_retry_ms and role.unacknowledged:
                self._send_end_quorum_epoch(now_ms, effects)
        elif isinstance(role, Leader):
            self._leader_tick(role, log, now_ms, effects)
        else:
            self._follower_tick(role, log, now_ms, effects)
        return effects

    def _leader_tick(self, role: Leader, log: QuorumLogView, now_ms: int,
                     effects: list[QuorumEffect]) -> None:
        self._maybe_bind(log, effects)
        bound = self.role
        assert isinstance(bound, Leader)
        role = bound
        if now_ms >= role.check_quorum_deadline_ms:
            if self._heard_from_majority(role, now_ms):
                self.role = replace(role, check_quorum_deadline_ms=now_ms
                                    + self.config.check_quorum_timeout_ms)
            else:  # cut off from the quorum: stop acting as leader (KIP-595 check quorum)
                self._to_resigned(log, now_ms, effects)
                return
            role = self.role
            assert isinstance(role, Leader)
        if now_ms >= role.next_begin_epoch_ms:
            for p in role.progress:
                if not p.acknowledged:
                    effects.append(Send(p.voter_id,
                                        BeginQuorumEpochRequest(role.epoch, self.node_id)))
            self.role = replace(role, next_begin_epoch_ms=now_ms
                                + self.config.request_timeout_ms)

    def _heard_from_majority(self, role: Leader, now_ms: int) -> bool:
        window_start = now_ms - self.config.check_quorum_timeout_ms
        heard = (1 if self.in_voter_set else 0) + sum(
            1 for p in role.progress if p.last_fetch_ms >= window_start)
        return heard >= majority(len(self.voters))

    def _follower_tick(self, role: Follower, log: QuorumLogView, now_ms: int,
                       effects: list[QuorumEffect]) -> None:
        if now_ms >= role.fetch_deadline_ms:
            if role.leader_resigned and self.is_voter:  # the leader said it is gone
                self._to_candidate(log, now_ms, effects)
            else:
                self._to_prospective(log, now_ms, effects)
            return
        in_flight = role.fetch_sent_ms >= 0
        if (role.snapshot is not None and in_flight
                and now_ms >= role.fetch_sent_ms + self.config.request_timeout_ms):
            end, epoch, held = role.snapshot  # a lost chunk: ask again from the bytes held
            effects.append(Send(role.leader_id, FetchSnapshotRequest(
                self.node_id, role.epoch, end, epoch, held)))
            self.role = replace(role, fetch_sent_ms=now_ms)
            return
        if (not in_flight and now_ms >= role.next_fetch_ms) or (
                in_flight and now_ms >= role.fetch_sent_ms + self.config.request_timeout_ms):
            effects.append(Send(role.leader_id, QuorumFetchRequest(
                self.node_id, role.epoch, log.log_end_offset, last_log_epoch(log),
                log.log_start_offset, replica_directory_id=self.directory_id)))
            self.role = replace(role, fetch_sent_ms=now_ms)

    def _send_vote_requests(self, log: QuorumLogView, now_ms: int,
                            effects: list[QuorumEffect]) -> None:
        role = self.role
        assert isinstance(role, Prospective | Candidate)
        request = VoteRequest(role.epoch, self.node_id, last_log_epoch(log), log.log_end_offset,
                              pre_vote=isinstance(role, Prospective),
                              candidate_directory_id=self.directory_id)
        for voter in self.others:
            if voter not in role.granted and voter not in role.rejected:
                effects.append(Send(voter, request))
        self.role = replace(role, next_retry_ms=now_ms + self.config.request_timeout_ms)
        self._maybe_won(log, now_ms, effects)

    def _send_end_quorum_epoch(self, now_ms: int, effects: list[QuorumEffect]) -> None:
        role = self.role
        assert isinstance(role, Resigned)
        request = EndQuorumEpochRequest(role.epoch, self.node_id, role.preferred_successors)
        effects.extend(Send(v, request) for v in sorted(role.unacknowledged))
        self.role = replace(role, next_retry_ms=now_ms + self.config.request_timeout_ms)

    def _maybe_won(self, log: QuorumLogView, now_ms: int, effects: list[QuorumEffect]) -> None:
        role = self.role
        if not isinstance(role, Prospective | Candidate):
            return
        if len(role.granted & set(self.voters)) < majority(len(self.voters)):
            return  # only the votes of the voter set in force count
        if not self.is_voter:  # on a data dir the quorum does not know: never stands
            return
        if isinstance(role, Prospective):
            self._to_candidate(log, now_ms, effects)
        else:
            self._to_leader(log, now_ms, effects)

    # -- messages ------------------------------------------------------------------------------
    def handle(self, src: int, message: QuorumMessage, log: QuorumLogView,
               now_ms: int) -> list[QuorumEffect]:
        effects: list[QuorumEffect] = []
        if isinstance(message, QuorumFetchRequest):
            self._on_fetch_request(src, message, log, now_ms, effects)
        elif isinstance(message, QuorumFetchResponse):
            self._on_fetch_response(src, message, log, now_ms, effects)
        elif isinstance(message, VoteRequest):
            self._on_vote_request(src, message, log, now_ms, effects)
        elif isinstance(message, VoteResponse):
            self._on_vote_response(src, message, log, now_ms, effects)
        elif isinstance(message, BeginQuorumEpochRequest):
            self._observe(message.leader_epoch, message.leader_id, now_ms, effects)
            effects.append(Send(src, BeginQuorumEpochResponse(self.node_id, self.epoch,
                                                              self.leader_id)))
        elif isinstance(message, BeginQuorumEpochResponse):
            self._observe(message.epoch, message.leader_id, now_ms, effects)
            role = self.role
            if isinstance(role, Leader) and message.epoch == role.epoch:
                self._update_progress(role, src, acknowledged=True)
        elif isinstance(message, EndQuorumEpochRequest):
            self._on_end_quorum_epoch(src, message, now_ms, effects)
        elif isinstance(message, FetchSnapshotRequest):
            self._on_fetch_snapshot_request(src, message, now_ms, effects)
        elif isinstance(message, FetchSnapshotResponse):
            self._on_fetch_snapshot_response(src, message, now_ms, effects)
        else:
            self._observe(message.epoch, message.leader_id, now_ms, effects)
            role = self.role
            if isinstance(role, Resigned) and message.epoch == role.epoch:
                self.role = replace(role, unacknowledged=role.unacknowledged - {src})
        return effects

    def _on_vote_request(self, src: int, req: VoteRequest, log: QuorumLogView, now_ms: int,
                         effects: list[QuorumEffect]) -> None:
        # KIP-853: only a voter on its known data dir votes, only for a candidate on its own.
        log_ok = (log_is_up_to_date(req.last_epoch, req.last_epoch_end_offset,
                                    last_log_epoch(log), log.log_end_offset)
                  and self.is_voter
                  and accepts(self.directories, req.candidate_id, req.candidate_directory_id))
        if req.pre_vote:
            # A question only: nobody's epoch, vote or timer changes (KIP-996). Refused by a
            # leader and by a follower that has heard from its leader in this term.
            role = self.role
            busy = isinstance(role, Leader) or (isinstance(role, Follower) and role.has_fetched
                                                and not role.leader_disconnected)
            grant = req.candidate_epoch >= self.epoch and log_ok and not busy
            effects.append(Send(src, VoteResponse(self.node_id, self.epoch,
                                                  NO_LEADER if grant else self.leader_id,
                                                  grant, pre_vote=True,
                                                  voter_directory_id=self.directory_id)))
            return
        if req.candidate_epoch > self.epoch:
            self._to_unattached(req.candidate_epoch, now_ms, effects)
        role = self.role
        # One vote per epoch, for a log at least as new, by a voter that knows no leader.
        grant = (req.candidate_epoch == self.epoch and log_ok
                 and isinstance(role, Unattached | Prospective) and self.leader_id == NO_LEADER
                 and role.voted_for in (NO_LEADER, req.candidate_id))
        if grant:  # persisted (by the effect order) before the answer leaves
            self._become(Unattached(self.epoch, req.candidate_id, self._election_deadline(now_ms)),
                         effects)
        effects.append(Send(src, VoteResponse(self.node_id, self.epoch, self.leader_id, grant,
                                              voter_directory_id=self.directory_id)))

    def _on_vote_response(self, src: int, resp: VoteResponse, log: QuorumLogView, now_ms: int,
                          effects: list[QuorumEffect]) -> None:
        self._observe(resp.epoch, resp.leader_id, now_ms, effects)
        role = self.role
        counts = (
            (isinstance(role, Prospective) and resp.pre_vote and resp.epoch <= role.epoch)
            or (isinstance(role, Candidate) and not resp.pre_vote and resp.epoch == role.epoch))
        if not counts or not isinstance(role, Prospective | Candidate):
            return  # an answer to an earlier round or role
        if resp.vote_granted and accepts(self.directories, src, resp.voter_directory_id):
            self.role = replace(role, granted=role.granted | {src})
            self._maybe_won(log, now_ms, effects)
        else:
            self.role = replace(role, rejected=role.rejected | {src})

    def _on_end_quorum_epoch(self, src: int, req: EndQuorumEpochRequest, now_ms: int,
                             effects: list[QuorumEffect]) -> None:
        self._observe(req.leader_epoch, req.leader_id, now_ms, effects)
        role = self.role
        if (isinstance(role, Follower) and role.epoch == req.leader_epoch
                and role.leader_id == req.leader_id and not role.leader_resigned):
            # The best successors stand first: each place in the list waits a little longer.
            successors = req.preferred_successors
            place = successors.index(self.node_id) if self.node_id in successors else len(
                successors)
            step = self.config.election_backoff_max_ms // max(1, len(successors))
            delay = place * step + self.rng.randint(0, max(0, step // 2))
            self.role = replace(role, leader_resigned=True,
                                fetch_deadline_ms=min(role.fetch_deadline_ms, now_ms + delay))
        effects.append(Send(src, EndQuorumEpochResponse(self.node_id, self.epoch,
                                                        self.leader_id)))

    # -- fetch: leader side --------------------------------------------------------------------
    def _on_fetch_request(self, src: int, req: QuorumFetchRequest, log: QuorumLogView,
                          now_ms: int, effects: list[QuorumEffect]) -> None:
        role = self.role
        error = fencing.check_leader_request(self.epoch, req.current_leader_epoch,
                                             is_leader=isinstance(role, Leader))
        if error is not ErrorCode.NONE:
            effects.append(Send(src, QuorumFetchResponse(error, self.epoch, self.leader_id,
                                                         req.fetch_offset)))
            return
        assert isinstance(role, Leader)
        leo = log.log_end_offset
        start = log.log_start_offset
        snapshot = self.latest_snapshot
        bindings = self.directories
        # KIP-853: a voter id fetching from a data dir the quorum does not know is an observer:
        # served, never counted (its progress of the lost directory is void) until re-admitted.
        counted = (role.voter(src) is not None
                   and accepts(bindings, src, req.replica_directory_id))
        if role.voter(src) is not None:
            self._update_progress(role, src, directory_id=req.replica_directory_id,
                                  observed_offset=req.fetch_offset, acknowledged=counted,
                                  forget=not counted)
        elif src != self.node_id:
            self._note_observer(role, src, req, now_ms)
        role = self.role
        assert isinstance(role, Leader)
        if snapshot is not None and start > 0 and (
                req.fetch_offset < start
                or req.last_fetched_epoch < self._log_start_epoch(log)):
            # The log there is gone (KIP-630): a fetch below the log start, or a follower whose
            # last epoch is older than anything the (start-truncated) epoch cache can place —
            # its end offset there would be a guess, and a divergence below the log start
            # cannot be cut. Answer with the SnapshotId (load it, then fetch after it).
            if counted:
                self._update_progress(role, src, fetch_ms=now_ms)
            effects.append(Send(src, QuorumFetchResponse(
                ErrorCode.NONE, role.epoch, self.node_id, req.fetch_offset, self.high_watermark,
                start, leo, snapshot_end_offset=snapshot[0], snapshot_epoch=snapshot[1],
                voter_directories=bindings, voter_sets=self.voter_sets)))
            return
        check = validate_fetch(MODE, log.epoch_cache, start, leo, req.fetch_offset,
                               req.last_fetched_epoch)
        if check.result is FetchValidation.DIVERGING:
            # The follower's log is not a prefix of ours: tell it where its epoch ends here.
            effects.append(Send(src, QuorumFetchResponse(
                ErrorCode.NONE, role.epoch, self.node_id, req.fetch_offset, self.high_watermark,
                start, leo, diverging=check.diverging, voter_directories=bindings)))
            return
        if check.result is FetchValidation.OFFSET_OUT_OF_RANGE:
            effects.append(Send(src, QuorumFetchResponse(
                ErrorCode.OFFSET_OUT_OF_RANGE, role.epoch, self.node_id, req.fetch_offset,
                self.high_watermark, start, leo)))
            return
        if counted:  # observers (brokers, a voter on a new data dir) are served, never counted
            self._update_progress(role, src, log_end_offset=req.fetch_offset, fetch_ms=now_ms)
            self._maybe_advance_high_watermark(log, now_ms, effects)
        self._maybe_bind(log, effects)
        effects.append(Send(src, QuorumFetchResponse(
            ErrorCode.NONE, role.epoch, self.node_id, req.fetch_offset, self.high_watermark,
            start, leo, read_from=req.fetch_offset, read_upto=leo,
            voter_directories=self.directories, voter_sets=self.voter_sets)))

    def _note_observer(self, role: Leader, src: int, req: QuorumFetchRequest,
                       now_ms: int) -> None:
        """A replica outside the voter set fetched: its progress, newest last, bounded."""
        seen = VoterProgress(src, -1, now_ms, True, req.replica_directory_id, req.fetch_offset)
        rest = tuple(p for p in role.observers if p.voter_id != src)
        self.role = replace(role, observers=(*rest, seen)[-MAX_OBSERVERS:])

    @staticmethod
    def _log_start_epoch(log: QuorumLogView) -> int:
        first = log.epoch_cache.earliest_entry
        return first.epoch if first is not None else -1

    def _update_progress(self, role: Leader, voter_id: int, *, log_end_offset: int | None = None,
                         fetch_ms: int | None = None, acknowledged: bool = True,
                         directory_id: str | None = None, observed_offset: int | None = None,
                         forget: bool = False) -> None:
        """``forget``: the voter fetched from a data dir the quorum does not know, so what its
        lost directory had acknowledged no longer counts."""
        progress = tuple(
            replace(p,
                    log_end_offset=(-1 if forget else p.log_end_offset if log_end_offset is None
                                    else log_end_offset),
                    last_fetch_ms=-1 if forget else p.last_fetch_ms if fetch_ms is None
                    else fetch_ms,
                    acknowledged=p.acknowledged or acknowledged,
                    directory_id=p.directory_id if directory_id is None else directory_id,
                    observed_offset=(p.observed_offset if observed_offset is None
                                     else observed_offset))
            if p.voter_id == voter_id else p
            for p in role.progress)
        self.role = replace(role, progress=progress)

    def _maybe_bind(self, log: QuorumLogView, effects: list[QuorumEffect]) -> None:
        """The leader binds one voter at a time to its data dir with a ``voters`` record
        (``voter_set.admission_candidate``): a voter not bound yet, or one back on a new data
        dir that has caught up. Only once a record of this epoch is committed (Raft's rule
        for a membership change), and one binding in flight at a time. Called on a fetch and
        on the leader's tick, never inside an append of the shell's own records."""
        role = self.role
        if (not isinstance(role, Leader) or role.binding is not None
                or self.high_watermark <= role.epoch_start_offset
                or uncommitted(self.voter_sets, self.high_watermark, log.log_end_offset)):
            return  # (one change at a time: a voter set change is under way)
        seen = [(self.node_id, self.directory_id, log.log_end_offset)]
        seen.extend((p.voter_id, p.directory_id, p.observed_offset) for p in role.progress)
        chosen = admission_candidate(self.directories, seen, self.high_watermark)
        if chosen is None:
            return
        voter_id, directory_id = chosen
        self.role = replace(role, binding=(voter_id, directory_id, log.log_end_offset))
        effects.append(AppendVoters(role.epoch, voter_id, directory_id))

    def _maybe_advance_high_watermark(self, log: QuorumLogView, now_ms: int,
                                      effects: list[QuorumEffect]) -> None:
        role = self.role
        if not isinstance(role, Leader):
            return
        new = leader_high_watermark(self.high_watermark, role.epoch_start_offset,
                                    log.recovery_point if self.in_voter_set else None,
                                    (p.log_end_offset for p in role.progress))
        if new == self.high_watermark:
            return
        old, self.high_watermark = self.high_watermark, new
        effects.append(HighWatermarkChanged(old, new))
        if role.binding is not None and new > role.binding[2]:
            # The voters record is committed (by voters the quorum knew): the binding holds.
            voter_id, directory_id, offset = role.binding
            self.role = replace(role, binding=None)
            self._set_directories(merge(self.directories,
                                        [VoterDirectory(voter_id, directory_id, offset)]),
                                  effects)
        entry = latest_entry(self.voter_sets, log.log_end_offset)
        if entry is None or not old <= entry.offset < new:
            return
        # A voter_set record is committed: the data dirs it names are bound (an added voter's).
        self._set_directories(merge(self.directories, [
            VoterDirectory(v, d, entry.offset) for v, d in entry.voters if d]), effects)
        if self.node_id not in entry.ids:
            # KIP-853: a leader that removed itself resigns once the removal is committed.
            self._to_resigned(log, now_ms, effects)

    def after_leader_append(self, log: QuorumLogView, now_ms: int) -> list[QuorumEffect]:
        """The leader appended and flushed: its own end offset counts now."""
        effects: list[QuorumEffect] = []
        self.refresh_voters(log)
        self._maybe_advance_high_watermark(log, now_ms, effects)
        return effects

    # -- voter set changes (KIP-853: AddRaftVoter, RemoveRaftVoter) ----------------------------
    def _change_refused(self, log: QuorumLogView) -> tuple[ErrorCode, str] | None:
        """Why the leader cannot start a voter set change now (Kafka's answers), or None."""
        role = self.role
        if not isinstance(role, Leader):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, "this controller is not the quorum leader"
        if self.high_watermark <= role.epoch_start_offset:
            return ErrorCode.REQUEST_TIMED_OUT, (
                "the leader has not committed a record of its epoch yet")
        if (uncommitted(self.voter_sets, self.high_watermark, log.log_end_offset)
                or role.binding is not None):
            return ErrorCode.REQUEST_TIMED_OUT, (
                "the previous voter change is not committed yet")
        return None

    def add_voter(self, voter_id: int, directory_id: str, log: QuorumLogView,
                  now_ms: int) -> tuple[ErrorCode, str, int, list[QuorumEffect]]:
        """AddRaftVoter on the leader: (error, message, offset of the ``voter_set`` record
        (-1: none), effects). The change holds once the record is committed (HW > offset);
        the shell answers then, or REQUEST_TIMED_OUT. The new voter must be fetching, as an
        observer on ``directory_id``, and have caught up to the high watermark."""
        refused = self._change_refused(log)
        if refused is None and voter_id in self.voters:
            refused = ErrorCode.DUPLICATE_VOTER, f"{voter_id} is already a voter"
        role = self.role
        if refused is None and isinstance(role, Leader):
            seen = role.observer(voter_id)
            if seen is None or (directory_id and seen.directory_id != directory_id):
                refused = ErrorCode.REQUEST_TIMED_OUT, (
                    f"replica {voter_id} (directory {directory_id or '?'}) is not fetching "
                    "from the leader")
            elif seen.observed_offset < self.high_watermark:
                refused = ErrorCode.REQUEST_TIMED_OUT, (
                    f"replica {voter_id} has not caught up (fetch offset "
                    f"{seen.observed_offset}, high watermark {self.high_watermark})")
            else:
                directory_id = seen.directory_id
        if refused is not None:
            return refused[0], refused[1], -1, []
        found = {b.voter_id: b.directory_id for b in self.directories}
        found[voter_id] = directory_id
        return self._change_voters(voters_of((*self.voters, voter_id), found), log, now_ms)

    def remove_voter(self, voter_id: int, directory_id: str, log: QuorumLogView,
                     now_ms: int) -> tuple[ErrorCode, str, int, list[QuorumEffect]]:
        """RemoveRaftVoter on the leader (see ``add_voter``). ``directory_id`` "" matches any
        data dir. The leader may remove itself: it stops counting towards the high
        watermark at once and resigns once the removal is committed."""
        refused = self._change_refused(log)
        bound = directory_of(self.directories, voter_id)
        if refused is None and (voter_id not in self.voters or (
                directory_id and bound is not None and bound != directory_id)):
            refused = ErrorCode.VOTER_NOT_FOUND, (
                f"{voter_id} (directory {directory_id or '?'}) is not one of the voters "
                f"{list(self.voters)}")
        if refused is None and self.voters == (voter_id,):
            refused = ErrorCode.VOTER_NOT_FOUND, "cannot remove the only voter"
        if refused is not None:
            return refused[0], refused[1], -1, []
        found = {b.voter_id: b.directory_id for b in self.directories}
        return self._change_voters(
            voters_of((v for v in self.voters if v != voter_id), found), log, now_ms)

    def update_voter(self, voter_id: int, directory_id: str, endpoint: str,
                     log: QuorumLogView, now_ms: int
                     ) -> tuple[ErrorCode, str, int, list[QuorumEffect]]:
        """UpdateRaftVoter on the leader (KIP-853; Kafka's ``UpdateVoterHandler``): voter
        ``voter_id`` on ``directory_id`` now listens on ``endpoint``. The same voters, with
        that endpoint, go into a new ``voter_set`` record through the one-change-at-a-time
        path of ``add_voter``; Kafka's leader answers at the append, without waiting for the
        commit. The checks of the request itself (epoch, directory, listener, kraft.version
        range) are the shell's, before this."""
        refused = self._change_refused(log)
        if refused is None and not endpoint:
            refused = ErrorCode.INVALID_REQUEST, "the listeners lack the controller listener"
        bound = directory_of(self.directories, voter_id)
        if refused is None and (voter_id not in self.voters or (
                bound is not None and bound != directory_id)):
            refused = ErrorCode.VOTER_NOT_FOUND, (
                f"{voter_id} (directory {directory_id or '?'}) is not one of the voters "
                f"{list(self.voters)}")
        if refused is not None:
            return refused[0], refused[1], -1, []
        found = {b.voter_id: b.directory_id for b in self.directories}
        voters = voters_of(self.voters, found)
        latest = latest_entry(self.voter_sets, log.log_end_offset)
        return self._change_voters(voters, log, now_ms, with_endpoint(
            () if latest is None else latest.endpoints, voters, voter_id, endpoint))

    def _change_voters(self, voters: tuple[tuple[int, str], ...], log: QuorumLogView,
                       now_ms: int, endpoints: Endpoints | None = None
                       ) -> tuple[ErrorCode, str, int, list[QuorumEffect]]:
        """Append the ``voter_set`` record naming ``voters`` (and ``endpoints``; None: the
        endpoints in force, for the voters that stay)."""
        role = self.role
        assert isinstance(role, Leader)
        effects: list[QuorumEffect] = []
        if endpoints is None:
            latest = latest_entry(self.voter_sets, log.log_end_offset)
            endpoints = with_endpoint(() if latest is None else latest.endpoints, voters)
        entry = VoterSetEntry(log.log_end_offset, voters, endpoints)
        self._set_voter_sets(appended(self.voter_sets, entry), log, effects)
        self.voters = entry.ids  # in force from the append on (the next effect)
        known = {p.voter_id: replace(p, log_end_offset=p.observed_offset)
                 for p in role.observers}  # an added voter's fetch offset counts from now
        known.update((p.voter_id, p) for p in role.progress)
        progress = tuple(known.get(v, VoterProgress(v)) for v in self.others)
        dropped = tuple(p for p in role.progress if p.voter_id not in self.voters)
        kept = tuple(p for p in role.observers if p.voter_id not in self.voters)
        self.role = replace(role, progress=progress,
                            observers=(*kept, *dropped)[-MAX_OBSERVERS:])
        effects.append(AppendVoterSet(role.epoch, voters, endpoints))
        return ErrorCode.NONE, "", entry.offset, effects

    def resign(self, log: QuorumLogView, now_ms: int) -> list[QuorumEffect]:
        """Graceful shutdown of the leader: EndQuorumEpoch to every voter, best successor
        first, so the next election starts at once instead of after a fetch timeout."""
        effects: list[QuorumEffect] = []
        if isinstance(self.role, Leader):
            self._to_resigned(log, now_ms, effects)
        return effects

    def leader_disconnected(self, leader_id: int, now_ms: int) -> list[QuorumEffect]:
        """The shell saw its connection to ``leader_id`` close (or be refused): that process
        is likely gone, so a follower of it need not wait for the fetch timeout. It stops
        vouching for the leader (it grants other voters' pre-votes) and asks for one itself
        after a short random delay (so that, as a rule, one follower asks while the others
        answer, instead of a split vote). Nothing else changes: the pre-vote (KIP-996) keeps
        a leader that a majority still fetches from in office, and a fetch answered from it
        makes this voter vouch for it again. A stopped or cut-off leader keeps its connections
        open and is left to the fetch timeout."""
        role = self.role
        if isinstance(role, Follower) and role.leader_id == leader_id:
            delay = self.rng.randint(0, max(1, self.config.election_timeout_ms // 5))
            self.role = replace(role, leader_disconnected=True,
                                fetch_deadline_ms=min(role.fetch_deadline_ms, now_ms + delay))
        return []

    # -- fetch: follower side ------------------------------------------------------------------
    def _on_fetch_response(self, src: int, resp: QuorumFetchResponse, log: QuorumLogView,
                           now_ms: int, effects: list[QuorumEffect]) -> None:
        self._observe(resp.leader_epoch, resp.leader_id, now_ms, effects)
        role = self.role
        if (not isinstance(role, Follower) or role.epoch != resp.leader_epoch
                or role.leader_id != src or role.fetch_sent_ms < 0):
            return  # for an earlier epoch or leader, or not asked for
        role = replace(role, fetch_sent_ms=-1)
        # Bindings only from the leader's fetch answer: a voter back on a new directory learns
        # it is re-admitted from a leader whose epoch it then knows has a leader, so it never
        # votes in that epoch (a vote it may have cast there before losing its disk). Hearing
        # them in vote messages would break that (docs/quorum.md).
        self._set_directories(merge(self.directories, resp.voter_directories), effects)
        if resp.fetch_offset != log.log_end_offset:  # the log moved since: a stale answer
            self.role = replace(role, next_fetch_ms=now_ms)
            return
        if resp.error is not ErrorCode.NONE:
            if (resp.error is ErrorCode.OFFSET_OUT_OF_RANGE
                    and 0 <= resp.log_end_offset < log.log_end_offset):
                effects.append(TruncateTo(max(resp.log_end_offset, 0), "leader log shorter"))
            self.role = replace(role, next_fetch_ms=now_ms + self.config.retry_backoff_ms)
            return
        role = replace(role, has_fetched=True, leader_disconnected=False,
                       fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms)
        if resp.diverging is not None:
            point = truncation_point(MODE, log.epoch_cache, log.log_end_offset,
                                     self.high_watermark, resp.diverging)
            self.role = replace(role, next_fetch_ms=now_ms)
            effects.append(TruncateTo(point.offset, (
                f"diverging epoch {resp.diverging.epoch}@{resp.diverging.end_offset}"
                + ("" if point.final else " (intermediate)"))))
            return
        if resp.snapshot_end_offset >= 0:  # below the leader's log start: its snapshot first
            # The leader's voter sets below the snapshot's end are committed: this log will
            # restart there, so they are the ones that hold (``voter_history``).
            self._set_voter_sets(truncated(resp.voter_sets, resp.snapshot_end_offset), log,
                                 effects)
            held = role.snapshot
            position = (held[2] if held is not None
                        and held[:2] == (resp.snapshot_end_offset, resp.snapshot_epoch) else 0)
            self.role = replace(role, fetch_sent_ms=now_ms, snapshot=(
                resp.snapshot_end_offset, resp.snapshot_epoch, position))
            effects.append(Send(src, FetchSnapshotRequest(
                self.node_id, role.epoch, resp.snapshot_end_offset, resp.snapshot_epoch,
                position)))
            return
        pause = 0 if resp.has_records else self.config.fetch_idle_backoff_ms
        self.role = replace(role, next_fetch_ms=now_ms + pause)
        if resp.has_records:
            # The voter_set records among them are written down before they are appended.
            self._set_voter_sets(replace_from(self.voter_sets, resp.read_from, resp.voter_sets,
                                              resp.read_upto), log, effects)
            effects.append(AppendFetched(resp))
        else:
            effects.extend(self.after_follower_append(log, resp))

    # -- FetchSnapshot (KIP-630) ---------------------------------------------------------------
    def snapshot_written(self, end_offset: int, epoch: int, size: int) -> None:
        """The shell wrote (or installed) a snapshot: a leader offers it to fetches below its
        log start offset."""
        if self.latest_snapshot is None or end_offset >= self.latest_snapshot[0]:
            self.latest_snapshot = (end_offset, epoch, size)
        self._snapshots[(end_offset, epoch)] = size
        for old in sorted(self._snapshots)[:-RETAINED_SNAPSHOTS]:
            del self._snapshots[old]  # the shell keeps as many (``SnapshotStore.prune``)

    def _on_fetch_snapshot_request(self, src: int, req: FetchSnapshotRequest, now_ms: int,
                                   effects: list[QuorumEffect]) -> None:
        role = self.role
        error = fencing.check_leader_request(self.epoch, req.current_leader_epoch,
                                             is_leader=isinstance(role, Leader))
        # Any snapshot still retained is served: a transfer survives the next snapshot.
        size = self._snapshots.get((req.snapshot_end_offset, req.snapshot_epoch))
        if error is ErrorCode.NONE and size is None:
            error = ErrorCode.SNAPSHOT_NOT_FOUND  # replaced and deleted: fetch again
        elif error is ErrorCode.NONE and size is not None and not 0 <= req.position <= size:
            error = ErrorCode.POSITION_OUT_OF_RANGE
        if error is not ErrorCode.NONE or size is None:
            effects.append(Send(src, FetchSnapshotResponse(
                error, self.epoch, self.leader_id, req.snapshot_end_offset, req.snapshot_epoch)))
            return
        known = role.voter(src) if isinstance(role, Leader) else None
        if (isinstance(role, Leader) and known is not None
                and accepts(self.directories, src, known.directory_id)):
            self._update_progress(role, src, fetch_ms=now_ms)  # alive, for check quorum
        effects.append(Send(src, FetchSnapshotResponse(
            ErrorCode.NONE, self.epoch, self.node_id, req.snapshot_end_offset,
            req.snapshot_epoch, size, req.position)))

    def _on_fetch_snapshot_response(self, src: int, resp: FetchSnapshotResponse, now_ms: int,
                                    effects: list[QuorumEffect]) -> None:
        self._observe(resp.leader_epoch, resp.leader_id, now_ms, effects)
        role = self.role
        if (not isinstance(role, Follower) or role.epoch != resp.leader_epoch
                or role.leader_id != src or role.fetch_sent_ms < 0):
            return
        if resp.error is not ErrorCode.NONE:  # back to fetching: it names the current snapshot
            self.role = replace(role, fetch_sent_ms=-1, snapshot=None,
                                next_fetch_ms=now_ms + self.config.retry_backoff_ms)
            return
        self.role = replace(role, has_fetched=True, fetch_sent_ms=now_ms,
                            fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms)
        effects.append(AppendSnapshotChunk(resp))

    def after_snapshot_chunk(self, log: QuorumLogView, resp: FetchSnapshotResponse,
                             received: int, complete: bool, now_ms: int) -> list[QuorumEffect]:
        """After ``AppendSnapshotChunk``: ``received`` bytes of the snapshot are stored; when
        ``complete`` the log restarts at its end offset, which is committed (a snapshot holds
        only committed records), and plain fetching resumes from there."""
        effects: list[QuorumEffect] = []
        role = self.role
        if not isinstance(role, Follower):
            return effects
        if not complete:
            self.role = replace(role, fetch_sent_ms=now_ms, snapshot=(
                resp.snapshot_end_offset, resp.snapshot_epoch, received))
            effects.append(Send(role.leader_id, FetchSnapshotRequest(
                self.node_id, role.epoch, resp.snapshot_end_offset, resp.snapshot_epoch,
                received)))
            return effects
        self.snapshot_written(resp.snapshot_end_offset, resp.snapshot_epoch, resp.size)
        self.refresh_voters(log)
        self.role = replace(role, fetch_sent_ms=-1, next_fetch_ms=now_ms, snapshot=None)
        new = min(max(self.high_watermark, resp.snapshot_end_offset), log.log_end_offset)
        if new != self.high_watermark:
            old, self.high_watermark = self.high_watermark, new
            effects.append(HighWatermarkChanged(old, new))
        return effects

    def after_follower_append(self, log: QuorumLogView,
                              resp: QuorumFetchResponse) -> list[QuorumEffect]:
        """Follower HW = min(leader HW, own end offset), never moved back by a late answer."""
        self.refresh_voters(log)  # a voter_set record just appended is in force
        new = max(self.high_watermark, min(resp.high_watermark, log.log_end_offset))
        if new == self.high_watermark:
            return []
        old, self.high_watermark = self.high_watermark, new
        return [HighWatermarkChanged(old, new)]

    def after_truncate(self, log: QuorumLogView) -> list[QuorumEffect]:
        """HW <= LEO. (A committed record is never cut: the simulator checks that.) A
        ``voter_set`` record cut is no longer in force."""
        effects: list[QuorumEffect] = []
        self._set_voter_sets(truncated(self.voter_sets, log.log_end_offset), log, effects)
        if self.high_watermark <= log.log_end_offset:
            return effects
        old, self.high_watermark = self.high_watermark, log.log_end_offset
        effects.append(HighWatermarkChanged(old, self.high_watermark))
        return effects
