"""Committed consumer-group offsets, kept in the compacted internal topic ``__consumer_offsets``.

Each commit appends one record per partition; the key and value use Kafka's layouts (key version 1:
group, topic, partition; value version 3: offset, leader epoch, metadata, commit timestamp), so the
latest record per key is the committed offset and compaction may drop older ones. The in-memory
table is only updated after the append succeeded, and is rebuilt by replaying the topic on start.

Transactional offsets (TxnOffsetCommit, KIP-98) are written in a transactional batch of the
producer and stay *pending* (per producer id) until the transaction's marker lands on the
partition: a COMMIT marker makes them the committed offsets, an ABORT drops them
(:meth:`OffsetStore.on_transaction_marker`). Replay does the same with the markers in the log.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from floodmark.metadata import coordinator_partition
from floodmark.records import Record, build_batch, decode_batch, iter_batches

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


_CONTROL_COMMIT = 1  # control record key: int16 version, int16 type (0 abort, 1 commit)


def control_type(key: bytes | None) -> int | None:
    """The type of a control record (0 ABORT, 1 COMMIT), None if the key is not one."""
    if key is None or len(key) < 4:
        return None
    return int(struct.unpack_from(">h", key, 2)[0])


class OffsetStore:
    def __init__(self) -> None:
        self._offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # Transactional offsets not yet committed or aborted, by producer id.
        self._pending: dict[int, dict[Key, CommittedOffset | None]] = {}

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

    # -- transactional offsets ------------------------------------------------------------------
    def add_pending(self, producer_id: int, group: str, topic: str, partition: int,
                    c: CommittedOffset | None) -> None:
        """A TxnOffsetCommit of ``producer_id`` is in the log: pending until its marker."""
        self._pending.setdefault(producer_id, {})[(group, topic, partition)] = c

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """An open transaction holds an offset for this partition (OffsetFetch with
        require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        key = (group, topic, partition)
        return any(key in offsets for offsets in self._pending.values())

    def on_transaction_marker(self, producer_id: int, committed: bool,
                              in_partition: Callable[[str], bool] | None = None) -> int:
        """The marker of ``producer_id``'s transaction landed on an offsets partition: the
        pending offsets of the groups that partition holds (``in_partition``: all when None)
        become the committed ones (COMMIT) or are dropped (ABORT). Returns how many it
        settled."""
        offsets = self._pending.get(producer_id, {})
        settled = [k for k in offsets if in_partition is None or in_partition(k[0])]
        for key in settled:
            c = offsets.pop(key)
            if committed:
                self.apply(*key, c)
        if not offsets:
            self._pending.pop(producer_id, None)
        return len(settled)

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
        """Rebuild the table from the internal topic's batches; returns records applied.
        Transactional batches are pending until their producer's marker follows in the log."""
        n = 0
        groups: set[str] = set()  # the groups of the partition(s) replayed
        for chunk in read_batches():
            for position, _ in iter_batches(chunk):
                header, records = decode_batch(chunk, position, validate=False)
                if header.is_control:
                    for rec in records:
                        kind = control_type(rec.key)
                        if kind is not None:
                            n += self.on_transaction_marker(header.producer_id,
                                                            kind == _CONTROL_COMMIT,
                                                            groups.__contains__)
                    continue
                for rec in records:
                    if rec.key is None:
                        continue
                    key = decode_key(rec.key)
                    if key is None:
                        continue
                    c = decode_value(rec.value) if rec.value is not None else None
                    groups.add(key[0])
                    if header.is_transactional:
                        self.add_pending(header.producer_id, *key, c)
                    else:
                        self.apply(*key, c)
                        n += 1
        return n
