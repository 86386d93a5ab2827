"""The records of ``__share_group_state`` (KIP-932's share coordinator), in Kafka's layouts.

One record per share partition (group, topic id, partition), the latest one wins, so the topic
is compacted. The key is Kafka's ``ShareSnapshotKey`` behind its record type (the key version,
0 for a snapshot): int16 type, int16-length group id, 16-byte topic id, int32 partition. The
value is ``ShareSnapshotValue`` version 0 in Kafka's flexible layout::

    int16 version (0), uint16 snapshot_epoch, int32 state_epoch, int32 leader_epoch,
    int64 start_offset, compact array of state batches
        (int64 first_offset, int64 last_offset, int8 delivery_state, int16 delivery_count,
         tagged fields), tagged fields

A record without a value is a tombstone: the group's state of that partition is deleted.
Every record is a whole snapshot (Kafka also writes ``ShareUpdate`` deltas between snapshots;
floodmark writes none, and refuses them when it reads one). The share partition's end offset is
not stored: the batches cover every offset of the window, so it is one past the last batch.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from floodmark.broker.share_group.partition import RecordState, ShareState, StateBatch
from floodmark.errors import FloodmarkError
from floodmark.records import CorruptRecordError, read_uvarint

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
_VALUE_VERSION = 0
_BATCH = struct.Struct(">qqbh")
ShareKey = tuple[str, uuid.UUID, int]  # group, topic id, partition


class BadShareStateRecord(FloodmarkError, ValueError):
    """A ``__share_group_state`` record floodmark cannot read."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the share coordinator keeps of one share partition."""

    state: ShareState
    leader_epoch: int  # the leader epoch of the share partition's last writer (or reader)
    snapshot_epoch: int = 0  # one more per record written for the key (uint16, wraps)


def coordinator_key(key: ShareKey) -> str:
    """The share coordinator's key for a share partition (FindCoordinator key type 2):
    ``group:topic id:partition``, as Kafka's ``SharePartitionKey``."""
    return f"{key[0]}:{key[1]}:{key[2]}"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_key(key: ShareKey) -> bytes:
    group = key[0].encode()
    return (struct.pack(">hh", SHARE_SNAPSHOT, len(group)) + group + key[1].bytes
            + struct.pack(">i", key[2]))


def encode_value(snap: Snapshot) -> bytes:
    s = snap.state
    out = bytearray(struct.pack(">hHiiq", _VALUE_VERSION, snap.snapshot_epoch & 0xFFFF,
                                s.state_epoch, snap.leader_epoch, s.start_offset))
    out += _uvarint(len(s.batches) + 1)
    for b in s.batches:
        out += _BATCH.pack(b.first_offset, b.last_offset, int(b.state), b.delivery_count)
        out += b"\x00"
    return bytes(out + b"\x00")


def decode_key(key: bytes) -> ShareKey:
    try:
        kind, n = struct.unpack_from(">hh", key, 0)
        if kind != SHARE_SNAPSHOT:
            raise BadShareStateRecord(f"record type {kind} (floodmark writes snapshots only)")
        if n < 0 or len(key) != 4 + n + 16 + 4:
            raise BadShareStateRecord(f"share snapshot key of {len(key)} bytes")
        group = key[4:4 + n].decode()
        topic_id = uuid.UUID(bytes=bytes(key[4 + n:20 + n]))
        (partition,) = struct.unpack_from(">i", key, 20 + n)
    except (struct.error, UnicodeDecodeError) as exc:
        raise BadShareStateRecord(f"share snapshot key: {exc}") from exc
    return group, topic_id, partition


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos, max_bytes=5)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, max_bytes=5)
        size, pos = read_uvarint(buf, pos, max_bytes=5)
        pos += size
    if pos > len(buf):
        raise BadShareStateRecord("tagged fields past the end")
    return pos


def decode_value(value: bytes) -> Snapshot:
    """A snapshot; BadShareStateRecord when ``value`` is not one (or its batches do not fit
    together: out of order, overlapping, below the start offset)."""
    try:
        version, snapshot_epoch, state_epoch, leader_epoch, start = struct.unpack_from(
            ">hHiiq", value, 0)
        if version != _VALUE_VERSION:
            raise BadShareStateRecord(f"share snapshot value version {version}")
        pos = 20
        count, pos = read_uvarint(value, pos, max_bytes=5)
        count -= 1
        if count < 0 or count * (_BATCH.size + 1) > len(value) - pos:
            raise BadShareStateRecord(f"{count} state batches in {len(value)} bytes")
        batches: list[StateBatch] = []
        end = start
        for _ in range(count):
            first, last, state, delivered = _BATCH.unpack_from(value, pos)
            pos = _skip_tags(value, pos + _BATCH.size)
            if first < end or last < first or delivered < 0:
                raise BadShareStateRecord(f"state batch [{first}, {last}] after {end}")
            batches.append(StateBatch(first, last, RecordState(state), delivered))
            end = last + 1
        _skip_tags(value, pos)
    except (struct.error, CorruptRecordError, ValueError) as exc:
        if isinstance(exc, BadShareStateRecord):
            raise
        raise BadShareStateRecord(f"share snapshot value: {exc}") from exc
    if start < -1 or (start == -1 and batches):
        # -1: initialized (InitializeShareGroupState) and not placed yet, with no batches
        raise BadShareStateRecord(f"start offset {start}")
    return Snapshot(ShareState(start, end, tuple(batches), state_epoch), leader_epoch,
                    snapshot_epoch)
