"""Committed consumer-group offsets and group metadata, kept in the compacted internal topic
``__consumer_offsets``.

Each commit appends one record per partition; the key and value use Kafka's layouts (key version 1:
group, topic, partition; value version 3: offset, leader epoch, metadata, commit timestamp), so the
latest record per key is the committed offset and compaction may drop older ones. The in-memory
table is only updated once the append is replicated (what OffsetFetch answers was acknowledged to
its committer and survives a failover), and is rebuilt by replaying a partition when this broker
becomes its leader (``load_partition``); it is dropped when another broker does
(``unload_partition``): a coordinator answers only from what it loaded at its current epoch.

A group's membership is a record too (Kafka's ``GroupMetadataKey`` version 2 and
``GroupMetadataValue`` version 3, read in versions 0-4): protocol type, generation, protocol,
leader and every member with its ids, timeouts, subscription and assignment, written by the
coordinator when a generation's assignment is complete, when the group becomes empty, and as a
tombstone when it is deleted. A newly elected coordinator loads it, so members go on with their
member id and generation after a coordinator failover.

Transactional offset commits (TxnOffsetCommit, KIP-98) are written in transactional batches and
held as *pending* per producer id until the transaction's marker is written on the offsets
partition: ``on_transaction_marker`` (called by the WriteTxnMarkers handler once the marker is
replicated) makes them committed on COMMIT and drops them on ABORT. Replay follows the same rule
from the batches' flags and the markers in the log; what is still pending at the end of the log
stays pending, for the marker the transaction coordinator will write.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from floodmark.errors import FloodmarkError
from floodmark.groups import share_records as sg_records
from floodmark.groups.consumer_group import records as cg_records
from floodmark.metadata import coordinator_partition
from floodmark.records import (
    CorruptRecordError,
    Record,
    build_batch,
    decode_batch,
    iter_batches,
    read_end_txn_marker,
    read_uvarint,
)

_KEY_VERSION = 1
_VALUE_VERSION = 3
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
GROUP_VALUE_VERSIONS = range(0, 5)


class BadGroupRecord(FloodmarkError, ValueError):
    """A ``__consumer_offsets`` record floodmark cannot read."""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _read_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos : pos + n].decode(), pos + n


def _bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    (n,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    if n < 0:
        return b"", pos
    if pos + n > len(buf):
        raise BadGroupRecord(f"{n} bytes at {pos} past the end ({len(buf)})")
    return bytes(buf[pos:pos + n]), pos + n


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos, max_bytes=5)
    except CorruptRecordError as exc:
        raise BadGroupRecord(f"bad varint: {exc}") from None


def _read_compact(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    """A flexible version's compact string or bytes (length + 1 as an unsigned varint)."""
    n, pos = _read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    if pos + n - 1 > len(buf):
        raise BadGroupRecord(f"{n - 1} bytes at {pos} past the end ({len(buf)})")
    return bytes(buf[pos:pos + n - 1]), pos + n - 1


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """One member of a group as ``GroupMetadataValue`` keeps it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group's state as ``GroupMetadataValue`` keeps it (no members: an empty group)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberRecord, ...]


def encode_group_key(group: str) -> bytes:
    return struct.pack(">h", GROUP_KEY_VERSION) + _string(group)


def encode_group_value(g: GroupRecord) -> bytes:
    """Version 3 (Kafka 2.3+): the members' static instance ids and the state timestamp."""
    out = bytearray(struct.pack(">h", GROUP_VALUE_VERSION))
    out += _string(g.protocol_type) + struct.pack(">i", g.generation)
    out += _string(g.protocol) + _string(g.leader)
    out += struct.pack(">qi", g.current_state_timestamp_ms, len(g.members))
    for m in g.members:
        out += _string(m.member_id) + _string(m.group_instance_id) + _string(m.client_id)
        out += _string(m.client_host)
        out += struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms)
        out += _bytes(m.subscription) + _bytes(m.assignment)
    return bytes(out)


def decode_group_value(value: bytes) -> GroupRecord:
    """Versions 0 to 4 (4 is Kafka's flexible layout: compact strings, tagged fields)."""
    try:
        (version,) = struct.unpack_from(">h", value, 0)
        if version not in GROUP_VALUE_VERSIONS:
            raise BadGroupRecord(f"group metadata value version {version}")
        flexible = version >= 4
        pos = 2

        def text(pos: int) -> tuple[str | None, int]:
            if not flexible:
                return _read_string(value, pos)
            raw, pos = _read_compact(value, pos)
            return (None if raw is None else raw.decode()), pos

        def blob(pos: int) -> tuple[bytes, int]:
            if not flexible:
                return _read_bytes(value, pos)
            raw, pos = _read_compact(value, pos)
            return raw or b"", pos

        protocol_type, pos = text(pos)
        (generation,) = struct.unpack_from(">i", value, pos)
        protocol, pos = text(pos + 4)
        leader, pos = text(pos)
        timestamp = -1
        if version >= 2:
            (timestamp,) = struct.unpack_from(">q", value, pos)
            pos += 8
        if flexible:
            count, pos = _read_uvarint(value, pos)
            count -= 1
        else:
            (count,) = struct.unpack_from(">i", value, pos)
            pos += 4
        members = []
        for _ in range(max(count, 0)):
            member_id, pos = text(pos)
            instance_id = None
            if version >= 3:
                instance_id, pos = text(pos)
            client_id, pos = text(pos)
            client_host, pos = text(pos)
            (session_ms,) = struct.unpack_from(">i", value, pos)
            rebalance_ms = session_ms
            if version >= 1:
                rebalance_ms, session_ms = struct.unpack_from(">ii", value, pos)
                pos += 4
            subscription, pos = blob(pos + 4)
            assignment, pos = blob(pos)
            if flexible:
                pos = _skip_tags(value, pos)
            members.append(MemberRecord(member_id or "", instance_id, client_id or "",
                                        client_host or "", rebalance_ms, session_ms,
                                        subscription, assignment))
        return GroupRecord(protocol_type or "", generation, protocol, leader, timestamp,
                           tuple(members))
    except (struct.error, UnicodeDecodeError) as exc:
        raise BadGroupRecord(f"group metadata value: {exc}") from exc


def encode_key(group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", _KEY_VERSION) + _string(group) + _string(topic) + struct.pack(">i", partition)


def decode_key(key: bytes) -> tuple[str, str, int] | None:
    """An offset key's (group, topic, partition); None for a group metadata key."""
    (version,) = struct.unpack_from(">h", key, 0)
    if version not in (0, 1):
        return None  # group metadata record (version 2), not an offset
    group, pos = _read_string(key, 2)
    topic, pos = _read_string(key, pos)
    (partition,) = struct.unpack_from(">i", key, pos)
    return group or "", topic or "", partition


def encode_value(c: CommittedOffset) -> bytes:
    return (struct.pack(">hqi", _VALUE_VERSION, c.offset, c.leader_epoch) + _string(c.metadata)
            + struct.pack(">q", c.commit_timestamp_ms))


def decode_value(value: bytes) -> CommittedOffset:
    version, offset = struct.unpack_from(">hq", value, 0)
    pos = 10
    epoch = -1
    if version >= 3:
        (epoch,) = struct.unpack_from(">i", value, pos)
        pos += 4
    metadata, pos = _read_string(value, pos)
    (ts,) = struct.unpack_from(">q", value, pos)
    return CommittedOffset(offset, epoch, metadata, ts)


def partition_for(group: str, num_partitions: int) -> int:
    return coordinator_partition(group, num_partitions)


Key = tuple[str, str, int]


@dataclass(frozen=True, slots=True)
class Loaded:
    """What loading one ``__consumer_offsets`` partition found."""

    offsets: int  # offset records applied
    groups: dict[str, GroupRecord]  # each group's last metadata record (tombstoned: absent)
    unreadable: int  # group metadata records that could not be read (skipped)
    # KIP-848 consumer groups: each group's records in log order, for the core to replay
    consumer_groups: dict[str, list[cg_records.ConsumerGroupRecord]] = \
        dataclasses.field(default_factory=dict)
    # KIP-932 share groups, as their records say (tombstoned: absent)
    share_groups: dict[str, sg_records.GroupView] = dataclasses.field(default_factory=dict)


class OffsetStore:
    def __init__(self) -> None:
        self._offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # producer id -> (group, topic, partition) -> offset (None: a tombstone), not yet
        # committed: written by a transaction whose marker has not been written.
        self._pending: dict[int, dict[Key, CommittedOffset | None]] = {}
        # (group, topic, partition) -> the log offset of the commit applied last: commits
        # replicated out of order are applied in log order (``apply_replicated``).
        self._positions: dict[Key, int] = {}
        self.group_records: dict[str, GroupRecord] = {}  # as last loaded or stored
        # KIP-848 consumer-group records met by a replay, until ``load_partition`` hands them on
        self._consumer_records: dict[str, list[cg_records.ConsumerGroupRecord]] = {}
        self._share_groups: dict[str, sg_records.GroupView] = {}  # the same, KIP-932's

    def apply_replicated(self, group: str, entries: Iterable[tuple[str, int,
                                                                    CommittedOffset | None]],
                         log_offset: int, producer_id: int | None = None) -> None:
        """A commit batch ending at ``log_offset`` is replicated: its offsets become what
        OffsetFetch answers (pending for a transactional ``producer_id``), unless a later batch
        of the same key was applied already."""
        for topic, partition, c in entries:
            key = (group, topic, partition)
            if producer_id is not None:
                self.add_pending(producer_id, group, topic, partition, c)
                continue
            if self._positions.get(key, -1) > log_offset:
                continue
            self._positions[key] = log_offset
            self.apply(group, topic, partition, c)

    def unload_partition(self, partition: int, num_partitions: int) -> list[str]:
        """Forget every group of ``__consumer_offsets-partition`` (another broker leads it now,
        or it is about to be loaded again); returns the groups that had state here."""
        def mine(group: str) -> bool:
            return partition_for(group, num_partitions) == partition

        gone = [g for g in set(self._offsets) | set(self.group_records) if mine(g)]
        for g in gone:
            self._offsets.pop(g, None)
            self.group_records.pop(g, None)
        for key in [k for k in self._positions if mine(k[0])]:
            del self._positions[key]
        for pid, entries in list(self._pending.items()):
            for key in [k for k in entries if mine(k[0])]:
                del entries[key]
            if not entries:
                del self._pending[pid]
        return gone

    def load_partition(self, partition: int, num_partitions: int,
                       read_batches: Callable[[], Iterable[bytes | memoryview]]) -> Loaded:
        """Rebuild this partition's groups (offsets, pending transactional offsets, group
        metadata) from its log, from nothing."""
        self.unload_partition(partition, num_partitions)
        self._consumer_records.clear()
        self._share_groups.clear()
        n, unreadable = self._replay(read_batches)
        groups = {g: r for g, r in self.group_records.items()
                  if partition_for(g, num_partitions) == partition}
        consumer_groups = {g: recs for g, recs in self._consumer_records.items()
                           if partition_for(g, num_partitions) == partition}
        share_groups = {g: v for g, v in self._share_groups.items()
                        if partition_for(g, num_partitions) == partition}
        self._consumer_records.clear()
        self._share_groups.clear()
        return Loaded(n, groups, unreadable, consumer_groups, share_groups)

    def store_group(self, group: str, record: GroupRecord | None) -> None:
        """A group metadata record (None: a tombstone) is replicated."""
        if record is None:
            self.group_records.pop(group, None)
        else:
            self.group_records[group] = record

    def add_pending(self, producer_id: int, group: str, topic: str, partition: int,
                    c: CommittedOffset | None) -> None:
        """A transactional offset commit was appended (TxnOffsetCommit): held until the
        producer's transaction ends."""
        self._pending.setdefault(producer_id, {})[(group, topic, partition)] = c

    def pending(self, group: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> offset of ``group``'s transactional commits still pending
        (what OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for)."""
        return {(t, p): (c.offset if c is not None else -1)
                for entries in self._pending.values()
                for (g, t, p), c in entries.items() if g == group}

    def on_transaction_marker(self, topic_partition: tuple[str, int], producer_id: int,
                              producer_epoch: int, committed: bool) -> int:
        """A COMMIT or ABORT marker of ``producer_id`` is replicated on the offsets partition
        ``topic_partition``: its pending offsets become the committed ones, or are dropped.
        Returns how many were committed. (A transaction's decision is final before its first
        marker is written, so the producer's pending offsets for groups on other offsets
        partitions are settled by the first marker too.)"""
        entries = self._pending.pop(producer_id, {})
        if not committed:
            return 0
        for (group, topic, partition), c in entries.items():
            self.apply(group, topic, partition, c)
        return len(entries)

    def fetch(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._offsets.get(group, {}).get((topic, partition))

    def group_offsets(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        return self._offsets.get(group, {})

    def groups(self) -> list[str]:
        return [g for g, offs in self._offsets.items() if offs]

    def build_commit_batch(self, group: str,
                           entries: Iterable[tuple[str, int, CommittedOffset | None]],
                           now_ms: int, producer: tuple[int, int] | None = None) -> bytes:
        """One batch of offset records; ``None`` is a tombstone (the offset is deleted, and
        compaction removes the key). ``producer``: (id, epoch) of a transactional producer
        (TxnOffsetCommit), whose batch is transactional."""
        records = [
            Record(i, now_ms, encode_key(group, topic, partition),
                   encode_value(c) if c is not None else None)
            for i, (topic, partition, c) in enumerate(entries)
        ]
        return self._batch(records, producer)

    @staticmethod
    def build_group_batch(group: str, record: GroupRecord | None, now_ms: int) -> bytes:
        """The one-record batch of a group's metadata (None: a tombstone, the group deleted)."""
        value = encode_group_value(record) if record is not None else None
        return build_batch([Record(0, now_ms, encode_group_key(group), value)])

    @staticmethod
    def _batch(records: list[Record], producer: tuple[int, int] | None) -> bytes:
        if producer is None:
            return build_batch(records)
        return build_batch(records, producer_id=producer[0], producer_epoch=producer[1],
                           base_sequence=0, is_transactional=True)

    def apply(self, group: str, topic: str, partition: int, c: CommittedOffset | None) -> None:
        table = self._offsets.setdefault(group, {})
        if c is None:
            table.pop((topic, partition), None)
        else:
            table[(topic, partition)] = c

    def remove_topic(self, topic: str) -> None:
        for table in self._offsets.values():
            for key in [k for k in table if k[0] == topic]:
                del table[key]

    def replay(self, read_batches: Callable[[], Iterable[bytes | memoryview]]) -> int:
        """Rebuild the table from the internal topic's batches (each partition's in offset
        order); returns offset records applied. Transactional batches wait for their marker."""
        return self._replay(read_batches)[0]

    def _replay(self, read_batches: Callable[[], Iterable[bytes | memoryview]]
                ) -> tuple[int, int]:
        """(offset records applied, unreadable group records skipped)."""
        n = unreadable = 0
        for chunk in read_batches():
            for position, header in iter_batches(chunk):
                if header.is_control:
                    if header.producer_id < 0:
                        continue  # not a transaction's (no producer): nothing to end
                    marker = read_end_txn_marker(header)  # corrupt: raises, never skipped
                    n += self.on_transaction_marker(("", -1), header.producer_id,
                                                    header.producer_epoch, marker.committed)
                    continue
                for rec in decode_batch(chunk, position, validate=False)[1]:
                    if rec.key is None:
                        continue
                    key = decode_key(rec.key)
                    if key is None:
                        unreadable += self._replay_group(rec.key, rec.value)
                        continue
                    value = decode_value(rec.value) if rec.value is not None else None
                    if header.is_transactional:
                        self.add_pending(header.producer_id, *key, value)
                        continue
                    self.apply(*key, value)
                    n += 1
        return n, unreadable

    def _replay_group(self, key: bytes, value: bytes | None) -> int:
        """A group metadata record in the log (1: it could not be read, and is skipped)."""
        try:
            (version,) = struct.unpack_from(">h", key, 0)
            if version in cg_records.KEY_VERSIONS:
                rec = cg_records.decode(key, value)
                self._consumer_records.setdefault(rec.group_id, []).append(rec)
                return 0
            if version in sg_records.KEY_VERSIONS:
                sg_records.replay(self._share_groups, sg_records.decode(key, value))
                return 0
            if version != GROUP_KEY_VERSION:
                raise BadGroupRecord(f"offsets key version {version}")
            group, _ = _read_string(key, 2)
            self.store_group(group or "", decode_group_value(value) if value is not None
                             else None)
        except (BadGroupRecord, cg_records.BadConsumerGroupRecord, struct.error,
                UnicodeDecodeError):
            return 1
        return 0
