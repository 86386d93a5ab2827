"""The classic consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), sans-I/O.

No asyncio, sockets or clocks: every input carries ``now_ms``, every call returns the effects
to apply in order (``effects``). A JoinGroup or SyncGroup that must wait stays parked in the
core under the ``request_id`` its runner gave it, and is answered by a later call. Driving::

    core = ClassicGroupCore(config, rng)
    effects = core.join(JoinGroup(...), now_ms)       # AnswerJoin now or later
    effects = core.sync(SyncGroup(...), now_ms)       # AnswerSync now or later, maybe StoreGroup
    effects = core.stored(token, error, now_ms)       # a StoreGroup with a token is done
    error = core.heartbeat(group, member, generation, instance, now_ms)
    error, effects = core.leave(group, member, instance, now_ms)
    effects = core.tick(now_ms)                        # at core.next_deadline_ms() or later
    core.abandon(request_id)                           # the client went: nobody to answer

One state machine per group, Kafka's states: EMPTY -> PREPARING_REBALANCE -> COMPLETING_REBALANCE
-> STABLE, back to PREPARING_REBALANCE when a member joins, leaves or times out. Generations start
at 1 (aiokafka skips LeaveGroup at generation 0, wire-compat.md P11). A rebalance completes when
every known member has rejoined, after ``group.initial.rebalance.delay.ms`` for an empty group, or
at the rebalance timeout (members that did not rejoin are removed; a late rejoin with the old
member id is UNKNOWN_MEMBER_ID, and the client joins afresh). Only the leader gets the member
list; followers' SyncGroup waits for the leader's assignment.

The group's state survives its coordinator (Kafka's ``GroupMetadataValue`` records in
``__consumer_offsets``): the core asks to store the group (``StoreGroup``) when a generation's
assignment is complete (the SyncGroup answers wait for it; a failed store answers the error and
the group rebalances), when it becomes empty and when a static member takes a new member id; a
new coordinator ``load``s what its partitions hold, so members keep their member id, generation
and assignment and heartbeat on without a rebalance, each with a fresh session timeout.

Kafka's checks, in Kafka's order: a stale generation is ILLEGAL_GENERATION (Heartbeat, SyncGroup,
OffsetCommit) before any REBALANCE_IN_PROGRESS; OffsetCommit from a member of the current
generation is accepted while the group is stable or preparing a rebalance (clients commit in
their revoke callback then) and refused between JoinGroup and SyncGroup; a member parked in
JoinGroup or SyncGroup is not expired; a silent member is removed after its session timeout.
"""

from __future__ import annotations

import logging
import random
import struct
import uuid
from dataclasses import dataclass

from floodmark.broker.classic_group.effects import (
    AnswerJoin,
    AnswerSync,
    ClassicEffect,
    GroupEmptied,
    StoreGroup,
)
from floodmark.broker.classic_group.messages import (
    GroupDescription,
    JoinGroup,
    JoinResult,
    SyncGroup,
)
from floodmark.broker.classic_group.state import Group, GroupState, Member
from floodmark.broker.offsets import GroupRecord, MemberRecord
from floodmark.client import decode_subscription
from floodmark.errors import ErrorCode

log = logging.getLogger(__name__)

MAX_TIMERS_PER_TICK = 4  # a group's two timers; each firing moves the group on (no loop)


@dataclass(frozen=True, slots=True)
class ClassicGroupConfig:
    """Kafka's ``group.*`` settings of the classic protocol (milliseconds)."""

    initial_rebalance_delay_ms: int  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int  # group.min.session.timeout.ms
    max_session_timeout_ms: int  # group.max.session.timeout.ms
    store_groups: bool = True
    """The runner stores group records (``StoreGroup``); without, nothing survives it."""
    max_size: int = 2**31 - 1  # group.max.size (Kafka's default: Integer.MAX_VALUE)


@dataclass(frozen=True, slots=True)
class _PendingStore:
    """A record being stored that a request waits for: a generation's assignment (the
    leader's SyncGroup) or a static member's new member id (its JoinGroup, ``replaced`` set)."""

    group: Group
    generation_id: int
    member: Member  # the leader, or the static member's new incarnation
    request_id: int
    replaced: Member | None = None  # the static member's previous incarnation


class ClassicGroupCore:
    def __init__(self, config: ClassicGroupConfig, rng: random.Random | None = None) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self._rng = rng if rng is not None else random.Random()
        self._stores: dict[int, _PendingStore] = {}
        self._next_token = 1

    # -- the group's record (GroupMetadataValue) -----------------------------------------------
    @staticmethod
    def record_of(g: Group, now_ms: int) -> GroupRecord:
        protocol = g.protocol_name or ""
        return GroupRecord(
            g.protocol_type or "", g.generation_id, g.protocol_name, g.leader_id, now_ms,
            tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                               m.rebalance_timeout_ms, m.session_timeout_ms,
                               m.metadata_for(protocol), m.assignment)
                  for m in g.members.values()))

    def load(self, group_id: str, rec: GroupRecord,
             now_ms: int) -> tuple[Group, list[ClassicEffect]]:
        """A new coordinator takes the group as its last record left it: stable with its
        members (each alive from now, for a session timeout) or empty."""
        out = self.unload([group_id])
        g = Group(group_id, generation_id=rec.generation,
                  protocol_type=rec.protocol_type or None)
        for r in rec.members:
            protocols = ((rec.protocol or "", r.subscription),)
            m = Member(r.member_id, r.group_instance_id, r.client_id, r.client_host,
                       r.session_timeout_ms, r.rebalance_timeout_ms, rec.protocol_type,
                       protocols, assignment=r.assignment, last_heartbeat_ms=now_ms)
            g.members[m.member_id] = m
            if m.group_instance_id:
                g.static_members[m.group_instance_id] = m.member_id
        if g.members:
            g.state = GroupState.STABLE
            g.protocol_name = rec.protocol
            g.leader_id = rec.leader if rec.leader in g.members else None
        self.groups[group_id] = g
        return g, out

    def unload(self, group_ids: list[str],
               error: ErrorCode = ErrorCode.NOT_COORDINATOR) -> list[ClassicEffect]:
        """Another broker coordinates these groups now: forget them here; members parked in
        JoinGroup or SyncGroup are told NOT_COORDINATOR (they find the new coordinator), or
        ``error`` (REBALANCE_IN_PROGRESS: the group became a consumer group, KIP-848)."""
        out: list[ClassicEffect] = []
        for group_id in group_ids:
            g = self.groups.pop(group_id, None)
            if g is None:
                continue
            for m in g.members.values():
                if m.join_request is not None:
                    out.append(AnswerJoin(m.join_request, JoinResult(
                        error, member_id=m.member_id)))
                    m.join_request = None
                if m.sync_request is not None:
                    out.append(AnswerSync(m.sync_request, error, b"", g.state))
                    m.sync_request = None
        return out

    def _store_later(self, g: Group, why: str, now_ms: int, out: list[ClassicEffect]) -> None:
        """Store the group's record without waiting (an emptied group, a replaced static
        member: Kafka writes these too, and a failover then loads them)."""
        if self.config.store_groups:
            out.append(StoreGroup(g.group_id, self.record_of(g, now_ms), None, why))

    def group(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = Group(group_id)
            self.groups[group_id] = g
        return g

    def _new_member_id(self, client_id: str) -> str:
        """Kafka's ``clientId-UUID``, the UUID from the runner's random source."""
        return f"{client_id or 'member'}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    # -- JoinGroup -----------------------------------------------------------------------------
    def join(self, req: JoinGroup, now_ms: int) -> list[ClassicEffect]:
        out: list[ClassicEffect] = []

        def answer(error: ErrorCode, member_id: str = req.member_id) -> list[ClassicEffect]:
            out.append(AnswerJoin(req.request_id, JoinResult(error, member_id=member_id)))
            return out

        member_id = req.member_id
        if not req.group_id:
            return answer(ErrorCode.INVALID_GROUP_ID)
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return answer(ErrorCode.INVALID_SESSION_TIMEOUT)
        g = self.group(req.group_id)
        if g.state is GroupState.DEAD:
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not self._accepts(g, member_id):
            # Kafka's acceptJoiningMember: a member turned away while the group is full is
            # out of it (the last ones to rejoin a group over its size are kicked out)
            if member_id in g.members:
                self._remove_member(g, member_id, "turned away: the group is full "
                                    f"(group.max.size {self.config.max_size})", now_ms, out)
            return answer(ErrorCode.GROUP_MAX_SIZE_REACHED, "")
        names = {p for p, _ in req.protocols}
        others = any(m != member_id for m in g.members)
        if not req.protocols or (
            others and (g.protocol_type != req.protocol_type
                        or not names & self._common_protocols(g, exclude=member_id))
        ):
            return answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        instance_id = req.group_instance_id
        if instance_id:
            known = g.static_members.get(instance_id)
            if member_id and known is not None and known != member_id:
                return answer(ErrorCode.FENCED_INSTANCE_ID)
            if not member_id and known is not None and known in g.members:
                self._replace_static_member(g, req, known, now_ms, out)
                return out
        if not member_id:
            new_id = self._new_member_id(req.client_id)
            if req.require_known_member_id and not instance_id:
                # KIP-394: hand out the id first; the client rejoins with it.
                g.pending_members[new_id] = now_ms + req.session_timeout_ms
                return answer(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            member_id = new_id
        elif member_id not in g.members and member_id not in g.pending_members:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        g.pending_members.pop(member_id, None)
        member = g.members.get(member_id)
        if member is None:
            member = Member(member_id, instance_id, req.client_id, req.client_host,
                            req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type,
                            req.protocols)
            if not g.members:
                # The first member sets the type; an Empty group keeps its last one (as Kafka).
                g.protocol_type = req.protocol_type
            g.members[member_id] = member
            if instance_id:
                g.static_members[instance_id] = member_id
        else:
            if member.protocols == req.protocols and (
                    g.state is GroupState.COMPLETING_REBALANCE
                    or (g.state is GroupState.STABLE and g.leader_id != member_id)):
                # The same metadata again: a follower while stable, or anyone whose JoinGroup
                # answer was lost while the group waits for SyncGroup. Just answer (Kafka).
                member.last_heartbeat_ms = now_ms
                out.append(AnswerJoin(req.request_id, self._join_result(g, member)))
                return out
            member.protocols = req.protocols
            member.session_timeout_ms = req.session_timeout_ms
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.last_heartbeat_ms = now_ms
        if member.join_request is not None:  # superseded by this one
            out.append(AnswerJoin(member.join_request, JoinResult(
                ErrorCode.REBALANCE_IN_PROGRESS, member_id=member_id)))
        member.join_request = req.request_id
        self._prepare_rebalance(g, f"member {member_id} joined", now_ms, out)
        self._maybe_complete_join(g, now_ms, out)
        return out

    def _accepts(self, g: Group, member_id: str) -> bool:
        """Room for ``member_id`` under ``group.max.size`` (Kafka's acceptJoiningMember): an
        empty group takes anyone; while members rejoin, one already rejoined or a place among
        those rejoining (the group may be over a size lowered since); else a member or a
        free place."""
        max_size = self.config.max_size
        if g.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        member = g.members.get(member_id)
        if g.state is GroupState.PREPARING_REBALANCE:
            return (member is not None and member.join_request is not None) or \
                sum(m.join_request is not None for m in g.members.values()) < max_size
        return member is not None or len(g.members) < max_size

    def _replace_static_member(self, g: Group, req: JoinGroup, old_id: str, now_ms: int,
                               out: list[ClassicEffect]) -> None:
        """KIP-345: a static member that restarts (same ``group.instance.id``, no member id)
        takes its old place under a new member id; the old id is fenced. Without a change of
        protocols and while the group is stable, nobody rebalances: the member gets the
        generation and the assignment its predecessor had."""
        instance_id = req.group_instance_id
        assert instance_id
        old = g.members.pop(old_id)
        if old.join_request is not None:
            out.append(AnswerJoin(old.join_request, JoinResult(ErrorCode.FENCED_INSTANCE_ID,
                                                               member_id=old_id)))
            old.join_request = None
        if old.sync_request is not None:
            out.append(AnswerSync(old.sync_request, ErrorCode.FENCED_INSTANCE_ID, b"", g.state))
            old.sync_request = None
        new_id = self._new_member_id(req.client_id)
        member = Member(new_id, instance_id, req.client_id, req.client_host,
                        req.session_timeout_ms, req.rebalance_timeout_ms, old.protocol_type,
                        req.protocols, assignment=old.assignment, last_heartbeat_ms=now_ms)
        g.members[new_id] = member
        g.static_members[instance_id] = new_id
        if g.leader_id == old_id:
            g.leader_id = new_id
        log.info("group %s: static member %s replaced %s by %s", g.group_id, instance_id,
                 old_id, new_id)
        if g.state is GroupState.STABLE and old.protocols == req.protocols:
            # The leader too (as Kafka before KIP-814's skip_assignment): it may compute an
            # assignment again, but SyncGroup in a stable group hands out the current one.
            # As Kafka (updateStaticMemberAndRebalance): answered once the new member id is
            # stored, and undone if it cannot be. Answered before, a failover that lost the
            # record brought the old member id back, and the old process (paused, not dead)
            # committed its older offsets over the new one's (``floodmark sim groups``).
            if not self.config.store_groups:
                out.append(AnswerJoin(req.request_id, self._join_result(g, member)))
                return
            token = self._next_token
            self._next_token += 1
            self._stores[token] = _PendingStore(g, g.generation_id, member, req.request_id,
                                                replaced=old)
            out.append(StoreGroup(g.group_id, self.record_of(g, now_ms), token,
                                  f"static member {instance_id} replaced"))
            return
        # Otherwise the group rebalances with the new member in the old one's place.
        member.join_request = req.request_id
        self._prepare_rebalance(g, f"static member {instance_id} rejoined", now_ms, out)
        self._maybe_complete_join(g, now_ms, out)

    def _common_protocols(self, g: Group, exclude: str = "") -> set[str]:
        common: set[str] | None = None
        for m in g.members.values():
            if m.member_id == exclude:
                continue
            names = {p for p, _ in m.protocols}
            common = names if common is None else common & names
        return common if common is not None else set()

    def _prepare_rebalance(self, g: Group, reason: str, now_ms: int,
                           out: list[ClassicEffect]) -> None:
        if g.state is GroupState.PREPARING_REBALANCE:
            return
        # Members waiting in SyncGroup of the previous round must rejoin.
        for m in g.members.values():
            if m.sync_request is not None:
                out.append(AnswerSync(m.sync_request, ErrorCode.REBALANCE_IN_PROGRESS, b"",
                                      GroupState.PREPARING_REBALANCE))
                m.sync_request = None
                m.last_heartbeat_ms = now_ms  # alive while parked
        was_empty = g.state is GroupState.EMPTY
        g.state = GroupState.PREPARING_REBALANCE
        log.info("group %s preparing rebalance generation=%d: %s", g.group_id,
                 g.generation_id, reason)
        timeout_ms = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        g.rebalance_deadline_ms = now_ms + timeout_ms
        if was_empty and self.config.initial_rebalance_delay_ms > 0:
            g.initial_delay_deadline_ms = now_ms + self.config.initial_rebalance_delay_ms

    def rebalance(self, group_id: str, reason: str, now_ms: int) -> list[ClassicEffect]:
        """Start a rebalance of a group with members (one a consumer group became, KIP-848's
        downgrade): its members learn it from their heartbeats and rejoin."""
        out: list[ClassicEffect] = []
        g = self.groups.get(group_id)
        if g is not None and g.members:
            self._prepare_rebalance(g, reason, now_ms, out)
        return out

    def _initial_delay_done(self, g: Group, now_ms: int, out: list[ClassicEffect]) -> None:
        g.initial_delay_deadline_ms = None
        self._maybe_complete_join(g, now_ms, out)

    def _rebalance_timeout(self, g: Group, now_ms: int, out: list[ClassicEffect]) -> None:
        g.rebalance_deadline_ms = None
        if g.state is not GroupState.PREPARING_REBALANCE:
            return
        for m in list(g.members.values()):
            if m.join_request is None:
                log.info("group %s: member %s did not rejoin in time, removed", g.group_id,
                         m.member_id)
                del g.members[m.member_id]
                if m.group_instance_id and g.static_members.get(m.group_instance_id) == \
                        m.member_id:
                    del g.static_members[m.group_instance_id]
        g.initial_delay_deadline_ms = None
        self._maybe_complete_join(g, now_ms, out)

    def _maybe_complete_join(self, g: Group, now_ms: int, out: list[ClassicEffect]) -> None:
        if g.state is not GroupState.PREPARING_REBALANCE or \
                g.initial_delay_deadline_ms is not None:
            return
        if any(m.join_request is None for m in g.members.values()):
            return
        g.rebalance_deadline_ms = None
        if not g.members:
            self._to_empty(g, now_ms, out)
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
            request_id = m.join_request
            m.join_request = None
            m.last_heartbeat_ms = now_ms
            if request_id is not None:
                out.append(AnswerJoin(request_id, self._join_result(g, m)))

    @staticmethod
    def _join_result(g: Group, m: Member) -> JoinResult:
        members = []
        if m.member_id == g.leader_id:
            members = [(x.member_id, x.group_instance_id, x.metadata_for(g.protocol_name or ""))
                       for x in g.members.values()]
        return JoinResult(ErrorCode.NONE, g.generation_id, g.protocol_type, g.protocol_name,
                          g.leader_id or "", m.member_id, members)

    def _to_empty(self, g: Group, now_ms: int, out: list[ClassicEffect]) -> None:
        g.state = GroupState.EMPTY
        g.leader_id = None
        g.protocol_name = None
        g.generation_id += 1
        self._store_later(g, "empty", now_ms, out)
        out.append(GroupEmptied(g.group_id))

    # -- SyncGroup -----------------------------------------------------------------------------
    def sync(self, req: SyncGroup, now_ms: int) -> list[ClassicEffect]:
        out: list[ClassicEffect] = []

        def answer(error: ErrorCode, assignment: bytes = b"",
                   state: GroupState | None = None) -> list[ClassicEffect]:
            out.append(AnswerSync(req.request_id, error, assignment, state))
            return out

        member_id = req.member_id
        if self.fenced(req.group_id, member_id, req.group_instance_id):
            return answer(ErrorCode.FENCED_INSTANCE_ID)
        g = self.groups.get(req.group_id)
        if g is None or member_id not in g.members:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if req.generation_id != g.generation_id:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        m = g.members[member_id]
        m.last_heartbeat_ms = now_ms
        if g.state is GroupState.PREPARING_REBALANCE:
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        if g.state is GroupState.STABLE:
            return answer(ErrorCode.NONE, m.assignment, g.state)
        # COMPLETING_REBALANCE
        if member_id == g.leader_id and not g.storing:
            given = dict(req.assignments)
            for x in g.members.values():
                x.assignment = given.get(x.member_id, b"")
            if self.config.store_groups:
                # Stored before anyone gets it (Kafka's storeGroup): once a member has its
                # assignment, a new coordinator must know it.
                token = self._next_token
                self._next_token += 1
                g.storing = True
                self._stores[token] = _PendingStore(g, g.generation_id, m, req.request_id)
                out.append(StoreGroup(g.group_id, self.record_of(g, now_ms), token,
                                      f"generation {g.generation_id} assignment"))
                return out
            self._complete_sync(g, now_ms, out)
            return answer(ErrorCode.NONE, m.assignment, g.state)
        if m.sync_request is not None:  # superseded by this one
            out.append(AnswerSync(m.sync_request, ErrorCode.REBALANCE_IN_PROGRESS, b"", g.state))
        m.sync_request = req.request_id
        return out

    def stored(self, token: int, error: ErrorCode, now_ms: int) -> list[ClassicEffect]:
        """The generation's assignment asked for by ``StoreGroup(token)`` is stored (or not).
        Stored: the group is stable, every SyncGroup gets its assignment. Failed: the members
        rejoin (REBALANCE_IN_PROGRESS) and the leader is told why."""
        pending = self._stores.pop(token, None)
        if pending is None:
            return []
        if pending.replaced is not None:
            return self._static_member_stored(pending, pending.replaced, error, now_ms)
        out: list[ClassicEffect] = []
        g = pending.group
        g.storing = False

        def answer(err: ErrorCode, assignment: bytes = b"",
                   state: GroupState | None = None) -> list[ClassicEffect]:
            out.append(AnswerSync(pending.request_id, err, assignment, state))
            return out

        if self.groups.get(g.group_id) is not g:
            return answer(ErrorCode.NOT_COORDINATOR)  # unloaded meanwhile
        if g.generation_id != pending.generation_id or \
                g.state is not GroupState.COMPLETING_REBALANCE:
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)  # a member joined or left meanwhile
        if error is not ErrorCode.NONE:
            log.warning("group %s generation=%d: storing the assignment failed: %s",
                        g.group_id, pending.generation_id, error.name)
            for x in g.members.values():
                x.assignment = b""
            self._prepare_rebalance(g, f"storing generation {pending.generation_id} failed",
                                    now_ms, out)
            return answer(error)
        self._complete_sync(g, now_ms, out)
        return answer(ErrorCode.NONE, pending.member.assignment, g.state)

    def _static_member_stored(self, pending: _PendingStore, old: Member, error: ErrorCode,
                              now_ms: int) -> list[ClassicEffect]:
        """A static member's new member id is stored: its JoinGroup is answered. Not stored:
        the old member is put back (Kafka reverts the replacement) and the new one is told why
        (it joins again)."""
        g, new = pending.group, pending.member
        instance_id = new.group_instance_id
        assert instance_id
        current = self.groups.get(g.group_id) is g and \
            g.static_members.get(instance_id) == new.member_id and new.member_id in g.members
        if error is ErrorCode.NONE:
            if current:
                result = self._join_result(g, new)
            elif self.groups.get(g.group_id) is not g:
                result = JoinResult(ErrorCode.NOT_COORDINATOR, member_id=new.member_id)
            elif g.static_members.get(instance_id, new.member_id) != new.member_id:
                result = JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=new.member_id)
            else:
                result = JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=new.member_id)
            return [AnswerJoin(pending.request_id, result)]
        log.warning("group %s: storing static member %s's new member id %s failed: %s; %s "
                    "keeps its place", g.group_id, instance_id, new.member_id, error.name,
                    old.member_id)
        if current:
            del g.members[new.member_id]
            old.last_heartbeat_ms = now_ms
            g.members[old.member_id] = old
            g.static_members[instance_id] = old.member_id
            if g.leader_id == new.member_id:
                g.leader_id = old.member_id
        return [AnswerJoin(pending.request_id, JoinResult(error, member_id=""))]

    @staticmethod
    def _complete_sync(g: Group, now_ms: int, out: list[ClassicEffect]) -> None:
        g.state = GroupState.STABLE
        for x in g.members.values():
            if x.sync_request is not None:
                out.append(AnswerSync(x.sync_request, ErrorCode.NONE, x.assignment, g.state))
                x.sync_request = None
                x.last_heartbeat_ms = now_ms  # alive while parked

    def abandon(self, request_id: int) -> None:
        """The client of a parked JoinGroup or SyncGroup went away: nobody waits for its answer,
        and the member counts as not parked (it did not rejoin; its session runs)."""
        for g in self.groups.values():
            for m in g.members.values():
                if m.join_request == request_id:
                    m.join_request = None
                if m.sync_request == request_id:
                    m.sync_request = None

    # -- Heartbeat / LeaveGroup ---------------------------------------------------------------
    def fenced(self, group_id: str, member_id: str, group_instance_id: str | None) -> bool:
        """KIP-345: a request naming a static instance now held by another member id."""
        if not group_instance_id:
            return False
        g = self.groups.get(group_id)
        known = g.static_members.get(group_instance_id) if g is not None else None
        return known is not None and known != member_id

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None, now_ms: int) -> ErrorCode:
        if self.fenced(group_id, member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != g.generation_id:
            return ErrorCode.ILLEGAL_GENERATION  # Kafka's order: a stale generation first
        g.members[member_id].last_heartbeat_ms = now_ms
        if g.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None,
              now_ms: int) -> tuple[ErrorCode, list[ClassicEffect]]:
        out: list[ClassicEffect] = []
        g = self.groups.get(group_id)
        if g is not None and group_instance_id:
            known = g.static_members.get(group_instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, out
            if member_id and member_id != known:
                return ErrorCode.FENCED_INSTANCE_ID, out
            member_id = known  # KIP-345: an admin may remove a static member by instance id
        if g is None or member_id not in g.members:
            return ErrorCode.UNKNOWN_MEMBER_ID, out
        self._remove_member(g, member_id, "left the group", now_ms, out)
        return ErrorCode.NONE, out

    def _remove_member(self, g: Group, member_id: str, reason: str, now_ms: int,
                       out: list[ClassicEffect]) -> None:
        m = g.members.pop(member_id)
        if m.group_instance_id and g.static_members.get(m.group_instance_id) == member_id:
            del g.static_members[m.group_instance_id]
        if m.join_request is not None:
            out.append(AnswerJoin(m.join_request, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                                             member_id=member_id)))
            m.join_request = None
        if m.sync_request is not None:
            out.append(AnswerSync(m.sync_request, ErrorCode.UNKNOWN_MEMBER_ID, b"", g.state))
            m.sync_request = None
        if g.leader_id == member_id:
            g.leader_id = None
        log.info("group %s: member %s %s", g.group_id, member_id, reason)
        if not g.members:
            g.rebalance_deadline_ms = None
            g.initial_delay_deadline_ms = None
            self._to_empty(g, now_ms, out)
        elif g.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(g, now_ms, out)
        else:
            self._prepare_rebalance(g, f"member {member_id} {reason}", now_ms, out)

    # -- timers --------------------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        """When ``tick`` next has work: a rebalance timeout, an initial delay, a session or an
        unused KIP-394 member id running out (None: nothing pending)."""
        deadlines: list[int] = []
        for g in self.groups.values():
            for d in (g.rebalance_deadline_ms, g.initial_delay_deadline_ms):
                if d is not None:
                    deadlines.append(d)
            deadlines.extend(m.last_heartbeat_ms + m.session_timeout_ms + 1
                             for m in g.members.values() if not m.parked)
            deadlines.extend(lapses_ms + 1 for lapses_ms in g.pending_members.values())
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> list[ClassicEffect]:
        """The groups' timers that are due, in deadline order, then the sessions."""
        out: list[ClassicEffect] = []
        for g in list(self.groups.values()):
            for _ in range(MAX_TIMERS_PER_TICK):
                due = [(d, fire) for d, fire in (
                    (g.initial_delay_deadline_ms, self._initial_delay_done),
                    (g.rebalance_deadline_ms, self._rebalance_timeout)) if d is not None
                    and d <= now_ms]
                if not due or self.groups.get(g.group_id) is not g:
                    break
                min(due, key=lambda x: x[0])[1](g, now_ms, out)
        self._expire_sessions(now_ms, out)
        return out

    def _expire_sessions(self, now_ms: int, out: list[ClassicEffect]) -> None:
        """Remove members whose session timed out."""
        for g in list(self.groups.values()):
            # Decided at one instant, then removed: a removal answers parked members, and
            # those were alive until that moment.
            expired = [m.member_id for m in g.members.values()
                       if not m.parked and now_ms - m.last_heartbeat_ms > m.session_timeout_ms]
            for member_id in expired:
                if member_id in g.members:
                    self._remove_member(g, member_id, "session expired", now_ms, out)
            for pending_id, lapses_ms in list(g.pending_members.items()):
                if now_ms > lapses_ms:
                    del g.pending_members[pending_id]  # handed out, never used to join

    # -- OffsetCommit, DeleteGroups, and what others ask -----------------------------------------
    def validate_commit(self, group_id: str, member_id: str, generation_id: int,
                        group_instance_id: str | None, now_ms: int) -> ErrorCode:
        """OffsetCommit's member check (``commit_error``); an accepted member is alive."""
        err = self.commit_error(group_id, member_id, generation_id, group_instance_id)
        if err is ErrorCode.NONE and member_id:
            self.groups[group_id].members[member_id].last_heartbeat_ms = now_ms
        return err

    def commit_error(self, group_id: str, member_id: str, generation_id: int,
                     group_instance_id: str | None) -> ErrorCode:
        """May this member commit now? Generation -1 with no member is a simple (manual)
        commit, accepted only while the group has no members."""
        if self.fenced(group_id, member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        g = self.groups.get(group_id)
        if generation_id < 0 and not member_id:
            if g is not None and g.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.NONE
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
        stable = g.state is GroupState.STABLE
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
