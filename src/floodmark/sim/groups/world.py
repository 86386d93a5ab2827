"""One classic consumer group on a simulated coordinator, step by step, with virtual time.

The coordinator is the broker's own ``ClassicGroupCore``; the world plays its runner (answers
go back to the members that asked, ``StoreGroup`` records go to a simulated ``__consumer_offsets``
log that may fail or lose them) and its members, which behave like the Java consumer with the
eager protocol: they join, the leader assigns the partitions round robin over the member list
it was given, each member syncs, heartbeats, consumes from its committed offsets, commits
(also before it rejoins, as the revoke callback), leaves, crashes silently, restarts (a static
member under its ``group.instance.id``; its old incarnation may linger as a zombie that goes on
heartbeating and committing). A failover replaces the core with a fresh one that loads the
last record the log holds; requests in flight are answered NOT_COORDINATOR.

Every step is checked against ``spec.groups``; a violation is recorded with the trace so far.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from floodmark.broker import (
    AnswerJoin,
    AnswerSync,
    ClassicEffect,
    ClassicGroupConfig,
    ClassicGroupCore,
    GroupEmptied,
    GroupRecord,
    GroupState,
    JoinGroup,
    JoinResult,
    StoreGroup,
    SyncGroup,
)
from floodmark.errors import ErrorCode
from floodmark.spec import groups as spec

GROUP = "g"
PROTOCOL = "range"


@dataclass(frozen=True, slots=True)
class GroupSimConfig:
    members: int = 4
    static_members: int = 2  # the first ones carry a group.instance.id
    partitions: int = 6
    session_timeout_ms: int = 3000
    rebalance_timeout_ms: int = 4000
    initial_rebalance_delay_ms: int = 0
    max_trace: int = 400


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
    generation: int = -1
    joining: int | None = None  # request id of its JoinGroup in flight
    syncing: int | None = None  # request id of its SyncGroup in flight
    owned: frozenset[int] = frozenset()
    owned_generation: int = -1
    positions: dict[int, int] = field(default_factory=dict)
    running: bool = True
    zombie: bool = False  # an old incarnation of a static member that did not die

    @property
    def idle(self) -> bool:
        return self.running and self.joining is None and self.syncing is None


def encode_assignment(partitions: list[int]) -> bytes:
    return ",".join(map(str, partitions)).encode()


def decode_assignment(data: bytes) -> frozenset[int]:
    return frozenset(int(x) for x in data.decode().split(",") if x)


class GroupWorld:
    def __init__(self, seed: int, config: GroupSimConfig | None = None) -> None:
        self.seed = seed
        self.config = config or GroupSimConfig()
        self.rng = random.Random(seed)
        self.now_ms = 0
        self.steps = 0
        self.core = self._new_core()
        self.members = [SimMember(f"c{i}", f"i{i}" if i < self.config.static_members else None)
                        for i in range(self.config.members)]
        self.zombies: list[SimMember] = []
        self.answers: deque[AnswerJoin | AnswerSync] = deque()
        self.stores: deque[StoreGroup] = deque()  # asked for, not yet in the log
        self.log: list[GroupRecord] = []  # the group's records in __consumer_offsets
        self.committed: dict[int, int] = {}  # partition -> committed offset (replicated)
        self.handed_out_generation = -1  # highest generation whose assignment a member got
        self.core_generation = 0
        self.failovers = 0
        self.commits = 0
        self.rebalances = 0
        self.violations: list[Violation] = []
        self.trace: deque[str] = deque(maxlen=self.config.max_trace)
        self._request_ids = 0

    def _new_core(self) -> ClassicGroupCore:
        c = self.config
        return ClassicGroupCore(ClassicGroupConfig(c.initial_rebalance_delay_ms, 1,
                                                   60_000, store_groups=True),
                                random.Random(self.rng.getrandbits(64)))

    # -- the runner's side ---------------------------------------------------------------------
    def _note(self, text: str) -> None:
        self.trace.append(f"{self.now_ms:>7} {text}")

    def _violate(self, invariant: str, detail: str) -> None:
        self.violations.append(Violation(invariant, detail, self.steps))
        self._note(f"VIOLATION {invariant}: {detail}")

    def _apply(self, effects: list[ClassicEffect]) -> None:
        for e in effects:
            if isinstance(e, AnswerJoin | AnswerSync):
                self.answers.append(e)
            elif isinstance(e, StoreGroup):
                self.stores.append(e)
            elif isinstance(e, GroupEmptied):
                self._note("group emptied")
        self._check()

    def _next_request_id(self) -> int:
        self._request_ids += 1
        return self._request_ids

    # -- the members' side ---------------------------------------------------------------------
    def _all(self) -> list[SimMember]:
        return [*self.members, *self.zombies]

    def send_join(self, m: SimMember) -> None:
        if not m.idle:
            return
        self._commit(m, "revoke")  # eager protocol: commit, then give everything up
        m.owned, m.owned_generation, m.positions = frozenset(), -1, {}
        m.joining = self._next_request_id()
        self._note(f"{m.name} JoinGroup member={m.member_id or '-'}")
        c = self.config
        self._apply(self.core.join(JoinGroup(
            m.joining, GROUP, m.member_id, m.instance_id, m.name, "/sim", c.session_timeout_ms,
            c.rebalance_timeout_ms, "consumer", ((PROTOCOL, b"sub"),), True), self.now_ms))

    def _send_sync(self, m: SimMember, result: JoinResult) -> None:
        assignments: tuple[tuple[str, bytes], ...] = ()
        if result.leader == result.member_id:
            ids = sorted(member_id for member_id, _, _ in result.members)
            assignments = tuple(
                (member_id, encode_assignment(list(range(i, self.config.partitions, len(ids)))))
                for i, member_id in enumerate(ids))
        m.syncing = self._next_request_id()
        self._note(f"{m.name} SyncGroup generation={m.generation}"
                   f"{' (leader)' if assignments else ''}")
        self._apply(self.core.sync(SyncGroup(m.syncing, GROUP, m.member_id, m.generation,
                                             assignments, m.instance_id), self.now_ms))

    def deliver(self) -> None:
        """The oldest answer reaches its member."""
        if not self.answers:
            return
        a = self.answers.popleft()
        for m in self._all():
            if isinstance(a, AnswerJoin) and m.joining == a.request_id:
                m.joining = None
                self._on_join(m, a.result)
                return
            if isinstance(a, AnswerSync) and m.syncing == a.request_id:
                m.syncing = None
                self._on_sync(m, a.error, a.assignment)
                return

    def _on_join(self, m: SimMember, r: JoinResult) -> None:
        self._note(f"{m.name} JoinGroup answer {r.error.name} generation={r.generation_id}")
        if r.error is ErrorCode.NONE:
            m.member_id, m.generation = r.member_id, r.generation_id
            self._send_sync(m, r)
        elif r.error is ErrorCode.MEMBER_ID_REQUIRED:
            m.member_id = r.member_id
        elif r.error is ErrorCode.UNKNOWN_MEMBER_ID:
            m.member_id = ""
        elif r.error is ErrorCode.FENCED_INSTANCE_ID:
            m.running = False  # the Java consumer dies fenced

    def _on_sync(self, m: SimMember, error: ErrorCode, assignment: bytes) -> None:
        self._note(f"{m.name} SyncGroup answer {error.name} {assignment.decode() or '-'}")
        if error is ErrorCode.NONE:
            m.owned, m.owned_generation = decode_assignment(assignment), m.generation
            m.positions = {p: self.committed.get(p, 0) for p in m.owned}
            self.handed_out_generation = max(self.handed_out_generation, m.generation)
        elif error is ErrorCode.UNKNOWN_MEMBER_ID:
            m.member_id = ""
        elif error is ErrorCode.FENCED_INSTANCE_ID:
            m.running = False

    def heartbeat(self, m: SimMember) -> None:
        if not m.idle or m.generation < 0:
            return
        err = self.core.heartbeat(GROUP, m.member_id, m.generation, m.instance_id, self.now_ms)
        if err is not ErrorCode.NONE:
            self._note(f"{m.name} Heartbeat {err.name}")
        if err is ErrorCode.FENCED_INSTANCE_ID or (m.zombie and err is not ErrorCode.NONE):
            m.running = False
        elif err is ErrorCode.UNKNOWN_MEMBER_ID:
            m.member_id, m.generation = "", -1
            self.send_join(m)
        elif err is not ErrorCode.NONE:
            self.send_join(m)  # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION: rejoin
        self._check()

    def consume(self, m: SimMember) -> None:
        if m.running:
            for p in m.positions:
                m.positions[p] += self.rng.randint(0, 3)

    def commit(self, m: SimMember) -> None:
        self._commit(m, "commit")
        self._check()

    def _commit(self, m: SimMember, why: str) -> None:
        if not m.running or not m.owned:
            return
        err = self.core.validate_commit(GROUP, m.member_id, m.owned_generation, m.instance_id,
                                        self.now_ms)
        self._note(f"{m.name} OffsetCommit ({why}) generation={m.owned_generation} "
                   f"{dict(sorted(m.positions.items()))}: {err.name}")
        if err is not ErrorCode.NONE:
            return
        g = self.core.groups[GROUP]
        if spec.stale_commit(m.owned_generation, g.generation_id):
            self._violate(spec.STALE_GENERATION_COMMIT,
                          f"{m.name} committed under generation {m.owned_generation}, the "
                          f"group is at {g.generation_id}")
        back = spec.committed_backwards(self.committed, m.positions)
        if back is not None:
            p, before, after = back
            self._violate(spec.COMMITTED_BACKWARDS,
                          f"{m.name} moved partition {p} from {before} back to {after}")
        self.committed.update(m.positions)
        self.commits += 1

    def leave(self, m: SimMember) -> None:
        if not m.idle or not m.member_id:
            return
        self._commit(m, "close")
        err, effects = self.core.leave(GROUP, m.member_id, m.instance_id, self.now_ms)
        self._note(f"{m.name} LeaveGroup {err.name}")
        m.member_id, m.generation, m.owned, m.positions = "", -1, frozenset(), {}
        self._apply(effects)

    def crash(self, m: SimMember) -> None:
        """The process stops without a word (its requests in flight are lost)."""
        if m.running and not m.zombie:
            self._note(f"{m.name} crashes")
            m.running = False

    def restart(self, m: SimMember) -> None:
        """A crashed member starts again: a dynamic one as a new member, a static one under
        its instance id. A static member may also restart while its old process lives on
        (a zombie, paused at the wrong moment): the coordinator must fence the old one."""
        if m.zombie:
            return
        if m.running:
            if m.instance_id is None or not m.member_id:
                return
            zombie = SimMember(f"{m.name}-zombie{len(self.zombies)}", m.instance_id,
                               m.member_id, m.generation, m.joining, m.syncing, m.owned,
                               m.owned_generation, dict(m.positions), zombie=True)
            self.zombies.append(zombie)
        self._note(f"{m.name} restarts")
        fresh = SimMember(m.name, m.instance_id)
        self.members[self.members.index(m)] = fresh
        self.send_join(fresh)

    # -- the coordinator's side ----------------------------------------------------------------
    def advance(self, ms: int) -> None:
        self.now_ms += ms
        deadline = self.core.next_deadline_ms()
        if deadline is not None and deadline <= self.now_ms:
            self._apply(self.core.tick(self.now_ms))

    def store_done(self, ok: bool) -> None:
        """The oldest store is replicated (or fails)."""
        if not self.stores:
            return
        s = self.stores.popleft()
        if ok:
            self._append(s.record)
        self._note(f"store ({s.reason}) {'done' if ok else 'failed'}")
        if s.token is not None:
            self._apply(self.core.stored(s.token, ErrorCode.NONE if ok else
                                         ErrorCode.COORDINATOR_NOT_AVAILABLE, self.now_ms))

    def _append(self, rec: GroupRecord) -> None:
        if self.log and spec.generation_backwards(self.log[-1].generation, rec.generation):
            self._violate(spec.GENERATION_BACKWARDS,
                          f"stored generation {rec.generation} after {self.log[-1].generation}")
        self.log.append(rec)

    def failover(self, landed: int | None = None) -> None:
        """The coordinator's broker dies: stores in flight reach the log or not (a prefix of
        ``landed`` of them, drawn when None), a new coordinator loads the last record; requests
        in flight are NOT_COORDINATOR."""
        if landed is None:
            landed = self.rng.randint(0, len(self.stores))
        for s in list(self.stores)[:landed]:
            self._append(s.record)
        self.stores.clear()
        self.answers.clear()
        for m in self._all():
            if m.joining is not None:
                m.joining = None
                self._on_join(m, JoinResult(ErrorCode.NOT_COORDINATOR, member_id=m.member_id))
            if m.syncing is not None:
                m.syncing = None
                self._on_sync(m, ErrorCode.NOT_COORDINATOR, b"")
        self.failovers += 1
        self.core = self._new_core()
        self.core_generation = 0
        if self.log:
            rec = self.log[-1]
            g, effects = self.core.load(GROUP, rec, self.now_ms)
            self._note(f"failover: loaded generation {rec.generation} with "
                       f"{len(rec.members)} members ({landed} stores in flight landed)")
            if spec.generation_backwards(self.handed_out_generation, g.generation_id) \
                    and g.members:
                self._violate(spec.GENERATION_BACKWARDS,
                              f"loaded generation {g.generation_id} below the handed-out "
                              f"{self.handed_out_generation}")
            if g.generation_id != rec.generation or \
                    [m for m in g.members] != [r.member_id for r in rec.members]:
                self._violate("load-continues", "the loaded group differs from its record")
            self._apply(effects)
        else:
            self._note("failover: no record stored yet")
        self._check()

    # -- invariants ----------------------------------------------------------------------------
    def _check(self) -> None:
        g = self.core.groups.get(GROUP)
        if g is None:
            return
        if spec.generation_backwards(self.core_generation, g.generation_id):
            self._violate(spec.GENERATION_BACKWARDS,
                          f"generation {g.generation_id} after {self.core_generation}")
        if g.generation_id > self.core_generation and g.state is GroupState.COMPLETING_REBALANCE:
            self.rebalances += 1
        self.core_generation = g.generation_id
        committers = {m.name: m.owned for m in self._all() if m.running and m.owned
                      and self.core.commit_error(GROUP, m.member_id, m.owned_generation,
                                                 m.instance_id) is ErrorCode.NONE}
        twice = spec.owned_twice(committers)
        if twice is not None:
            p, a, b = twice
            self._violate(spec.OWNED_TWICE, f"partition {p} owned by {a} and {b}, both "
                                            f"accepted as committers")

    # -- a random run --------------------------------------------------------------------------
    # action -> weight: mostly the members' routine, now and then a fault
    ACTIONS: ClassVar[Mapping[str, float]] = {
        "deliver": 6, "heartbeat": 6, "consume": 4, "commit": 4, "store": 4, "advance": 3,
        "join": 1, "store_fail": 1, "leave": 0.3, "crash": 0.3, "restart": 0.5}

    def step(self, action: str, who: int, amount_ms: int) -> None:
        self.steps += 1
        m = self.members[who % len(self.members)]
        if action in ("consume", "commit") and self.zombies and who < 0:
            # A zombie is a paused process: when it runs again it commits what it consumed
            # before it would notice anything (its heartbeat thread was paused too).
            m = self.zombies[-who % len(self.zombies)]
        if action == "join":
            if not m.running:
                self.restart(m)
            else:
                self.send_join(m)
        elif action == "deliver":
            self.deliver()
        elif action == "heartbeat":
            self.heartbeat(m)
        elif action == "consume":
            self.consume(m)
        elif action == "commit":
            self.commit(m)
        elif action == "leave":
            self.leave(m)
        elif action == "crash":
            self.crash(m)
        elif action == "restart":
            self.restart(m)
        elif action == "advance":
            self.advance(amount_ms)
        elif action == "store":
            self.store_done(True)
        elif action == "store_fail":
            self.store_done(False)
        elif action == "failover":
            self.failover()

    def run_random(self, steps: int, failover_weight: float = 0.005) -> None:
        actions, weights = list(self.ACTIONS), list(self.ACTIONS.values())
        for _ in range(steps):
            action = "failover" if self.rng.random() < failover_weight else \
                self.rng.choices(actions, weights)[0]
            who = self.rng.randrange(-2, len(self.members))
            self.step(action, who, self.rng.choice((10, 20, 50, 100, 400)))
            if self.violations:
                return
