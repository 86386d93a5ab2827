"""One voter of the checked quorum: its value, and the running code rebuilt from it.

A ``VoterValue`` is what the checker stores: the voter's log and epoch cache (all of it
durable between steps: the driver flushes every append), its ``quorum-state`` file, and — while
its process runs — the ``QuorumCore``'s role and high watermark. ``run`` rebuilds a real
``QuorumCore`` and ``QuorumDriver`` from a value, performs one event through them (a message
arrives, a timer fires, the active controller writes, the process starts, its leader's
connection closes) and reads the value back, with every message the voter sent. Nothing here
decides how the voter reacts: that is the core's and the driver's code, the controller's own.

**Time.** Every call but a timer's gets ``now_ms`` = 0 and the core's configuration makes every
timeout 1 ms; after each step a role's timestamps are replaced by canonical ones
(``canonical_role``) so that a timer firing at ``now_ms`` = 1 does what a retry timer does
(send the next fetch, resend votes, EndQuorumEpoch or BeginQuorumEpoch) and at ``now_ms`` = 2
what an expired election, fetch or check-quorum timeout does. So any timer may fire between any
two steps, as when any amount of time may pass: the checked behaviours include every timing
the real voter could see (a leader's check quorum always finds its last fetches too old — the
network may have delayed them all). The random part of the election timeout is dropped
(``NoJitter``): with time abstracted it only decides *when*.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from floodmark.controller import (
    ElectionState,
    Follower,
    Leader,
    QuorumConfig,
    QuorumCore,
    QuorumDriver,
    QuorumMessage,
    Role,
    RoleChanged,
    leader_of,
    voted_for,
)
from floodmark.mc.quorum.log import Batches, Crashed, Entry, IoPoints, MetadataModelLog
from floodmark.replication import EpochCache

CachePairs = tuple[tuple[int, int], ...]

RETRY_MS = 1
"""``now_ms`` of a retry timer (next fetch, resent requests) after a canonical step."""
TIMEOUT_MS = 2
"""``now_ms`` of an expired election, fetch or check-quorum timeout."""
TIMER_TIMES = (RETRY_MS, TIMEOUT_MS)
_CANONICAL_TIMES = {
    "election_deadline_ms": TIMEOUT_MS,
    "fetch_deadline_ms": TIMEOUT_MS,
    "check_quorum_deadline_ms": TIMEOUT_MS,
    "next_retry_ms": RETRY_MS,
    "next_fetch_ms": RETRY_MS,
    "next_begin_epoch_ms": RETRY_MS,
}


def quorum_config(node_id: int, voters: int) -> QuorumConfig:
    """The core's settings in the model: every timeout 1 ms (see the module docstring);
    ``voters``: the bootstrap voter set is nodes 1..voters (the others are observers)."""
    return QuorumConfig(node_id, tuple(range(1, voters + 1)), election_timeout_ms=1,
                        fetch_timeout_ms=1, election_backoff_max_ms=0, request_timeout_ms=1,
                        retry_backoff_ms=0, fetch_idle_backoff_ms=0)


class NoJitter(random.Random):
    """The core's random source in the model: always the low end of a range."""

    def randint(self, a: int, b: int) -> int:
        return a


NO_JITTER = NoJitter(0)  # stateless: one for every core


class VoterValue(NamedTuple):
    log: tuple[Entry, ...]
    cache: CachePairs
    stored: ElectionState
    """The ``quorum-state`` file."""
    role: Role | None
    """None: the process is down (only the log and ``quorum-state`` remain)."""
    high_watermark: int

    @property
    def alive(self) -> bool:
        return self.role is not None

    @property
    def is_leader(self) -> bool:
        return isinstance(self.role, Leader)

    @property
    def epoch(self) -> int:
        return self.role.epoch if self.role is not None else self.stored.epoch

    def entries(self) -> dict[int, Entry]:
        return dict(enumerate(self.log))


EMPTY = VoterValue((), (), ElectionState(), None, 0)


def canonical_role(role: Role) -> Role:
    """The role with its timestamps replaced (see "Time" in the module docstring): pending
    timers at their canonical instants, a fetch in flight sent at 0, a voter's last fetch (as
    the leader saw it) long enough ago that check quorum does not count it."""
    changes: dict[str, object] = {name: value for name, value in _CANONICAL_TIMES.items()
                                  if hasattr(role, name)}
    if isinstance(role, Follower) and role.fetch_sent_ms >= 0:
        changes["fetch_sent_ms"] = 0
    if isinstance(role, Leader):
        changes["progress"] = tuple(replace(p, last_fetch_ms=min(p.last_fetch_ms, 0))
                                    for p in role.progress)
        changes["observers"] = tuple(replace(p, last_fetch_ms=min(p.last_fetch_ms, 0))
                                     for p in role.observers)
    return replace(role, **changes)  # type: ignore[arg-type]


@dataclass(slots=True)
class ModelStateFile:
    """The ``quorum-state`` file: durable once ``write`` returns (``QuorumStateFile``)."""

    state: ElectionState
    io: IoPoints

    def write(self, state: ElectionState) -> None:
        self.io.point()
        self.state = state


Sent = tuple[int, QuorumMessage, bytes]
"""A message a step sent: (destination, message, records beside it)."""


@dataclass(slots=True)
class ModelPorts:
    io: IoPoints
    sent: list[Sent] = field(default_factory=list)

    def send(self, destination: int, message: QuorumMessage, records: bytes) -> None:
        self.io.point()
        self.sent.append((destination, message, bytes(records)))

    def high_watermark_changed(self, old: int, new: int) -> None:
        pass  # the HW is read back from the core

    def role_changed(self, change: RoleChanged) -> None:
        pass  # the role is read back from the core


# Events a voter can undergo (the model's environment chooses them).
class Deliver(NamedTuple):
    src: int
    message: QuorumMessage
    records: bytes


class Tick(NamedTuple):
    now_ms: int


class Write(NamedTuple):
    name: str


class Start(NamedTuple):
    pass


class LeaderGone(NamedTuple):
    """The shell saw the connection to ``leader_id`` close (``leader_disconnected``)."""

    leader_id: int


class ChangeVoters(NamedTuple):
    """An operator's AddRaftVoter (``add``) or RemoveRaftVoter for ``voter_id`` reaches the
    voter (the core refuses it unless it leads and the change is allowed)."""

    add: bool
    voter_id: int


class UpdateVoter(NamedTuple):
    """Voter ``voter_id``'s UpdateRaftVoter (a new endpoint, ``c<id>'``) reaches the voter
    (the core refuses it unless it leads and the change is allowed)."""

    voter_id: int


Event = Deliver | Tick | Write | Start | LeaderGone | ChangeVoters | UpdateVoter


class Outcome(NamedTuple):
    value: VoterValue
    sent: tuple[Sent, ...]
    crashed: bool


def _live(node_id: int, voters: int, value: VoterValue, batches: Batches, io: IoPoints,
          fetch_max_bytes: int) -> tuple[QuorumDriver, MetadataModelLog, ModelStateFile,
                                         ModelPorts]:
    config = quorum_config(node_id, voters)
    role = value.role
    if role is None:  # a process starting: the core reads the quorum-state file
        core = QuorumCore(config, value.stored, NO_JITTER)
    else:  # a running core: its in-memory election state is its role's
        core = QuorumCore(config, ElectionState(role.epoch, leader_of(role, node_id),
                                                voted_for(role, node_id),
                                                value.stored.directories,
                                                value.stored.voter_sets), NO_JITTER)
        core.role = role
        core.high_watermark = value.high_watermark
    log = MetadataModelLog(list(value.log), EpochCache(value.cache), batches, io,
                           recovery_point=len(value.log))
    if role is not None:
        core.refresh_voters(log)
    state_file = ModelStateFile(value.stored, io)
    ports = ModelPorts(io)
    driver = QuorumDriver(core, log, state_file, ports, fetch_max_bytes=fetch_max_bytes)
    return driver, log, state_file, ports


def run(node_id: int, voters: int, value: VoterValue, event: Event, batches: Batches,
        fetch_max_bytes: int, crash_at: int | None = None) -> tuple[list[Outcome], int]:
    """Perform ``event`` on the voter of ``value``: its outcomes and the number of durable
    operations the event performed. Without ``crash_at``: the one outcome of the whole step.
    With it: the voter crashes before its ``crash_at``-th operation — one outcome per log
    length its disk may give back (every flushed entry, then any prefix of the rest)."""
    io = IoPoints(crash_at)
    driver, log, state_file, ports = _live(node_id, voters, value, batches, io,
                                           fetch_max_bytes)
    try:
        if isinstance(event, Deliver):
            driver.deliver(event.src, event.message, event.records, 0)
        elif isinstance(event, Tick):
            driver.tick(event.now_ms)
        elif isinstance(event, Write):
            driver.append_as_leader([event.name.encode()], 0)
        elif isinstance(event, Start):
            driver.start(0)
        elif isinstance(event, ChangeVoters):
            change = driver.add_voter if event.add else driver.remove_voter
            change(event.voter_id, "", 0)
        elif isinstance(event, UpdateVoter):
            driver.update_voter(event.voter_id, "", f"c{event.voter_id}'", 0)
        else:
            driver.leader_disconnected(event.leader_id, 0)
    except Crashed:
        return crashed_outcomes(log, state_file.state, tuple(ports.sent)), io.count
    role = driver.core.role
    assert log.recovery_point == log.log_end_offset, "the driver flushes every append"
    after = VoterValue(tuple(log.entries), cache_pairs(log.epoch_cache), state_file.state,
                       canonical_role(role), driver.core.high_watermark)
    return [Outcome(after, tuple(ports.sent), False)], io.count


def crashed_outcomes(log: MetadataModelLog, stored: ElectionState,
                     sent: tuple[Sent, ...]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    for keep in range(log.recovery_point, log.log_end_offset + 1):
        cache = EpochCache(log.epoch_cache.entries())
        cache.truncate_from_end(keep)
        outcomes.append(Outcome(VoterValue(tuple(log.entries[:keep]), cache_pairs(cache), stored,
                                           None, 0), sent, True))
    return outcomes


def crash_between_steps(value: VoterValue) -> VoterValue:
    """The process dies between two steps: everything is flushed then, so only the role and
    the high watermark (memory) are lost."""
    return value._replace(role=None, high_watermark=0)


def cache_pairs(cache: EpochCache) -> CachePairs:
    return tuple((e.epoch, e.start_offset) for e in cache.entries())
