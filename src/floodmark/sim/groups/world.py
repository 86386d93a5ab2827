"""One classic consumer group on a simulated coordinator, step by step, with virtual time.

The coordinator is the broker's own ``ClassicGroupCore``; the world plays its runner (answers
go back to the members that asked, ``StoreGroup`` records go to a simulated ``__consumer_offsets``
log that may fail or lose them) and its members, which behave like the Java consumer with the
eager protocol (``base``): they join, the leader assigns the partitions round robin over the
member list it was given, each member syncs, heartbeats, consumes from its committed offsets,
commits (also before it rejoins, as the revoke callback), leaves, crashes silently, restarts (a
static member under its ``group.instance.id``; its old incarnation may linger as a zombie that
goes on heartbeating and committing). A failover replaces the core with a fresh one that loads
the last record the log holds; requests in flight are answered NOT_COORDINATOR.

Every step is checked against ``spec.groups``; a violation is recorded with the trace so far.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from floodmark.broker import ClassicEffect, GroupRecord, GroupState, StoreGroup
from floodmark.errors import ErrorCode
from floodmark.sim.groups.base import GROUP, PROTOCOL, BaseGroupWorld, SimMember, Violation
from floodmark.spec import groups as spec

__all__ = ["GROUP", "PROTOCOL", "GroupSimConfig", "GroupWorld", "SimMember", "Violation"]


@dataclass(frozen=True, slots=True)
class GroupSimConfig:
    members: int = 4
    static_members: int = 2  # the first ones carry a group.instance.id
    partitions: int = 6
    session_timeout_ms: int = 3000
    rebalance_timeout_ms: int = 4000
    initial_rebalance_delay_ms: int = 0
    max_trace: int = 400


class GroupWorld(BaseGroupWorld[SimMember]):
    ACTIONS: ClassVar[Mapping[str, float]] = {
        "deliver": 6, "heartbeat": 6, "consume": 4, "commit": 4, "store": 4, "advance": 3,
        "join": 1, "store_fail": 1, "leave": 0.3, "crash": 0.3, "restart": 0.5}

    def __init__(self, seed: int, config: GroupSimConfig | None = None) -> None:
        self.config = c = config or GroupSimConfig()
        super().__init__(seed, c, [SimMember(f"c{i}", f"i{i}" if i < c.static_members else None)
                                   for i in range(c.members)], c.initial_rebalance_delay_ms)
        self.log: list[GroupRecord] = []  # the group's records in __consumer_offsets
        self.handed_out_generation = -1  # highest generation whose assignment a member got
        self.core_generation = 0
        self.rebalances = 0

    # -- the runner's side ---------------------------------------------------------------------
    def _apply(self, effects: list[ClassicEffect]) -> None:
        super()._apply(effects)
        self._check()

    def _store(self, effect: StoreGroup) -> None:
        self.stores.append(effect)  # in the log once acknowledged (``store_done``)

    # -- the members' side ---------------------------------------------------------------------
    def join(self, m: SimMember) -> None:
        if m.idle:
            self._classic_join(m)

    def _fresh(self, m: SimMember, switch: bool) -> SimMember:
        return SimMember(m.name, m.instance_id)

    def _on_sync(self, m: SimMember, error: ErrorCode, partitions: frozenset[int]) -> None:
        super()._on_sync(m, error, partitions)
        if error is ErrorCode.NONE:
            self.handed_out_generation = max(self.handed_out_generation, m.generation)

    def heartbeat(self, m: SimMember) -> None:
        if not m.idle or m.generation < 0:
            return
        self._on_heartbeat(m, self.classic.heartbeat(GROUP, m.member_id, m.generation,
                                                     m.instance_id, self.now_ms))
        self._check()

    def _commit_error(self, m: SimMember) -> ErrorCode:
        return self.classic.commit_error(GROUP, m.member_id, m.owned_generation, m.instance_id)

    def _validate_commit(self, m: SimMember) -> ErrorCode:
        return self.classic.validate_commit(GROUP, m.member_id, m.owned_generation,
                                            m.instance_id, self.now_ms)

    def _current_generation(self, m: SimMember) -> int | None:
        g = self.classic.groups.get(GROUP)
        return None if g is None else g.generation_id

    def leave(self, m: SimMember) -> None:
        if not m.idle or not m.member_id:
            return
        self._commit(m, "close")
        err, effects = self.classic.leave(GROUP, m.member_id, m.instance_id, self.now_ms)
        self._note(f"{m.name} LeaveGroup {err.name}")
        m.member_id, m.generation, m.owned, m.positions = "", -1, frozenset(), {}
        self._apply(effects)

    # -- the coordinator's side ----------------------------------------------------------------
    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self._tick_classic()

    def store_done(self, ok: bool) -> None:
        """The oldest store is replicated (or fails)."""
        if not self.stores:
            return
        s = self.stores.popleft()
        if ok:
            self._append(s.record)
        self._note(f"store ({s.reason}) {'done' if ok else 'failed'}")
        if s.token is not None:
            self._apply(self.classic.stored(s.token, ErrorCode.NONE if ok else
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
        arrived, _lost = self._in_flight_lost(landed)
        for s in arrived:
            self._append(s.record)
        self.classic = self._new_classic()
        self.core_generation = 0
        if self.log:
            rec = self.log[-1]
            g, effects = self.classic.load(GROUP, rec, self.now_ms)
            self._note(f"failover: loaded generation {rec.generation} with "
                       f"{len(rec.members)} members ({len(arrived)} stores in flight landed)")
            if spec.generation_backwards(self.handed_out_generation, g.generation_id) \
                    and g.members:
                self._violate(spec.GENERATION_BACKWARDS,
                              f"loaded generation {g.generation_id} below the handed-out "
                              f"{self.handed_out_generation}")
            if g.generation_id != rec.generation or \
                    list(g.members) != [r.member_id for r in rec.members]:
                self._violate("load-continues", "the loaded group differs from its record")
            self._apply(effects)
        else:
            self._note("failover: no record stored yet")
        self._check()

    # -- invariants ----------------------------------------------------------------------------
    def _check(self) -> None:
        g = self.classic.groups.get(GROUP)
        if g is None:
            return
        if spec.generation_backwards(self.core_generation, g.generation_id):
            self._violate(spec.GENERATION_BACKWARDS,
                          f"generation {g.generation_id} after {self.core_generation}")
        if g.generation_id > self.core_generation and g.state is GroupState.COMPLETING_REBALANCE:
            self.rebalances += 1
        self.core_generation = g.generation_id
        super()._check()
