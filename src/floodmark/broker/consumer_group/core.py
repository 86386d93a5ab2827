"""KIP-848's group coordinator for ``group.protocol=consumer`` groups, as a sans-I/O core.

No asyncio, sockets or clocks: every input carries ``now_ms``, every answer carries the
records to store (``ConsumerGroupRecord`` values, Kafka's consumer-group records). Every state
change goes through one applier, ``apply``: the live path emits a record and applies it at
once, a new coordinator replays the same records from ``__consumer_offsets``, so what a
failover loads is what the members were told.

The protocol, as Kafka's ``GroupMetadataManager`` runs it:

* a member joins with member epoch 0 and its subscription; a change of membership, of a
  subscription or of the subscribed topics' partitions bumps the **group epoch**;
* when the group epoch is ahead of the **assignment epoch**, the assignor computes a new
  *target assignment* (``uniform`` by default, ``range``) and the assignment epoch catches up;
* each member is reconciled towards its target on its own heartbeats (``reconcile``): it first
  revokes what it must give up (state UNREVOKED_PARTITIONS, member epoch unchanged), then gets
  the target epoch and the partitions that are free; partitions another member still holds
  wait (UNRELEASED_PARTITIONS) until that member revoked them. So no partition is ever held by
  two members at once;
* a member sends its epoch; a higher one, or a lower one that is not its previous epoch (a lost
  answer), is FENCED_MEMBER_EPOCH; an unknown member id is UNKNOWN_MEMBER_ID; both rejoin with
  epoch 0 and nothing owned;
* a member leaves with epoch -1, or with -2 as a static member: it keeps its partitions
  for its session timeout, and the instance that rejoins with the same instance id (a new
  member id) takes its place and its partitions without a new group epoch; a member is
  removed when its session times out (``group.consumer.session.timeout.ms``) or when it does
  not revoke within its rebalance timeout.

Subscriptions name topics, or a regular expression matched against the cluster's topics at
each heartbeat (a new matching topic bumps the group epoch). The ``uniform`` assignor is
rack-aware (members' ``client.rack`` against the racks of the partitions' replicas; see
``assignors``).

KIP-848's online migration (``migration``): a classic group upgraded to a consumer group keeps
its members as *classic protocol members* (``classic_members`` serves their JoinGroup,
SyncGroup, Heartbeat and LeaveGroup); when the last member speaking the consumer protocol goes
and only classic members remain, ``_remove`` writes the group's tombstones and leaves the
classic group it becomes in ``downgrades`` for the broker's shell to take over.
"""

from __future__ import annotations

import copy
import enum
import functools
import random
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace

from floodmark.broker.consumer_group import migration
from floodmark.broker.consumer_group.assignors import ASSIGNORS, AssignmentSpec, Partitions
from floodmark.broker.consumer_group.records import (
    ConsumerGroupRecord,
    CurrentAssignment,
    GroupEpoch,
    MemberAssignment,
    MemberState,
    MemberSubscription,
    PartitionMetadata,
    Subscription,
    TargetEpoch,
    TargetMember,
    TopicMetadata,
)
from floodmark.errors import ErrorCode

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
GROUP_MAX_SIZE_DEFAULT = 2**31 - 1  # group.consumer.max.size and group.max.size: Kafka's
# Integer.MAX_VALUE
_NONE: Partitions = frozenset()


class GroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class CoreConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    migration_policy: migration.MigrationPolicy = migration.MigrationPolicy.BIDIRECTIONAL
    max_size: int = GROUP_MAX_SIZE_DEFAULT  # group.consumer.max.size
    classic_max_size: int = GROUP_MAX_SIZE_DEFAULT  # group.max.size (a downgrade's bound)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat, as typed values (None: the field was not sent)."""

    group_id: str
    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: ErrorCode
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Partitions | None = None  # sent when it changed or the request was full
    message: str | None = None
    records: tuple[ConsumerGroupRecord, ...] = ()


_NO_SUBSCRIPTION = Subscription(None, None, "", "", (), None, -1, None)
_EMPTY_ASSIGNMENT = CurrentAssignment(0, 0, int(MemberState.STABLE), _NONE, _NONE)


@dataclass
class Member:
    member_id: str
    subscription: Subscription
    current: CurrentAssignment = _EMPTY_ASSIGNMENT

    @property
    def member_epoch(self) -> int:
        return self.current.member_epoch

    @property
    def holds(self) -> Partitions:
        """What the member may still consume: assigned, and being revoked."""
        return self.current.assigned | self.current.pending_revocation

    @property
    def uses_classic_protocol(self) -> bool:
        return self.subscription.classic is not None

    def session_timeout_ms(self, config: CoreConfig) -> int:
        """A classic protocol member's own (its JoinGroup's), else the group's."""
        classic = self.subscription.classic
        return classic.session_timeout_ms if classic is not None else config.session_timeout_ms


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    topics: tuple[TopicMetadata, ...] = ()  # the subscribed topics, as last stored
    # not stored: timers, restarted by a new coordinator from its load
    session_deadline_ms: dict[str, int] = field(default_factory=dict)
    revocation_deadline_ms: dict[str, int] = field(default_factory=dict)
    # classic protocol members (``classic_members``): told to rejoin, they must send JoinGroup
    # within their rebalance timeout; answered, SyncGroup within it (Kafka's join and sync
    # timeouts)
    join_deadline_ms: dict[str, int] = field(default_factory=dict)
    sync_deadline_ms: dict[str, int] = field(default_factory=dict)

    def deadlines(self) -> tuple[dict[str, int], ...]:
        """Every member timer of the group, the session's first."""
        return (self.session_deadline_ms, self.revocation_deadline_ms, self.join_deadline_ms,
                self.sync_deadline_ms)

    def full(self, member_id: str, max_size: int) -> bool:
        """Kafka's ``throwIfConsumerGroupIsFull``: the group holds ``max_size`` members and
        ``member_id`` is not one of them."""
        return len(self.members) >= max_size and member_id not in self.members

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch != self.assignment_epoch:
            return GroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch
               or m.current.state != MemberState.STABLE for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for (Kafka's rule), else the default."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.subscription.server_assignor:
                votes[m.subscription.server_assignor] = votes.get(
                    m.subscription.server_assignor, 0) + 1
        if not votes:
            return default
        return max(sorted(votes), key=lambda name: votes[name])


def reconcile(current: CurrentAssignment, target: Partitions, target_epoch: int,
              owned: Partitions | None, held_by_others: Partitions) -> CurrentAssignment:
    """A member's next assignment (Kafka's ``CurrentAssignmentBuilder``): ``owned`` is what the
    member reports it owns (None: not reported), ``held_by_others`` what other members hold."""

    def still_owns(revoking: Partitions) -> bool:
        return owned is None or bool(owned & revoking)

    def next_assignment(member_epoch: int) -> CurrentAssignment:
        keep = current.assigned & target
        revoke = current.assigned - keep
        new = target - keep
        unreleased = new & held_by_others
        new -= unreleased
        if revoke and still_owns(revoke):
            return CurrentAssignment(member_epoch, current.member_epoch,
                                     int(MemberState.UNREVOKED_PARTITIONS), keep, revoke)
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return CurrentAssignment(target_epoch, current.member_epoch, int(state), keep | new,
                                 _NONE)

    state = current.state
    if state == MemberState.STABLE:
        return current if current.member_epoch == target_epoch else \
            next_assignment(current.member_epoch)
    if state == MemberState.UNREVOKED_PARTITIONS:
        if still_owns(current.pending_revocation):
            return current
        return next_assignment(current.member_epoch + 1)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return next_assignment(current.member_epoch)
    return next_assignment(target_epoch)  # UNKNOWN: from scratch


def subscribed(s: Subscription, topics: Mapping[str, TopicMetadata]) -> set[str]:
    """The existing topics a subscription names: its topic names, and the topics its regular
    expression matches in full (Python's ``re``; Kafka uses RE2/J: the common syntax is the
    same). Internal topics match like any other, as in Kafka (``GroupMetadataManager
    .refreshRegularExpressions`` scans every topic of the image; leaving them out is the
    client's ``exclude.internal.topics``)."""
    out = {n for n in s.subscribed_topic_names if n in topics}
    if s.subscribed_topic_regex:
        pattern = _compiled(s.subscribed_topic_regex)
        if pattern is not None:
            out.update(n for n in topics if pattern.fullmatch(n))
    return out


@functools.lru_cache(maxsize=256)
def _compiled(regex: str) -> re.Pattern[str] | None:
    try:
        return re.compile(regex)
    except re.error:
        return None  # checked when the member sent it; a stored one is not trusted blindly


def consumer_group_assignors(setting: object) -> tuple[str, ...]:
    """``group.consumer.assignors`` (a list, or comma-separated text) as names, each checked."""
    items = setting if isinstance(setting, list | tuple) else str(setting).split(",")
    names = tuple(str(n).strip() for n in items if str(n).strip())
    unknown = [n for n in names if n not in ASSIGNORS]
    if not names or unknown:
        raise ValueError(f"group.consumer.assignors: {list(names)}; floodmark's assignors "
                         f"are {sorted(ASSIGNORS)}")
    return names


class ConsumerGroupCoordinator:
    """Every consumer group of one coordinator (the groups of the ``__consumer_offsets``
    partitions it leads)."""

    def __init__(self, config: CoreConfig, rng: random.Random | None = None) -> None:
        """``rng``: where new member ids come from (a seeded one in the simulator, so a seed
        replays exactly; by default the system's)."""
        if not config.assignors or any(a not in ASSIGNORS for a in config.assignors):
            raise ValueError(f"group.consumer.assignors: {list(config.assignors)}; "
                             f"known: {sorted(ASSIGNORS)}")
        self.config = config
        # a group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms (group
        # configs): the broker keeps this up to date from its metadata
        self.group_configs: dict[str, CoreConfig] = {}
        self.groups: dict[str, ConsumerGroup] = {}
        # the classic groups that consumer groups became (downgrades), until the shell takes
        # them (``take_downgrade``) with the records that wrote them
        self.downgrades: dict[str, migration.ClassicSnapshot] = {}
        self._rng = rng if rng is not None else random.SystemRandom()

    def new_member_id(self) -> str:
        """A member id the coordinator names (a classic protocol member's JoinGroup)."""
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def config_of(self, group_id: str) -> CoreConfig:
        """The settings ``group_id`` runs with: its group configs, else the broker's."""
        return self.group_configs.get(group_id, self.config)

    # -- the one applier ------------------------------------------------------------------------
    def apply(self, rec: ConsumerGroupRecord) -> None:
        """Apply one record (live, or replayed by a new coordinator)."""
        g = self.groups.get(rec.group_id)
        if isinstance(rec, GroupEpoch):
            if rec.epoch is None:
                self.groups.pop(rec.group_id, None)
                return
            g = g or self.groups.setdefault(rec.group_id, ConsumerGroup(rec.group_id))
            g.group_epoch = rec.epoch
            return
        if g is None:
            g = self.groups.setdefault(rec.group_id, ConsumerGroup(rec.group_id))
        if isinstance(rec, PartitionMetadata):
            g.topics = rec.topics or ()
        elif isinstance(rec, TargetEpoch):
            g.assignment_epoch = rec.assignment_epoch or 0
        elif isinstance(rec, TargetMember):
            if rec.partitions is None:
                g.target.pop(rec.member_id, None)
            else:
                g.target[rec.member_id] = rec.partitions
        elif isinstance(rec, MemberSubscription):
            if rec.value is None:
                g.members.pop(rec.member_id, None)
                for timers in g.deadlines():
                    timers.pop(rec.member_id, None)
            elif rec.member_id in g.members:
                g.members[rec.member_id].subscription = rec.value
            else:
                g.members[rec.member_id] = Member(rec.member_id, rec.value)
        elif isinstance(rec, MemberAssignment):
            m = g.members.get(rec.member_id)
            if rec.value is None:
                return
            if m is None:
                # Compaction keeps a member's latest subscription record, which may come
                # later in the log than its assignment: the member exists from here.
                m = g.members[rec.member_id] = Member(rec.member_id, _NO_SUBSCRIPTION)
            m.current = rec.value

    def upgrade(self, classic: migration.ClassicSnapshot, topics: Mapping[str, TopicMetadata],
                now_ms: int) -> list[ConsumerGroupRecord]:
        """A non-empty classic group becomes a consumer group (``migration.upgrade_records``;
        ``ValueError`` when a member's embedded protocol cannot be read): its records, each
        classic member with a fresh session of its own timeout."""
        records: list[ConsumerGroupRecord] = []
        for rec in migration.upgrade_records(classic, topics):
            self._emit(records, rec)
        g = self.groups[classic.group_id]
        for m in g.members.values():
            g.session_deadline_ms[m.member_id] = now_ms + m.session_timeout_ms(self.config)
        return records

    def take_downgrade(self, group_id: str) -> migration.ClassicSnapshot | None:
        """The classic group ``group_id`` became by the change just made (None: it did not)."""
        return self.downgrades.pop(group_id, None)

    def loaded(self, group_ids: Iterable[str], now_ms: int) -> None:
        """The replay of these groups is complete: every member has a fresh session."""
        for group_id in group_ids:
            g = self.groups.get(group_id)
            if g is None:
                continue
            for member_id, m in g.members.items():
                g.session_deadline_ms[member_id] = \
                    now_ms + m.session_timeout_ms(self.config_of(group_id))
                if m.current.state == MemberState.UNREVOKED_PARTITIONS:
                    g.revocation_deadline_ms[member_id] = \
                        now_ms + m.subscription.rebalance_timeout_ms

    def unload(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            self.groups.pop(group_id, None)

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------
    def heartbeat(self, hb: Heartbeat, topics: Mapping[str, TopicMetadata],
                  now_ms: int) -> HeartbeatAnswer:
        """One heartbeat; ``topics`` is the cluster's topics by name."""
        config = self.config_of(hb.group_id)
        interval_ms = config.heartbeat_interval_ms

        def refuse(error: ErrorCode, message: str) -> HeartbeatAnswer:
            return HeartbeatAnswer(error, hb.member_id, hb.member_epoch, interval_ms,
                                   message=message)

        invalid = self._invalid(hb)
        if invalid is not None:
            return refuse(*invalid)
        records: list[ConsumerGroupRecord] = []
        g = self.groups.get(hb.group_id)
        if hb.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            if g is None or hb.member_id not in g.members:
                return refuse(ErrorCode.UNKNOWN_MEMBER_ID,
                              f"member {hb.member_id} is not in group {hb.group_id}")
            leaving = g.members[hb.member_id]
            if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and \
                    leaving.subscription.instance_id is not None:
                # KIP-848 static leave: the member keeps its partitions for its session
                # timeout, for the instance that comes back with the same instance id; what
                # it was revoking is released (the instance gave everything up when it left).
                self._emit(records, MemberAssignment(g.group_id, hb.member_id, replace(
                    leaving.current, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    previous_member_epoch=leaving.member_epoch,
                    state=int(MemberState.STABLE), pending_revocation=_NONE)))
                g.session_deadline_ms[hb.member_id] = now_ms + config.session_timeout_ms
                g.revocation_deadline_ms.pop(hb.member_id, None)
            else:
                self._remove(g, hb.member_id, topics, records)
            return HeartbeatAnswer(ErrorCode.NONE, hb.member_id, hb.member_epoch, interval_ms,
                                   records=tuple(records))
        if g is None and hb.member_epoch != 0:
            return refuse(ErrorCode.GROUP_ID_NOT_FOUND,
                          f"Consumer group {hb.group_id} not found.")
        if g is not None and g.full(hb.member_id, self.config.max_size):
            return refuse(ErrorCode.GROUP_MAX_SIZE_REACHED, self.full_message())
        if g is None:
            g = ConsumerGroup(hb.group_id)
            self.groups[hb.group_id] = g
        replaced = False
        if hb.instance_id is not None:
            static = self._static_member(g, hb, records)
            if isinstance(static, tuple):
                return refuse(*static)
            replaced = static
        member = g.members.get(hb.member_id)
        if hb.member_epoch == 0:
            if member is not None and not replaced:
                # A rejoin (it gave up everything it owned): start it afresh.
                self._emit(records, MemberAssignment(g.group_id, hb.member_id,
                                                     _EMPTY_ASSIGNMENT))
                member = g.members[hb.member_id]
        elif member is None:
            return refuse(ErrorCode.UNKNOWN_MEMBER_ID,
                          f"member {hb.member_id} is not in group {hb.group_id}")
        else:
            fenced = self._fenced(member, hb)
            if fenced is not None:
                return refuse(ErrorCode.FENCED_MEMBER_EPOCH, fenced)
        before = member.current if member is not None else None
        bump = self._update_subscription(g, member, hb, records)
        member = g.members[hb.member_id]
        bump = self._update_topics(g, topics, records) or bump
        if bump:
            self._emit(records, GroupEpoch(g.group_id, g.group_epoch + 1))
        if g.group_epoch > g.assignment_epoch:
            self._assign(g, records, topics)
        self._reconcile(g, member, hb.owned, records, now_ms)
        g.session_deadline_ms[member.member_id] = now_ms + config.session_timeout_ms
        full = hb.member_epoch == 0 or (hb.rebalance_timeout_ms != -1
                                        and hb.subscribed_topic_names is not None
                                        and hb.owned is not None)
        changed = before is None or before.assigned != member.current.assigned
        return HeartbeatAnswer(ErrorCode.NONE, member.member_id, member.member_epoch,
                               interval_ms,
                               member.current.assigned if full or changed else None,
                               records=tuple(records))

    def _invalid(self, hb: Heartbeat) -> tuple[ErrorCode, str] | None:
        bad = ErrorCode.INVALID_REQUEST
        if not hb.group_id:
            return bad, "GroupId can't be empty."
        if hb.instance_id == "":
            return bad, "InstanceId can't be empty."
        if hb.rack_id == "":
            return bad, "RackId can't be empty."
        if hb.subscribed_topic_regex:
            try:
                re.compile(hb.subscribed_topic_regex)
            except re.error as exc:
                return (ErrorCode.INVALID_REGULAR_EXPRESSION,
                        f"SubscribedTopicRegex {hb.subscribed_topic_regex!r} is not a valid "
                        f"regular expression: {exc}")
        if hb.member_epoch > 0 or hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not hb.member_id:
                return bad, "MemberId can't be empty."
        elif hb.member_epoch == 0:
            if not hb.member_id:
                return bad, "MemberId can't be empty."
            if hb.rebalance_timeout_ms == -1:
                return bad, "RebalanceTimeoutMs must be provided in first request."
            if hb.owned is None or hb.owned:
                return bad, "TopicPartitions must be empty when (re-)joining."
            if not hb.subscribed_topic_names and not hb.subscribed_topic_regex:
                return bad, ("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                             "first request.")
        elif hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not hb.member_id:
                return bad, "MemberId can't be empty."
            if hb.instance_id is None:
                return bad, "InstanceId can't be null."
        else:
            return bad, "MemberEpoch is invalid."
        if hb.server_assignor is not None and hb.server_assignor not in self.config.assignors:
            return (ErrorCode.UNSUPPORTED_ASSIGNOR,
                    f"ServerAssignor {hb.server_assignor} is not supported. Supported "
                    f"assignors: {', '.join(self.config.assignors)}.")
        return None

    def _static_member(self, g: ConsumerGroup, hb: Heartbeat,
                       records: list[ConsumerGroupRecord]) -> tuple[ErrorCode, str] | bool:
        """KIP-848 static membership (True: a member was replaced; a tuple: the refusal): the
        member holding ``hb.instance_id``. A rejoin (epoch 0)
        under a new member id takes the place of an instance that left with epoch -2 (its
        partitions and target, epoch 0: it reconciles from there); anything else naming the
        instance must be the member that holds it."""
        holder = next((m for m in g.members.values()
                       if m.subscription.instance_id == hb.instance_id), None)
        if hb.member_epoch != 0:
            if holder is None:
                return (ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Instance id {hb.instance_id} is unknown.")
            if holder.member_id != hb.member_id:
                return (ErrorCode.FENCED_INSTANCE_ID,
                        f"Static member {hb.member_id} with instance id {hb.instance_id} is "
                        f"fenced by member {holder.member_id}.")
            return False
        if holder is None or holder.member_id == hb.member_id:
            return False
        if holder.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and \
                not holder.uses_classic_protocol:
            # (a classic protocol holder is replaced at once, as Kafka does: the classic
            # protocol has no static leave)
            return (ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {holder.member_id} with instance id {hb.instance_id} "
                    f"is not released.")
        self.replace_member(g, holder, hb.member_id, records)
        return True

    def replace_member(self, g: ConsumerGroup, holder: Member, member_id: str,
                       records: list[ConsumerGroupRecord]) -> None:
        """KIP-345/KIP-848 static membership: ``member_id`` (a new instance under the same
        ``group.instance.id``) takes ``holder``'s place, subscription, target and partitions,
        at member epoch 0, without a new group epoch (Kafka's ``replaceMember``); ``holder``
        is gone (its id is UNKNOWN_MEMBER_ID, its instance id FENCED_INSTANCE_ID to it)."""
        target = g.target.get(holder.member_id, _NONE)
        for rec in (MemberAssignment(g.group_id, holder.member_id, None),
                    TargetMember(g.group_id, holder.member_id, None),
                    MemberSubscription(g.group_id, holder.member_id, None),
                    MemberSubscription(g.group_id, member_id, holder.subscription),
                    TargetMember(g.group_id, member_id, target),
                    MemberAssignment(g.group_id, member_id, replace(
                        holder.current, member_epoch=0, previous_member_epoch=0,
                        state=int(MemberState.STABLE), pending_revocation=_NONE))):
            self._emit(records, rec)

    def full_message(self) -> str:
        return (f"The consumer group has reached its maximum capacity of "
                f"{self.config.max_size} members.")

    @staticmethod
    def _fenced(member: Member, hb: Heartbeat) -> str | None:
        current = member.current
        if hb.member_epoch > current.member_epoch:
            return f"member epoch {hb.member_epoch} is ahead of {current.member_epoch}"
        # Behind: an answer that bumped the epoch was lost, and the member may retry with its
        # previous epoch while it owns nothing beyond what it is assigned.
        if hb.member_epoch < current.member_epoch and (
                hb.member_epoch != current.previous_member_epoch
                or (hb.owned is not None and not hb.owned <= current.assigned)):
            return f"member epoch {hb.member_epoch} is behind {current.member_epoch}"
        return None

    def _emit(self, records: list[ConsumerGroupRecord], rec: ConsumerGroupRecord) -> None:
        self.apply(rec)
        records.append(rec)

    def _update_subscription(self, g: ConsumerGroup, member: Member | None, hb: Heartbeat,
                             records: list[ConsumerGroupRecord]) -> bool:
        old = member.subscription if member is not None else None
        new = Subscription(
            hb.instance_id if hb.instance_id is not None else (old.instance_id if old else None),
            hb.rack_id if hb.rack_id is not None else (old.rack_id if old else None),
            hb.client_id, hb.client_host,
            tuple(sorted(hb.subscribed_topic_names)) if hb.subscribed_topic_names is not None
            else (old.subscribed_topic_names if old else ()),
            # None: unchanged; "" (librdkafka's, beside topic names): no regular expression
            (hb.subscribed_topic_regex or None) if hb.subscribed_topic_regex is not None
            else (old.subscribed_topic_regex if old else None),
            hb.rebalance_timeout_ms if hb.rebalance_timeout_ms != -1
            else (old.rebalance_timeout_ms if old else -1),
            hb.server_assignor if hb.server_assignor is not None
            else (old.server_assignor if old else None))
        if new == old:
            return False
        self._emit(records, MemberSubscription(g.group_id, hb.member_id, new))
        return old is None or (old.subscribed_topic_names, old.subscribed_topic_regex,
                               old.server_assignor) != (
            new.subscribed_topic_names, new.subscribed_topic_regex, new.server_assignor)

    def _update_topics(self, g: ConsumerGroup, topics: Mapping[str, TopicMetadata],
                       records: list[ConsumerGroupRecord]) -> bool:
        names = {n for m in g.members.values() for n in subscribed(m.subscription, topics)}
        wanted = tuple(topics[n] for n in sorted(names))
        if wanted == g.topics:
            return False
        self._emit(records, PartitionMetadata(g.group_id, wanted))
        return True

    def _assign(self, g: ConsumerGroup, records: list[ConsumerGroupRecord],
                topics: Mapping[str, TopicMetadata]) -> None:
        ids = {t.name: t.topic_id for t in g.topics}
        live = [topics.get(t.name, t) for t in g.topics]  # racks as the cluster has them now
        spec = AssignmentSpec(
            subscriptions={m.member_id: frozenset(ids[n] for n in subscribed(
                m.subscription, {t.name: t for t in g.topics}) if n in ids)
                for m in g.members.values()},
            partition_counts={t.topic_id: t.num_partitions for t in g.topics},
            current_target=dict(g.target),
            member_racks={m.member_id: m.subscription.rack_id for m in g.members.values()},
            partition_racks={(t.topic_id, p): racks for t in live
                             for p, racks in enumerate(t.partition_racks) if racks})
        assignor = ASSIGNORS[g.preferred_assignor(self.config.assignors[0])]
        new = assignor(spec)
        for member_id in sorted(new):
            if g.target.get(member_id) != new[member_id]:
                self._emit(records, TargetMember(g.group_id, member_id, new[member_id]))
        self._emit(records, TargetEpoch(g.group_id, g.group_epoch))

    def _reconcile(self, g: ConsumerGroup, member: Member, owned: Partitions | None,
                   records: list[ConsumerGroupRecord], now_ms: int) -> None:
        others = frozenset(tp for m in g.members.values() if m is not member for tp in m.holds)
        old = member.current
        new = reconcile(old, g.target.get(member.member_id, _NONE), g.assignment_epoch, owned,
                        others)
        if new != old:
            self._emit(records, MemberAssignment(g.group_id, member.member_id, new))
        if new.state == MemberState.UNREVOKED_PARTITIONS:
            if old.state != MemberState.UNREVOKED_PARTITIONS:
                g.revocation_deadline_ms[member.member_id] = \
                    now_ms + max(member.subscription.rebalance_timeout_ms, 0)
        else:
            g.revocation_deadline_ms.pop(member.member_id, None)

    def _downgrade(self, g: ConsumerGroup, leaving: str, topics: Mapping[str, TopicMetadata],
                   records: list[ConsumerGroupRecord], rebalance: bool) -> None:
        """The group becomes the classic group of its members but ``leaving`` ("": all stay):
        its records as tombstones, the classic group in ``downgrades`` for the shell (which
        rebalances it when ``rebalance``)."""
        names = {t.topic_id: t.name for t in (*g.topics, *topics.values())}
        self.downgrades[g.group_id] = replace(migration.downgrade(
            g.group_id, g.group_epoch,
            [migration.MemberView(m.member_id, m.subscription, g.target.get(m.member_id, _NONE))
             for m in g.members.values()], leaving, names), rebalance=rebalance)
        for rec in migration.tombstones(g.group_id, sorted(set(g.members) | set(g.target))):
            self._emit(records, rec)

    def downgrade_after_replacement(self, g: ConsumerGroup, topics: Mapping[str, TopicMetadata],
                                    records: list[ConsumerGroupRecord]) -> bool:
        """A classic member's JoinGroup replaced the last consumer-protocol member (a static
        instance): when the policy and ``group.max.size`` allow it, the group becomes a
        classic group at once, without a rebalance (Kafka's
        ``validateOnlineDowngradeWithReplacedMemberId``). True: it did."""
        if not (self.config.migration_policy.downgrade_enabled and g.members
                and len(g.members) <= self.config.classic_max_size
                and all(m.uses_classic_protocol for m in g.members.values())):
            return False
        self._downgrade(g, "", topics, records, rebalance=False)
        return True

    def _remove(self, g: ConsumerGroup, member_id: str, topics: Mapping[str, TopicMetadata],
                records: list[ConsumerGroupRecord]) -> None:
        """A member goes (left, timed out, fenced): its partitions are free at once. When it
        was the last member speaking the consumer protocol and classic members remain, the
        group becomes a classic group (KIP-848's downgrade, when the policy allows it)."""
        if migration.can_downgrade(self.config.migration_policy,
                                   {m: v.subscription for m, v in g.members.items()},
                                   member_id, self.config.classic_max_size):
            self._downgrade(g, member_id, topics, records, rebalance=True)
            return
        self._emit(records, MemberAssignment(g.group_id, member_id, None))
        self._emit(records, TargetMember(g.group_id, member_id, None))
        self._emit(records, MemberSubscription(g.group_id, member_id, None))
        self._update_topics(g, topics, records)
        self._emit(records, GroupEpoch(g.group_id, g.group_epoch + 1))

    # -- timers ---------------------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups.values() for timers in g.deadlines()
                     for d in timers.values()]
        return min(deadlines, default=None)

    _WHY = ("session timed out", "did not revoke its partitions in its rebalance timeout",
            "(a classic member) did not rejoin in its rebalance timeout",
            "(a classic member) did not sync in its rebalance timeout")

    def expired(self, now_ms: int) -> list[tuple[str, str, str]]:
        """(group, member, why) of every member whose session timed out, who did not revoke
        in its rebalance timeout, or (a classic member) did not send JoinGroup or SyncGroup in
        it (nothing changes: ``expire`` removes one)."""
        out: list[tuple[str, str, str]] = []
        for g in self.groups.values():
            expired: dict[str, str] = {}
            for why, timers in zip(self._WHY, g.deadlines(), strict=True):
                for m, d in timers.items():
                    if d <= now_ms:
                        expired.setdefault(m, why)
            out.extend((g.group_id, m, why) for m, why in sorted(expired.items()))
        return out

    def expire(self, group_id: str, member_id: str, topics: Mapping[str, TopicMetadata],
               now_ms: int) -> list[ConsumerGroupRecord]:
        """Remove a member ``expired`` named, if it is still due (a heartbeat may have come
        in between)."""
        g = self.groups.get(group_id)
        if g is None:
            return []
        due = [d for timers in g.deadlines() if (d := timers.get(member_id)) is not None]
        if member_id not in g.members:
            for timers in g.deadlines():
                timers.pop(member_id, None)
            return []
        if not due or min(due) > now_ms:
            return []
        records: list[ConsumerGroupRecord] = []
        self._remove(g, member_id, topics, records)
        return records

    def tick(self, topics: Mapping[str, TopicMetadata],
             now_ms: int) -> list[tuple[str, str, list[ConsumerGroupRecord]]]:
        """Remove every member ``expired`` names; (group, why, records) per removal."""
        out = []
        for group_id, member_id, why in self.expired(now_ms):
            records = self.expire(group_id, member_id, topics, now_ms)
            if records:
                out.append((group_id, f"member {member_id} {why}", records))
        return out

    # -- undoing a change whose records could not be stored -------------------------------------
    def snapshot(self, group_id: str) -> ConsumerGroup | None:
        """A copy of the group as it is (None: no such group), for ``restore``."""
        g = self.groups.get(group_id)
        if g is None:
            return None
        # Every value a group holds is immutable (frozen records, frozensets, ints) but its
        # members and its dicts: those are copied, the rest shared (a deep copy cost more than
        # the heartbeat it guards).
        out = copy.copy(g)
        for f in fields(g):
            value = getattr(g, f.name)
            if isinstance(value, dict):
                setattr(out, f.name, dict(value))
        out.members = {m: copy.copy(x) for m, x in g.members.items()}
        return out

    def restore(self, group_id: str, snapshot: ConsumerGroup | None) -> None:
        """The group goes back to ``snapshot`` (Kafka reverts to its last committed state when
        a write fails): what the members were told stays what a failover would load."""
        self.downgrades.pop(group_id, None)
        if snapshot is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = snapshot

    # -- offsets and admin ----------------------------------------------------------------------
    def validate_commit(self, group_id: str, member_id: str, member_epoch: int,
                        api_version: int, transactional: bool = False) -> ErrorCode:
        """OffsetCommit (and TxnOffsetCommit) into a consumer group (Kafka's
        ``ConsumerGroup.validateOffsetCommit``)."""
        g = self.groups[group_id]
        if member_epoch < 0 and not g.members:
            return ErrorCode.NONE  # an admin's or a manual commit into an empty group
        member = g.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.uses_classic_protocol:  # its generation is its member epoch
            return ErrorCode.NONE if member_epoch == member.member_epoch \
                else ErrorCode.ILLEGAL_GENERATION
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_fetch(self, group_id: str, member_id: str | None,
                       member_epoch: int) -> ErrorCode:
        g = self.groups[group_id]
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = g.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol \
                else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def delete(self, group_id: str) -> tuple[ErrorCode, list[ConsumerGroupRecord]]:
        """DeleteGroups of an empty consumer group: its records become tombstones."""
        g = self.groups.get(group_id)
        if g is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        if g.members:
            return ErrorCode.NON_EMPTY_GROUP, []
        records: list[ConsumerGroupRecord] = []
        for member_id in list(g.target):
            self._emit(records, TargetMember(group_id, member_id, None))
        self._emit(records, TargetEpoch(group_id, None))
        self._emit(records, PartitionMetadata(group_id, None))
        self._emit(records, GroupEpoch(group_id, None))
        return ErrorCode.NONE, records

    def subscribed_topics(self, group_id: str) -> set[str]:
        g = self.groups.get(group_id)
        return set() if g is None else {t.name for t in g.topics}
