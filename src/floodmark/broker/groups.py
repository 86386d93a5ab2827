"""The classic consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup).

One state machine per group, Kafka's states: EMPTY -> PREPARING_REBALANCE -> COMPLETING_REBALANCE
-> STABLE, back to PREPARING_REBALANCE when a member joins, leaves or times out. Generations start
at 1 (aiokafka skips LeaveGroup at generation 0, wire-compat.md P11). A rebalance completes when
every known member has rejoined, after ``group.initial.rebalance.delay.ms`` for an empty group, or
at the rebalance timeout (members that did not rejoin are removed; a late rejoin with the old
member id is UNKNOWN_MEMBER_ID, and the client joins afresh). Only the leader gets the member
list; followers' SyncGroup waits for the leader's assignment.

The group's state survives its coordinator (Kafka's ``GroupMetadataValue`` records in
``__consumer_offsets``): ``persist`` stores the group when a generation's assignment is complete
(the SyncGroup answers wait for it; a failed store answers the error and the group rebalances),
when it becomes empty and when a static member takes a new member id; a new coordinator
``load``s what its partitions hold, so members keep their member id, generation and assignment
and heartbeat on without a rebalance, each with a fresh session timeout.

Kafka's checks, in Kafka's order: a stale generation is ILLEGAL_GENERATION (Heartbeat, SyncGroup,
OffsetCommit) before any REBALANCE_IN_PROGRESS; OffsetCommit from a member of the current
generation is accepted while the group is stable or preparing a rebalance (clients commit in
their revoke callback then) and refused between JoinGroup and SyncGroup; a member parked in
JoinGroup or SyncGroup is not expired; a silent member is removed after its session timeout.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypedDict

from floodmark.broker.offsets import GroupRecord, MemberRecord
from floodmark.client.group import decode_subscription
from floodmark.errors import ErrorCode

log = logging.getLogger(__name__)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class JoinResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat_ms: float = 0.0
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[tuple[ErrorCode, bytes]] | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


def _now_ms() -> float:
    return time.monotonic() * 1000


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # KIP-394 ids handed out with MEMBER_ID_REQUIRED -> when they lapse unused (ms)
    pending_members: dict[str, float] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    rebalance_timer: asyncio.TimerHandle | None = None
    initial_delay_timer: asyncio.TimerHandle | None = None
    storing: bool = False  # the leader's assignment is being stored (SyncGroup waits)


class MemberDescription(TypedDict):
    """A member as DescribeGroups lists it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


class GroupDescription(TypedDict):
    """A group as DescribeGroups (and ListGroups) show it."""

    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: list[MemberDescription]


class GroupCoordinator:
    def __init__(
        self,
        *,
        initial_rebalance_delay_ms: int,
        min_session_timeout_ms: int,
        max_session_timeout_ms: int,
        on_group_emptied: Callable[[str], None] | None = None,
        persist: Callable[[str, GroupRecord | None], Awaitable[ErrorCode]] | None = None,
    ) -> None:
        self.groups: dict[str, Group] = {}
        self._initial_delay_ms = initial_rebalance_delay_ms
        self._min_session_ms = min_session_timeout_ms
        self._max_session_ms = max_session_timeout_ms
        self._on_group_emptied = on_group_emptied
        self.persist = persist
        self._stores: set[asyncio.Task[None]] = set()

    # -- the group's record (GroupMetadataValue) -----------------------------------------------
    @staticmethod
    def record_of(g: Group) -> GroupRecord:
        protocol = g.protocol_name or ""
        return GroupRecord(
            g.protocol_type or "", g.generation_id, g.protocol_name, g.leader_id,
            int(time.time() * 1000),
            tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                               m.rebalance_timeout_ms, m.session_timeout_ms,
                               m.metadata_for(protocol), m.assignment)
                  for m in g.members.values()))

    def load(self, group_id: str, rec: GroupRecord) -> Group:
        """A new coordinator takes the group as its last record left it: stable with its
        members (each alive from now, for a session timeout) or empty."""
        self.unload([group_id])
        g = Group(group_id, generation_id=rec.generation,
                  protocol_type=rec.protocol_type or None)
        now = _now_ms()
        for r in rec.members:
            protocols = [(rec.protocol or "", r.subscription)]
            m = Member(r.member_id, r.group_instance_id, r.client_id, r.client_host,
                       r.session_timeout_ms, r.rebalance_timeout_ms, rec.protocol_type,
                       protocols, assignment=r.assignment, last_heartbeat_ms=now)
            g.members[m.member_id] = m
            if m.group_instance_id:
                g.static_members[m.group_instance_id] = m.member_id
        if g.members:
            g.state = GroupState.STABLE
            g.protocol_name = rec.protocol
            g.leader_id = rec.leader if rec.leader in g.members else None
        self.groups[group_id] = g
        return g

    def unload(self, group_ids: list[str]) -> None:
        """Another broker coordinates these groups now: forget them here; members parked in
        JoinGroup or SyncGroup are told NOT_COORDINATOR (they find the new coordinator)."""
        for group_id in group_ids:
            g = self.groups.pop(group_id, None)
            if g is None:
                continue
            for timer in (g.rebalance_timer, g.initial_delay_timer):
                if timer is not None:
                    timer.cancel()
            for m in g.members.values():
                if m.join_future is not None and not m.join_future.done():
                    m.join_future.set_result(JoinResult(ErrorCode.NOT_COORDINATOR,
                                                        member_id=m.member_id))
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result((ErrorCode.NOT_COORDINATOR, b""))

    def _store_later(self, g: Group, why: str) -> None:
        """Store the group's record without waiting (an emptied group, a replaced static
        member: Kafka writes these too, and a failover then loads them)."""
        if self.persist is None:
            return
        store = self.persist(g.group_id, self.record_of(g))

        async def run() -> None:
            err = await store
            if err is not ErrorCode.NONE:
                log.warning("group %s: storing its metadata (%s) failed: %s", g.group_id, why,
                            err.name)

        task = asyncio.get_running_loop().create_task(run())
        self._stores.add(task)
        task.add_done_callback(self._stores.discard)

    def group(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = Group(group_id)
            self.groups[group_id] = g
        return g

    # -- JoinGroup -----------------------------------------------------------------------------
    async def join(
        self, *, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], require_known_member_id: bool,
    ) -> JoinResult:
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id=member_id)
        if not (self._min_session_ms <= session_timeout_ms <= self._max_session_ms):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        g = self.group(group_id)
        if g.state is GroupState.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        names = {p for p, _ in protocols}
        others = any(m != member_id for m in g.members)
        if not protocols or (
            others and (g.protocol_type != protocol_type
                        or not names & self._common_protocols(g, exclude=member_id))
        ):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if group_instance_id:
            known = g.static_members.get(group_instance_id)
            if member_id and known is not None and known != member_id:
                return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
            if not member_id and known is not None and known in g.members:
                replaced = self._replace_static_member(g, group_instance_id, known, client_id,
                                                       client_host, session_timeout_ms,
                                                       rebalance_timeout_ms, protocols)
                return replaced if isinstance(replaced, JoinResult) else await replaced
        if not member_id:
            new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id and not group_instance_id:
                # KIP-394: hand out the id first; the client rejoins with it.
                g.pending_members[new_id] = _now_ms() + session_timeout_ms
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
            member_id = new_id
        elif member_id not in g.members and member_id not in g.pending_members:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        g.pending_members.pop(member_id, None)
        loop = asyncio.get_running_loop()
        member = g.members.get(member_id)
        if member is None:
            member = Member(member_id, group_instance_id, client_id, client_host,
                            session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
            if not g.members:
                # The first member sets the type; an Empty group keeps its last one (as Kafka).
                g.protocol_type = protocol_type
            g.members[member_id] = member
            if group_instance_id:
                g.static_members[group_instance_id] = member_id
        else:
            if member.protocols == protocols and (
                    g.state is GroupState.COMPLETING_REBALANCE
                    or (g.state is GroupState.STABLE and g.leader_id != member_id)):
                # The same metadata again: a follower while stable, or anyone whose JoinGroup
                # answer was lost while the group waits for SyncGroup. Just answer (Kafka).
                member.last_heartbeat_ms = _now_ms()
                return self._join_result(g, member)
            member.protocols = protocols
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
        member.last_heartbeat_ms = _now_ms()
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS,
                                                     member_id=member_id))
        member.join_future = loop.create_future()
        fut = member.join_future
        self._prepare_rebalance(g, f"member {member_id} joined")
        self._maybe_complete_join(g)
        return await fut

    def _replace_static_member(self, g: Group, instance_id: str, old_id: str, client_id: str,
                               client_host: str, session_timeout_ms: int,
                               rebalance_timeout_ms: int,
                               protocols: list[tuple[str, bytes]]
                               ) -> JoinResult | asyncio.Future[JoinResult]:
        """KIP-345: a static member that restarts (same ``group.instance.id``, no member id)
        takes its old place under a new member id; the old id is fenced. Without a change of
        protocols and while the group is stable, nobody rebalances: the member gets the
        generation and the assignment its predecessor had."""
        old = g.members.pop(old_id)
        if old.join_future is not None and not old.join_future.done():
            old.join_future.set_result(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        if old.sync_future is not None and not old.sync_future.done():
            old.sync_future.set_result((ErrorCode.FENCED_INSTANCE_ID, b""))
        new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        member = Member(new_id, instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, old.protocol_type, protocols,
                        assignment=old.assignment)
        member.last_heartbeat_ms = _now_ms()
        g.members[new_id] = member
        g.static_members[instance_id] = new_id
        was_leader = g.leader_id == old_id
        if was_leader:
            g.leader_id = new_id
        log.info("group %s: static member %s replaced %s by %s", g.group_id, instance_id,
                 old_id, new_id)
        if g.state is GroupState.STABLE and old.protocols == protocols:
            # The leader too (as Kafka before KIP-814's skip_assignment): it may compute an
            # assignment again, but SyncGroup in a stable group hands out the current one.
            self._store_later(g, f"static member {instance_id} replaced")
            return self._join_result(g, member)
        # Otherwise the group rebalances with the new member in the old one's place.
        loop = asyncio.get_running_loop()
        member.join_future = loop.create_future()
        fut = member.join_future
        self._prepare_rebalance(g, f"static member {instance_id} rejoined")
        self._maybe_complete_join(g)
        return fut

    def _common_protocols(self, g: Group, exclude: str = "") -> set[str]:
        common: set[str] | None = None
        for m in g.members.values():
            if m.member_id == exclude:
                continue
            names = {p for p, _ in m.protocols}
            common = names if common is None else common & names
        return common if common is not None else set()

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        loop = asyncio.get_running_loop()
        if g.state is GroupState.PREPARING_REBALANCE:
            return
        # Members waiting in SyncGroup of the previous round must rejoin.
        for m in g.members.values():
            if m.sync_future is not None and not m.sync_future.done():
                m.sync_future.set_result((ErrorCode.REBALANCE_IN_PROGRESS, b""))
                m.last_heartbeat_ms = _now_ms()  # alive while parked
        was_empty = g.state is GroupState.EMPTY
        g.state = GroupState.PREPARING_REBALANCE
        log.info("group %s preparing rebalance generation=%d: %s", g.group_id,
                 g.generation_id, reason)
        timeout_ms = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        if g.rebalance_timer is not None:
            g.rebalance_timer.cancel()
        g.rebalance_timer = loop.call_later(timeout_ms / 1000, self._rebalance_timeout, g)
        if was_empty and self._initial_delay_ms > 0:
            g.initial_delay_timer = loop.call_later(
                self._initial_delay_ms / 1000, self._initial_delay_done, g
            )

    def _initial_delay_done(self, g: Group) -> None:
        g.initial_delay_timer = None
        self._maybe_complete_join(g)

    def _rebalance_timeout(self, g: Group) -> None:
        g.rebalance_timer = None
        if g.state is not GroupState.PREPARING_REBALANCE:
            return
        for m in list(g.members.values()):
            if m.join_future is None or m.join_future.done():
                log.info("group %s: member %s did not rejoin in time, removed", g.group_id,
                         m.member_id)
                del g.members[m.member_id]
                if m.group_instance_id and g.static_members.get(m.group_instance_id) == \
                        m.member_id:
                    del g.static_members[m.group_instance_id]
        if g.initial_delay_timer is not None:
            g.initial_delay_timer.cancel()
            g.initial_delay_timer = None
        self._maybe_complete_join(g)

    def _maybe_complete_join(self, g: Group) -> None:
        if g.state is not GroupState.PREPARING_REBALANCE or g.initial_delay_timer is not None:
            return
        if any(m.join_future is None or m.join_future.done() for m in g.members.values()):
            return
        if g.rebalance_timer is not None:
            g.rebalance_timer.cancel()
            g.rebalance_timer = None
        if not g.members:
            self._to_empty(g)
            return
        g.generation_id += 1
        common = self._common_protocols(g)
        leader = g.members.get(g.leader_id or "") or next(iter(g.members.values()))
        g.leader_id = leader.member_id
        g.protocol_name = next((p for p, _ in leader.protocols if p in common), None)
        g.state = GroupState.COMPLETING_REBALANCE
        log.info("group %s generation=%d leader=%s protocol=%s members=%d", g.group_id,
                 g.generation_id, g.leader_id, g.protocol_name, len(g.members))
        for m in g.members.values():
            m.assignment = b""
            fut = m.join_future
            m.join_future = None
            m.last_heartbeat_ms = _now_ms()
            if fut is not None and not fut.done():
                fut.set_result(self._join_result(g, m))

    def _join_result(self, g: Group, m: Member) -> JoinResult:
        members = []
        if m.member_id == g.leader_id:
            members = [(x.member_id, x.group_instance_id, x.metadata_for(g.protocol_name or ""))
                       for x in g.members.values()]
        return JoinResult(ErrorCode.NONE, g.generation_id, g.protocol_type, g.protocol_name,
                          g.leader_id or "", m.member_id, members)

    def _to_empty(self, g: Group) -> None:
        g.state = GroupState.EMPTY
        g.leader_id = None
        g.protocol_name = None
        g.generation_id += 1
        self._store_later(g, "empty")
        if self._on_group_emptied is not None:
            self._on_group_emptied(g.group_id)

    # -- SyncGroup -----------------------------------------------------------------------------
    async def sync(
        self, *, group_id: str, member_id: str, generation_id: int,
        assignments: list[tuple[str, bytes]], group_instance_id: str | None = None,
    ) -> tuple[ErrorCode, bytes, GroupState | None]:
        if self.fenced(group_id, member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID, b"", None
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return ErrorCode.UNKNOWN_MEMBER_ID, b"", None
        if generation_id != g.generation_id:
            return ErrorCode.ILLEGAL_GENERATION, b"", None
        m = g.members[member_id]
        m.last_heartbeat_ms = _now_ms()
        if g.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, b"", None
        if g.state is GroupState.STABLE:
            return ErrorCode.NONE, m.assignment, g.state
        # COMPLETING_REBALANCE
        if member_id == g.leader_id and not g.storing:
            given = dict(assignments)
            for x in g.members.values():
                x.assignment = given.get(x.member_id, b"")
            if self.persist is not None:
                stored = await self._store_assignment(g)
                if stored is not ErrorCode.NONE:
                    return stored, b"", None
            g.state = GroupState.STABLE
            for x in g.members.values():
                if x.sync_future is not None and not x.sync_future.done():
                    x.sync_future.set_result((ErrorCode.NONE, x.assignment))
                    x.last_heartbeat_ms = _now_ms()  # alive while parked
                x.sync_future = None
            return ErrorCode.NONE, m.assignment, g.state
        m.sync_future = asyncio.get_running_loop().create_future()
        err, assignment = await m.sync_future
        return err, assignment, g.state

    async def _store_assignment(self, g: Group) -> ErrorCode:
        """Store the generation's assignment before anyone gets it (Kafka's storeGroup): once a
        member has its assignment, a new coordinator must know it. Failed: the members rejoin
        (REBALANCE_IN_PROGRESS) and the leader is told why."""
        assert self.persist is not None
        generation = g.generation_id
        g.storing = True
        try:
            err = await self.persist(g.group_id, self.record_of(g))
        finally:
            g.storing = False
        if self.groups.get(g.group_id) is not g:
            return ErrorCode.NOT_COORDINATOR  # unloaded meanwhile
        if g.generation_id != generation or g.state is not GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS  # a member joined or left meanwhile
        if err is not ErrorCode.NONE:
            log.warning("group %s generation=%d: storing the assignment failed: %s",
                        g.group_id, generation, err.name)
            for x in g.members.values():
                x.assignment = b""
            self._prepare_rebalance(g, f"storing generation {generation} failed")
            return err
        return ErrorCode.NONE

    # -- Heartbeat / LeaveGroup ---------------------------------------------------------------
    def fenced(self, group_id: str, member_id: str, group_instance_id: str | None) -> bool:
        """KIP-345: a request naming a static instance now held by another member id."""
        if not group_instance_id:
            return False
        g = self.groups.get(group_id)
        known = g.static_members.get(group_instance_id) if g is not None else None
        return known is not None and known != member_id

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> ErrorCode:
        if self.fenced(group_id, member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != g.generation_id:
            return ErrorCode.ILLEGAL_GENERATION  # Kafka's order: a stale generation first
        g.members[member_id].last_heartbeat_ms = _now_ms()
        if g.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, member_id: str,
              group_instance_id: str | None = None) -> ErrorCode:
        g = self.groups.get(group_id)
        if g is not None and group_instance_id:
            known = g.static_members.get(group_instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and member_id != known:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known  # KIP-345: an admin may remove a static member by instance id
        if g is None or member_id not in g.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member(g, member_id, "left the group")
        return ErrorCode.NONE

    def _remove_member(self, g: Group, member_id: str, reason: str) -> None:
        m = g.members.pop(member_id)
        if m.group_instance_id and g.static_members.get(m.group_instance_id) == member_id:
            del g.static_members[m.group_instance_id]
        if m.join_future is not None and not m.join_future.done():
            m.join_future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
        if m.sync_future is not None and not m.sync_future.done():
            m.sync_future.set_result((ErrorCode.UNKNOWN_MEMBER_ID, b""))
        if g.leader_id == member_id:
            g.leader_id = None
        log.info("group %s: member %s %s", g.group_id, member_id, reason)
        if not g.members:
            if g.rebalance_timer is not None:
                g.rebalance_timer.cancel()
                g.rebalance_timer = None
            if g.initial_delay_timer is not None:
                g.initial_delay_timer.cancel()
                g.initial_delay_timer = None
            self._to_empty(g)
        elif g.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(g)
        else:
            self._prepare_rebalance(g, f"member {member_id} {reason}")

    def expire_sessions(self, now_ms: float | None = None) -> None:
        """Remove members whose session timed out (called periodically by the broker)."""
        now = _now_ms() if now_ms is None else now_ms
        for g in list(self.groups.values()):
            # Decided at one instant, then removed: a removal answers parked members, and
            # those were alive until that moment.
            expired = [m.member_id for m in g.members.values()
                       if not self._parked(m)
                       and now - m.last_heartbeat_ms > m.session_timeout_ms]
            for member_id in expired:
                if member_id in g.members:
                    self._remove_member(g, member_id, "session expired")
            for pending_id, lapses_ms in list(g.pending_members.items()):
                if now > lapses_ms:
                    del g.pending_members[pending_id]  # handed out, never used to join

    @staticmethod
    def _parked(m: Member) -> bool:
        """Waiting in JoinGroup or SyncGroup: alive (Kafka's shouldKeepAlive), it cannot
        heartbeat until the coordinator answers it."""
        return any(f is not None and not f.done() for f in (m.join_future, m.sync_future))

    def validate_commit(self, group_id: str, member_id: str, generation_id: int,
                        group_instance_id: str | None = None) -> ErrorCode:
        """OffsetCommit's member check; generation -1 with no member is a simple (manual) commit."""
        if self.fenced(group_id, member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and not member_id:
            g = self.groups.get(group_id)
            if g is not None and g.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.NONE
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != g.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if g.state is GroupState.COMPLETING_REBALANCE:
            # The member has the new generation but not yet its assignment: nothing it holds
            # can be committed under this generation yet.
            return ErrorCode.REBALANCE_IN_PROGRESS
        # STABLE, and PREPARING_REBALANCE too: a member still in the generation commits what it
        # consumed before it rejoins (the revoke callback, kafka-python's commit on join
        # prepare). Refusing it made the next owner read those records again.
        g.members[member_id].last_heartbeat_ms = _now_ms()
        return ErrorCode.NONE

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups: only a group without members goes (NON_EMPTY_GROUP otherwise)."""
        g = self.groups.get(group_id)
        if g is not None and g.members:
            return ErrorCode.NON_EMPTY_GROUP
        self.groups.pop(group_id, None)
        return ErrorCode.NONE

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        """Topics the members of an active consumer group subscribe to (None: no members)."""
        g = self.groups.get(group_id)
        if g is None or not g.members:
            return None
        topics: set[str] = set()
        for m in g.members.values():
            if g.protocol_type == "consumer":
                try:
                    topics.update(decode_subscription(m.metadata_for(g.protocol_name or "")))
                except (ValueError, IndexError, struct.error):
                    continue  # a subscription floodmark cannot read protects nothing
        return topics

    def describe(self, group_id: str) -> GroupDescription:
        g = self.groups.get(group_id)
        if g is None:
            return {"group_id": group_id, "group_state": "Dead", "protocol_type": "",
                    "protocol_data": "", "members": []}
        # As Kafka: the protocol, the members' metadata and assignments only once the group is
        # Stable (during a rebalance they are not settled).
        stable = g.state.value == "Stable"
        return {
            "group_id": group_id,
            "group_state": g.state.value,
            "protocol_type": g.protocol_type or "",
            "protocol_data": (g.protocol_name or "") if stable else "",
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "client_id": m.client_id, "client_host": m.client_host,
                 "member_metadata": m.metadata_for(g.protocol_name or "") if stable else b"",
                 "member_assignment": m.assignment if stable else b""}
                for m in g.members.values()
            ],
        }

    def shutdown(self) -> None:
        for task in list(self._stores):
            task.cancel()
        for g in self.groups.values():
            for timer in (g.rebalance_timer, g.initial_delay_timer):
                if timer is not None:
                    timer.cancel()
            for m in g.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.cancel()
