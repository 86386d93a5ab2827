"""The replication model the checker explores: states as hashable tuples, actions as successors.

One partition, a fixed replica set, a controller that publishes LeaderAndIsr-style requests into a
grow-only set (so any request can be delivered late, out of order, or never), and replica actions.
Every truncation decision is made by the project's own rule code in
``floodmark.replication.truncation`` over ``floodmark.replication.epochs.EpochCache``, switched by
``floodmark.replication.modes.Truncation`` — the checker checks what the broker runs.

Modelling choices (see docs/model-checker.md for the full list):

- A state is a ``ModelState`` (NamedTuple) of per-replica ``ReplicaState`` tuples plus controller
  fields and a history variable (``committed`` records) for the invariants.
- Log entries are ``(epoch, record_id)``; record ids are unique, so "same record" is exact.
- Epoch caches are stored as tuples of ``(epoch, start_offset)`` and rebuilt into a real
  ``EpochCache`` whenever a rule needs one.
- Every controller change (election, controller-side ISR shrink, unclean restart) bumps the leader
  epoch (ZooKeeper-era semantics). Leader-side ISR changes are AlterPartition proposals: pending
  (the leader's HW uses the maximal ISR) until the controller accepts them — a compare-and-set on
  the current leader and leader epoch — or rejects them; ``async_isr=False`` makes them atomic.
- The leader learns a follower's LEO from the fetch offset; the fetch response carries the
  leader's HW from *before* that fetch (rule 5), so followers learn commitment one fetch late.
- ``fencing`` (KIP-320: every fetch and OffsetsForLeaderEpoch carries the current leader epoch and
  is rejected unless it equals the leader's) is on by default in every mode, as in the broker; it
  can be switched off to reproduce pre-KIP-320 Kafka and the KIP-279-only counterexample.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

# The truncation rules are called through their module so mutation tests can patch them.
from floodmark.replication import truncation as rules
from floodmark.replication.epochs import EpochCache
from floodmark.replication.modes import Truncation
from floodmark.replication.truncation import FetchValidation

NO_LEADER = -1
UNKNOWN_OFFSET = -1
STUCK_FETCH = "StuckFetch"
"""Action kind of a diverging fetch whose truncation cuts nothing (a livelock)."""

Entry = tuple[int, int]
"""A log entry: (leader epoch stamped into the batch, record id)."""

CachePairs = tuple[tuple[int, int], ...]
"""An epoch cache as (epoch, start_offset) pairs, oldest first."""


class ReplicaState(NamedTuple):
    log: tuple[Entry, ...]
    hw: int
    leader_epoch: int
    """Epoch of the newest control request this replica applied (-1: none yet)."""
    leader: int
    """The leader this replica presumes (itself when it thinks it leads; -1: none)."""
    isr: int
    """Bit mask: the ISR as this replica caches it (meaningful only while it presumes leadership)."""
    cache: CachePairs
    remote_leo: tuple[int, ...]
    """Leader only: each replica's LEO as learned from its last fetch offset (-1: unknown)."""
    pending_truncation: bool
    """EPOCH_OFFSET mode: must ask OffsetsForLeaderEpoch before fetching (KIP-101 as shipped)."""
    leso: int = 0
    """Leader only: leader epoch start offset, the LEO when it took over this epoch (KAFKA-7128)."""
    pending_isr: int = 0
    """Leader only: the ISR (bit mask) of an AlterPartition proposal in flight; 0 = none."""

    @property
    def leo(self) -> int:
        return len(self.log)


class Request(NamedTuple):
    """A LeaderAndIsr request the controller published for one leader epoch."""

    leader: int
    isr: int


class ModelState(NamedTuple):
    replicas: tuple[ReplicaState, ...]
    controller_epoch: int
    """The newest leader epoch the controller issued (-1: none yet)."""
    controller_leader: int
    controller_isr: int
    requests: tuple[Request, ...]
    """Request for epoch e is ``requests[e]``; grow-only, so delivery may be late or never."""
    next_record_id: int
    restarts_left: int
    committed: tuple[tuple[int, int, int], ...]
    """History: every (offset, epoch, record_id) that was ever below some leader's HW, sorted."""


class Action(NamedTuple):
    """A transition label: ``kind`` plus the replica and a kind-specific argument."""

    kind: str
    replica: int = -1
    arg: int = -1


@dataclass(frozen=True, slots=True)
class ModelConfig:
    truncation: Truncation
    replicas: int = 2
    log_size: int = 2
    max_epoch: int = 3
    """The controller may issue leader epochs 0 .. max_epoch - 1."""
    max_records: int | None = None
    """Distinct records producers may write in total (default: ``log_size``)."""
    min_insync_replicas: int = 1
    unclean_restarts: int = 0
    """How many times a replica may restart losing an unflushed suffix of its log."""
    fencing: bool = True
    """KIP-320 epoch fencing on fetch/OffsetsForLeaderEpoch. On by default in every mode because
    the broker (``replication.partition``) fences in every mode; off reproduces pre-2.1 Kafka."""
    async_isr: bool = True
    """AlterPartition as a round trip: the leader's proposal stays pending (counted in the maximal
    ISR) until the controller accepts or rejects it. False: accepted atomically when proposed."""
    names: tuple[str, ...] = field(default=("A", "B", "C", "D", "E"))

    def __post_init__(self) -> None:
        if not 1 <= self.replicas <= len(self.names):
            raise ValueError(f"replicas must be 1..{len(self.names)}, got {self.replicas}")
        if self.log_size < 1 or self.max_epoch < 1:
            raise ValueError("log_size and max_epoch must be positive")
        if self.max_records is not None and self.max_records < 0:
            raise ValueError("max_records must be >= 0")
        if self.min_insync_replicas < 1 or self.unclean_restarts < 0:
            raise ValueError("min_insync_replicas must be >= 1 and unclean_restarts >= 0")

    @property
    def record_limit(self) -> int:
        return self.log_size if self.max_records is None else self.max_records

    @property
    def fenced(self) -> bool:
        return self.fencing

    def name(self, replica: int) -> str:
        return self.names[replica]


def members(mask: int, count: int) -> list[int]:
    return [r for r in range(count) if mask >> r & 1]


def cache_pairs(cache: EpochCache) -> CachePairs:
    return tuple((e.epoch, e.start_offset) for e in cache.entries())


def truncate_replica(rep: ReplicaState, offset: int) -> ReplicaState:
    """Cut the log so ``offset`` becomes the LEO; the epoch cache and the HW follow (§4.5)."""
    new_leo = min(offset, rep.leo)
    cache = EpochCache(rep.cache)
    cache.truncate_from_end(new_leo)
    return rep._replace(log=rep.log[:new_leo], cache=cache_pairs(cache), hw=min(rep.hw, new_leo))


class CacheOps:
    """Epoch-cache operations on ``CachePairs``, done by the real ``EpochCache`` and memoised per
    model (per check run, so a test that patches ``EpochCache`` never sees stale answers)."""

    __slots__ = ("_assign", "_truncate", "_views")

    def __init__(self) -> None:
        self._views: dict[CachePairs, EpochCache] = {}
        self._assign: dict[tuple[CachePairs, int, int], CachePairs] = {}
        self._truncate: dict[tuple[CachePairs, int], CachePairs] = {}

    def view(self, pairs: CachePairs) -> EpochCache:
        """A shared cache for read-only use (the truncation rules only read it)."""
        cache = self._views.get(pairs)
        if cache is None:
            cache = self._views[pairs] = EpochCache(pairs)
        return cache

    def assign(self, pairs: CachePairs, epoch: int, start_offset: int) -> CachePairs:
        key = (pairs, epoch, start_offset)
        result = self._assign.get(key)
        if result is None:
            cache = EpochCache(pairs)
            cache.assign(epoch, start_offset)
            result = self._assign[key] = cache_pairs(cache)
        return result

    def truncate_from_end(self, pairs: CachePairs, end_offset: int) -> CachePairs:
        key = (pairs, end_offset)
        result = self._truncate.get(key)
        if result is None:
            cache = EpochCache(pairs)
            cache.truncate_from_end(end_offset)
            result = self._truncate[key] = cache_pairs(cache)
        return result

    def truncate(self, rep: ReplicaState, offset: int) -> ReplicaState:
        """``truncate_replica`` with the memoised cache operation."""
        new_leo = min(offset, len(rep.log))
        return rep._replace(
            log=rep.log[:new_leo],
            cache=self.truncate_from_end(rep.cache, new_leo),
            hw=min(rep.hw, new_leo),
        )


class Model:
    """Initial state, successor relation and helpers for one ``ModelConfig``."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.n = config.replicas
        self.mode = config.truncation
        self.all_mask = (1 << self.n) - 1
        self._unknown_remote = (UNKNOWN_OFFSET,) * self.n
        self.caches = CacheOps()

    # -- initial state ---------------------------------------------------------------------
    def initial_state(self) -> ModelState:
        replica = ReplicaState(
            log=(),
            hw=0,
            leader_epoch=-1,
            leader=NO_LEADER,
            isr=0,
            cache=(),
            remote_leo=(),
            pending_truncation=False,
        )
        return ModelState(
            replicas=(replica,) * self.n,
            controller_epoch=-1,
            controller_leader=NO_LEADER,
            controller_isr=self.all_mask,
            requests=(),
            next_record_id=0,
            restarts_left=self.config.unclean_restarts,
            committed=(),
        )

    # -- helpers -----------------------------------------------------------------------------
    def _leader_hw(self, rep: ReplicaState, self_id: int) -> int:
        """Leader HW = max(HW, min LEO over itself and its maximal ISR — the committed ISR plus a
        member being added), frozen while the committed ISR is below min ISR."""
        effective_min_isr = min(self.config.min_insync_replicas, self.n)
        if len(members(rep.isr, self.n)) < effective_min_isr:
            return rep.hw
        new_hw = rep.leo
        for r in members(rep.isr | rep.pending_isr, self.n):
            if r != self_id:
                new_hw = min(new_hw, rep.remote_leo[r])
        return max(rep.hw, new_hw)

    def _with_leader(
        self,
        state: ModelState,
        r: int,
        rep: ReplicaState,
        extra: dict[int, ReplicaState] | None = None,
    ) -> ModelState:
        """Install leader ``r``'s new state, advancing its HW and the ``committed`` history."""
        new_hw = self._leader_hw(rep, r)
        committed = state.committed
        if new_hw > rep.hw:
            added = {(o, rep.log[o][0], rep.log[o][1]) for o in range(rep.hw, new_hw)}
            if not added.issubset(committed):
                committed = tuple(sorted(added.union(committed)))
            rep = rep._replace(hw=new_hw)
        replicas = list(state.replicas)
        replicas[r] = rep
        if extra:
            for k, v in extra.items():
                replicas[k] = v
        return state._replace(replicas=tuple(replicas), committed=committed)

    def _set_replica(self, state: ModelState, r: int, rep: ReplicaState) -> ModelState:
        replicas = list(state.replicas)
        replicas[r] = rep
        return state._replace(replicas=tuple(replicas))

    def _publish(self, state: ModelState, leader: int, isr: int) -> ModelState:
        epoch = state.controller_epoch + 1
        return state._replace(
            controller_epoch=epoch,
            controller_leader=leader,
            controller_isr=isr,
            requests=(*state.requests, Request(leader, isr)),
        )

    # -- successors --------------------------------------------------------------------------
    def successors(self, state: ModelState) -> Iterator[tuple[Action, ModelState]]:
        yield from self._controller_actions(state)
        for r in range(self.n):
            yield from self._apply_requests(state, r)
            rep = state.replicas[r]
            if rep.leader == r:
                yield from self._leader_actions(state, r)
            elif rep.leader != NO_LEADER:
                yield from self._follower_actions(state, r)
            if state.restarts_left > 0:
                yield from self._unclean_restarts(state, r)

    def _controller_actions(self, state: ModelState) -> Iterator[tuple[Action, ModelState]]:
        if state.controller_epoch + 1 >= self.config.max_epoch:
            return  # the epoch budget of this bound is spent
        for r in members(state.controller_isr, self.n):
            if r != state.controller_leader:
                # Clean election: any ISR member other than the current leader; bumps the epoch.
                yield Action("ElectLeader", r), self._publish(state, r, state.controller_isr)
        if state.controller_isr & (state.controller_isr - 1):  # more than one member
            for r in members(state.controller_isr, self.n):
                # The controller removes a fenced/failed broker; never empties the ISR.
                leader = NO_LEADER if r == state.controller_leader else state.controller_leader
                yield (
                    Action("ControllerShrinkIsr", r),
                    self._publish(state, leader, state.controller_isr & ~(1 << r)),
                )

    def _apply_requests(self, state: ModelState, r: int) -> Iterator[tuple[Action, ModelState]]:
        rep = state.replicas[r]
        for epoch in range(rep.leader_epoch + 1, state.controller_epoch + 1):
            request = state.requests[epoch]
            if request.leader == r:
                yield (
                    Action("BecomeLeader", r, epoch),
                    self._become_leader(state, r, epoch, request),
                )
            else:
                yield (
                    Action("BecomeFollower", r, epoch),
                    self._become_follower(state, r, epoch, request),
                )

    def _become_leader(self, state: ModelState, r: int, epoch: int, req: Request) -> ModelState:
        rep = state.replicas[r]
        cache = rep.cache
        if self.mode.records_epoch_on_election:
            # KAFKA-7415: record (new epoch, LEO) before accepting any write.
            cache = self.caches.assign(cache, epoch, rep.leo)
        remote = list(self._unknown_remote)
        remote[r] = rep.leo
        rep = rep._replace(
            leader_epoch=epoch,
            leader=r,
            isr=req.isr,
            cache=cache,
            remote_leo=tuple(remote),
            pending_truncation=False,
            leso=rep.leo,
            pending_isr=0,
        )
        return self._with_leader(state, r, rep)

    def _become_follower(self, state: ModelState, r: int, epoch: int, req: Request) -> ModelState:
        rep = state.replicas[r]
        rep = rep._replace(
            leader_epoch=epoch,
            leader=req.leader,
            isr=0,
            remote_leo=(),
            # As the broker: only a non-empty log has anything to ask about.
            pending_truncation=self.mode is Truncation.EPOCH_OFFSET and rep.leo > 0,
            leso=0,
            pending_isr=0,
        )
        cut = rules.truncation_on_become_follower(self.mode, rep.leo, rep.hw)
        if cut is not None:
            rep = self.caches.truncate(rep, cut)
        return self._set_replica(state, r, rep)

    def _leader_actions(self, state: ModelState, r: int) -> Iterator[tuple[Action, ModelState]]:
        rep = state.replicas[r]
        # Produce carries no leader epoch: a zombie that still presumes leadership can append.
        if rep.leo < self.config.log_size and state.next_record_id < self.config.record_limit:
            record = state.next_record_id
            remote = list(rep.remote_leo)
            remote[r] = rep.leo + 1
            new_rep = rep._replace(
                log=(*rep.log, (rep.leader_epoch, record)),
                cache=self.caches.assign(rep.cache, rep.leader_epoch, rep.leo),
                remote_leo=tuple(remote),
            )
            nxt = state._replace(next_record_id=record + 1)
            yield Action("LeaderWrite", r, record), self._with_leader(nxt, r, new_rep)
        # ISR changes are AlterPartition proposals: one at a time; the controller accepts only
        # the current leader in the current leader epoch (compare-and-set).
        if self.config.async_isr:
            if rep.pending_isr:
                yield from self._alter_partition_response(state, r)
                return
        elif state.controller_leader != r or state.controller_epoch != rep.leader_epoch:
            return
        for f in range(self.n):
            if f == r:
                continue
            in_isr = bool(rep.isr >> f & 1)
            known = rep.remote_leo[f]
            if in_isr and known != rep.leo:
                # Shrink: a follower that has not caught up to the leader's LEO (§3.2).
                yield Action("LeaderShrinkIsr", r, f), self._propose(state, r, rep.isr & ~(1 << f))
            elif not in_isr and known >= rep.hw and known >= self._leso(rep):
                # Expand: LEO (as learned from its fetches) >= HW and >= LESO (§3.3, KAFKA-7128).
                yield Action("LeaderExpandIsr", r, f), self._propose(state, r, rep.isr | (1 << f))

    def _propose(self, state: ModelState, r: int, new_isr: int) -> ModelState:
        rep = state.replicas[r]
        if self.config.async_isr:
            # Pending: a member being added counts for the HW at once; one being removed still
            # counts until the controller agrees (maximal ISR).
            return self._with_leader(state, r, rep._replace(pending_isr=new_isr))
        nxt = state._replace(controller_isr=new_isr)
        return self._with_leader(nxt, r, rep._replace(isr=new_isr))

    def _alter_partition_response(
        self, state: ModelState, r: int
    ) -> Iterator[tuple[Action, ModelState]]:
        """The controller handles the leader's pending proposal and the leader gets the answer."""
        rep = state.replicas[r]
        if state.controller_leader == r and state.controller_epoch == rep.leader_epoch:
            new_isr = rep.pending_isr
            nxt = state._replace(controller_isr=new_isr)
            accepted = rep._replace(isr=new_isr, pending_isr=0)
            yield Action("AlterPartitionAccepted", r), self._with_leader(nxt, r, accepted)
        else:
            # FENCED_LEADER_EPOCH / NOT_CONTROLLER-style rejection: back to the committed ISR.
            yield (
                Action("AlterPartitionRejected", r),
                self._with_leader(state, r, rep._replace(pending_isr=0)),
            )

    def _leso(self, rep: ReplicaState) -> int:
        """Leader epoch start offset, checked before an ISR expansion in every mode (KAFKA-7128),
        as ``replication.partition`` does."""
        return rep.leso

    def _leader_for_fetch(self, state: ModelState, f: int) -> int | None:
        """The leader a follower's fetch / OffsetsForLeaderEpoch reaches, or None if rejected."""
        rep = state.replicas[f]
        target = rep.leader
        leader = state.replicas[target]
        if leader.leader != target:
            return None  # NOT_LEADER_OR_FOLLOWER
        if self.config.fenced and leader.leader_epoch != rep.leader_epoch:
            return None  # FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (KIP-320)
        return target

    def _follower_actions(self, state: ModelState, f: int) -> Iterator[tuple[Action, ModelState]]:
        target = self._leader_for_fetch(state, f)
        if target is None:
            return
        rep = state.replicas[f]
        if rep.pending_truncation:
            yield (
                Action("OffsetsForLeaderEpoch", f, target),
                self._offsets_for_leader_epoch(state, f, target),
            )
            return
        nxt = self._fetch(state, f, target)
        if nxt is state:
            yield Action(STUCK_FETCH, f, target), nxt
        elif nxt is not None:
            yield Action("Fetch", f, target), nxt

    def _offsets_for_leader_epoch(self, state: ModelState, f: int, target: int) -> ModelState:
        rep = state.replicas[f]
        leader = state.replicas[target]
        cache = self.caches.view(rep.cache)
        answer = rules.leader_end_offset_for(
            self.mode, self.caches.view(leader.cache), cache.latest_epoch, leader.leo
        )
        point = rules.truncation_point(self.mode, cache, rep.leo, rep.hw, answer)
        rep = self.caches.truncate(rep, point.offset)._replace(pending_truncation=not point.final)
        return self._set_replica(state, f, rep)

    def _fetch(self, state: ModelState, f: int, target: int) -> ModelState | None:
        rep = state.replicas[f]
        leader = state.replicas[target]
        leader_cache = self.caches.view(leader.cache)
        follower_cache = self.caches.view(rep.cache)
        check = rules.validate_fetch(
            self.mode, leader_cache, 0, leader.leo, rep.leo, follower_cache.latest_epoch
        )
        if check.result is FetchValidation.DIVERGING:
            assert check.diverging is not None
            point = rules.truncation_point(
                self.mode, follower_cache, rep.leo, rep.hw, check.diverging
            )
            # The leader does not update this follower's state on a diverging answer; a
            # non-final cut simply produces another diverging answer on the next fetch. A cut at
            # the LEO still drops empty epochs from the cache (Kafka's truncateTo).
            cut = self.caches.truncate(rep, point.offset)
            if cut == rep:
                # No progress: the follower would fetch, get the same answer and cut nothing,
                # forever. Reported as a self-loop that the TruncationProgress invariant flags.
                return state
            return self._set_replica(state, f, cut)
        if check.result is FetchValidation.OFFSET_OUT_OF_RANGE:
            # §4.7: a follower ahead of the leader truncates to the leader's LEO.
            if leader.leo < rep.leo:
                return self._set_replica(state, f, self.caches.truncate(rep, leader.leo))
            return None
        # Normal read from the follower's LEO. The response carries the HW from *before* this
        # fetch updated the leader's view of the follower (rule 5).
        hw_snapshot = leader.hw
        remote = list(leader.remote_leo)
        remote[f] = rep.leo
        new_leader = leader._replace(remote_leo=tuple(remote))
        new_rep = rep
        if rep.leo < leader.leo:
            entry = leader.log[rep.leo]
            new_rep = rep._replace(
                log=(*rep.log, entry), cache=self.caches.assign(rep.cache, entry[0], rep.leo)
            )
        new_rep = new_rep._replace(hw=min(hw_snapshot, new_rep.leo))
        if new_rep == rep and new_leader == leader:
            return None
        return self._with_leader(state, target, new_leader, {f: new_rep})

    def _unclean_restarts(self, state: ModelState, r: int) -> Iterator[tuple[Action, ModelState]]:
        """A replica restarts losing an unflushed, non-empty suffix of its log.

        Its in-memory role is gone; it keeps its last leader epoch as an incarnation guard (a
        restarted broker ignores requests issued before it restarted, KIP-380). The controller sees
        the new incarnation, removes it from the ISR unless it is the only member, and publishes
        a partition change (new epoch).
        """
        if state.controller_epoch + 1 >= self.config.max_epoch:
            return
        rep = state.replicas[r]
        isr = state.controller_isr
        if isr & ~(1 << r):
            isr &= ~(1 << r)
        leader = NO_LEADER if state.controller_leader == r else state.controller_leader
        for keep in range(rep.leo):
            cut = self.caches.truncate(rep, keep)._replace(
                leader=NO_LEADER,
                isr=0,
                remote_leo=(),
                pending_truncation=False,
                leader_epoch=state.controller_epoch,
                leso=0,
                pending_isr=0,
            )
            nxt = self._set_replica(state, r, cut)._replace(restarts_left=state.restarts_left - 1)
            yield Action("UncleanRestart", r, keep), self._publish(nxt, leader, isr)
