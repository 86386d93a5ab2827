"""Committed consumer-group offsets, kept in the compacted internal topic ``__consumer_offsets``.

Each commit appends one record per partition; the key and value use Kafka's layouts (key version 1:
group, topic, partition; value version 3: offset, leader epoch, metadata, commit timestamp), so the
latest record per key is the committed offset and compaction may drop older ones. The in-memory
table is only updated after the append succeeded, and is rebuilt by replaying the topic on start.

Transactional offset commits (TxnOffsetCommit, KIP-98) are written in transactional batches and
held as *pending* per producer id until the transaction's marker is written on the offsets
partition: ``on_transaction_marker`` (called by the WriteTxnMarkers handler once the marker is
replicated) makes them committed on COMMIT and drops them on ABORT. Replay follows the same rule
from the batches' flags and the markers in the log; what is still pending at the end of the log
stays pending, for the marker the transaction coordinator will write.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from floodmark.metadata import coordinator_partition
from floodmark.records import (
    Record,
    build_batch,
    decode_batch,
    iter_batches,
    read_end_txn_marker,
)

_KEY_VERSION = 1
_VALUE_VERSION = 3


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


def encode_key(group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", _KEY_VERSION) + _string(group) + _string(topic) + struct.pack(">i", partition)


def decode_key(key: bytes) -> tuple[str, str, int] | None:
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


class OffsetStore:
    def __init__(self) -> None:
        self._offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # producer id -> (group, topic, partition) -> offset (None: a tombstone), not yet
        # committed: written by a transaction whose marker has not been written.
        self._pending: dict[int, dict[Key, CommittedOffset | None]] = {}

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
        order); returns records applied. Transactional batches wait for their marker."""
        n = 0
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
                        continue
                    value = decode_value(rec.value) if rec.value is not None else None
                    if header.is_transactional:
                        self.add_pending(header.producer_id, *key, value)
                        continue
                    self.apply(*key, value)
                    n += 1
        return n
