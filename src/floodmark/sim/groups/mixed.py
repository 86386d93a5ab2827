"""One group whose members speak the classic protocol or KIP-848's consumer protocol, on a
simulated coordinator, step by step, with virtual time: KIP-848's online migration under
random steps.

The coordinator is the broker's own pair of cores: ``ClassicGroupCore`` while the group is a
classic group, ``ConsumerGroupCoordinator`` (with ``classic_members`` serving the classic
members) while it is a consumer group; the world plays the broker's routing between them
(``handlers.classic_protocol`` / ``consumer_group_apis``): a consumer-protocol member joining a
classic group with members upgrades it (``migration.can_upgrade``, ``ConsumerGroupCoordinator
.upgrade``; the classic group's parked requests are answered REBALANCE_IN_PROGRESS), the last
consumer-protocol member leaving or removed downgrades it (``take_downgrade``: the classic
core loads the group and rebalances it), an empty group of one kind gives way to the other.
Every change is a record in a simulated ``__consumer_offsets`` log (consumer-group records
through their codec, the classic group's ``GroupRecord``); a consumer-group change whose store
fails is undone (the core's ``restore``), as the broker does.

Members behave like real clients: classic ones like the Java consumer with the eager protocol
(commit, give everything up, JoinGroup, SyncGroup; the leader assigns round robin in the
consumer protocol's encoding), consumer-protocol ones like KIP-848's (full heartbeats with what
they own, commit before giving a partition up, a fenced member drops everything and rejoins at
epoch 0 without committing). A member may restart speaking the other protocol (an upgrade or a
rollback, one member at a time), a static one under its ``group.instance.id`` while its old
process may linger as a zombie. A failover replaces both cores with fresh ones that replay the
log; requests in flight are NOT_COORDINATOR.

``spec.groups`` is checked after every step: committed offsets never go backwards, no
partition is owned by two members the coordinator would let commit, and a commit is accepted
only from a member at the coordinator's current generation (classic) or member epoch
(consumer group) — a fenced or replaced member commits nothing.
"""

from __future__ import annotations

import random
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

from floodmark.broker import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    AnswerJoin,
    AnswerSync,
    ClassicEffect,
    ClassicGroupConfig,
    ClassicGroupCore,
    ConsumerGroupCoordinator,
    CoreConfig,
    GroupRecord,
    Heartbeat,
    JoinGroup,
    JoinResult,
    StoreGroup,
    SyncGroup,
    classic_members,
    migration,
    record_of_snapshot,
    snapshot_of,
)
from floodmark.broker import records as cg_records
from floodmark.client import encode_subscription
from floodmark.errors import ErrorCode
from floodmark.sim.groups.world import Violation
from floodmark.spec import groups as spec
from floodmark.wire import decode_assignment, encode_assignment

GROUP = "g"
TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0x5EED)
PROTOCOL = "range"
CLASSIC, CONSUMER = "classic", "consumer"


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
class Member:
    """A consumer process."""

    name: str
    protocol: str
    instance_id: str | None
    member_id: str = ""
    epoch: int = -1  # a classic member's generation, a consumer member's member epoch
    joining: int | None = None  # request id of a classic JoinGroup parked in the classic core
    syncing: int | None = None  # and of its SyncGroup
    sync_due: bool = False  # answered by a consumer group, its SyncGroup not sent yet
    join_due: bool = False  # told to rejoin by a consumer group, its JoinGroup not sent yet
    owned: frozenset[int] = frozenset()
    owned_epoch: int = -1
    positions: dict[int, int] = field(default_factory=dict)
    running: bool = True
    zombie: bool = False

    @property
    def idle(self) -> bool:
        return self.running and self.joining is None and self.syncing is None and \
            not self.sync_due and not self.join_due


Entry = tuple[bytes, bytes | None] | GroupRecord | None  # a consumer-group record, a classic


class MixedGroupWorld:
    def __init__(self, seed: int, config: MixedSimConfig | None = None) -> None:
        self.seed = seed
        self.config = c = config or MixedSimConfig()
        self.rng = random.Random(seed)
        self.now_ms = 0
        self.steps = 0
        self.topics = {TOPIC: cg_records.TopicMetadata(TOPIC_ID, TOPIC, c.partitions)}
        self.classic, self.consumer = self._new_cores()
        self.members = [Member(f"c{i}", CONSUMER if i >= c.members - c.consumer_members
                               else CLASSIC, f"i{i}" if i < c.static_members else None)
                        for i in range(c.members)]
        self.zombies: list[Member] = []
        self.answers: deque[AnswerJoin | AnswerSync] = deque()
        self.stores: deque[StoreGroup] = deque()  # classic stores: in the log, not yet acked
        self.log: list[Entry] = []  # the group's records in __consumer_offsets, in order
        self.committed: dict[int, int] = {}
        self.failovers = self.commits = self.upgrades = self.downgrades = 0
        self.classic_timeouts = 0  # classic members removed by a join or sync timeout
        self.violations: list[Violation] = []
        self.trace: deque[str] = deque(maxlen=c.max_trace)
        self._request_ids = 0

    def _new_cores(self) -> tuple[ClassicGroupCore, ConsumerGroupCoordinator]:
        c = self.config
        return (ClassicGroupCore(ClassicGroupConfig(0, 1, 60_000, store_groups=True),
                                 random.Random(self.rng.getrandbits(64))),
                ConsumerGroupCoordinator(CoreConfig(session_timeout_ms=c.session_timeout_ms,
                                                    heartbeat_interval_ms=500)))

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
                self.log.append(e.record)  # appended now, acknowledged by ``store_done``
                self.stores.append(e)

    def _is_consumer_group(self, with_members: bool) -> bool:
        g = self.consumer.groups.get(GROUP)
        return g is not None and (bool(g.members) or not with_members)

    def _change(self, change: Callable[[], list[cg_records.ConsumerGroupRecord]],
                upgrade_of: GroupRecord | None = None) -> ErrorCode:
        """A consumer-group change and the store of its records (``group_apis
        .change_consumer_group``): stored in one batch, or undone when the store fails; a
        downgrade hands the group to the classic core, which rebalances it."""
        before = self.consumer.snapshot(GROUP)
        records = change()
        downgraded = self.consumer.take_downgrade(GROUP)
        if not records:
            return ErrorCode.NONE
        if self.rng.random() < self.config.store_fail_rate:
            self.consumer.restore(GROUP, before)
            self._note(f"consumer-group store of {len(records)} records failed: undone")
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if upgrade_of is not None:
            self.log.append(None)  # the classic group's tombstone, first in the batch
        self.log.extend(cg_records.encode(r) for r in records)
        if downgraded is not None:
            rec = record_of_snapshot(downgraded, self.now_ms)
            self.log.append(rec)
            _, effects = self.classic.load(GROUP, rec, self.now_ms)
            self._apply(effects)
            if downgraded.rebalance:
                self._apply(self.classic.rebalance(GROUP, "downgraded from a consumer group",
                                                   self.now_ms))
            self.downgrades += 1
            self._note(f"downgraded to a classic group at generation {rec.generation} "
                       f"with {len(rec.members)} members")
        return ErrorCode.NONE

    def _land_classic_stores(self) -> None:
        """A later batch in the log is replicated only after the earlier ones: before a
        conversion's batch, the classic stores in flight complete."""
        while self.stores:
            self.store_done(True)

    # -- the members' side ---------------------------------------------------------------------
    def _all(self) -> list[Member]:
        return [*self.members, *self.zombies]

    def _subscription(self) -> bytes:
        return encode_subscription([TOPIC])

    def _give_up(self, m: Member, commit: bool) -> None:
        if commit:
            self._commit(m, "revoke")
        m.owned, m.owned_epoch, m.positions = frozenset(), -1, {}

    def join(self, m: Member) -> None:
        if not m.idle:
            return
        if m.protocol == CONSUMER:
            self._give_up(m, commit=True)
            m.epoch = 0
            if not m.member_id:
                m.member_id = f"{m.name}-{uuid.UUID(int=self.rng.getrandbits(128))}"
            self.heartbeat(m)
            return
        self._give_up(m, commit=True)  # eager: commit, then give everything up
        c = self.config
        req = classic_members.ClassicJoin(
            GROUP, m.member_id, m.instance_id, m.name, "/sim", c.session_timeout_ms,
            c.rebalance_timeout_ms, "consumer", ((PROTOCOL, self._subscription()),), True)
        if self._is_consumer_group(with_members=True):
            answers: list[classic_members.ClassicJoinAnswer] = []
            err = self._change(lambda: self._classic_join(req, answers))
            a = answers[0]
            self._note(f"{m.name} JoinGroup (consumer group) member={m.member_id or '-'}: "
                       f"{a.error.name if err is ErrorCode.NONE else err.name}")
            if err is not ErrorCode.NONE:
                return
            self._on_join(m, JoinResult(a.error, a.generation_id, member_id=a.member_id))
            return
        if self._is_consumer_group(with_members=False) and self._change(  # it gives way
                lambda: self.consumer.delete(GROUP)[1]) is not ErrorCode.NONE:
            return
        m.joining = self._next_request_id()
        self._note(f"{m.name} JoinGroup member={m.member_id or '-'}")
        self._apply(self.classic.join(JoinGroup(
            m.joining, GROUP, m.member_id, m.instance_id, m.name, "/sim",
            c.session_timeout_ms, c.rebalance_timeout_ms, "consumer",
            ((PROTOCOL, self._subscription()),), True), self.now_ms))

    def _classic_join(self, req: classic_members.ClassicJoin,
                      answers: list[classic_members.ClassicJoinAnswer]
                      ) -> list[cg_records.ConsumerGroupRecord]:
        a = classic_members.join(self.consumer, req, self.topics, self.now_ms)
        answers.append(a)
        return list(a.records)

    def _on_join(self, m: Member, r: JoinResult) -> None:
        if r.error is ErrorCode.NONE:
            m.member_id, m.epoch = r.member_id, r.generation_id
            if self._is_consumer_group(with_members=False) and self.rng.random() < 0.5:
                m.sync_due = True  # a slow client: its SyncGroup comes in a later step
                return
            self._sync(m, r)
        elif r.error is ErrorCode.MEMBER_ID_REQUIRED:
            m.member_id = r.member_id
            self.join(m)  # at once, with it (KIP-394)
        elif r.error is ErrorCode.UNKNOWN_MEMBER_ID:
            m.member_id = ""
        elif r.error is ErrorCode.FENCED_INSTANCE_ID:
            m.running = False

    def _sync(self, m: Member, r: JoinResult) -> None:
        if self._is_consumer_group(with_members=False):
            err, assigned, _ = classic_members.sync(self.consumer, GROUP, m.member_id,
                                                    m.epoch, m.instance_id, "consumer",
                                                    PROTOCOL, self.now_ms)
            self._note(f"{m.name} SyncGroup (consumer group) generation={m.epoch}: "
                       f"{err.name} {sorted(p for _, p in assigned)}")
            self._on_sync(m, err, frozenset(p for _, p in assigned))
            return
        assignments: tuple[tuple[str, bytes], ...] = ()
        if r.leader == r.member_id:
            ids = sorted(member_id for member_id, _, _ in r.members)
            assignments = tuple(
                (member_id, encode_assignment(
                    {TOPIC: tuple(range(i, self.config.partitions, len(ids)))}, 0))
                for i, member_id in enumerate(ids))
        m.syncing = self._next_request_id()
        self._note(f"{m.name} SyncGroup generation={m.epoch}"
                   f"{' (leader)' if assignments else ''}")
        self._apply(self.classic.sync(SyncGroup(m.syncing, GROUP, m.member_id, m.epoch,
                                                assignments, m.instance_id), self.now_ms))

    def late(self, m: Member) -> None:
        """A slow classic member sends the SyncGroup or the JoinGroup it owes now."""
        if m.running and m.sync_due:
            m.sync_due = False
            self._sync(m, JoinResult(ErrorCode.NONE, m.epoch, member_id=m.member_id))
        elif m.running and m.join_due:
            m.join_due = False
            self.join(m)
        self._check()

    def _on_sync(self, m: Member, error: ErrorCode, partitions: frozenset[int]) -> None:
        if error is ErrorCode.NONE:
            m.owned, m.owned_epoch = partitions, m.epoch
            m.positions = {p: self.committed.get(p, 0) for p in partitions}
        elif error is ErrorCode.UNKNOWN_MEMBER_ID:
            m.member_id = ""
        elif error is ErrorCode.FENCED_INSTANCE_ID:
            m.running = False

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

    def heartbeat(self, m: Member) -> None:
        if not m.idle or m.epoch < 0:
            return
        if m.protocol == CONSUMER:
            self._consumer_heartbeat(m)
        else:
            self._classic_heartbeat(m)
        self._check()

    def _classic_heartbeat(self, m: Member) -> None:
        if self._is_consumer_group(with_members=False):
            err = classic_members.heartbeat(self.consumer, GROUP, m.member_id, m.epoch,
                                            m.instance_id, self.now_ms)
        else:
            err = self.classic.heartbeat(GROUP, m.member_id, m.epoch, m.instance_id,
                                         self.now_ms)
        if err is not ErrorCode.NONE:
            self._note(f"{m.name} Heartbeat {err.name}")
        if err is ErrorCode.FENCED_INSTANCE_ID or (m.zombie and err is not ErrorCode.NONE):
            m.running = False
        elif err is ErrorCode.UNKNOWN_MEMBER_ID:
            m.member_id, m.epoch = "", -1
            self.join(m)
        elif err is ErrorCode.REBALANCE_IN_PROGRESS and self._is_consumer_group(False) and \
                self.rng.random() < 0.5:
            m.join_due = True  # a slow client: it rejoins in a later step
        elif err is not ErrorCode.NONE:
            self.join(m)

    def _consumer_heartbeat(self, m: Member) -> None:
        c = self.config
        hb = Heartbeat(GROUP, m.member_id, m.epoch, m.name, "/sim", m.instance_id,
                       rebalance_timeout_ms=c.rebalance_timeout_ms,
                       subscribed_topic_names=(TOPIC,),
                       owned=frozenset((TOPIC_ID, p) for p in m.owned))
        classic = self.classic.groups.get(GROUP)
        upgrade_of: GroupRecord | None = None
        snapshot: migration.ClassicSnapshot | None = None
        if classic is not None and classic.members:
            if m.epoch != 0 or migration.can_upgrade(self.consumer.config.migration_policy,
                                                     snapshot_of(classic)) is not None:
                self._note(f"{m.name} ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND")
                self._fenced(m)
                return
            self._land_classic_stores()
            classic = self.classic.groups[GROUP]
            snapshot = snapshot_of(classic)
            upgrade_of = self.classic.record_of(classic, self.now_ms)
            self._apply(self.classic.unload([GROUP], ErrorCode.REBALANCE_IN_PROGRESS))
        elif classic is not None and m.epoch == 0 and not self._is_consumer_group(False):
            self.classic.delete(GROUP)  # an empty classic group gives way
            self.log.append(None)
        answers = []

        def beat() -> list[cg_records.ConsumerGroupRecord]:
            records = [] if snapshot is None else \
                self.consumer.upgrade(snapshot, self.topics, self.now_ms)
            a = self.consumer.heartbeat(hb, self.topics, self.now_ms)
            answers.append(a)
            if a.error is not ErrorCode.NONE:
                if snapshot is not None:
                    self.consumer.restore(GROUP, None)
                return []
            return [*records, *a.records]

        err = self._change(beat, upgrade_of)
        a = answers[0]
        if upgrade_of is not None and (err is not ErrorCode.NONE
                                       or a.error is not ErrorCode.NONE):
            _, effects = self.classic.load(GROUP, upgrade_of, self.now_ms)  # not converted
            self._apply(effects)
        elif upgrade_of is not None:
            self.upgrades += 1
            self._note(f"upgraded to a consumer group at generation {upgrade_of.generation}")
        if err is not ErrorCode.NONE:
            return
        if a.error is not ErrorCode.NONE:
            self._note(f"{m.name} ConsumerGroupHeartbeat epoch={m.epoch} {a.error.name}")
            if m.zombie:
                m.running = False
            elif a.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                self._fenced(m)
            elif a.error is ErrorCode.FENCED_INSTANCE_ID:
                m.running = False
            return
        assert a.assignment is not None  # a full heartbeat is answered in full
        new = frozenset(p for _, p in a.assignment)
        if new != m.owned or a.member_epoch != m.epoch:
            self._note(f"{m.name} ConsumerGroupHeartbeat epoch {m.epoch}->{a.member_epoch} "
                       f"{sorted(new)}")
        if m.owned - new:
            self._commit(m, "revoke")  # commit, then give up what goes
        m.epoch = a.member_epoch
        for p in m.owned - new:
            m.positions.pop(p, None)
        for p in new - m.owned:
            m.positions[p] = self.committed.get(p, 0)
        m.owned, m.owned_epoch = new, a.member_epoch

    def _fenced(self, m: Member) -> None:
        """A fenced consumer-protocol member gives everything up without committing and
        rejoins at epoch 0 under its member id."""
        self._give_up(m, commit=False)
        m.epoch = 0

    def consume(self, m: Member) -> None:
        if m.running:
            for p in m.positions:
                m.positions[p] += self.rng.randint(0, 3)

    def commit(self, m: Member) -> None:
        self._commit(m, "commit")
        self._check()

    def _commit_error(self, m: Member) -> ErrorCode:
        if self._is_consumer_group(with_members=False):
            return self.consumer.validate_commit(
                GROUP, m.member_id, m.owned_epoch, 8 if m.protocol == CLASSIC else 9)
        return self.classic.commit_error(GROUP, m.member_id, m.owned_epoch, m.instance_id)

    def _current_epoch(self, m: Member) -> int | None:
        """The coordinator's generation (classic) or the member's epoch (consumer group)."""
        cg = self.consumer.groups.get(GROUP)
        if cg is not None:
            x = cg.members.get(m.member_id)
            return None if x is None else x.member_epoch
        g = self.classic.groups.get(GROUP)
        return None if g is None else g.generation_id

    def _commit(self, m: Member, why: str) -> None:
        if not m.running or not m.owned:
            return
        err = self._commit_error(m)
        if err is ErrorCode.NONE and not self._is_consumer_group(with_members=False):
            self.classic.validate_commit(GROUP, m.member_id, m.owned_epoch, m.instance_id,
                                         self.now_ms)
        self._note(f"{m.name} OffsetCommit ({why}) epoch={m.owned_epoch} "
                   f"{dict(sorted(m.positions.items()))}: {err.name}")
        if err is not ErrorCode.NONE:
            return
        current = self._current_epoch(m)
        if current is None or spec.stale_commit(m.owned_epoch, current):
            self._violate(spec.STALE_GENERATION_COMMIT,
                          f"{m.name} committed under {m.owned_epoch}, the coordinator is at "
                          f"{current}")
        back = spec.committed_backwards(self.committed, m.positions)
        if back is not None:
            p, before, after = back
            self._violate(spec.COMMITTED_BACKWARDS,
                          f"{m.name} moved partition {p} from {before} back to {after}")
        self.committed.update(m.positions)
        self.commits += 1

    def leave(self, m: Member) -> None:
        if not m.idle or not m.member_id or m.epoch < 0:
            return
        self._commit(m, "close")
        if m.protocol == CONSUMER:
            epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if m.instance_id else \
                LEAVE_GROUP_MEMBER_EPOCH
            hb = Heartbeat(GROUP, m.member_id, epoch, m.name, "/sim", m.instance_id)
            self._note(f"{m.name} leaves (epoch {epoch})")
            if self._is_consumer_group(with_members=False):
                self._change(lambda: list(
                    self.consumer.heartbeat(hb, self.topics, self.now_ms).records))
        elif self._is_consumer_group(with_members=False):
            self._note(f"{m.name} LeaveGroup (consumer group)")
            self._change(lambda: classic_members.leave(
                self.consumer, GROUP, [(m.member_id, m.instance_id)], self.topics)[1])
        else:
            err, effects = self.classic.leave(GROUP, m.member_id, m.instance_id, self.now_ms)
            self._note(f"{m.name} LeaveGroup {err.name}")
            self._apply(effects)
        m.member_id, m.epoch = "", -1
        self._give_up(m, commit=False)
        m.running = False  # closed; ``restart`` starts it again

    def crash(self, m: Member) -> None:
        if m.running and not m.zombie:
            self._note(f"{m.name} crashes")
            m.running = False

    def restart(self, m: Member, switch: bool = False) -> None:
        """A stopped member starts again (a running static one may leave a zombie behind);
        ``switch``: speaking the other protocol (an upgrade or a rollback of that member)."""
        if m.zombie:
            return
        if m.running:
            if m.instance_id is None or not m.member_id:
                return
            self.zombies.append(replace(m, name=f"{m.name}-zombie{len(self.zombies)}",
                                        positions=dict(m.positions), zombie=True))
        protocol = m.protocol if not switch else (CLASSIC if m.protocol == CONSUMER
                                                  else CONSUMER)
        self._note(f"{m.name} restarts ({protocol})")
        fresh = Member(m.name, protocol, m.instance_id)
        self.members[self.members.index(m)] = fresh
        self.join(fresh)

    # -- the coordinator's side ----------------------------------------------------------------
    def advance(self, ms: int) -> None:
        self.now_ms += ms
        deadline = self.classic.next_deadline_ms()
        if deadline is not None and deadline <= self.now_ms:
            self._apply(self.classic.tick(self.now_ms))
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
        if not ok:
            # the newest copy of this record is the one that failed
            for i in range(len(self.log) - 1, -1, -1):
                if self.log[i] is s.record:
                    del self.log[i]
                    break
        self._note(f"classic store ({s.reason}) {'done' if ok else 'failed'}")
        if s.token is not None:
            self._apply(self.classic.stored(s.token, ErrorCode.NONE if ok else
                                            ErrorCode.COORDINATOR_NOT_AVAILABLE, self.now_ms))

    def failover(self) -> None:
        """The coordinator's broker dies: classic stores in flight reach the log or not (a
        random prefix), new cores replay the log; requests in flight are NOT_COORDINATOR."""
        landed = self.rng.randint(0, len(self.stores))
        for s in list(self.stores)[landed:]:
            for i in range(len(self.log) - 1, -1, -1):
                if self.log[i] is s.record:
                    del self.log[i]
                    break
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
        self.classic, self.consumer = self._new_cores()
        classic: GroupRecord | None = None
        for entry in self.log:
            if isinstance(entry, tuple):
                self.consumer.apply(cg_records.decode(*entry))
            else:
                classic = entry
        self.consumer.loaded([GROUP], self.now_ms)
        if GROUP in self.consumer.groups:
            self._note(f"failover: a consumer group at epoch "
                       f"{self.consumer.groups[GROUP].group_epoch} with "
                       f"{len(self.consumer.groups[GROUP].members)} members")
        elif classic is not None:
            _, effects = self.classic.load(GROUP, classic, self.now_ms)
            self._apply(effects)
            self._note(f"failover: a classic group at generation {classic.generation}")
        else:
            self._note("failover: no group stored")
        self._check()

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
    ACTIONS: ClassVar[Mapping[str, float]] = {
        "deliver": 6, "heartbeat": 8, "consume": 4, "commit": 4, "store": 4, "advance": 3,
        "join": 1, "store_fail": 0.5, "leave": 0.3, "crash": 0.3, "restart": 0.5,
        "switch": 0.3, "late": 1}

    def step(self, action: str, who: int, amount_ms: int) -> None:
        self.steps += 1
        m = self.members[who % len(self.members)]
        if action in ("consume", "commit") and self.zombies and who < 0:
            m = self.zombies[-who % len(self.zombies)]  # a paused process runs again
        if action == "join":
            self.restart(m) if not m.running else self.join(m)
        elif action == "deliver":
            self.deliver()
        elif action == "late":
            self.late(m)
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
        elif action == "switch":
            if not m.running or m.instance_id is not None:
                self.restart(m, switch=True)
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
