"""The transition system the checker explores, over the code the broker runs.

One partition, replicas ``A, B, C…`` (broker ids 0, 1, 2…), one controller. Every step is carried
out by the running classes (see ``floodmark.mc.pieces``): ``Partition`` and ``ReplicaDriver`` for
a replica, ``produce_as_leader`` for a write, ``ControllerLogic`` for every controller decision.
Nothing here decides how a replica or the controller reacts; the model only chooses *which*
event happens next (the environment: a broker's session expires, a metadata change reaches a
broker late or never, a fetch is answered, a process restarts losing unflushed data).

A state (``ModelState``) is a tuple of small integers: each replica's and the controller's value
is interned once (``ReplicaValue``, ``ControllerValue``: the immutable values of the live
objects) and a state names them by id, so hashing and comparing a state is cheap and every
transition over the same values is computed once (the real calls are memoised per model run: a
test that patches the core gets a fresh model and sees its patch).

* **Metadata.** Every controller change (a fence, an unfence, a leadership move, a broker's new
  incarnation) is published: replicas apply any published change newer than the last one they
  applied, so changes arrive late, skip ahead, or never. The controller may make
  ``max_epoch - 1`` changes after creating the topic (leader epochs stay below ``max_epoch``).
  An AlterPartition the controller accepts is not a separate delivery: the leader learns it from
  the answer, the followers from the next change (for a follower an ISR-only change is a no-op).
* **Canonical states.** Partition epochs are only ever compared, so they are renumbered to their
  ranks (0, 1, 2… over the values present) and published changes every replica has passed are
  dropped; equal situations are equal states and the space is finite.
* **Fetches** answer at once with what the leader has (a parked fetch that times out answers
  the same), carrying the HW from before the fetch (rule 5): followers learn commitment one fetch
  late. ``fencing=False`` sends requests without the leader epoch (pre-KIP-320 followers).
* **Writes** are acks=1 produces of distinct records (``produce_as_leader``): any replica that
  presumes leadership may write, a zombie included — Produce carries no leader epoch.
* **Transactions** (``transactions`` > 0, issue 15): transaction ``t`` is producer
  ``TXN_PRODUCER_ID + t``'s; its records (``txn_records`` at most) are transactional acks=all
  produces to whichever replica presumes leadership (``TxnWrite``), checked by the real producer
  state (sequences, epochs). The coordinator (the environment) decides: ``TxnAbort`` any time
  after a first record, ``TxnCommit`` only once every record written is below some leader's HW
  (the producer flushed with acks=all before EndTxn). Then a leader writes the marker
  (``WriteMarker``: ``write_marker_as_leader``), again after a leader change lost it, until a
  marker of the transaction is committed. The replicas' producer state (open transactions, the
  LSO, the aborted list) is rebuilt from the log and the HW, as the broker does at open — by
  the broker's own start-up path over a real storage ``Log`` (``mc.restart``) that reads the log
  in chunks of ``scan_chunk_bytes``: every state is also a restart of every replica. With
  ``txn_producers`` a producer's transactions follow one another (``Batches.txn_producer``):
  the next one writes only once the previous one's marker is committed.

No symmetry reduction: the controller elects in assignment order (``election.elect_leader``), so
replica ids are not interchangeable — the assignment order is part of every state, and exploring
one order is exactly the symmetry-reduced exploration of all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from floodmark.constants import ACKS_ALL, ACKS_LEADER, NO_LEADER
from floodmark.errors import ErrorCode
from floodmark.mc.pieces import (
    COORDINATOR_EPOCH,
    NOW_MS,
    PARTITION,
    TOPIC,
    Batches,
    CachePairs,
    ControllerValue,
    Entry,
    LiveReplica,
    ReplicaValue,
    controller_config,
    controller_value,
    empty_replica,
    initial_controller,
    live_controller,
    live_replica,
    marker_record,
    partition_config,
    replica_value,
    txn_record,
)
from floodmark.mc.restart import Restarts
from floodmark.replication import (
    UNDEFINED_EPOCH,
    EpochCache,
    EpochQuery,
    FollowerActionKind,
    FollowerState,
    LeaderState,
    PartitionConfig,
    ProducerStateTable,
    Truncation,
    produce_as_leader,
    write_marker_as_leader,
)
from floodmark.spec import ReplicaView

STUCK_FETCH = "StuckFetch"
"""Action kind of a diverging fetch whose truncation cuts nothing (a livelock)."""

Committed = tuple[tuple[int, int, int], ...]


class ModelState(NamedTuple):
    replicas: tuple[int, ...]
    """Interned ``ReplicaValue`` id per replica."""
    applied: tuple[int, ...]
    """Per replica: index in ``published`` of the last change it applied (-1: none)."""
    controller: int
    """Interned ``ControllerValue`` id: the controller's current image."""
    published: tuple[int, ...]
    """Controller value ids of the changes some replica has not passed yet, oldest first."""
    changes_left: int
    restarts_left: int
    next_record_id: int
    committed: Committed
    """History: every (offset, epoch, record_id) that was ever below some leader's HW, sorted."""
    txns: tuple[int, ...] = ()
    """Per transaction: ``TXN_OPEN/TXN_COMMIT/TXN_ABORT * TXN_STATUS + records written``."""


MIN_SCAN_CHUNK_BYTES = 61
DEFAULT_SCAN_CHUNK_BYTES = (61, 100, 139, 211, 290)
"""Restart chunk sizes (see ``ModelConfig.scan_chunk_bytes``): 61, the storage's minimum,
cuts every batch (70-78 bytes in the model); the others end chunks inside batches at other
places of the model's logs."""

TXN_STATUS = 16
"""``ModelState.txns`` packs a transaction's status above its record count."""
TXN_OPEN, TXN_COMMIT, TXN_ABORT = 0, 1, 2


class Action(NamedTuple):
    """A transition label: ``kind`` plus the replica and a kind-specific argument."""

    kind: str
    replica: int = -1
    arg: int = -1


class StateView(NamedTuple):
    """A state with its ids resolved to values (for invariants, traces and rendering)."""

    replicas: tuple[ReplicaValue, ...]
    controller: ControllerValue
    committed: Committed
    next_record_id: int
    changes_left: int
    published: tuple[ControllerValue, ...] = ()
    applied: tuple[int, ...] = ()
    txns: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelConfig:
    truncation: Truncation
    replicas: int = 2
    log_size: int = 2
    max_epoch: int = 3
    """The controller makes at most ``max_epoch`` changes, creating the topic included, so
    leader epochs stay within 0 .. max_epoch - 1."""
    max_records: int | None = None
    """Distinct records producers may write in total (default: ``log_size``)."""
    min_insync_replicas: int = 1
    unclean_restarts: int = 0
    """How many times a replica may restart losing an unflushed suffix of its log."""
    fencing: bool = True
    """KIP-320 epoch fencing on fetch/OffsetsForLeaderEpoch. On by default in every mode because
    the broker fences in every mode; off sends requests without the leader epoch (pre-2.1)."""
    async_isr: bool = True
    """AlterPartition as its own step: the leader's proposal stays pending (in the maximal ISR)
    until the controller's answer arrives. False: delivered in the step that proposes it."""
    names: tuple[str, ...] = field(default=("A", "B", "C", "D", "E"))
    transactions: int = 0
    """Transactions the model's transactional producers run (each its own producer id)."""
    txn_records: int = 1
    """Records per transaction at most."""
    txn_producers: int = 0
    """0: each transaction its own producer. N: transaction ``t`` is producer ``t % N``'s,
    at producer epoch ``t // N``, and begins once that producer's previous transaction has a
    committed marker (a producer's transactions one after another)."""
    scan_chunk_bytes: tuple[int, ...] = DEFAULT_SCAN_CHUNK_BYTES
    """``LogConfig.scan_chunk_bytes`` of the restarts (``mc.restart``): each read_committed
    view is checked after a restart with each size; the first also gives the live replicas'
    producer state."""

    def __post_init__(self) -> None:
        if not 1 <= self.replicas <= len(self.names):
            raise ValueError(f"replicas must be 1..{len(self.names)}, got {self.replicas}")
        if self.log_size < 1 or self.max_epoch < 1:
            raise ValueError("log_size and max_epoch must be positive")
        if self.max_records is not None and self.max_records < 0:
            raise ValueError("max_records must be >= 0")
        if self.min_insync_replicas < 1 or self.unclean_restarts < 0:
            raise ValueError("min_insync_replicas must be >= 1 and unclean_restarts >= 0")
        if not 0 <= self.transactions <= 4 or not 1 <= self.txn_records < TXN_STATUS:
            raise ValueError("transactions must be 0..4 and txn_records 1..15")
        if not 0 <= self.txn_producers <= max(self.transactions, 0):
            raise ValueError("txn_producers must be 0..transactions")
        if not self.scan_chunk_bytes or min(self.scan_chunk_bytes) < MIN_SCAN_CHUNK_BYTES:
            raise ValueError(f"scan_chunk_bytes must be one or more sizes >= "
                             f"{MIN_SCAN_CHUNK_BYTES} (a batch header)")

    @property
    def record_limit(self) -> int:
        return self.log_size if self.max_records is None else self.max_records

    @property
    def fenced(self) -> bool:
        return self.fencing

    def name(self, replica: int) -> str:
        return self.names[replica] if 0 <= replica < len(self.names) else "none"


def members(isr: tuple[int, ...] | int, count: int) -> list[int]:
    """Replica ids of an ISR tuple (or of a bit mask, for callers of the earlier model)."""
    if isinstance(isr, int):
        return [r for r in range(count) if isr >> r & 1]
    return sorted(isr)


def cache_pairs(cache: EpochCache) -> CachePairs:
    return tuple((e.epoch, e.start_offset) for e in cache.entries())


class _Interned:
    """Values <-> small ids; ``derived[i][id]`` is ``derive[i](value)``, computed once."""

    __slots__ = ("derive", "derived", "ids", "values")

    def __init__(self, *derive: Callable[[Any], int]) -> None:
        self.ids: dict[object, int] = {}
        self.values: list[object] = []
        self.derive = derive
        self.derived: tuple[list[int], ...] = tuple([] for _ in derive)

    def id(self, value: object) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.values)
            self.values.append(value)
            for derive, derived in zip(self.derive, self.derived, strict=True):
                derived.append(derive(value))
        return found


def _replica_epochs(value: ReplicaValue) -> int:
    """The partition epochs a replica value holds (its role's, its proposal's), as a bit set."""
    held = 0
    if value.role is not None:
        held |= 1 << value.role.partition_epoch
    if value.proposal is not None:
        held |= 1 << value.proposal.partition_epoch
    return held


EXPOSES, PROPOSES = 1, 2
"""``_replica_traits`` bits: a leader with records below its HW (it adds to the history of
committed records); an AlterPartition request in flight."""


def _replica_traits(value: ReplicaValue) -> int:
    return ((EXPOSES if value.is_leader and value.hw else 0)
            | (PROPOSES if value.proposal is not None else 0))


def _controller_epochs(value: ControllerValue) -> int:
    return value.registration.partition_epoch


class Model:
    """Initial state, successor relation and views for one ``ModelConfig``."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.n = config.replicas
        self.mode = config.truncation
        self.batches = Batches(config.txn_producers)
        self.restarts = Restarts(self.batches)
        self.partition_configs: tuple[PartitionConfig, ...] = tuple(
            partition_config(r, config.truncation, config.min_insync_replicas)
            for r in range(self.n)
        )
        self.controller_config = controller_config(config.min_insync_replicas)
        self._replicas = _Interned(_replica_epochs, _replica_traits)
        self._controllers = _Interned(_controller_epochs)
        self._memo: dict[tuple[object, ...], object] = {}
        self._canon: dict[tuple[object, ...], int] = {}
        self._commit: dict[tuple[Committed, int], Committed] = {}
        self._committed_ids: dict[Committed, int] = {}
        self._committed_values: list[Committed] = []
        self._replica_epochs, self._replica_traits = self._replicas.derived
        (self._controller_epochs,) = self._controllers.derived
        self._sync_isr = not config.async_isr
        self._spec_views: dict[tuple[int, int], ReplicaView] = {}
        self.skip_noop_metadata = True
        self.state_verdicts: dict[tuple[object, ...], object] = {}
        self.transition_verdicts: dict[tuple[object, ...], object] = {}
        # The search checks every step out of one state (the same ``before``) and then each new
        # state (the step's ``after``): the two views used last are kept, by identity.
        self._views: list[tuple[ModelState, StateView]] = []
        self.replica_views_of: tuple[StateView, tuple[ReplicaView, ...]] | None = None
        """The last view's replicas as the shared invariants see them (``mc.invariants``
        judges one view with several of them)."""

    # -- values ------------------------------------------------------------------------------
    def replica(self, rid: int) -> ReplicaValue:
        value = self._replicas.values[rid]
        assert isinstance(value, ReplicaValue)
        return value

    def controller(self, cid: int) -> ControllerValue:
        value = self._controllers.values[cid]
        assert isinstance(value, ControllerValue)
        return value

    def view(self, state: ModelState) -> StateView:
        views = self._views
        for i, (seen, view) in enumerate(views):
            if seen is state:
                if i == 0 and len(views) == 2:
                    views.reverse()  # the most recently used last
                return view
        values = self._replicas.values
        view = StateView(
            tuple([values[r] for r in state.replicas]),  # type: ignore[misc]
            self.controller(state.controller),
            state.committed,
            state.next_record_id,
            state.changes_left,
            txns=state.txns,
        )
        self._views = [views[-1], (state, view)] if views else [(state, view)]
        return view

    def spec_views(self, replicas: tuple[int, ...]) -> tuple[ReplicaView, ...]:
        """The replicas (by id) as the shared invariants see them (``mc.invariants``), each
        built once per model run."""
        cache = self._spec_views
        out = []
        for r, rid in enumerate(replicas):
            found = cache.get((r, rid))
            if found is None:
                rep = self.replica(rid)
                found = cache[(r, rid)] = ReplicaView(self.config.name(r), rep.log, rep.hw,
                                                      rep.leader_epoch, rep.is_leader)
            out.append(found)
        return tuple(out)

    def full_view(self, state: ModelState) -> StateView:
        """``view`` plus the published changes not yet applied everywhere (for traces)."""
        return self.view(state)._replace(
            published=tuple(self.controller(c) for c in state.published), applied=state.applied
        )

    def key(self, state: ModelState) -> tuple[int, ...]:
        """``state`` as one flat tuple of small ints (the history interned), for the seen-set."""
        committed = self._committed_ids.get(state.committed)
        if committed is None:
            committed = self._committed_ids[state.committed] = len(self._committed_values)
            self._committed_values.append(state.committed)
        return (state.controller, state.changes_left, state.restarts_left, state.next_record_id,
                committed, *state.txns, *state.replicas, *state.applied, *state.published)

    def from_key(self, key: tuple[int, ...]) -> ModelState:
        n = self.n
        t = 5 + self.config.transactions
        return ModelState(
            replicas=key[t : t + n],
            applied=key[t + n : t + 2 * n],
            controller=key[0],
            published=key[t + 2 * n :],
            changes_left=key[1],
            restarts_left=key[2],
            next_record_id=key[3],
            committed=self._committed_values[key[4]],
            txns=key[5:t],
        )

    def live(self, state: ModelState, r: int) -> LiveReplica:
        """Replica ``r`` of ``state`` as running objects (``Partition``, ``ReplicaDriver``...)."""
        return self._live(r, state.replicas[r])

    def rebuilt_producers(self, log: tuple[Entry, ...], hw: int) -> ProducerStateTable:
        """The producer state a broker opening ``log`` (HW ``hw``) rebuilds, through the
        storage (``mc.restart``, at the first of the model's chunk sizes)."""
        return self.restarts.producer_state(log, hw, self.config.scan_chunk_bytes[0])

    def live_controller(self, state: ModelState) -> object:
        """The controller of ``state`` as a running ``ControllerLogic``."""
        return live_controller(self.controller(state.controller), self.controller_config)

    def _rid(self, live: LiveReplica) -> int:
        return self._replicas.id(replica_value(live))

    # -- initial state -------------------------------------------------------------------------
    def initial_state(self) -> ModelState:
        ctrl = initial_controller(self.n, self.controller_config)
        epochs = dict(ctrl.broker_epochs)
        cid = self._controllers.id(ctrl)
        return ModelState(
            replicas=tuple(self._replicas.id(empty_replica(epochs[r])) for r in range(self.n)),
            applied=(-1,) * self.n,
            controller=cid,
            published=(cid,),
            changes_left=self.config.max_epoch - 1,
            restarts_left=self.config.unclean_restarts,
            next_record_id=0,
            committed=(),
            txns=(0,) * self.config.transactions,
        )

    # -- successors ----------------------------------------------------------------------------
    def successors(self, state: ModelState) -> Iterator[tuple[Action, ModelState]]:
        if state.changes_left > 0:
            for action, cid in self._controller_changes(state.controller):
                yield action, self._publish(state, cid)
        for r in range(self.n):
            rid = state.replicas[r]
            for index in range(state.applied[r] + 1, len(state.published)):
                new = self._apply_metadata(r, rid, state.published[index])
                if new == rid and self.skip_noop_metadata:
                    continue
                yield (
                    Action("ApplyMetadata", r, index),
                    self._next(state, {r: new}, applied=(r, index)),
                )
            value = self.replica(rid)
            role = value.role
            if isinstance(role, LeaderState):
                yield from self._leader_steps(state, r, rid, value)
            elif isinstance(role, FollowerState) and role.leader_id != NO_LEADER:
                yield from self._follower_steps(state, r, rid, role.leader_id)
            if state.restarts_left > 0 and state.changes_left > 0:
                yield from self._unclean_restarts(state, r, rid, value)
        yield from self._coordinator_decisions(state)

    def _leader_steps(
        self, state: ModelState, r: int, rid: int, value: ReplicaValue
    ) -> Iterator[tuple[Action, ModelState]]:
        record = state.next_record_id
        if value.leo < self.config.log_size and record < self.config.record_limit:
            new = self._write(r, rid, record)
            if new != rid:
                nxt = state._replace(next_record_id=record + 1)
                yield Action("LeaderWrite", r, record), self._next(nxt, {r: new})
        yield from self._txn_steps(state, r, rid, value)
        if value.proposal is not None:
            cid, new = self._alter_partition(r, rid, state.controller)
            if (cid, new) != (state.controller, rid):
                yield Action("AlterPartition", r), self._next(state, {r: new}, controller=cid)
        else:
            new = self._shrink(r, rid)
            if new != rid:
                yield Action("LeaderShrinkIsr", r), self._next(state, {r: new})

    def _txn_steps(
        self, state: ModelState, r: int, rid: int, value: ReplicaValue
    ) -> Iterator[tuple[Action, ModelState]]:
        """Leader ``r``: the next record of each open transaction (acks=all, transactional), and
        the marker of each decided one that is neither in its log nor committed."""
        for t, packed in enumerate(state.txns):
            status, written = divmod(packed, TXN_STATUS)
            if status == TXN_OPEN:
                if written == 0 and not self._may_begin(state, t):
                    continue
                if written < self.config.txn_records and value.leo < self.config.log_size:
                    new = self._write(r, rid, txn_record(t, written), acks=ACKS_ALL)
                    if new != rid:
                        txns = list(state.txns)
                        txns[t] = packed + 1
                        yield (Action("TxnWrite", r, t),
                               self._next(state._replace(txns=tuple(txns)), {r: new}))
                continue
            markers = (marker_record(t, True), marker_record(t, False))
            if any(rec in markers for _e, rec in value.log):
                continue
            if any(rec in markers for _o, _e, rec in state.committed):
                continue
            new = self._write_marker(r, rid, t, status == TXN_COMMIT)
            if new != rid:
                yield Action("WriteMarker", r, t), self._next(state, {r: new})

    def _may_begin(self, state: ModelState, t: int) -> bool:
        """Transaction ``t`` may write its first record: it has a producer of its own, or that
        producer's previous transaction has a committed marker (EndTxn answered, its markers
        written: Kafka's producer gets CONCURRENT_TRANSACTIONS until then)."""
        producers = self.config.txn_producers
        if producers <= 0 or t < producers:
            return True
        previous = t - producers
        markers = (marker_record(previous, True), marker_record(previous, False))
        return any(rec in markers for _o, _e, rec in state.committed)

    def _coordinator_decisions(self, state: ModelState) -> Iterator[tuple[Action, ModelState]]:
        """The coordinator ends an open transaction that wrote something: abort at any time,
        commit once every record it wrote is committed (acks=all answered before EndTxn)."""
        committed = {rec for _o, _e, rec in state.committed}
        for t, packed in enumerate(state.txns):
            status, written = divmod(packed, TXN_STATUS)
            if status != TXN_OPEN or written == 0:
                continue
            for decision, kind in ((TXN_COMMIT, "TxnCommit"), (TXN_ABORT, "TxnAbort")):
                if decision == TXN_COMMIT and any(
                        txn_record(t, seq) not in committed for seq in range(written)):
                    continue
                txns = list(state.txns)
                txns[t] = decision * TXN_STATUS + written
                yield Action(kind, -1, t), state._replace(txns=tuple(txns))

    def _follower_steps(
        self, state: ModelState, f: int, fid: int, target: int
    ) -> Iterator[tuple[Action, ModelState]]:
        tid = state.replicas[target]
        for kind, new_f, new_t in self._fetch(f, fid, target, tid):
            if kind == STUCK_FETCH:
                yield Action(STUCK_FETCH, f, target), state
            else:
                yield Action(kind, f, target), self._next(state, {f: new_f, target: new_t})

    def _unclean_restarts(
        self, state: ModelState, r: int, rid: int, value: ReplicaValue
    ) -> Iterator[tuple[Action, ModelState]]:
        """A replica restarts losing an unflushed, non-empty suffix of its log: its process
        state is gone, the log and the epoch cache keep offsets < ``keep`` (the HW checkpoint
        is clamped to the log), and it registers as a new incarnation that reports an unclean
        shutdown (``ControllerLogic.register_broker``). From then on it sees metadata published
        after its registration only."""
        cid = self._restart_controller(state.controller, r)
        ctrl = self.controller(cid)
        epoch = dict(ctrl.broker_epochs)[r]
        for keep in range(value.leo):
            cache = EpochCache(value.cache)
            cache.truncate_from_end(keep)
            restarted = value._replace(
                log=value.log[:keep], cache=cache_pairs(cache), hw=min(value.hw, keep),
                role=None, followers=(), broker_epochs=(), ineligible=frozenset(),
                local_broker_epoch=epoch, proposal=None,
            )
            nxt = state._replace(restarts_left=state.restarts_left - 1)
            nxt = self._publish(nxt, cid)
            applied = list(nxt.applied)
            applied[r] = len(nxt.published) - 2
            nxt = nxt._replace(applied=tuple(applied))
            yield (
                Action("UncleanRestart", r, keep),
                self._next(nxt, {r: self._replicas.id(restarted)}),
            )

    # -- state assembly --------------------------------------------------------------------------
    def _publish(self, state: ModelState, cid: int) -> ModelState:
        return ModelState(state.replicas, state.applied, cid, (*state.published, cid),
                          state.changes_left - 1, state.restarts_left, state.next_record_id,
                          state.committed, state.txns)

    def _next(
        self,
        state: ModelState,
        changed: dict[int, int],
        *,
        applied: tuple[int, int] | None = None,
        controller: int | None = None,
    ) -> ModelState:
        """The successor: ``changed`` replicas, the history, then the canonical form (published
        changes every replica has passed are dropped; partition epochs renumbered to ranks)."""
        if self._sync_isr:
            changed, controller = self._deliver_proposals(state, changed, controller)
        old = state.replicas
        replicas = list(old)
        committed = state.committed
        for r, rid in changed.items():
            if rid != old[r]:
                replicas[r] = rid
                committed = self._committed(committed, rid)
        applied_now = state.applied
        if applied is not None:
            applied_list = list(applied_now)
            applied_list[applied[0]] = applied[1]
            applied_now = tuple(applied_list)
        published = state.published
        shift = min(applied_now) + 1
        if shift > 0:
            published = published[shift:]
            applied_now = tuple([a - shift for a in applied_now])
        cid = state.controller if controller is None else controller
        replicas_now = tuple(replicas)
        controller_epochs = self._controller_epochs
        top = controller_epochs[cid]
        seen = 1 << top
        for c in published:
            seen |= 1 << controller_epochs[c]
        replica_epochs = self._replica_epochs
        for rid in replicas_now:
            seen |= replica_epochs[rid]
        if seen != (1 << (top + 1)) - 1:
            ranked = [e for e in range(seen.bit_length()) if seen >> e & 1]
            ranks = {e: i for i, e in enumerate(ranked)}
            mapping = tuple(ranked)
            replicas_now = tuple(self._renumber_replica(rid, mapping, ranks) for rid in replicas_now)
            cid = self._renumber_controller(cid, mapping, ranks)
            published = tuple(self._renumber_controller(c, mapping, ranks) for c in published)
        return ModelState(replicas_now, applied_now, cid, published, state.changes_left,
                          state.restarts_left, state.next_record_id, committed, state.txns)

    def _deliver_proposals(
        self, state: ModelState, changed: dict[int, int], controller: int | None
    ) -> tuple[dict[int, int], int | None]:
        """``async_isr=False``: a proposal made in this step is answered in this step."""
        traits = self._replica_traits
        for r, rid in list(changed.items()):
            if rid != state.replicas[r] and traits[rid] & PROPOSES:
                cid = state.controller if controller is None else controller
                controller, changed[r] = self._alter_partition(r, rid, cid)
        return changed, controller

    def _committed(self, committed: Committed, rid: int) -> Committed:
        """Add what a leader exposes: its log below its HW."""
        if not self._replica_traits[rid] & EXPOSES:
            return committed
        key = (committed, rid)
        found = self._commit.get(key)
        if found is None:
            value = self.replica(rid)
            found = committed
            if value.is_leader and value.hw:
                added = {(o, *value.log[o]) for o in range(value.hw)}
                if not added.issubset(committed):
                    found = tuple(sorted(added.union(committed)))
            self._commit[key] = found
        return found

    def _renumber_replica(
        self, rid: int, mapping: tuple[int, ...], ranks: dict[int, int]
    ) -> int:
        key = ("rr", rid, mapping)
        found = self._canon.get(key)
        if found is None:
            value = self.replica(rid)
            role, proposal = value.role, value.proposal
            if role is not None:
                role = replace(role, partition_epoch=ranks[role.partition_epoch])
            if proposal is not None:
                proposal = replace(proposal, partition_epoch=ranks[proposal.partition_epoch])
            found = self._canon[key] = self._replicas.id(
                value._replace(role=role, proposal=proposal)
            )
        return found

    def _renumber_controller(
        self, cid: int, mapping: tuple[int, ...], ranks: dict[int, int]
    ) -> int:
        key = ("rc", cid, mapping)
        found = self._canon.get(key)
        if found is None:
            value = self.controller(cid)
            reg = value.registration
            reg = replace(reg, partition_epoch=ranks[reg.partition_epoch])
            found = self._canon[key] = self._controllers.id(value._replace(registration=reg))
        return found

    # -- the real calls, memoised ----------------------------------------------------------------
    def _controller_changes(self, cid: int) -> list[tuple[Action, int]]:
        key = ("ctrl", cid)
        found = self._memo.get(key)
        if found is None:
            ctrl = self.controller(cid)
            changes: list[tuple[Action, int]] = []
            for broker in ctrl.brokers:
                logic = live_controller(ctrl, self.controller_config)
                if broker.fenced:
                    logic.unfence_broker(broker.broker_id)
                    kind = "Unfence"
                else:
                    logic.fence_broker(broker.broker_id, "the model fences it")
                    kind = "Fence"
                new = controller_value(logic)
                if new != ctrl:
                    changes.append((Action(kind, broker.broker_id), self._controllers.id(new)))
            logic = live_controller(ctrl, self.controller_config)
            if logic.move_leadership(TOPIC, PARTITION, "the model moves leadership"):
                new = controller_value(logic)
                changes.append((Action("MoveLeadership", new.registration.leader),
                                self._controllers.id(new)))
            found = self._memo[key] = changes
        assert isinstance(found, list)
        return found

    def _restart_controller(self, cid: int, r: int) -> int:
        key = ("restart", cid, r)
        found = self._memo.get(key)
        if found is None:
            ctrl = self.controller(cid)
            logic = live_controller(ctrl, self.controller_config)
            old = logic.image.brokers[r]
            logic.register_broker(r, old.host, old.port, f"{r}-{old.broker_epoch + 1}", NOW_MS,
                                  clean_shutdown=False)
            found = self._memo[key] = self._controllers.id(controller_value(logic))
        assert isinstance(found, int)
        return found

    def _apply_metadata(self, r: int, rid: int, cid: int) -> int:
        key = ("md", r, rid, cid)
        found = self._memo.get(key)
        if found is None:
            ctrl = self.controller(cid)
            live = self._live(r, rid)
            live.driver.apply_metadata(ctrl.registration, NOW_MS,
                                       broker_epochs=dict(ctrl.broker_epochs),
                                       ineligible=ctrl.ineligible)
            found = self._memo[key] = self._rid(live)
        assert isinstance(found, int)
        return found

    def _write(self, r: int, rid: int, record: int, *, acks: int = ACKS_LEADER) -> int:
        key = ("write", r, rid, record)
        found = self._memo.get(key)
        if found is None:
            live = self._live(r, rid)
            result = produce_as_leader(
                live.partition, live.log, self.batches.produced(record),
                acks=acks, produce_id=record, now_ms=NOW_MS, timeout_ms=30_000,
            )
            live.driver.apply(result.effects)
            found = self._memo[key] = self._rid(live) if result.appended else rid
        assert isinstance(found, int)
        return found

    def _write_marker(self, r: int, rid: int, txn: int, committed: bool) -> int:
        """WriteTxnMarkers at leader ``r`` (``write_marker_as_leader``: acks=all, fencing)."""
        key = ("marker", r, rid, txn, committed)
        found = self._memo.get(key)
        if found is None:
            live = self._live(r, rid)
            self.batches.produced(marker_record(txn, committed))  # the bytes it will append
            producer_id, producer_epoch = self.batches.txn_producer(txn)
            result = write_marker_as_leader(
                live.partition, live.log, producer_id, producer_epoch, committed,
                COORDINATOR_EPOCH, produce_id=-1, now_ms=NOW_MS, timeout_ms=30_000,
            )
            live.driver.apply(result.effects)
            found = self._memo[key] = self._rid(live) if result.appended else rid
        assert isinstance(found, int)
        return found

    def _shrink(self, r: int, rid: int) -> int:
        key = ("shrink", r, rid)
        found = self._memo.get(key)
        if found is None:
            live = self._live(r, rid)
            live.driver.apply(live.partition.maybe_shrink_isr(live.log, NOW_MS))
            found = self._memo[key] = self._rid(live)
        assert isinstance(found, int)
        return found

    def _alter_partition(self, r: int, rid: int, cid: int) -> tuple[int, int]:
        """The controller handles the leader's pending AlterPartition; the leader gets the
        answer (``ControllerLogic.alter_partition``, ``Partition.handle_alter_partition_response``)."""
        key = ("alter", r, rid, cid)
        found = self._memo.get(key)
        if found is None:
            live = self._live(r, rid)
            request = live.proposal
            assert request is not None
            logic = live_controller(self.controller(cid), self.controller_config)
            error, registration = logic.alter_partition(TOPIC, PARTITION, request)
            live.driver.on_alter_partition_response(
                request, error, registration if error is ErrorCode.NONE else None, NOW_MS)
            found = self._memo[key] = (self._controllers.id(controller_value(logic)),
                                       self._rid(live))
        assert isinstance(found, tuple)
        return found

    def _fetch(self, f: int, fid: int, t: int, tid: int) -> list[tuple[str, int, int]]:
        """Follower ``f`` sends its next request to ``t`` and acts on the answer: the outcomes
        that change something, as (kind, new follower id, new leader id). A fetch whose answer
        is lost is an outcome of its own ("FetchResponseLost": the leader has recorded the fetch
        — follower state, ISR expansion, HW — the follower has learned nothing)."""
        key = ("fetch", f, fid, t, tid)
        found = self._memo.get(key)
        if found is not None:
            assert isinstance(found, list)
            return found
        follower = self._live(f, fid)
        leader = self._live(t, tid)
        request = follower.partition.next_fetch(follower.log)
        result: list[tuple[str, int, int]] = []
        if isinstance(request, EpochQuery):
            query = request if self.config.fenced else replace(
                request, current_leader_epoch=UNDEFINED_EPOCH)
            error, answer = leader.driver.answer_epoch_query(query)
            follower.driver.on_epoch_answer(request.current_leader_epoch, error, answer)
            new_f = self._rid(follower)
            if new_f != fid:
                result.append(("OffsetsForLeaderEpoch", new_f, tid))
        elif request is not None:
            sent = request if self.config.fenced else replace(
                request, current_leader_epoch=UNDEFINED_EPOCH)
            fetched = leader.driver.answer_follower_fetch(sent, NOW_MS, leader.log.read)
            new_t = self._rid(leader)
            # The follower matches the answer to the request it built (its own leader epoch).
            response = replace(fetched.response,
                               request_leader_epoch=request.current_leader_epoch)
            records = fetched.records
            action = follower.driver.on_fetch_response(response, records, NOW_MS)
            new_f = self._rid(follower)
            if (new_f, new_t) != (fid, tid):
                result.append(("Fetch", new_f, new_t))
            elif action.kind is FollowerActionKind.TRUNCATE:
                result.append((STUCK_FETCH, fid, tid))
            if new_t != tid and new_f != fid:
                result.append(("FetchResponseLost", fid, new_t))
        self._memo[key] = result
        return result

    def _live(self, r: int, rid: int) -> LiveReplica:
        return live_replica(self.replica(rid), self.partition_configs[r], self.batches,
                            self.rebuilt_producers)
