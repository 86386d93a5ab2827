"""``__transaction_state`` records: Kafka's ``TransactionLogKey`` / ``TransactionLogValue``
layouts (version 0), so the latest record per transactional id is its state and compaction may
drop older ones; a tombstone (no value) removes an expired id.

Key:   int16 version (0), string transactional_id.
Value: int16 version (0), int64 producer_id, int16 producer_epoch, int32 transaction_timeout_ms,
       int8 transaction_status, array of (string topic, array of int32 partition) (null: none),
       int64 last_update_timestamp_ms, int64 start_timestamp_ms.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from floodmark.errors import FloodmarkError
from floodmark.records import Record, build_batch, decode_records
from floodmark.replication.transactions.state import TxnMetadata, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0


class BadTxnRecord(FloodmarkError, ValueError):
    """A ``__transaction_state`` record floodmark cannot read."""


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0 or pos + n > len(buf):
        raise BadTxnRecord(f"string of {n} bytes at {pos}")
    return buf[pos:pos + n].decode(), pos + n


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def decode_key(key: bytes) -> str:
    (version,) = struct.unpack_from(">h", key, 0)
    if version != KEY_VERSION:
        raise BadTxnRecord(f"transaction log key version {version}")
    return _read_string(key, 2)[0]


def encode_value(m: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(struct.pack(">hqhib", VALUE_VERSION, m.producer_id, m.producer_epoch,
                                m.txn_timeout_ms, int(m.state)))
    if m.state is TxnState.EMPTY or m.state.is_complete:
        out += struct.pack(">i", -1)  # Kafka writes null partitions for these states
    else:
        out += struct.pack(">i", len(by_topic))
        for topic, partitions in by_topic.items():
            out += _string(topic) + struct.pack(f">i{len(partitions)}i", len(partitions),
                                                *partitions)
    out += struct.pack(">qq", m.txn_last_update_timestamp_ms, m.txn_start_timestamp_ms)
    return bytes(out)


def decode_value(transactional_id: str, value: bytes) -> TxnMetadata:
    try:
        version, pid, epoch, timeout_ms, status = struct.unpack_from(">hqhib", value, 0)
        if version != VALUE_VERSION:
            raise BadTxnRecord(f"transaction log value version {version}")
        pos = 17
        (count,) = struct.unpack_from(">i", value, pos)
        pos += 4
        partitions: set[tuple[str, int]] = set()
        for _ in range(max(count, 0)):
            topic, pos = _read_string(value, pos)
            (n,) = struct.unpack_from(">i", value, pos)
            pos += 4
            partitions.update((topic, p) for p in struct.unpack_from(f">{n}i", value, pos))
            pos += 4 * n
        last_update_ms, start_ms = struct.unpack_from(">qq", value, pos)
        return TxnMetadata(transactional_id, pid, epoch, timeout_ms, TxnState(status),
                           frozenset(partitions), start_ms, last_update_ms)
    except (struct.error, ValueError, AssertionError) as exc:
        if isinstance(exc, BadTxnRecord):
            raise
        raise BadTxnRecord(f"transaction log value of {transactional_id!r}: {exc}") from exc


def build_record_batch(metadata: TxnMetadata, now_ms: int) -> bytes:
    """The one-record batch that stores ``metadata`` (the leader assigns its offset); Dead, an
    expired id, is a tombstone (compaction removes the key)."""
    value = None if metadata.state is TxnState.DEAD else encode_value(metadata)
    return build_batch([Record(0, now_ms, encode_key(metadata.transactional_id), value)])


@dataclass(frozen=True, slots=True)
class Replayed:
    """What a ``__transaction_state`` partition holds: the last state of each id, and how many
    records could not be read (skipped, reported)."""

    transactions: dict[str, TxnMetadata]
    records: int
    unreadable: int


def replay(chunks: Iterable[bytes | memoryview]) -> Replayed:
    """The state of every transactional id of one partition, from its batches in log order (the
    last record of an id wins; a tombstone removes it)."""
    out: dict[str, TxnMetadata] = {}
    n = bad = 0
    for chunk in chunks:
        for rec in decode_records(chunk):
            if rec.key is None:
                continue
            n += 1
            try:
                txn_id = decode_key(rec.key)
                if rec.value is None:
                    out.pop(txn_id, None)
                else:
                    out[txn_id] = decode_value(txn_id, rec.value)
            except (BadTxnRecord, struct.error, UnicodeDecodeError):
                bad += 1
    return Replayed(out, n, bad)
