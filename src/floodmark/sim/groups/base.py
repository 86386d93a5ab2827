"""What the two group worlds (``world.GroupWorld``, ``mixed.MixedGroupWorld``) share: the
runner's bookkeeping (virtual time, the trace, violations), classic members that behave like
the Java consumer with the eager protocol (JoinGroup, the leader's round-robin assignment in
the consumer protocol's encoding, SyncGroup, heartbeats, commits before giving partitions up),
consuming and committing under ``spec.groups``' checks, static members restarted while their
old process lingers as a zombie, a failover's answer to requests in flight, and the random
run's dispatch of steps. Each world brings its coordinator: the hooks below.
"""

from __future__ import annotations

import abc
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar, Generic, Protocol, TypeVar

from floodmark.broker import (
    AnswerJoin,
    AnswerSync,
    ClassicEffect,
    ClassicGroupConfig,
    ClassicGroupCore,
    GroupEmptied,
    JoinGroup,
    JoinResult,
    StoreGroup,
    SyncGroup,
)
from floodmark.client import encode_subscription
from floodmark.errors import ErrorCode
from floodmark.spec import groups as spec
from floodmark.wire import decode_assignment, encode_assignment

GROUP = "g"
TOPIC = "t"
PROTOCOL = "range"


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str
    detail: str
    step: int


@dataclass
class SimMember:
    """A consumer process."""

    name: str
    instance_id: str | None
    member_id: str = ""
    generation: int = -1  # a classic member's generation, a consumer member's member epoch
    joining: int | None = None  # request id of a JoinGroup parked in the classic core
    syncing: int | None = None  # and of its SyncGroup
    owned: frozenset[int] = frozenset()
    owned_generation: int = -1  # the generation (member epoch) ``owned`` was given in
    positions: dict[int, int] = field(default_factory=dict)
    running: bool = True
    zombie: bool = False  # an old incarnation of a static member that did not die

    @property
    def idle(self) -> bool:
        return self.running and self.joining is None and self.syncing is None


class WorldConfig(Protocol):
    @property
    def members(self) -> int: ...
    @property
    def static_members(self) -> int: ...
    @property
    def partitions(self) -> int: ...
    @property
    def session_timeout_ms(self) -> int: ...
    @property
    def rebalance_timeout_ms(self) -> int: ...
    @property
    def max_trace(self) -> int: ...


M = TypeVar("M", bound=SimMember)


class BaseGroupWorld(abc.ABC, Generic[M]):
    """One group's members and a coordinator, step by step, with virtual time."""

    # action -> weight: mostly the members' routine, now and then a fault
    ACTIONS: ClassVar[Mapping[str, float]]

    def __init__(self, seed: int, config: WorldConfig, members: list[M],
                 initial_rebalance_delay_ms: int = 0) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now_ms = 0
        self.steps = 0
        self.members = members
        self.zombies: list[M] = []
        self.answers: deque[AnswerJoin | AnswerSync] = deque()
        self.stores: deque[StoreGroup] = deque()  # classic stores: not yet acknowledged
        self.committed: dict[int, int] = {}  # partition -> committed offset (replicated)
        self.failovers = self.commits = 0
        self.violations: list[Violation] = []
        self.trace: deque[str] = deque(maxlen=config.max_trace)
        self._world_config = config
        self._initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._request_ids = 0
        self.classic = self._new_classic()

    def _new_classic(self) -> ClassicGroupCore:
        """A fresh classic core (a new coordinator), storing its groups."""
        return ClassicGroupCore(ClassicGroupConfig(self._initial_rebalance_delay_ms, 1, 60_000,
                                                   store_groups=True),
                                random.Random(self.rng.getrandbits(64)))

    # -- the hooks: each world's coordinator --------------------------------------------------
    @abc.abstractmethod
    def join(self, m: M) -> None: ...

    @abc.abstractmethod
    def heartbeat(self, m: M) -> None: ...

    @abc.abstractmethod
    def leave(self, m: M) -> None: ...

    @abc.abstractmethod
    def advance(self, ms: int) -> None: ...

    @abc.abstractmethod
    def store_done(self, ok: bool) -> None: ...

    @abc.abstractmethod
    def failover(self) -> None: ...

    @abc.abstractmethod
    def _fresh(self, m: M, switch: bool) -> M:
        """A new process for ``m``'s place (``switch``: speaking the other protocol)."""

    @abc.abstractmethod
    def _store(self, effect: StoreGroup) -> None:
        """The classic core asks to store its group's record."""

    @abc.abstractmethod
    def _commit_error(self, m: M) -> ErrorCode:
        """May ``m`` commit now, as the coordinator says (no side effect)?"""

    @abc.abstractmethod
    def _validate_commit(self, m: M) -> ErrorCode:
        """``m``'s OffsetCommit, as the coordinator checks it."""

    @abc.abstractmethod
    def _current_generation(self, m: M) -> int | None:
        """The coordinator's generation (classic) or ``m``'s member epoch (consumer group)."""

    def _joined(self, m: M, r: JoinResult) -> None:
        """A successful JoinGroup answer: the member syncs."""
        self._sync(m, r)

    def _member_id_required(self, m: M) -> None:
        """MEMBER_ID_REQUIRED (KIP-394): the member has its id for its next JoinGroup."""

    # -- the runner's side ---------------------------------------------------------------------
    def _note(self, text: str) -> None:
        self.trace.append(f"{self.now_ms:>7} {text}")

    def _violate(self, invariant: str, detail: str) -> None:
        self.violations.append(Violation(invariant, detail, self.steps))
        self._note(f"VIOLATION {invariant}: {detail}")

    def _next_request_id(self) -> int:
        self._request_ids += 1
        return self._request_ids

    def _apply(self, effects: list[ClassicEffect]) -> None:
        for e in effects:
            if isinstance(e, AnswerJoin | AnswerSync):
                self.answers.append(e)
            elif isinstance(e, StoreGroup):
                self._store(e)
            elif isinstance(e, GroupEmptied):
                self._note("group emptied")

    def _tick_classic(self) -> None:
        deadline = self.classic.next_deadline_ms()
        if deadline is not None and deadline <= self.now_ms:
            self._apply(self.classic.tick(self.now_ms))

    def _in_flight_lost(self, landed: int | None) -> tuple[list[StoreGroup], list[StoreGroup]]:
        """The coordinator's broker dies: of the classic stores in flight a prefix of
        ``landed`` (drawn when None) reaches the log, the rest is lost (returned: landed,
        lost); requests in flight are NOT_COORDINATOR."""
        stores = list(self.stores)
        if landed is None:
            landed = self.rng.randint(0, len(stores))
        self.stores.clear()
        self.answers.clear()
        for m in self._all():
            if m.joining is not None:
                m.joining = None
                self._on_join(m, JoinResult(ErrorCode.NOT_COORDINATOR, member_id=m.member_id))
            if m.syncing is not None:
                m.syncing = None
                self._on_sync(m, ErrorCode.NOT_COORDINATOR, frozenset())
        self.failovers += 1
        return stores[:landed], stores[landed:]

    # -- the members' side ---------------------------------------------------------------------
    def _all(self) -> list[M]:
        return [*self.members, *self.zombies]

    def _subscription(self) -> bytes:
        return encode_subscription([TOPIC])

    def _give_up(self, m: M, commit: bool) -> None:
        if commit:
            self._commit(m, "revoke")
        m.owned, m.owned_generation, m.positions = frozenset(), -1, {}

    def _classic_join(self, m: M) -> None:
        """A JoinGroup to the classic core (eager: commit, then give everything up)."""
        self._give_up(m, commit=True)
        m.joining = self._next_request_id()
        self._note(f"{m.name} JoinGroup member={m.member_id or '-'}")
        c = self._world_config
        self._apply(self.classic.join(JoinGroup(
            m.joining, GROUP, m.member_id, m.instance_id, m.name, "/sim",
            c.session_timeout_ms, c.rebalance_timeout_ms, "consumer",
            ((PROTOCOL, self._subscription()),), True), self.now_ms))

    def _sync(self, m: M, r: JoinResult) -> None:
        """A SyncGroup to the classic core; the leader assigns round robin."""
        assignments: tuple[tuple[str, bytes], ...] = ()
        if r.leader == r.member_id:
            ids = sorted(member_id for member_id, _, _ in r.members)
            partitions = self._world_config.partitions
            assignments = tuple(
                (member_id, encode_assignment({TOPIC: tuple(range(i, partitions, len(ids)))},
                                              0))
                for i, member_id in enumerate(ids))
        m.syncing = self._next_request_id()
        self._note(f"{m.name} SyncGroup generation={m.generation}"
                   f"{' (leader)' if assignments else ''}")
        self._apply(self.classic.sync(SyncGroup(m.syncing, GROUP, m.member_id, m.generation,
                                                assignments, m.instance_id), self.now_ms))

    def deliver(self) -> None:
        """The oldest classic answer reaches its member."""
        if not self.answers:
            return
        a = self.answers.popleft()
        for m in self._all():
            if isinstance(a, AnswerJoin) and m.joining == a.request_id:
                m.joining = None
                self._note(f"{m.name} JoinGroup answer {a.result.error.name} "
                           f"generation={a.result.generation_id}")
                self._on_join(m, a.result)
                return
            if isinstance(a, AnswerSync) and m.syncing == a.request_id:
                m.syncing = None
                parts = frozenset(decode_assignment(a.assignment).get(TOPIC, ())) \
                    if a.error is ErrorCode.NONE else frozenset()
                self._note(f"{m.name} SyncGroup answer {a.error.name} {sorted(parts)}")
                self._on_sync(m, a.error, parts)
                return

    def _on_join(self, m: M, r: JoinResult) -> None:
        if r.error is ErrorCode.NONE:
            m.member_id, m.generation = r.member_id, r.generation_id
            self._joined(m, r)
        elif r.error is ErrorCode.MEMBER_ID_REQUIRED:
            m.member_id = r.member_id
            self._member_id_required(m)
        elif r.error is ErrorCode.UNKNOWN_MEMBER_ID:
            m.member_id = ""
        elif r.error is ErrorCode.FENCED_INSTANCE_ID:
            m.running = False  # the Java consumer dies fenced

    def _on_sync(self, m: M, error: ErrorCode, partitions: frozenset[int]) -> None:
        if error is ErrorCode.NONE:
            m.owned, m.owned_generation = partitions, m.generation
            m.positions = {p: self.committed.get(p, 0) for p in partitions}
        elif error is ErrorCode.UNKNOWN_MEMBER_ID:
            m.member_id = ""
        elif error is ErrorCode.FENCED_INSTANCE_ID:
            m.running = False

    def _on_heartbeat(self, m: M, err: ErrorCode) -> None:
        """A classic member's Heartbeat answer."""
        if err is not ErrorCode.NONE:
            self._note(f"{m.name} Heartbeat {err.name}")
        if err is ErrorCode.FENCED_INSTANCE_ID or (m.zombie and err is not ErrorCode.NONE):
            m.running = False
        elif err is ErrorCode.UNKNOWN_MEMBER_ID:
            m.member_id, m.generation = "", -1
            self.join(m)
        elif err is not ErrorCode.NONE:
            self.join(m)  # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION: rejoin

    def consume(self, m: M) -> None:
        if m.running:
            for p in m.positions:
                m.positions[p] += self.rng.randint(0, 3)

    def commit(self, m: M) -> None:
        self._commit(m, "commit")
        self._check()

    def _commit(self, m: M, why: str) -> None:
        if not m.running or not m.owned:
            return
        err = self._validate_commit(m)
        self._note(f"{m.name} OffsetCommit ({why}) generation={m.owned_generation} "
                   f"{dict(sorted(m.positions.items()))}: {err.name}")
        if err is not ErrorCode.NONE:
            return
        current = self._current_generation(m)
        if current is None or spec.stale_commit(m.owned_generation, current):
            self._violate(spec.STALE_GENERATION_COMMIT,
                          f"{m.name} committed under {m.owned_generation}, the coordinator "
                          f"is at {current}")
        back = spec.committed_backwards(self.committed, m.positions)
        if back is not None:
            p, before, after = back
            self._violate(spec.COMMITTED_BACKWARDS,
                          f"{m.name} moved partition {p} from {before} back to {after}")
        self.committed.update(m.positions)
        self.commits += 1

    def crash(self, m: M) -> None:
        """The process stops without a word (its requests in flight are lost)."""
        if m.running and not m.zombie:
            self._note(f"{m.name} crashes")
            m.running = False

    def restart(self, m: M, switch: bool = False) -> None:
        """A stopped member starts again: a dynamic one as a new member, a static one under
        its instance id. A static member may also restart while its old process lives on
        (a zombie, paused at the wrong moment): the coordinator must fence the old one."""
        if m.zombie:
            return
        if m.running:
            if m.instance_id is None or not m.member_id:
                return
            self.zombies.append(replace(m, name=f"{m.name}-zombie{len(self.zombies)}",
                                        positions=dict(m.positions), zombie=True))
        self._note(f"{m.name} restarts")
        fresh = self._fresh(m, switch)
        self.members[self.members.index(m)] = fresh
        self.join(fresh)

    # -- invariants ----------------------------------------------------------------------------
    def _check(self) -> None:
        committers = {m.name: m.owned for m in self._all() if m.running and m.owned
                      and self._commit_error(m) is ErrorCode.NONE}
        twice = spec.owned_twice(committers)
        if twice is not None:
            p, a, b = twice
            self._violate(spec.OWNED_TWICE, f"partition {p} owned by {a} and {b}, both "
                                            f"accepted as committers")

    # -- a random run --------------------------------------------------------------------------
    def _member_actions(self) -> dict[str, Callable[[M], None]]:
        return {"join": lambda m: self.join(m) if m.running else self.restart(m),
                "heartbeat": self.heartbeat, "consume": self.consume, "commit": self.commit,
                "leave": self.leave, "crash": self.crash, "restart": self.restart}

    def step(self, action: str, who: int, amount_ms: int) -> None:
        self.steps += 1
        m = self.members[who % len(self.members)]
        if action in ("consume", "commit") and self.zombies and who < 0:
            # A zombie is a paused process: when it runs again it commits what it consumed
            # before it would notice anything (its heartbeat thread was paused too).
            m = self.zombies[-who % len(self.zombies)]
        if action == "deliver":
            self.deliver()
        elif action == "advance":
            self.advance(amount_ms)
        elif action in ("store", "store_fail"):
            self.store_done(action == "store")
        elif action == "failover":
            self.failover()
        else:
            self._member_actions()[action](m)

    def run_random(self, steps: int, failover_weight: float = 0.005) -> None:
        actions, weights = list(self.ACTIONS), list(self.ACTIONS.values())
        for _ in range(steps):
            action = "failover" if self.rng.random() < failover_weight else \
                self.rng.choices(actions, weights)[0]
            who = self.rng.randrange(-2, len(self.members))
            self.step(action, who, self.rng.choice((10, 20, 50, 100, 400)))
            if self.violations:
                return
