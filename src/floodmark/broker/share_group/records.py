"""KIP-932's share-group records in ``__consumer_offsets``, in Kafka's layouts: what a new
group coordinator replays so the members of a share group go on with their member ids and
epochs after a coordinator failover.

Key types (the key version, Kafka's ``CoordinatorRecord`` types): 10
``ShareGroupMemberMetadata`` (a member's rack, client id and host, subscribed topics), 11
``ShareGroupMetadata`` (the group epoch), 14 ``ShareGroupCurrentMemberAssignment`` (a member's
epoch, previous epoch, state and assigned partitions). Keys are Kafka's non-flexible layout,
values version 0 in the flexible one, as ``consumer_group.records``; a record without a value
is a tombstone. Kafka also keeps the target assignment (12, 13) and the initialized partitions
(15); floodmark's ``simple`` assignment is a function of the members and the topics, so the
assignment epoch is the members' epoch of their last assignment (``coordinator.loaded``).

``changes`` turns a group before and after a call of the coordinator core into the records
that say what changed: the heartbeat handler stores them (acks=all) before it answers.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from floodmark.broker.consumer_group.assignors import Partitions
from floodmark.broker.consumer_group.records import (
    BadConsumerGroupRecord,
    Reader,
    compact_string,
    string,
    topic_partitions,
    uvarint,
)

MEMBER_METADATA = 10
GROUP_METADATA = 11
CURRENT_MEMBER_ASSIGNMENT = 14
KEY_VERSIONS = frozenset({MEMBER_METADATA, GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT})
_VALUE_VERSION = 0
STABLE = 0  # MemberState.STABLE: a share group member has no other state


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
class GroupView:
    """What is stored of one share group (None in ``changes``: no group)."""

    group_epoch: int
    members: Mapping[str, MemberView]


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
class MemberGone:
    """Both of a member's records as tombstones."""

    group_id: str
    member_id: str


ShareGroupRecord = GroupEpoch | MemberMetadata | MemberAssignment | MemberGone


def changes(group_id: str, before: GroupView | None,
            after: GroupView | None) -> list[ShareGroupRecord]:
    """The records that take a stored ``before`` to ``after``: members first, the group
    epoch last (a replay that stops between them has the members of the epoch it knows)."""
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
        if was is None or (m.member_epoch, m.previous_epoch, m.assignment) != (
                was.member_epoch, was.previous_epoch, was.assignment):
            out.append(MemberAssignment(group_id, member_id, m.member_epoch,
                                        m.previous_epoch, m.assignment))
    if after is None:
        if before is not None:
            out.append(GroupEpoch(group_id, None))
    elif before is None or before.group_epoch != after.group_epoch:
        out.append(GroupEpoch(group_id, after.group_epoch))
    return out


def replay(views: dict[str, GroupView], rec: ShareGroupRecord) -> None:
    """Apply one replayed record to the groups as stored (the one applier: a failover's
    replay folds the log with it)."""
    g = views.get(rec.group_id)
    if isinstance(rec, GroupEpoch):
        if rec.epoch is None:
            views.pop(rec.group_id, None)
        else:
            views[rec.group_id] = GroupView(rec.epoch, g.members if g is not None else {})
        return
    members = dict(g.members) if g is not None else {}
    epoch = g.group_epoch if g is not None else 0
    if isinstance(rec, MemberGone):
        members.pop(rec.member_id, None)
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
    views[rec.group_id] = GroupView(epoch, members)


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    key = struct.pack(">h", kind) + string(group_id)
    return key if member_id is None else key + string(member_id)


def encode(rec: ShareGroupRecord) -> list[tuple[bytes, bytes | None]]:
    """(key, value) pairs of a record (two tombstones for a member that is gone)."""
    head = struct.pack(">h", _VALUE_VERSION)
    if isinstance(rec, MemberGone):
        return [(_key(MEMBER_METADATA, rec.group_id, rec.member_id), None),
                (_key(CURRENT_MEMBER_ASSIGNMENT, rec.group_id, rec.member_id), None)]
    if isinstance(rec, GroupEpoch):
        value = None if rec.epoch is None else head + struct.pack(">iq", rec.epoch, 0) + b"\x00"
        return [(_key(GROUP_METADATA, rec.group_id), value)]
    if isinstance(rec, MemberMetadata):
        body = bytearray(head)
        body += compact_string(rec.rack_id) + compact_string(rec.client_id)
        body += compact_string(rec.client_host) + uvarint(len(rec.subscribed) + 1)
        body += b"".join(compact_string(n) for n in rec.subscribed)
        return [(_key(MEMBER_METADATA, rec.group_id, rec.member_id), bytes(body) + b"\x00")]
    value = head + struct.pack(">iib", rec.member_epoch, rec.previous_epoch, STABLE)
    value += topic_partitions(rec.assignment) + b"\x00"
    return [(_key(CURRENT_MEMBER_ASSIGNMENT, rec.group_id, rec.member_id), value)]


def decode(key: bytes, value: bytes | None) -> ShareGroupRecord:
    """A share-group record (key type in ``KEY_VERSIONS``)."""
    try:
        k = Reader(key)
        kind = k.int16()
        group_id = k.string()
        member_id = k.string() if kind != GROUP_METADATA else ""
        v: Reader | None = None
        if value is not None:
            v = Reader(value)
            version = v.int16()
            if version != _VALUE_VERSION:
                raise BadShareGroupRecord(f"record type {kind} value version {version}")
        if kind == GROUP_METADATA:
            return GroupEpoch(group_id, None if v is None else v.int32())
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
