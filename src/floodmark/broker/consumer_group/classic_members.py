"""Classic protocol members of a consumer group (KIP-848's online migration): JoinGroup,
SyncGroup, Heartbeat and LeaveGroup from consumers that speak the classic protocol, served by
the consumer group's rules (Kafka's ``classicGroupJoinToConsumerGroup``,
``classicGroupSyncToConsumerGroup``, ``classicGroupHeartbeatToConsumerGroup``,
``classicGroupLeaveToConsumerGroup``).

* JoinGroup updates the member's subscription from its embedded ``ConsumerProtocolSubscription``
  (a new member or new topics bump the group epoch, and the target assignment is computed
  again), reconciles it towards its target with the partitions it says it owns (none for an
  eager consumer, its partitions for a cooperative one), and is answered at once: the
  generation is the member epoch, no leader (the member is a follower, and gets its assignment
  from SyncGroup);
* SyncGroup answers the member's assigned partitions, in its subscription's version, unless a
  new rebalance is under way (the group epoch is ahead and the member is not revoking):
  REBALANCE_IN_PROGRESS;
* Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch is
  ahead of its member epoch, it must revoke partitions, or partitions it waits for are free;
* a stale generation is ILLEGAL_GENERATION; a member that speaks the consumer protocol is
  UNKNOWN_MEMBER_ID to these APIs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from floodmark.broker.consumer_group.assignors import Partitions
from floodmark.broker.consumer_group.core import (
    ConsumerGroup,
    ConsumerGroupCoordinator,
    Member,
)
from floodmark.broker.consumer_group.records import (
    ClassicMemberMetadata,
    ConsumerGroupRecord,
    GroupEpoch,
    MemberState,
    MemberSubscription,
    Subscription,
    TopicMetadata,
)
from floodmark.errors import ErrorCode
from floodmark.wire import (
    PROTOCOL_TYPE,
    BadEmbeddedProtocol,
    decode_subscription,
    version_of,
)


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    group_id: str
    member_id: str  # "" for a new member
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool


@dataclass(frozen=True, slots=True)
class ClassicJoinAnswer:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_name: str | None = None
    message: str | None = None
    records: tuple[ConsumerGroupRecord, ...] = ()


def supports(g: ConsumerGroup, protocol_type: str, protocols: set[str]) -> bool:
    """Kafka's ``ConsumerGroup.supportsClassicProtocols``: protocol type ``consumer`` and a
    protocol every classic member of the group supports too."""
    if protocol_type != PROTOCOL_TYPE or not protocols:
        return False
    for m in g.members.values():
        if m.subscription.classic is not None:
            protocols &= {n for n, _ in m.subscription.classic.supported_protocols}
    return bool(protocols)


def join(core: ConsumerGroupCoordinator, req: ClassicJoin, topics: Mapping[str, TopicMetadata],
         now_ms: int) -> ClassicJoinAnswer:
    g = core.groups[req.group_id]
    member_id = req.member_id or core.new_member_id()
    if g.full(member_id, core.config.max_size):
        return ClassicJoinAnswer(ErrorCode.GROUP_MAX_SIZE_REACHED, "",
                                 message=core.full_message())
    if not supports(g, req.protocol_type, {n for n, _ in req.protocols}):
        return ClassicJoinAnswer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id,
                                 message=f"Member {member_id}'s protocols are not supported.")
    if not req.member_id and req.require_known_member_id and req.instance_id is None:
        return ClassicJoinAnswer(ErrorCode.MEMBER_ID_REQUIRED, member_id)
    try:
        sub = decode_subscription(req.protocols[0][1])
    except BadEmbeddedProtocol as exc:
        return ClassicJoinAnswer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id,
                                 message=f"Member {member_id}'s subscription: {exc}")
    member = g.members.get(member_id)
    if member is not None and member.subscription.classic is None:
        return ClassicJoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id,
                                 message=f"Member {member_id} does not use the classic "
                                         f"protocol.")
    records: list[ConsumerGroupRecord] = []
    replaced_consumer_member = False
    if req.instance_id is not None:
        holder = next((m for m in g.members.values()
                       if m.subscription.instance_id == req.instance_id), None)
        if not req.member_id:
            if holder is not None:
                # KIP-345 under KIP-848: the new instance takes the old one's place and
                # partitions (Kafka's getOrMaybeSubscribeStaticConsumerGroupMember); the old
                # member id is fenced, the others do not rebalance
                replaced_consumer_member = not holder.uses_classic_protocol
                core.replace_member(g, holder, member_id, records)
                member = g.members[member_id]
        elif holder is None:
            return ClassicJoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id,
                                     message=f"Instance id {req.instance_id} is unknown.")
        elif holder.member_id != member_id:
            return ClassicJoinAnswer(ErrorCode.FENCED_INSTANCE_ID, member_id,
                                     message=f"Static member {member_id} with instance id "
                                             f"{req.instance_id} is fenced by member "
                                             f"{holder.member_id}.")
    old = member.subscription if member is not None else None
    new = Subscription(
        req.instance_id, sub.rack_id, req.client_id, req.client_host, tuple(sorted(sub.topics)),
        None, req.rebalance_timeout_ms, None,
        ClassicMemberMetadata(req.session_timeout_ms, req.protocols))
    bump = False
    if new != old:
        core._emit(records, MemberSubscription(g.group_id, member_id, new))
        bump = old is None or old.subscribed_topic_names != new.subscribed_topic_names
    member = g.members[member_id]
    bump = core._update_topics(g, topics, records) or bump
    if bump:
        core._emit(records, GroupEpoch(g.group_id, g.group_epoch + 1))
    if g.group_epoch > g.assignment_epoch:
        core._assign(g, records, topics)
    owned = frozenset((topics[t].topic_id, p) for t, ps in sub.owned.items() if t in topics
                      for p in ps)
    core._reconcile(g, member, owned, records, now_ms)
    g.session_deadline_ms[member_id] = now_ms + req.session_timeout_ms
    # Kafka's join timeout is done; its sync timeout starts (SyncGroup in the rebalance
    # timeout, else the member is removed)
    g.join_deadline_ms.pop(member_id, None)
    g.sync_deadline_ms[member_id] = now_ms + req.rebalance_timeout_ms
    if replaced_consumer_member:
        # the last consumer-protocol member may be gone: a classic group at once (the member
        # then syncs with it)
        core.downgrade_after_replacement(g, topics, records)
    return ClassicJoinAnswer(ErrorCode.NONE, member_id, member.member_epoch,
                             req.protocols[0][0], records=tuple(records))


def _member(g: ConsumerGroup, member_id: str,
            instance_id: str | None) -> Member | ErrorCode:
    """Kafka's ``validateConsumerGroupMember`` and ``throwIfMemberDoesNotUseClassicProtocol``."""
    if instance_id is not None:
        m = next((m for m in g.members.values() if m.subscription.instance_id == instance_id),
                 None)
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_id and m.member_id != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    else:
        found = g.members.get(member_id)
        if found is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        m = found
    if m.subscription.classic is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return m


def sync(core: ConsumerGroupCoordinator, group_id: str, member_id: str, generation_id: int,
         instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
         now_ms: int) -> tuple[ErrorCode, Partitions, int]:
    """(error, the member's assigned partitions, the assignment's embedded version)."""
    g = core.groups[group_id]
    m = _member(g, member_id, instance_id)
    if isinstance(m, ErrorCode):
        return m, frozenset(), 0
    if generation_id != m.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION, frozenset(), 0
    classic = m.subscription.classic
    assert classic is not None
    if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
            protocol_name is not None
            and protocol_name != classic.supported_protocols[0][0]):
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, frozenset(), 0
    if g.group_epoch > m.member_epoch and \
            m.current.state != MemberState.UNREVOKED_PARTITIONS:
        _must_rejoin(g, m, now_ms)
        return ErrorCode.REBALANCE_IN_PROGRESS, frozenset(), 0
    g.sync_deadline_ms.pop(m.member_id, None)
    g.session_deadline_ms[m.member_id] = now_ms + classic.session_timeout_ms
    meta = classic.supported_protocols[0][1]
    return ErrorCode.NONE, m.current.assigned, version_of(meta) if len(meta) >= 2 else 0


def heartbeat(core: ConsumerGroupCoordinator, group_id: str, member_id: str,
              generation_id: int, instance_id: str | None, now_ms: int) -> ErrorCode:
    g = core.groups[group_id]
    m = _member(g, member_id, instance_id)
    if isinstance(m, ErrorCode):
        return m
    if generation_id != m.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION
    classic = m.subscription.classic
    assert classic is not None
    g.session_deadline_ms[m.member_id] = now_ms + classic.session_timeout_ms
    state = m.current.state
    if m.member_epoch < g.group_epoch or state == MemberState.UNREVOKED_PARTITIONS or (
            state == MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(g, m)):
        _must_rejoin(g, m, now_ms)
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def _must_rejoin(g: ConsumerGroup, m: Member, now_ms: int) -> None:
    """The member is told REBALANCE_IN_PROGRESS: it must send JoinGroup within its rebalance
    timeout, counted from the first time it is told (Kafka's
    ``scheduleConsumerGroupJoinTimeoutIfAbsent``), else it is removed."""
    g.join_deadline_ms.setdefault(
        m.member_id, now_ms + max(m.subscription.rebalance_timeout_ms, 0))


def _waiting_on_unreleased(g: ConsumerGroup, m: Member) -> bool:
    """Some partition of its target is still held by another member."""
    missing = g.target.get(m.member_id, frozenset()) - m.current.assigned
    return any(missing & other.holds for other in g.members.values() if other is not m)


def leave(core: ConsumerGroupCoordinator, group_id: str,
          members: list[tuple[str, str | None]], topics: Mapping[str, TopicMetadata]
          ) -> tuple[list[tuple[str, str | None, ErrorCode]], list[ConsumerGroupRecord]]:
    """LeaveGroup of classic members ((member id, instance id) each): one answer each, and
    the records of the removals."""
    g = core.groups[group_id]
    answers: list[tuple[str, str | None, ErrorCode]] = []
    records: list[ConsumerGroupRecord] = []
    for member_id, instance_id in members:
        m = _member(g, member_id, instance_id)
        if isinstance(m, ErrorCode):
            answers.append((member_id, instance_id, m))
            continue
        core._remove(g, m.member_id, topics, records)
        answers.append((m.member_id, instance_id, ErrorCode.NONE))
        if group_id not in core.groups:
            break  # downgraded (cannot happen from a classic member's leave; kept safe)
    return answers, records
