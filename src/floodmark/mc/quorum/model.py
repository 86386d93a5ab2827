"""The transition system of the controller quorum the checker explores.

N voters (``c1``…) run the controller's ``QuorumCore`` through its ``QuorumDriver``
(``floodmark.mc.quorum.voter``); the model only chooses which event happens next:

* ``Deliver`` a message in flight to a running voter, or ``Drop`` it (the network may lose,
  delay and reorder anything; a crash resets the crashed voter's connections, so what was in
  flight to it is gone);
* ``Timer``: one of a running voter's timers fires (a retry, or an election, fetch or
  check-quorum timeout; see "Time" in ``voter``);
* ``Write``: a voter that believes it leads appends the next client record (``m0``, ``m1``…;
  at most ``max_records`` in all) — a stale leader may write too;
* ``LeaderGone``: a follower's connection to its leader closes (a reset, a dead process);
* ``AddVoter`` / ``RemoveVoter``: an operator's AddRaftVoter or RemoveRaftVoter for any node
  reaches a voter that believes it leads (KIP-853; at most ``max_changes`` accepted in all; the
  core refuses what Kafka refuses, and a refused request is no step). With
  ``bootstrap_voters`` < ``voters`` the nodes above it start as observers, ready to be added;
* ``UpdateVoter`` (with ``updates``): a voter's UpdateRaftVoter, its new endpoint, reaches a
  voter that believes it leads (from the same ``max_changes``);
* ``Crash`` a running voter between steps (at most ``max_crashes`` crashes in all), or in the
  middle of any of the steps above: before its k-th durable operation, keeping of its log what
  its disk holds then (``voter.crashed_outcomes``); ``Start`` a crashed voter again.

Bounds: epochs above ``max_epoch`` are not entered (a step that would is not taken), at most
``max_in_flight`` messages are in flight (when a step sends more than fit, each choice of the
sends that fit is a successor: the network lost the others, which it may do anyway). The state also keeps two histories: every (epoch, leader) there ever was, and every
record ever below a leader's HW, for the invariants (``floodmark.mc.quorum.invariants``).

Values are interned: a state is a tuple of small ints, and every voter step is computed once
per (voter, value, event) and memoised.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from floodmark.controller import Follower, Leader, QuorumMessage
from floodmark.mc.quorum.log import Batches, Entry
from floodmark.mc.quorum.voter import (
    EMPTY,
    TIMER_TIMES,
    ChangeVoters,
    Deliver,
    Event,
    LeaderGone,
    Outcome,
    Start,
    Tick,
    UpdateVoter,
    VoterValue,
    Write,
    crash_between_steps,
    run,
)

Message = tuple[int, int, QuorumMessage, bytes]
"""In flight: (source, destination, message, the records beside it)."""
Committed = tuple[tuple[int, int, str], ...]
"""(offset, epoch, name) of every record ever below a leader's HW, sorted."""
Leaders = tuple[tuple[int, int], ...]
"""(epoch, voter) of every leader there ever was, sorted."""


@dataclass(frozen=True, slots=True)
class QuorumModelConfig:
    voters: int = 2
    max_epoch: int = 2
    max_records: int = 1
    max_crashes: int = 0
    max_in_flight: int = 1
    fetch_max_bytes: int = 1
    """Bytes per fetch answer (at least one batch): 1 moves one record per fetch, which reaches
    a voter holding an old epoch's record without the new leader's first one."""
    bootstrap_voters: int = 0
    """Nodes 1..this form the bootstrap voter set (0: all ``voters``); the rest observe."""
    max_changes: int = 0
    """Voter set changes (AddRaftVoter, RemoveRaftVoter) accepted in all."""
    updates: bool = False
    """UpdateRaftVoter (a voter's new endpoint) among those changes too."""

    @property
    def bootstrap(self) -> int:
        return self.bootstrap_voters or self.voters

    def __post_init__(self) -> None:
        if not 1 <= self.voters <= 5:
            raise ValueError(f"--voters must be 1..5, got {self.voters}")
        if self.max_epoch < 1:
            raise ValueError(f"--max-epoch must be >= 1, got {self.max_epoch}")
        if self.max_records < 0 or self.max_crashes < 0:
            raise ValueError("--max-records and --max-crashes must be >= 0")
        if self.max_in_flight < 1:
            raise ValueError(f"--max-in-flight must be >= 1, got {self.max_in_flight}")
        if not 0 <= self.bootstrap_voters <= self.voters or self.max_changes < 0:
            raise ValueError("--bootstrap-voters must be 0..--voters and --max-changes >= 0")


class QuorumState(NamedTuple):
    voters: tuple[int, ...]
    """Interned ``VoterValue`` id per voter (voter ``i + 1`` at index ``i``)."""
    network: tuple[int, ...]
    """Interned ``Message`` ids in flight, sorted (a multiset)."""
    writes: int
    crashes_left: int
    leaders: Leaders
    committed: Committed
    changes_left: int = 0


class Action(NamedTuple):
    """A transition label: ``kind`` at ``voter`` (1-based), ``arg`` kind-specific (a timer's
    ``now_ms``, a record number, a leader id), ``message`` the one delivered or lost;
    ``crash_at`` >= 0: the voter crashed before that durable operation of the step, keeping
    ``keep`` log entries; ``kept``: the sends that fit in the network when not all did.
    Values only, so a fresh model can replay a trace."""

    kind: str
    voter: int
    arg: int = -1
    crash_at: int = -1
    keep: int = -1
    message: Message | None = None
    kept: tuple[Message, ...] | None = None


class StateView(NamedTuple):
    """A state with its ids resolved (traces, invariants, rendering)."""

    voters: tuple[VoterValue, ...]
    network: tuple[Message, ...]
    writes: int
    crashes_left: int
    leaders: Leaders
    committed: Committed
    changes_left: int = 0


class _Interned:
    __slots__ = ("ids", "values")

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.values: list[Any] = []

    def id(self, value: object) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.values)
            self.values.append(value)
        return found


class QuorumModel:
    """Initial state, successors and views for one ``QuorumModelConfig``."""

    def __init__(self, config: QuorumModelConfig) -> None:
        self.config = config
        self.n = config.voters
        self.batches = Batches()
        self._voters = _Interned()
        self._messages = _Interned()
        self._histories = _Interned()
        self._steps: dict[tuple[object, ...], tuple[tuple[Step, ...], int]] = {}
        self._alive: list[bool] = []  # per voter value id
        self._contributions: list[tuple[int, Committed]] = []
        """Per voter value id: (its epoch if it leads, else -1; the records below its HW)."""
        self._history_memo: dict[tuple[object, ...], tuple[Leaders, Committed]] = {}

    # -- values ----------------------------------------------------------------------------
    def voter(self, vid: int) -> VoterValue:
        value: VoterValue = self._voters.values[vid]
        return value

    def message(self, mid: int) -> Message:
        value: Message = self._messages.values[mid]
        return value

    def view(self, state: QuorumState) -> StateView:
        return StateView(tuple(self.voter(v) for v in state.voters),
                         tuple(self.message(m) for m in state.network), state.writes,
                         state.crashes_left, state.leaders, state.committed,
                         state.changes_left)

    def key(self, state: QuorumState) -> tuple[int, ...]:
        history = self._histories.id((state.leaders, state.committed))
        return (state.writes, state.crashes_left, state.changes_left, history, *state.voters,
                *state.network)

    def from_key(self, key: tuple[int, ...]) -> QuorumState:
        leaders, committed = self._histories.values[key[3]]
        return QuorumState(key[4:4 + self.n], key[4 + self.n:], key[0], key[1], leaders,
                           committed, key[2])

    # -- the voters' code, memoised ----------------------------------------------------------
    def _run(self, i: int, vid: int, event_key: tuple[object, ...], event: Event,
             crash_at: int = -1) -> tuple[tuple[Step, ...], int]:
        """Voter ``i`` of value ``vid`` undergoes ``event``: its outcomes as ids (None beyond
        the epoch bound) and how many durable operations the whole step performs."""
        memo_key = (i, vid, event_key, crash_at)
        found = self._steps.get(memo_key)
        if found is None:
            outcomes, operations = run(i + 1, self.config.bootstrap, self.voter(vid), event,
                                       self.batches,
                                       self.config.fetch_max_bytes,
                                       None if crash_at < 0 else crash_at)
            found = self._steps[memo_key] = (
                tuple(self._step(i, o) for o in outcomes), operations)
        return found

    def _step(self, i: int, outcome: Outcome) -> Step:
        value = outcome.value
        if value.epoch > self.config.max_epoch or value.stored.epoch > self.config.max_epoch:
            return None
        sent = tuple(self._messages.id((i + 1, dst, message, records))
                     for dst, message, records in outcome.sent)
        return self._voter_id(value), sent, outcome.crashed

    def _voter_id(self, value: VoterValue) -> int:
        vid = self._voters.id(value)
        if vid == len(self._alive):
            self._alive.append(value.alive)
            contribution: tuple[int, Committed] = (-1, ())
            if isinstance(value.role, Leader):
                contribution = (value.role.epoch, tuple(
                    (o, *value.log[o]) for o in range(value.high_watermark)))
            self._contributions.append(contribution)
        return vid

    # -- initial state ---------------------------------------------------------------------
    def initial_state(self) -> QuorumState:
        """Every voter starts on an empty disk (``Start``), nothing in flight."""
        empty = self._voter_id(EMPTY)
        state = QuorumState((empty,) * self.n, (), 0, self.config.max_crashes, (), (),
                            self.config.max_changes)
        for i in range(self.n):
            (step,), _ = self._run(i, empty, ("start",), Start())
            assert step is not None
            state = self._after(state, i, step)[0][1]
        return state

    # -- successors --------------------------------------------------------------------------
    def successors(self, state: QuorumState) -> Iterator[tuple[Action, QuorumState]]:
        seen: set[int] = set()
        for mid in state.network:
            if mid in seen:
                continue
            seen.add(mid)
            message = self.message(mid)
            src, dst, body, records = message
            rest = list(state.network)
            rest.remove(mid)
            dropped = state._replace(network=tuple(rest))
            yield Action("Drop", dst, message=message), dropped
            i = dst - 1
            if self._alive[state.voters[i]]:
                yield from self._steps_of(dropped, i, ("deliver", mid),
                                          Deliver(src, body, records),
                                          Action("Deliver", dst, message=message))
        for i, vid in enumerate(state.voters):
            if not self._alive[vid]:
                yield from self._steps_of(state, i, ("start",), Start(), Action("Start", i + 1))
                continue
            for now_ms in TIMER_TIMES:
                yield from self._steps_of(state, i, ("tick", now_ms), Tick(now_ms),
                                          Action("Timer", i + 1, now_ms))
            value = self.voter(vid)
            if value.is_leader and state.writes < self.config.max_records:
                nxt = state._replace(writes=state.writes + 1)
                yield from self._steps_of(nxt, i, ("write", state.writes),
                                          Write(f"m{state.writes}"),
                                          Action("Write", i + 1, state.writes))
            if value.is_leader and state.changes_left > 0:
                nxt = state._replace(changes_left=state.changes_left - 1)
                for target in range(1, self.n + 1):
                    for add in (True, False):
                        yield from self._steps_of(
                            nxt, i, ("voters", add, target), ChangeVoters(add, target),
                            Action("AddVoter" if add else "RemoveVoter", i + 1, target))
                    if self.config.updates:
                        yield from self._steps_of(
                            nxt, i, ("update", target), UpdateVoter(target),
                            Action("UpdateVoter", i + 1, target))
            role = value.role
            if isinstance(role, Follower) and not role.leader_disconnected:
                yield from self._steps_of(state, i, ("gone", role.leader_id),
                                          LeaderGone(role.leader_id),
                                          Action("LeaderGone", i + 1, role.leader_id))
            if state.crashes_left > 0:
                step = (self._voter_id(crash_between_steps(value)), (), True)
                for _kept, crashed in self._after(state, i, step):
                    yield Action("Crash", i + 1), crashed

    def _steps_of(self, state: QuorumState, i: int, event_key: tuple[object, ...],
                  event: Event, action: Action) -> Iterator[tuple[Action, QuorumState]]:
        """The successors of voter ``i`` undergoing ``event``: the whole step, and with crashes
        left, a crash before each of its durable operations but the first (a crash before the
        first is the plain ``Crash``)."""
        vid = state.voters[i]
        (step,), operations = self._run(i, vid, event_key, event)
        if step is not None and (step[0] != vid or step[1]):
            for kept, nxt in self._after(state, i, step):
                # (``action`` as given holds kept=None: only a choice of sends changes it)
                yield (action if kept is None else action._replace(kept=kept)), nxt
        if state.crashes_left <= 0:
            return
        for crash_at in range(1, operations):
            steps, _ = self._run(i, vid, event_key, event, crash_at)
            for crashed in steps:
                if crashed is None:
                    continue
                keep = len(self.voter(crashed[0]).log)
                for kept, nxt in self._after(state, i, crashed):
                    yield action._replace(crash_at=crash_at, keep=keep, kept=kept), nxt

    def _after(self, state: QuorumState, i: int, step: tuple[int, tuple[int, ...], bool]
               ) -> list[tuple[tuple[Message, ...] | None, QuorumState]]:
        """The states after voter ``i``'s step: its sends to running voters added — when more
        than ``max_in_flight`` allows, one state per choice of the sends that fit (the network
        lost the others; the choice is returned with it) —, a crash's resets applied, the
        histories updated."""
        vid, sent, crashed = step
        voters = (*state.voters[:i], vid, *state.voters[i + 1:])
        network = state.network
        messages = self._messages.values
        if crashed:
            network = tuple(m for m in network if messages[m][1] != i + 1)
        added = [m for m in sent if self._alive[voters[messages[m][1] - 1]]]
        room = max(self.config.max_in_flight - len(network), 0)
        choices = [tuple(added)] if len(added) <= room else sorted(
            set(itertools.combinations(added, room)))
        leaders, committed = self._history(state.leaders, state.committed, i, vid)
        crashes_left = state.crashes_left - (1 if crashed else 0)
        return [(None if len(choices) == 1 else tuple(messages[m] for m in chosen),
                 QuorumState(voters, tuple(sorted((*network, *chosen))) if chosen else network,
                             state.writes, crashes_left, leaders, committed,
                             state.changes_left))
                for chosen in choices]

    def _history(self, leaders: Leaders, committed: Committed, i: int, vid: int
                 ) -> tuple[Leaders, Committed]:
        epoch, exposed = self._contributions[vid]
        if epoch < 0:
            return leaders, committed
        key = (leaders, committed, i, vid)
        found = self._history_memo.get(key)
        if found is None:
            new_leaders = leaders
            if (epoch, i + 1) not in leaders:
                new_leaders = tuple(sorted((*leaders, (epoch, i + 1))))
            new_committed = committed
            if not set(exposed) <= set(committed):
                new_committed = tuple(sorted(set(committed) | set(exposed)))
            found = self._history_memo[key] = (new_leaders, new_committed)
        return found


Step = tuple[int, tuple[int, ...], bool] | None
"""A voter's step as ids: (new voter value, messages sent, crashed); None: beyond the bounds."""


def committed_entries(committed: Committed) -> dict[int, Entry]:
    """The committed history as ``{offset: (epoch, name)}`` (the first one per offset)."""
    out: dict[int, Entry] = {}
    for offset, epoch, name in committed:
        out.setdefault(offset, (epoch, name))
    return out

