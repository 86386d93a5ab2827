"""KIP-848's consumer-group records in ``__consumer_offsets``, in Kafka's layouts.

Each record's key starts with its type as the key version (Kafka's ``CoordinatorRecord``
types): 3 ``ConsumerGroupMetadata`` (group epoch), 4 ``ConsumerGroupPartitionMetadata``
(the subscribed topics' ids and partition counts), 5 ``ConsumerGroupMemberMetadata`` (a
member's subscription), 6 ``ConsumerGroupTargetAssignmentMetadata`` (the assignment epoch),
7 ``ConsumerGroupTargetAssignmentMember`` (a member's target partitions), 8
``ConsumerGroupCurrentMemberAssignment`` (a member's epoch, state, owned and revoking
partitions). Keys are Kafka's non-flexible layout (int16 version, int16-length strings);
values are value version 0 in Kafka's flexible layout (compact strings and arrays, tagged
fields). A record without a value is a tombstone: the member (or group) is gone.

The typed values here are what the core (``core``) emits and replays: the same applier
rebuilds a group from the log after a coordinator failover.
"""

from __future__ import annotations

import enum
import struct
import uuid
from dataclasses import dataclass, field

from floodmark.errors import FloodmarkError
from floodmark.groups.consumer_group.assignors import Partitions, TopicPartition
from floodmark.records import CorruptRecordError, read_uvarint

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
KEY_VERSIONS = frozenset(range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1))
_VALUE_VERSION = 0


class BadConsumerGroupRecord(FloodmarkError, ValueError):
    """A consumer-group record floodmark cannot read."""


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    # The racks of each partition's replicas, by partition (for the rack-aware assignor). Not
    # stored (Kafka 4 writes PartitionMetadata without racks) and not compared: a group's
    # topics are the same topics whatever the racks; the assignor reads them live.
    partition_racks: tuple[frozenset[str], ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a
    consumer group (KIP-848's online migration): ``ConsumerGroupMemberMetadataValue``'s tagged
    field ``ClassicMemberMetadata`` (tag 0)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), the member's order


@dataclass(frozen=True, slots=True)
class Subscription:
    """``ConsumerGroupMemberMetadataValue``."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None  # None: the member speaks the consumer protocol


class MemberState(enum.IntEnum):
    """Kafka's ``MemberState`` (its values are stored in CurrentMemberAssignment records)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    """``ConsumerGroupCurrentMemberAssignmentValue``."""

    member_epoch: int
    previous_member_epoch: int
    state: int  # a MemberState's value
    assigned: Partitions
    pending_revocation: Partitions


@dataclass(frozen=True, slots=True)
class GroupEpoch:
    group_id: str
    epoch: int | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    group_id: str
    topics: tuple[TopicMetadata, ...] | None


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    group_id: str
    member_id: str
    value: Subscription | None


@dataclass(frozen=True, slots=True)
class TargetEpoch:
    group_id: str
    assignment_epoch: int | None


@dataclass(frozen=True, slots=True)
class TargetMember:
    group_id: str
    member_id: str
    partitions: Partitions | None


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    group_id: str
    member_id: str
    value: CurrentAssignment | None


ConsumerGroupRecord = (GroupEpoch | PartitionMetadata | MemberSubscription | TargetEpoch
                       | TargetMember | MemberAssignment)


# -- writing --------------------------------------------------------------------------------------
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return _uvarint(len(raw) + 1) + raw


def _topic_partitions(parts: Partitions) -> bytes:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in parts:
        by_topic.setdefault(topic_id, []).append(p)
    out = bytearray(_uvarint(len(by_topic) + 1))
    for topic_id in sorted(by_topic, key=str):
        ps = sorted(by_topic[topic_id])
        out += topic_id.bytes + _uvarint(len(ps) + 1)
        out += b"".join(struct.pack(">i", p) for p in ps)
        out += b"\x00"
    return bytes(out)


def encode(rec: ConsumerGroupRecord) -> tuple[bytes, bytes | None]:
    """(key, value) of a record; the value None for a tombstone."""
    head = struct.pack(">h", _VALUE_VERSION)
    if isinstance(rec, GroupEpoch):
        key = struct.pack(">h", GROUP_METADATA) + _string(rec.group_id)
        return key, None if rec.epoch is None else head + struct.pack(">i", rec.epoch) + b"\x00"
    if isinstance(rec, PartitionMetadata):
        key = struct.pack(">h", PARTITION_METADATA) + _string(rec.group_id)
        if rec.topics is None:
            return key, None
        body = bytearray(_uvarint(len(rec.topics) + 1))
        for t in rec.topics:
            # PartitionMetadata (racks) is deprecated since Kafka 4.0: an empty array.
            body += t.topic_id.bytes + _compact_string(t.name)
            body += struct.pack(">i", t.num_partitions) + b"\x01" + b"\x00"
        return key, head + bytes(body) + b"\x00"
    if isinstance(rec, MemberSubscription):
        key = struct.pack(">h", MEMBER_METADATA) + _string(rec.group_id) + _string(rec.member_id)
        s = rec.value
        if s is None:
            return key, None
        body = bytearray(head)
        body += _compact_string(s.instance_id) + _compact_string(s.rack_id)
        body += _compact_string(s.client_id) + _compact_string(s.client_host)
        body += _uvarint(len(s.subscribed_topic_names) + 1)
        body += b"".join(_compact_string(n) for n in s.subscribed_topic_names)
        body += _compact_string(s.subscribed_topic_regex)
        body += struct.pack(">i", s.rebalance_timeout_ms) + _compact_string(s.server_assignor)
        if s.classic is None:
            return key, bytes(body) + b"\x00"
        classic = bytearray(struct.pack(">i", s.classic.session_timeout_ms))
        classic += _uvarint(len(s.classic.supported_protocols) + 1)
        for name, metadata in s.classic.supported_protocols:
            classic += _compact_string(name) + _uvarint(len(metadata) + 1) + metadata + b"\x00"
        classic += b"\x00"
        return key, bytes(body) + b"\x01\x00" + _uvarint(len(classic)) + bytes(classic)
    if isinstance(rec, TargetEpoch):
        key = struct.pack(">h", TARGET_ASSIGNMENT_METADATA) + _string(rec.group_id)
        if rec.assignment_epoch is None:
            return key, None
        return key, head + struct.pack(">i", rec.assignment_epoch) + b"\x00"
    if isinstance(rec, TargetMember):
        key = (struct.pack(">h", TARGET_ASSIGNMENT_MEMBER) + _string(rec.group_id)
               + _string(rec.member_id))
        if rec.partitions is None:
            return key, None
        return key, head + _topic_partitions(rec.partitions) + b"\x00"
    key = (struct.pack(">h", CURRENT_MEMBER_ASSIGNMENT) + _string(rec.group_id)
           + _string(rec.member_id))
    a = rec.value
    if a is None:
        return key, None
    fixed = head + struct.pack(">iib", a.member_epoch, a.previous_member_epoch, a.state)
    return key, fixed + _topic_partitions(a.assigned) + _topic_partitions(
        a.pending_revocation) + b"\x00"


# -- reading --------------------------------------------------------------------------------------
class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise BadConsumerGroupRecord(f"{n} bytes at {self.pos} past the end "
                                         f"({len(self.buf)})")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def uvarint(self) -> int:
        try:
            n, self.pos = read_uvarint(self.buf, self.pos, max_bytes=5)
        except CorruptRecordError as exc:
            raise BadConsumerGroupRecord(f"bad varint: {exc}") from None
        return n

    def string(self) -> str:
        n = self.int16()
        return self.take(max(n, 0)).decode()

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def count(self) -> int:
        n = self.uvarint() - 1
        if n > len(self.buf):
            raise BadConsumerGroupRecord(f"array of {n} in a {len(self.buf)}-byte record")
        return max(n, 0)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def topic_partitions(self) -> Partitions:
        out: set[TopicPartition] = set()
        for _ in range(self.count()):
            topic_id = self.uuid()
            out.update((topic_id, self.int32()) for _ in range(self.count()))
            self.tags()
        return frozenset(out)


def key_type(key: bytes) -> int:
    """The record type (key version) of a ``__consumer_offsets`` key."""
    if len(key) < 2:
        raise BadConsumerGroupRecord("key shorter than its version")
    return int(struct.unpack_from(">h", key, 0)[0])


def decode(key: bytes, value: bytes | None) -> ConsumerGroupRecord:
    """A consumer-group record (``key_type(key)`` in ``KEY_VERSIONS``)."""
    try:
        k = _Reader(key)
        kind = k.int16()
        group_id = k.string()
        member_id = k.string() if kind in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER,
                                           CURRENT_MEMBER_ASSIGNMENT) else ""
        v: _Reader | None = None
        if value is not None:
            v = _Reader(value)
            version = v.int16()
            if version != _VALUE_VERSION:
                raise BadConsumerGroupRecord(f"record type {kind} value version {version}")
        if kind == GROUP_METADATA:
            return GroupEpoch(group_id, None if v is None else v.int32())
        if kind == PARTITION_METADATA:
            if v is None:
                return PartitionMetadata(group_id, None)
            topics = []
            for _ in range(v.count()):
                topic_id, name, count = v.uuid(), v.compact_string() or "", v.int32()
                for _ in range(v.count()):  # deprecated racks per partition
                    v.int32()
                    for _ in range(v.count()):
                        v.compact_string()
                    v.tags()
                v.tags()
                topics.append(TopicMetadata(topic_id, name, count))
            return PartitionMetadata(group_id, tuple(topics))
        if kind == MEMBER_METADATA:
            if v is None:
                return MemberSubscription(group_id, member_id, None)
            instance_id, rack_id = v.compact_string(), v.compact_string()
            client_id, client_host = v.compact_string() or "", v.compact_string() or ""
            names = tuple(v.compact_string() or "" for _ in range(v.count()))
            regex = v.compact_string()
            rebalance_timeout_ms = v.int32()
            assignor = v.compact_string()
            return MemberSubscription(group_id, member_id, Subscription(
                instance_id, rack_id, client_id, client_host, names, regex,
                rebalance_timeout_ms, assignor, _classic_member(v)))
        if kind == TARGET_ASSIGNMENT_METADATA:
            return TargetEpoch(group_id, None if v is None else v.int32())
        if kind == TARGET_ASSIGNMENT_MEMBER:
            return TargetMember(group_id, member_id,
                                None if v is None else v.topic_partitions())
        if kind == CURRENT_MEMBER_ASSIGNMENT:
            if v is None:
                return MemberAssignment(group_id, member_id, None)
            epoch, previous, state = v.int32(), v.int32(), v.int8()
            return MemberAssignment(group_id, member_id, CurrentAssignment(
                epoch, previous, state, v.topic_partitions(), v.topic_partitions()))
        raise BadConsumerGroupRecord(f"record type {kind} is not a consumer group's")
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, BadConsumerGroupRecord):
            raise
        raise BadConsumerGroupRecord(f"consumer group record: {exc}") from exc


def _classic_member(v: _Reader) -> ClassicMemberMetadata | None:
    """The tagged fields ending a ``ConsumerGroupMemberMetadataValue``: tag 0 is
    ``ClassicMemberMetadata``, others are skipped (as Kafka skips unknown tags)."""
    out = None
    for _ in range(v.uvarint()):
        tag, size = v.uvarint(), v.uvarint()
        raw = _Reader(v.take(size))
        if tag != 0:
            continue
        session_timeout_ms = raw.int32()
        protocols = []
        for _ in range(raw.count()):
            name = raw.compact_string() or ""
            n = raw.uvarint()
            protocols.append((name, raw.take(n - 1) if n else b""))
            raw.tags()
        out = ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
    return out


def group_of(rec: ConsumerGroupRecord) -> str:
    return rec.group_id


# The same layouts' pieces, for KIP-932's share-group records (``share_group.records``).
Reader = _Reader
uvarint = _uvarint
string = _string
compact_string = _compact_string
topic_partitions = _topic_partitions
