"""KIP-932's share-group records in ``__consumer_offsets``, in Kafka's layouts: what a new
group coordinator replays so the members of a share group go on with their member ids, epochs
and assignments after a coordinator failover, without a new assignment.

Key types (the key version, Kafka's ``CoordinatorRecord`` types): 10
``ShareGroupMemberMetadata`` (a member's rack, client id and host, subscribed topics), 11
``ShareGroupMetadata`` (the group epoch), 12 ``ShareGroupTargetAssignmentMetadata`` (the
assignment epoch), 13 ``ShareGroupTargetAssignmentMember`` (a member's target partitions), 14
``ShareGroupCurrentMemberAssignment`` (a member's epoch, previous epoch, state and assigned
partitions) and 15 ``ShareGroupStatePartitionMetadata`` (the partitions whose share state the
group has initialized at their share coordinators, is initializing, or is deleting). Keys are
Kafka's non-flexible layout, values version 0 in the flexible one, as ``consumer_group.records``;
a record without a value is a tombstone.

A share group revokes nothing before it assigns, so floodmark's coordinator moves each member to
its target at once: the target (13) and the current assignment (14) agree, and the assignment
epoch (12) is the epoch the members were last assigned at. A replay takes the assignment epoch
from 12 (a log written before 12 was kept: the members' highest epoch); a member whose target is
ahead of its current assignment (a log Kafka wrote) is moved to it, its old epoch kept as its
previous one so its next heartbeat is answered with the new assignment.

``changes`` turns a group before and after a call of the coordinator core into the records
that say what changed: the heartbeat handler stores them (acks=all) before it answers.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from floodmark.groups.consumer_group.assignors import Partitions
from floodmark.groups.consumer_group.records import (
    BadConsumerGroupRecord,
    MemberState,
    Reader,
    compact_string,
    string,
    topic_partitions,
    uvarint,
)

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
KEY_VERSIONS = frozenset({MEMBER_METADATA, GROUP_METADATA, TARGET_ASSIGNMENT_METADATA,
                          TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT,
                          STATE_PARTITION_METADATA})
_VALUE_VERSION = 0


class BadShareGroupRecord(BadConsumerGroupRecord):
    """A share-group record floodmark cannot read."""


@dataclass(frozen=True, slots=True)
class MemberView:
    """What is stored of one member."""

    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple[str, ...]
    member_epoch: int
    previous_epoch: int
    assignment: Partitions


@dataclass(frozen=True, slots=True)
class TopicState:
    """A topic's partitions in ``ShareGroupStatePartitionMetadata`` (``TopicPartitionsInfo``;
    ``create_ms``: when they became initializing, 0 for initialized ones)."""

    name: str
    partitions: frozenset[int]
    create_ms: int = 0


@dataclass(frozen=True, slots=True)
class StatePartitions:
    """Which partitions' share state the group has initialized, is initializing, or is
    deleting at their share coordinators (by topic id)."""

    initializing: Mapping[uuid.UUID, TopicState] = field(default_factory=dict)
    initialized: Mapping[uuid.UUID, TopicState] = field(default_factory=dict)
    deleting: Mapping[uuid.UUID, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupView:
    """What is stored of one share group (None in ``changes``: no group).
    ``assignment_epoch`` -1: not stored (a log from before record 12 was written);
    ``targets``: each member's target partitions (absent: its current assignment)."""

    group_epoch: int
    members: Mapping[str, MemberView]
    assignment_epoch: int = -1
    targets: Mapping[str, Partitions] = field(default_factory=dict)
    state: StatePartitions = field(default_factory=StatePartitions)


@dataclass(frozen=True, slots=True)
class GroupEpoch:
    group_id: str
    epoch: int | None  # None: tombstone, the group is gone


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    group_id: str
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    group_id: str
    member_id: str
    member_epoch: int
    previous_epoch: int
    assignment: Partitions


@dataclass(frozen=True, slots=True)
class TargetMember:
    group_id: str
    member_id: str
    assignment: Partitions


@dataclass(frozen=True, slots=True)
class TargetEpoch:
    group_id: str
    assignment_epoch: int | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class StatePartitionMetadata:
    group_id: str
    state: StatePartitions | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class MemberGone:
    """A member's records (10, 13, 14) as tombstones."""

    group_id: str
    member_id: str


ShareGroupRecord = (GroupEpoch | MemberMetadata | MemberAssignment | MemberGone | TargetMember
                    | TargetEpoch | StatePartitionMetadata)


def changes(group_id: str, before: GroupView | None,
            after: GroupView | None) -> list[ShareGroupRecord]:
    """The records that take a stored ``before`` to ``after``: each member's metadata, target
    and current assignment, then the assignment epoch, the group epoch and the state
    partitions (one append holds them all; a replay folds them in any order)."""
    out: list[ShareGroupRecord] = []
    old = before.members if before is not None else {}
    new = after.members if after is not None else {}
    for member_id in sorted(set(old) - set(new)):
        out.append(MemberGone(group_id, member_id))
    for member_id in sorted(new):
        m, was = new[member_id], old.get(member_id)
        if was is None or (m.rack_id, m.client_id, m.client_host, m.subscribed) != (
                was.rack_id, was.client_id, was.client_host, was.subscribed):
            out.append(MemberMetadata(group_id, member_id, m.rack_id, m.client_id,
                                      m.client_host, m.subscribed))
        target = after.targets.get(member_id, m.assignment) if after is not None \
            else m.assignment
        was_target = None if was is None or before is None else before.targets.get(
            member_id, was.assignment)
        if target != was_target:
            out.append(TargetMember(group_id, member_id, target))
        if was is None or (m.member_epoch, m.previous_epoch, m.assignment) != (
                was.member_epoch, was.previous_epoch, was.assignment):
            out.append(MemberAssignment(group_id, member_id, m.member_epoch,
                                        m.previous_epoch, m.assignment))
    if after is None:
        if before is not None:
            out += [TargetEpoch(group_id, None), StatePartitionMetadata(group_id, None),
                    GroupEpoch(group_id, None)]
        return out
    if before is None or before.assignment_epoch != after.assignment_epoch:
        out.append(TargetEpoch(group_id, after.assignment_epoch))
    if before is None or before.group_epoch != after.group_epoch:
        out.append(GroupEpoch(group_id, after.group_epoch))
    if (before.state if before is not None else StatePartitions()) != after.state:
        out.append(StatePartitionMetadata(group_id, after.state))
    return out


def replay(views: dict[str, GroupView], rec: ShareGroupRecord) -> None:
    """Apply one replayed record to the groups as stored (the one applier: a failover's
    replay folds the log with it)."""
    g = views.get(rec.group_id)
    if g is None:
        if _tombstone(rec):
            return  # of a group not known: nothing to forget
        g = GroupView(0, {})
    members = dict(g.members)
    targets = dict(g.targets)
    if isinstance(rec, GroupEpoch):
        if rec.epoch is None:
            views.pop(rec.group_id, None)
            return
        views[rec.group_id] = GroupView(rec.epoch, members, g.assignment_epoch, targets,
                                        g.state)
        return
    if isinstance(rec, TargetEpoch):
        views[rec.group_id] = GroupView(g.group_epoch, members,
                                        -1 if rec.assignment_epoch is None
                                        else rec.assignment_epoch, targets, g.state)
        return
    if isinstance(rec, StatePartitionMetadata):
        views[rec.group_id] = GroupView(g.group_epoch, members, g.assignment_epoch, targets,
                                        rec.state if rec.state is not None
                                        else StatePartitions())
        return
    if isinstance(rec, MemberGone):
        members.pop(rec.member_id, None)
        targets.pop(rec.member_id, None)
    elif isinstance(rec, TargetMember):
        targets[rec.member_id] = rec.assignment
    else:
        # compaction may leave a member's assignment before its metadata: either makes it
        m = members.get(rec.member_id) or MemberView(None, "", "", (), 0, 0, frozenset())
        if isinstance(rec, MemberMetadata):
            m = MemberView(rec.rack_id, rec.client_id, rec.client_host, rec.subscribed,
                           m.member_epoch, m.previous_epoch, m.assignment)
        else:
            m = MemberView(m.rack_id, m.client_id, m.client_host, m.subscribed,
                           rec.member_epoch, rec.previous_epoch, rec.assignment)
        members[rec.member_id] = m
    views[rec.group_id] = GroupView(g.group_epoch, members, g.assignment_epoch, targets,
                                    g.state)


def _tombstone(rec: ShareGroupRecord) -> bool:
    return isinstance(rec, MemberGone) or (isinstance(rec, GroupEpoch) and rec.epoch is None) \
        or (isinstance(rec, TargetEpoch) and rec.assignment_epoch is None) \
        or (isinstance(rec, StatePartitionMetadata) and rec.state is None)


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    key = struct.pack(">h", kind) + string(group_id)
    return key if member_id is None else key + string(member_id)


def encode(rec: ShareGroupRecord) -> list[tuple[bytes, bytes | None]]:
    """(key, value) pairs of a record (two tombstones for a member that is gone)."""
    head = struct.pack(">h", _VALUE_VERSION)
    if isinstance(rec, MemberGone):
        return [(_key(kind, rec.group_id, rec.member_id), None) for kind in (
            MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)]
    if isinstance(rec, TargetEpoch):
        value = None if rec.assignment_epoch is None \
            else head + struct.pack(">i", rec.assignment_epoch) + b"\x00"
        return [(_key(TARGET_ASSIGNMENT_METADATA, rec.group_id), value)]
    if isinstance(rec, TargetMember):
        return [(_key(TARGET_ASSIGNMENT_MEMBER, rec.group_id, rec.member_id),
                 head + topic_partitions(rec.assignment) + b"\x00")]
    if isinstance(rec, StatePartitionMetadata):
        key = _key(STATE_PARTITION_METADATA, rec.group_id)
        return [(key, None if rec.state is None else head + _state_value(rec.state))]
    if isinstance(rec, GroupEpoch):
        value = None if rec.epoch is None else head + struct.pack(">iq", rec.epoch, 0) + b"\x00"
        return [(_key(GROUP_METADATA, rec.group_id), value)]
    if isinstance(rec, MemberMetadata):
        body = bytearray(head)
        body += compact_string(rec.rack_id) + compact_string(rec.client_id)
        body += compact_string(rec.client_host) + uvarint(len(rec.subscribed) + 1)
        body += b"".join(compact_string(n) for n in rec.subscribed)
        return [(_key(MEMBER_METADATA, rec.group_id, rec.member_id), bytes(body) + b"\x00")]
    value = head + struct.pack(">iib", rec.member_epoch, rec.previous_epoch,
                               MemberState.STABLE)  # a share member's only state
    value += topic_partitions(rec.assignment) + b"\x00"
    return [(_key(CURRENT_MEMBER_ASSIGNMENT, rec.group_id, rec.member_id), value)]


def _topics_info(topics: Mapping[uuid.UUID, TopicState]) -> bytes:
    out = bytearray(uvarint(len(topics) + 1))
    for topic_id in sorted(topics, key=str):
        t = topics[topic_id]
        out += topic_id.bytes + compact_string(t.name) + uvarint(len(t.partitions) + 1)
        out += b"".join(struct.pack(">i", p) for p in sorted(t.partitions))
        out += struct.pack(">q", t.create_ms) + b"\x00"
    return bytes(out)


def _state_value(state: StatePartitions) -> bytes:
    """ShareGroupStatePartitionMetadataValue v0 (Kafka 4.1): InitializingTopics and
    InitializedTopics ([]TopicPartitionsInfo: topic id, name, partitions, create timestamp),
    DeletingTopics ([]TopicInfo: topic id, name)."""
    out = bytearray(_topics_info(state.initializing))
    out += _topics_info(state.initialized)
    out += uvarint(len(state.deleting) + 1)
    for topic_id in sorted(state.deleting, key=str):
        out += topic_id.bytes + compact_string(state.deleting[topic_id]) + b"\x00"
    return bytes(out) + b"\x00"


def _read_topics_info(v: Reader) -> dict[uuid.UUID, TopicState]:
    out: dict[uuid.UUID, TopicState] = {}
    for _ in range(v.count()):
        topic_id, name = v.uuid(), v.compact_string() or ""
        partitions = frozenset(v.int32() for _ in range(v.count()))
        (create_ms,) = struct.unpack(">q", v.take(8))
        v.tags()
        out[topic_id] = TopicState(name, partitions, int(create_ms))
    return out


def _read_state_value(v: Reader) -> StatePartitions:
    initializing = _read_topics_info(v)
    initialized = _read_topics_info(v)
    deleting: dict[uuid.UUID, str] = {}
    for _ in range(v.count()):
        topic_id = v.uuid()
        deleting[topic_id] = v.compact_string() or ""
        v.tags()
    return StatePartitions(initializing, initialized, deleting)


def decode(key: bytes, value: bytes | None) -> ShareGroupRecord:
    """A share-group record (key type in ``KEY_VERSIONS``)."""
    try:
        k = Reader(key)
        kind = k.int16()
        group_id = k.string()
        member_id = k.string() if kind in (
            MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT) else ""
        v: Reader | None = None
        if value is not None:
            v = Reader(value)
            version = v.int16()
            if version != _VALUE_VERSION:
                raise BadShareGroupRecord(f"record type {kind} value version {version}")
        if kind == GROUP_METADATA:
            return GroupEpoch(group_id, None if v is None else v.int32())
        if kind == TARGET_ASSIGNMENT_METADATA:
            return TargetEpoch(group_id, None if v is None else v.int32())
        if kind == TARGET_ASSIGNMENT_MEMBER:
            if v is None:
                return MemberGone(group_id, member_id)
            return TargetMember(group_id, member_id, v.topic_partitions())
        if kind == STATE_PARTITION_METADATA:
            return StatePartitionMetadata(group_id,
                                          None if v is None else _read_state_value(v))
        if kind == MEMBER_METADATA:
            if v is None:
                return MemberGone(group_id, member_id)
            rack_id = v.compact_string()
            client_id, client_host = v.compact_string() or "", v.compact_string() or ""
            names = tuple(v.compact_string() or "" for _ in range(v.count()))
            return MemberMetadata(group_id, member_id, rack_id, client_id, client_host, names)
        if kind == CURRENT_MEMBER_ASSIGNMENT:
            if v is None:
                return MemberGone(group_id, member_id)
            epoch, previous, _state = v.int32(), v.int32(), v.int8()
            return MemberAssignment(group_id, member_id, epoch, previous,
                                    v.topic_partitions())
        raise BadShareGroupRecord(f"record type {kind} is not a share group's")
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, BadShareGroupRecord):
            raise
        raise BadShareGroupRecord(f"share group record: {exc}") from exc
