"""One group whose members speak the classic protocol or KIP-848's consumer protocol, on a
simulated coordinator, step by step, with virtual time: KIP-848's online migration under
random steps.

The coordinator is the broker's own pair of cores: ``ClassicGroupCore`` while the group is a
classic group, ``ConsumerGroupCoordinator`` (with ``classic_members`` serving the classic
members) while it is a consumer group; which one serves a request, and how the group converts
between them, is the broker's own ``group_routing`` (what its handlers call): a
consumer-protocol member joining a classic group with members upgrades it (the classic group's
parked requests are answered REBALANCE_IN_PROGRESS), the last consumer-protocol member leaving
or removed downgrades it (the classic core loads the group and rebalances it), an empty group
of one kind gives way to the other. Every change is a batch in a simulated
``__consumer_offsets`` log in Kafka's layouts (``group_routing.Change.pairs``, the classic
core's ``GroupMetadataValue`` records); a consumer-group change whose store fails is undone
(``group_routing.undo``), as the broker does. A failover loads the log the broker's way: its
``OffsetStore`` replays it and ``group_routing.load`` hands each group to its core.

Members behave like real clients: classic ones like the Java consumer with the eager protocol
(``base``), consumer-protocol ones like KIP-848's (full heartbeats with what they own, commit
before giving a partition up, a fenced member drops everything and rejoins at epoch 0 without
committing). A member may restart speaking the other protocol (an upgrade or a rollback, one
member at a time), a static one under its ``group.instance.id`` while its old process may
linger as a zombie. Requests in flight at a failover are NOT_COORDINATOR.

``spec.groups`` is checked after every step: committed offsets never go backwards, no
partition is owned by two members the coordinator would let commit, and a commit is accepted
only from a member at the coordinator's current generation (classic) or member epoch
(consumer group) — a fenced or replaced member commits nothing.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from floodmark.broker import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupCoordinator,
    CoreConfig,
    GroupRecord,
    Heartbeat,
    JoinResult,
    OffsetStore,
    StoreGroup,
    classic_members,
    encode_group_key,
    encode_group_value,
    group_routing,
)
from floodmark.broker import records as cg_records
from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch
from floodmark.sim.groups.base import GROUP, PROTOCOL, TOPIC, BaseGroupWorld, SimMember

__all__ = ["CLASSIC", "CONSUMER", "GROUP", "Member", "MixedGroupWorld", "MixedSimConfig"]

TOPIC_ID = uuid.UUID(int=0x5EED)
CLASSIC, CONSUMER = "classic", "consumer"
Pair = tuple[bytes, bytes | None]  # a record of __consumer_offsets (None: a tombstone)


@dataclass(frozen=True, slots=True)
class MixedSimConfig:
    members: int = 4
    static_members: int = 2  # the first ones carry a group.instance.id
    consumer_members: int = 2  # how many start speaking the consumer protocol
    partitions: int = 6
    session_timeout_ms: int = 3000
    # shorter than the session: a classic member that stops between a JoinGroup and its
    # SyncGroup, or after being told to rejoin, meets Kafka's sync and join timeouts first
    rebalance_timeout_ms: int = 2500
    store_fail_rate: float = 0.05  # a consumer-group change whose records are not stored
    max_trace: int = 400


@dataclass
class Member(SimMember):
    """A consumer process speaking ``protocol``."""

    protocol: str = CLASSIC
    sync_due: bool = False  # answered by a consumer group, its SyncGroup not sent yet
    join_due: bool = False  # told to rejoin by a consumer group, its JoinGroup not sent yet

    @property
    def idle(self) -> bool:
        return self.running and self.joining is None and self.syncing is None and \
            not self.sync_due and not self.join_due


class MixedGroupWorld(BaseGroupWorld[Member]):
    ACTIONS: ClassVar[Mapping[str, float]] = {
        "deliver": 6, "heartbeat": 8, "consume": 4, "commit": 4, "store": 4, "advance": 3,
        "join": 1, "store_fail": 0.5, "leave": 0.3, "crash": 0.3, "restart": 0.5,
        "switch": 0.3, "late": 1}

    def __init__(self, seed: int, config: MixedSimConfig | None = None) -> None:
        self.config = c = config or MixedSimConfig()
        super().__init__(seed, c, [
            Member(f"c{i}", f"i{i}" if i < c.static_members else None,
                   protocol=CONSUMER if i >= c.members - c.consumer_members else CLASSIC)
            for i in range(c.members)])
        self.consumer = self._new_consumer()
        self.topics = {TOPIC: cg_records.TopicMetadata(TOPIC_ID, TOPIC, c.partitions)}
        self.log: list[Pair] = []  # the group's records in __consumer_offsets, in order
        self._store_entries: dict[int, Pair] = {}  # a classic store in flight: its entry
        self.upgrades = self.downgrades = 0
        self.classic_timeouts = 0  # classic members removed by a join or sync timeout

    def _new_consumer(self) -> ConsumerGroupCoordinator:
        return ConsumerGroupCoordinator(
            CoreConfig(session_timeout_ms=self.config.session_timeout_ms,
                       heartbeat_interval_ms=500),
            random.Random(self.rng.getrandbits(64)))  # member ids: a seed replays exactly

    # -- the runner's side ---------------------------------------------------------------------
    def _store(self, effect: StoreGroup) -> None:
        entry = (encode_group_key(GROUP), encode_group_value(effect.record))
        self.log.append(entry)  # appended now, acknowledged by ``store_done``
        self._store_entries[id(effect)] = entry
        self.stores.append(effect)

    def _unlog(self, effect: StoreGroup) -> None:
        """A classic store did not reach the log."""
        entry = self._store_entries.pop(id(effect))
        for i in range(len(self.log) - 1, -1, -1):
            if self.log[i] is entry:
                del self.log[i]
                return

    def _owner(self) -> group_routing.Core:
        return group_routing.owner(self.consumer, GROUP)

    def _change(self, make: Callable[[], Sequence[cg_records.ConsumerGroupRecord]],
                replaces_classic: GroupRecord | None = None) -> ErrorCode:
        """A consumer-group change and the store of its batch, as the broker's
        ``group_apis.change_consumer_group`` does it (``group_routing``)."""
        made = group_routing.change(self.consumer, GROUP, make, self.now_ms, replaces_classic)
        if not made.records:
            return ErrorCode.NONE
        self._apply(group_routing.take_over(self.classic, made, self.now_ms))
        if self.rng.random() < self.config.store_fail_rate:
            self._apply(group_routing.undo(self.classic, self.consumer, made, self.now_ms))
            self._note(f"consumer-group store of {len(made.records)} records failed: undone")
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self.log.extend(made.pairs())
        if made.classic is not None:
            self.downgrades += 1
            self._note(f"downgraded to a classic group at generation {made.classic.generation}"
                       f" with {len(made.classic.members)} members")
        self._apply(group_routing.stored(self.classic, made, self.now_ms))
        return ErrorCode.NONE

    def _land_classic_stores(self) -> None:
        """A later batch in the log is replicated only after the earlier ones: before a
        conversion's batch, the classic stores in flight complete."""
        while self.stores:
            self.store_done(True)

    # -- the members' side ---------------------------------------------------------------------
    def _fresh(self, m: Member, switch: bool) -> Member:
        protocol = m.protocol if not switch else (CLASSIC if m.protocol == CONSUMER
                                                  else CONSUMER)
        self._note(f"{m.name} speaks the {protocol} protocol")
        return Member(m.name, m.instance_id, protocol=protocol)

    def join(self, m: Member) -> None:
        if not m.idle:
            return
        self._give_up(m, commit=True)  # commit, then give everything up
        if m.protocol == CONSUMER:
            m.generation = 0
            if not m.member_id:
                m.member_id = f"{m.name}-{uuid.UUID(int=self.rng.getrandbits(128))}"
            self.heartbeat(m)
            return
        route = group_routing.join_group(self.consumer, GROUP)
        if route is group_routing.Join.CONSUMER:
            self._join_consumer_group(m)
            return
        if route is group_routing.Join.CONSUMER_GROUP_GIVES_WAY and self._change(
                lambda: self.consumer.delete(GROUP)[1]) is not ErrorCode.NONE:
            return
        self._classic_join(m)

    def _join_consumer_group(self, m: Member) -> None:
        """A classic member's JoinGroup into a consumer group (``classic_members``)."""
        c = self.config
        req = classic_members.ClassicJoin(
            GROUP, m.member_id, m.instance_id, m.name, "/sim", c.session_timeout_ms,
            c.rebalance_timeout_ms, "consumer", ((PROTOCOL, self._subscription()),), True)
        answers: list[classic_members.ClassicJoinAnswer] = []

        def join() -> tuple[cg_records.ConsumerGroupRecord, ...]:
            answers.append(classic_members.join(self.consumer, req, self.topics, self.now_ms))
            return answers[0].records

        err = self._change(join)
        a = answers[0]
        self._note(f"{m.name} JoinGroup (consumer group) member={m.member_id or '-'}: "
                   f"{a.error.name if err is ErrorCode.NONE else err.name}")
        if err is ErrorCode.NONE:
            self._on_join(m, JoinResult(a.error, a.generation_id, member_id=a.member_id))

    def _joined(self, m: Member, r: JoinResult) -> None:
        if self._owner() is group_routing.Core.CONSUMER and self.rng.random() < 0.5:
            m.sync_due = True  # a slow client: its SyncGroup comes in a later step
            return
        self._sync(m, r)

    def _member_id_required(self, m: Member) -> None:
        self.join(m)  # at once, with it (KIP-394)

    def _sync(self, m: Member, r: JoinResult) -> None:
        if self._owner() is group_routing.Core.CLASSIC:
            super()._sync(m, r)
            return
        err, assigned, _ = classic_members.sync(self.consumer, GROUP, m.member_id,
                                                m.generation, m.instance_id, "consumer",
                                                PROTOCOL, self.now_ms)
        self._note(f"{m.name} SyncGroup (consumer group) generation={m.generation}: "
                   f"{err.name} {sorted(p for _, p in assigned)}")
        self._on_sync(m, err, frozenset(p for _, p in assigned))

    def late(self, m: Member) -> None:
        """A slow classic member sends the SyncGroup or the JoinGroup it owes now."""
        if m.running and m.sync_due:
            m.sync_due = False
            self._sync(m, JoinResult(ErrorCode.NONE, m.generation, member_id=m.member_id))
        elif m.running and m.join_due:
            m.join_due = False
            self.join(m)
        self._check()

    def heartbeat(self, m: Member) -> None:
        if not m.idle or m.generation < 0:
            return
        if m.protocol == CONSUMER:
            self._consumer_heartbeat(m)
        elif self._owner() is group_routing.Core.CONSUMER:
            err = classic_members.heartbeat(self.consumer, GROUP, m.member_id, m.generation,
                                            m.instance_id, self.now_ms)
            if err is ErrorCode.REBALANCE_IN_PROGRESS and not m.zombie and \
                    self.rng.random() < 0.5:
                self._note(f"{m.name} Heartbeat {err.name}")
                m.join_due = True  # a slow client: it rejoins in a later step
            else:
                self._on_heartbeat(m, err)
        else:
            self._on_heartbeat(m, self.classic.heartbeat(GROUP, m.member_id, m.generation,
                                                         m.instance_id, self.now_ms))
        self._check()

    def _consumer_heartbeat(self, m: Member) -> None:
        c = self.config
        hb = Heartbeat(GROUP, m.member_id, m.generation, m.name, "/sim", m.instance_id,
                       rebalance_timeout_ms=c.rebalance_timeout_ms,
                       subscribed_topic_names=(TOPIC,),
                       owned=frozenset((TOPIC_ID, p) for p in m.owned))
        route = self._heartbeat_route(m)
        if route.upgrade is not None and self.stores:
            self._land_classic_stores()
            route = self._heartbeat_route(m)  # the group as its stores left it
        if route.refused is not None:
            self._note(f"{m.name} ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND")
            self._fenced(m)
            return
        if route.classic_gives_way:
            self.classic.delete(GROUP)  # an empty classic group gives way
            if self._classic_stored():
                self.log.append((encode_group_key(GROUP), None))
        replaces: GroupRecord | None = None
        if route.upgrade is not None:
            replaces, effects = group_routing.begin_upgrade(self.classic, route.upgrade,
                                                            self.now_ms)
            self._apply(effects)
        answers = []

        def beat() -> list[cg_records.ConsumerGroupRecord]:
            a, records = group_routing.heartbeat(self.consumer, hb, route.upgrade,
                                                 self.topics, self.now_ms)
            answers.append(a)
            return records

        err = self._change(beat, replaces)
        a = answers[0]
        if replaces is not None and a.error is not ErrorCode.NONE:
            _, effects = self.classic.load(GROUP, replaces, self.now_ms)  # not converted
            self._apply(effects)
        elif replaces is not None and err is ErrorCode.NONE:
            self.upgrades += 1
            self._note(f"upgraded to a consumer group at generation {replaces.generation}")
        if err is not ErrorCode.NONE:
            return
        if a.error is not ErrorCode.NONE:
            self._note(f"{m.name} ConsumerGroupHeartbeat epoch={m.generation} {a.error.name}")
            if m.zombie or a.error is ErrorCode.FENCED_INSTANCE_ID:
                m.running = False
            elif a.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                self._fenced(m)
            return
        assert a.assignment is not None  # a full heartbeat is answered in full
        new = frozenset(p for _, p in a.assignment)
        if new != m.owned or a.member_epoch != m.generation:
            self._note(f"{m.name} ConsumerGroupHeartbeat epoch {m.generation}->"
                       f"{a.member_epoch} {sorted(new)}")
        if m.owned - new:
            self._commit(m, "revoke")  # commit, then give up what goes
        m.generation = a.member_epoch
        for p in m.owned - new:
            m.positions.pop(p, None)
        for p in new - m.owned:
            m.positions[p] = self.committed.get(p, 0)
        m.owned, m.owned_generation = new, a.member_epoch

    def _heartbeat_route(self, m: Member) -> group_routing.HeartbeatRoute:
        return group_routing.consumer_group_heartbeat(
            self.classic.groups, self.consumer, GROUP, m.generation, self._classic_stored())

    def _classic_stored(self) -> bool:
        """The log's last classic group record is a record, not a tombstone."""
        key = encode_group_key(GROUP)
        return next((v is not None for k, v in reversed(self.log) if k == key), False)

    def _fenced(self, m: Member) -> None:
        """A fenced consumer-protocol member gives everything up without committing and
        rejoins at epoch 0 under its member id."""
        self._give_up(m, commit=False)
        m.generation = 0

    def _commit_error(self, m: Member) -> ErrorCode:
        return group_routing.commit_error(self.classic, self.consumer, GROUP, m.member_id,
                                          m.owned_generation, m.instance_id,
                                          8 if m.protocol == CLASSIC else 9)

    def _validate_commit(self, m: Member) -> ErrorCode:
        return group_routing.validate_commit(self.classic, self.consumer, GROUP, m.member_id,
                                             m.owned_generation, m.instance_id,
                                             8 if m.protocol == CLASSIC else 9, self.now_ms)

    def _current_generation(self, m: Member) -> int | None:
        cg = self.consumer.groups.get(GROUP)
        if cg is not None:
            x = cg.members.get(m.member_id)
            return None if x is None else x.member_epoch
        g = self.classic.groups.get(GROUP)
        return None if g is None else g.generation_id

    def leave(self, m: Member) -> None:
        if not m.idle or not m.member_id or m.generation < 0:
            return
        self._commit(m, "close")
        consumer_group = self._owner() is group_routing.Core.CONSUMER
        if m.protocol == CONSUMER:
            epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if m.instance_id else \
                LEAVE_GROUP_MEMBER_EPOCH
            hb = Heartbeat(GROUP, m.member_id, epoch, m.name, "/sim", m.instance_id)
            self._note(f"{m.name} leaves (epoch {epoch})")
            if consumer_group:
                self._change(lambda: list(
                    self.consumer.heartbeat(hb, self.topics, self.now_ms).records))
        elif consumer_group:
            self._note(f"{m.name} LeaveGroup (consumer group)")
            self._change(lambda: classic_members.leave(
                self.consumer, GROUP, [(m.member_id, m.instance_id)], self.topics)[1])
        else:
            err, effects = self.classic.leave(GROUP, m.member_id, m.instance_id, self.now_ms)
            self._note(f"{m.name} LeaveGroup {err.name}")
            self._apply(effects)
        m.member_id, m.generation = "", -1
        self._give_up(m, commit=False)
        m.running = False  # closed; ``restart`` starts it again

    # -- the coordinator's side ----------------------------------------------------------------
    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self._tick_classic()
        for group_id, member_id, why in self.consumer.expired(self.now_ms):
            self._note(f"consumer group: member {member_id} {why}")
            self.classic_timeouts += why.startswith("(a classic member)")
            self._change(self._expiry(group_id, member_id))
        self._check()

    def _expiry(self, group_id: str, member_id: str
                ) -> Callable[[], list[cg_records.ConsumerGroupRecord]]:
        return lambda: self.consumer.expire(group_id, member_id, self.topics, self.now_ms)

    def store_done(self, ok: bool) -> None:
        """The oldest classic store is acknowledged (or fails: it did not reach the log)."""
        if not self.stores:
            return
        s = self.stores.popleft()
        if ok:
            self._store_entries.pop(id(s))
        else:
            self._unlog(s)  # the newest copy of this record is the one that failed
        self._note(f"classic store ({s.reason}) {'done' if ok else 'failed'}")
        if s.token is not None:
            self._apply(self.classic.stored(s.token, ErrorCode.NONE if ok else
                                            ErrorCode.COORDINATOR_NOT_AVAILABLE, self.now_ms))

    def failover(self) -> None:
        """The coordinator's broker dies: classic stores in flight reach the log or not (a
        random prefix), new cores load the log as a broker does (its ``OffsetStore`` replays
        the partition, ``group_routing.load`` hands each group to its core); requests in
        flight are NOT_COORDINATOR."""
        arrived, lost = self._in_flight_lost(None)
        for s in arrived:
            self._store_entries.pop(id(s))
        for s in lost:
            self._unlog(s)
        self.classic, self.consumer = self._new_classic(), self._new_consumer()
        batch = build_batch([Record(i, self.now_ms, k, v)
                             for i, (k, v) in enumerate(self.log)]) if self.log else b""
        loaded = OffsetStore().load_partition(0, 1, lambda: [batch] if batch else [])
        self._apply(group_routing.load(self.classic, self.consumer, loaded, self.now_ms))
        if GROUP in self.consumer.groups:
            self._note(f"failover: a consumer group at epoch "
                       f"{self.consumer.groups[GROUP].group_epoch} with "
                       f"{len(self.consumer.groups[GROUP].members)} members")
        elif GROUP in self.classic.groups:
            self._note(f"failover: a classic group at generation "
                       f"{self.classic.groups[GROUP].generation_id}")
        else:
            self._note("failover: no group stored")
        self._check()

    # -- a random run --------------------------------------------------------------------------
    def _member_actions(self) -> dict[str, Callable[[Member], None]]:
        def switch(m: Member) -> None:
            if not m.running or m.instance_id is not None:
                self.restart(m, switch=True)

        return {**super()._member_actions(), "late": self.late, "switch": switch}
