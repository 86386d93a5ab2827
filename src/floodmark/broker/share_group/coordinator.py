"""KIP-932's share-group coordinator, as a sans-I/O core: ShareGroupHeartbeat's membership and
the server-side ``simple`` assignment. Every input carries ``now_ms``; timers are the members'
sessions (``next_deadline_ms`` / ``expired``).

A share group shares partitions instead of dividing them: the records of a partition are handed
out one lock at a time by its leader (``partition.SharePartition``), so two members may be
assigned one partition and nothing is revoked before it is given to another. That makes the
protocol short:

* a member joins with epoch 0 and its subscribed topic names (v1: the client made its member
  id); joining, leaving, a new subscription or a change in the subscribed topics' partitions
  bumps the **group epoch** and recomputes the assignment at once;
* a member's epoch is the group epoch of its current assignment; a heartbeat carries it. A
  higher epoch, or a lower one that is not the member's previous epoch (a lost answer), is
  FENCED_MEMBER_EPOCH; an unknown member id is UNKNOWN_MEMBER_ID; both rejoin with epoch 0;
* epoch -1 leaves; a member silent for ``group.share.session.timeout.ms`` is removed.

The ``simple`` assignor spreads: with at least as many partitions as members, each partition
goes to one member (round robin over the sorted members); with fewer, each member gets one
partition and each partition is shared by members in turn, so every member has work and every
partition a consumer.

Membership is stored as Kafka's share-group records in ``__consumer_offsets`` (``records``):
the handler stores what a call changed (``view`` before and after) before it answers, and a new
coordinator replays them (``restore``), so after a coordinator failover the members go on with
their member ids, epochs and assignments (the target assignment and its epoch are stored too).

The share state of the partitions a group subscribes to is initialized at their share
coordinators as Kafka 4.1 does (InitializeShareGroupState, at the group epoch, start offset -1):
``to_initialize`` marks the subscribed partitions with no state yet as initializing (stored in
the heartbeat's records, ``ShareGroupStatePartitionMetadata``), the handler asks the share
coordinators after it answers, and ``state_initialized`` records the outcome (a failure is
retried by a later heartbeat, as is one still initializing after ``INITIALIZE_RETRY_MS``).
Unlike Kafka, the assignment does not wait for it: a partition's leader that finds no state
places the start offset itself, so a member never waits a heartbeat for its first records. The delivery state of the records lives with the partitions, at
the share coordinator (``share_coordinator``), not with the members.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from floodmark.errors import ErrorCode
from floodmark.groups import (
    GroupView,
    MemberView,
    StatePartitions,
    TopicState,
)

LEAVE_GROUP_MEMBER_EPOCH = -1
INITIALIZE_RETRY_MS = 30_000  # Kafka's group.share.initialize.retry.interval.ms default
TopicPartition = tuple[uuid.UUID, int]
Partitions = frozenset[TopicPartition]


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged


@dataclass(frozen=True, slots=True)
class ShareHeartbeatAnswer:
    error: ErrorCode
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Partitions | None = None  # sent when it changed
    message: str | None = None


@dataclass
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: tuple[str, ...]
    member_epoch: int = 0
    previous_epoch: int = 0
    assignment: Partitions = frozenset()
    sent_epoch: int = -1  # the epoch of the last assignment the member was answered


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # (topic, topic id, partitions), sorted: a topic deleted and created again under its name
    # is a new topic (a new id), and the group is assigned its partitions
    subscribed_shape: tuple[tuple[str, uuid.UUID, int], ...] = ()
    session_deadline_ms: dict[str, int] = field(default_factory=dict)
    state_partitions: StatePartitions = field(default_factory=StatePartitions)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY


def simple_assignment(members: list[str], partitions: list[TopicPartition]
                      ) -> dict[str, Partitions]:
    """Kafka's ``simple`` share assignor's aim: every partition has a member and every member
    a partition (see the module's text)."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members or not partitions:
        return {m: frozenset() for m in members}
    ms, ps = sorted(members), sorted(partitions, key=lambda tp: (str(tp[0]), tp[1]))
    if len(ps) >= len(ms):
        for i, tp in enumerate(ps):
            out[ms[i % len(ms)]].add(tp)
    else:
        for i, m in enumerate(ms):
            out[m].add(ps[i % len(ps)])
    return {m: frozenset(tps) for m, tps in out.items()}


SHARE_GROUP_MAX_SIZE_DEFAULT = 200  # group.share.max.size (Kafka's default)


class ShareGroupCoordinator:
    def __init__(self, config: ShareGroupConfig,
                 max_size: int = SHARE_GROUP_MAX_SIZE_DEFAULT) -> None:
        self.config = config
        self.max_size = max_size  # group.share.max.size, broker-wide
        # a group's own share.session.timeout.ms / share.heartbeat.interval.ms (group
        # configs): the broker keeps this up to date from its metadata
        self.group_configs: dict[str, ShareGroupConfig] = {}
        self.groups: dict[str, ShareGroup] = {}

    def config_of(self, group_id: str) -> ShareGroupConfig:
        """The settings ``group_id`` runs with: its group configs, else the broker's."""
        return self.group_configs.get(group_id, self.config)

    def heartbeat(self, hb: ShareHeartbeat, topics: Mapping[str, TopicInfo],
                  now_ms: int) -> ShareHeartbeatAnswer:
        config = self.config_of(hb.group_id)
        interval_ms = config.heartbeat_interval_ms

        def refuse(error: ErrorCode, message: str) -> ShareHeartbeatAnswer:
            return ShareHeartbeatAnswer(error, hb.member_id, hb.member_epoch, interval_ms,
                                        message=message)

        if not hb.member_id:
            return refuse(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        group = self.groups.get(hb.group_id)
        member = None if group is None else group.members.get(hb.member_id)
        if group is not None and member is None and len(group.members) >= self.max_size:
            # Kafka's throwIfShareGroupIsFull
            return refuse(ErrorCode.GROUP_MAX_SIZE_REACHED,
                          f"The share group has reached its maximum capacity of "
                          f"{self.max_size} members.")
        if hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if group is not None and member is not None:
                self._remove(group, hb.member_id, topics)
            return ShareHeartbeatAnswer(ErrorCode.NONE, hb.member_id,
                                        LEAVE_GROUP_MEMBER_EPOCH, interval_ms)
        if hb.member_epoch == 0:
            if not hb.subscribed_topic_names:
                return refuse(ErrorCode.INVALID_REQUEST,
                              "SubscribedTopicNames must be set in first request.")
            group = self.groups.setdefault(hb.group_id, ShareGroup(hb.group_id))
            if member is not None:  # a rejoin with the same id: start over
                group.members.pop(hb.member_id)
            member = ShareMember(hb.member_id, hb.client_id, hb.client_host, hb.rack_id,
                                 tuple(sorted(set(hb.subscribed_topic_names))))
            group.members[hb.member_id] = member
            group.group_epoch += 1
        elif group is None or member is None:
            return refuse(ErrorCode.UNKNOWN_MEMBER_ID,
                          f"Member {hb.member_id} is not a member of group {hb.group_id}.")
        elif hb.member_epoch != member.member_epoch and not (
                hb.member_epoch == member.previous_epoch and hb.member_epoch > 0):
            return refuse(ErrorCode.FENCED_MEMBER_EPOCH,
                          f"The share group member has a member epoch ({hb.member_epoch}) "
                          f"that differs from the current epoch ({member.member_epoch}).")
        else:
            if hb.member_epoch != member.member_epoch:
                member.sent_epoch = -1  # it lost an answer: send the assignment again
            names = None if hb.subscribed_topic_names is None else \
                tuple(sorted(set(hb.subscribed_topic_names)))
            if names is not None and names != member.subscribed:
                member.subscribed = names
                group.group_epoch += 1
            if hb.rack_id is not None:
                member.rack_id = hb.rack_id
        self._assign(group, topics)
        group.session_deadline_ms[hb.member_id] = now_ms + config.session_timeout_ms
        send = member.sent_epoch != member.member_epoch
        member.sent_epoch = member.member_epoch
        return ShareHeartbeatAnswer(ErrorCode.NONE, hb.member_id, member.member_epoch,
                                    interval_ms, member.assignment if send else None)

    def _assign(self, group: ShareGroup, topics: Mapping[str, TopicInfo]) -> None:
        """A new assignment when the group epoch moved or the subscribed topics changed."""
        wanted = sorted({n for m in group.members.values() for n in m.subscribed})
        shape = tuple((n, topics[n].topic_id, topics[n].partitions) for n in wanted
                      if n in topics)
        if shape != group.subscribed_shape:
            group.subscribed_shape = shape
            if group.assignment_epoch == group.group_epoch:
                group.group_epoch += 1
        if group.assignment_epoch == group.group_epoch:
            return
        # members subscribed to the same topics share them; each set of topics is spread
        # over the members that subscribe to it
        by_subscription: dict[tuple[str, ...], list[str]] = {}
        for m in group.members.values():
            by_subscription.setdefault(m.subscribed, []).append(m.member_id)
        for names, member_ids in by_subscription.items():
            parts = [(topics[n].topic_id, p) for n in names if n in topics
                     for p in range(topics[n].partitions)]
            for member_id, assigned in simple_assignment(member_ids, parts).items():
                m = group.members[member_id]
                m.assignment = assigned
                m.previous_epoch, m.member_epoch = m.member_epoch, group.group_epoch
        group.assignment_epoch = group.group_epoch

    def _remove(self, group: ShareGroup, member_id: str,
                topics: Mapping[str, TopicInfo]) -> None:
        group.members.pop(member_id, None)
        group.session_deadline_ms.pop(member_id, None)
        group.group_epoch += 1
        self._assign(group, topics)

    # -- timers ---------------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups.values() for d in g.session_deadline_ms.values()]
        return min(deadlines) if deadlines else None

    def expire(self, topics: Mapping[str, TopicInfo], now_ms: int, *,
               only: str | None = None) -> list[tuple[str, str]]:
        """Remove the members whose session timed out (of group ``only``, or of every
        group): (group, member) of each."""
        gone: list[tuple[str, str]] = []
        for group in self.groups.values():
            if only is not None and group.group_id != only:
                continue
            for member_id, deadline_ms in list(group.session_deadline_ms.items()):
                if deadline_ms <= now_ms:
                    self._remove(group, member_id, topics)
                    gone.append((group.group_id, member_id))
        return gone

    # -- what is stored ---------------------------------------------------------------------
    def view(self, group_id: str) -> GroupView | None:
        """The group as its records store it (None: no group)."""
        g = self.groups.get(group_id)
        if g is None:
            return None
        return GroupView(g.group_epoch, {
            m.member_id: MemberView(m.rack_id, m.client_id, m.client_host, m.subscribed,
                                    m.member_epoch, m.previous_epoch, m.assignment)
            for m in g.members.values()}, g.assignment_epoch,
            {m.member_id: m.assignment for m in g.members.values()}, g.state_partitions)

    def restore(self, group_id: str, view: GroupView | None,
                topics: Mapping[str, TopicInfo], now_ms: int) -> None:
        """Make the group what ``view`` says (a replay after a failover, or a change whose
        records could not be stored undone): the members keep their ids, epochs and
        assignments; each has a fresh session; the assignment is the one of their epoch."""
        if view is None:
            self.groups.pop(group_id, None)
            return
        g = ShareGroup(group_id, view.group_epoch, state_partitions=view.state)
        g.assignment_epoch = view.assignment_epoch if view.assignment_epoch >= 0 else max(
            (m.member_epoch for m in view.members.values()), default=view.group_epoch)
        for member_id, m in sorted(view.members.items()):
            member = ShareMember(member_id, m.client_id, m.client_host, m.rack_id,
                                 m.subscribed, m.member_epoch, m.previous_epoch, m.assignment)
            target = view.targets.get(member_id)
            if target is not None and m.member_epoch < g.assignment_epoch:
                # its target is ahead of what it was answered: it moves there, and its next
                # heartbeat (with its old epoch, now its previous one) is sent the assignment
                member.previous_epoch, member.member_epoch = m.member_epoch, g.assignment_epoch
                member.assignment = target
            g.members[member_id] = member
            g.session_deadline_ms[member_id] = \
                now_ms + self.config_of(group_id).session_timeout_ms
        wanted = sorted({n for m in g.members.values() for n in m.subscribed})
        g.subscribed_shape = tuple((n, topics[n].topic_id, topics[n].partitions)
                                   for n in wanted if n in topics)
        self.groups[group_id] = g

    # -- the share state of the subscribed partitions --------------------------------------
    def to_initialize(self, group_id: str, topics: Mapping[str, TopicInfo],
                      now_ms: int) -> list[TopicPartition]:
        """The subscribed partitions whose share state the group has not initialized (nor
        is initializing, unless for ``INITIALIZE_RETRY_MS``): they become initializing."""
        g = self.groups.get(group_id)
        if g is None:
            return []
        state = g.state_partitions
        initializing = dict(state.initializing)
        out: list[TopicPartition] = []
        for name in sorted({n for m in g.members.values() for n in m.subscribed}):
            t = topics.get(name)
            if t is None:
                continue
            done = state.initialized.get(t.topic_id)
            pending = initializing.get(t.topic_id)
            fresh = set() if pending is None or \
                pending.create_ms + INITIALIZE_RETRY_MS <= now_ms else set(pending.partitions)
            new = [p for p in range(t.partitions)
                   if (done is None or p not in done.partitions) and p not in fresh]
            if not new:
                continue
            out += [(t.topic_id, p) for p in new]
            initializing[t.topic_id] = TopicState(name, frozenset(fresh | set(new)), now_ms)
        if out:
            g.state_partitions = StatePartitions(initializing, state.initialized,
                                                 state.deleting)
        return out

    def state_initialized(self, group_id: str, done: list[TopicPartition],
                          failed: list[TopicPartition]) -> None:
        """The share coordinators answered: ``done`` are initialized, ``failed`` are not
        (a later heartbeat tries them again)."""
        g = self.groups.get(group_id)
        if g is None:
            return
        state = g.state_partitions
        initializing = dict(state.initializing)
        initialized = dict(state.initialized)
        for (topic_id, p), ok in [(tp, True) for tp in done] + [(tp, False) for tp in failed]:
            pending = initializing.get(topic_id)
            if pending is None or p not in pending.partitions:
                continue
            left = pending.partitions - {p}
            if left:
                initializing[topic_id] = TopicState(pending.name, left, pending.create_ms)
            else:
                del initializing[topic_id]
            if ok:
                had = initialized.get(topic_id)
                initialized[topic_id] = TopicState(
                    pending.name, (had.partitions if had else frozenset()) | {p})
        g.state_partitions = StatePartitions(initializing, initialized, state.deleting)

    def state_deleted(self, group_id: str, topic_ids: list[uuid.UUID]) -> None:
        """DeleteShareGroupOffsets deleted the share state of these topics' partitions."""
        g = self.groups.get(group_id)
        if g is None:
            return
        state = g.state_partitions
        g.state_partitions = StatePartitions(
            {t: v for t, v in state.initializing.items() if t not in topic_ids},
            {t: v for t, v in state.initialized.items() if t not in topic_ids},
            {t: v for t, v in state.deleting.items() if t not in topic_ids})

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        return ErrorCode.NONE
