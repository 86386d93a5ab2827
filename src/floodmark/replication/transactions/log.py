"""``__transaction_state`` records: Kafka's ``TransactionLogKey`` / ``TransactionLogValue``
layouts, so the latest record per transactional id is its state and compaction may drop older
ones; a tombstone (no value) removes an expired id.

Key:   int16 version (0), string transactional_id.
Value: int16 version (0), int64 producer_id, int16 producer_epoch, int32 transaction_timeout_ms,
       int8 transaction_status, array of (string topic, array of int32 partition) (null: none),
       int64 last_update_timestamp_ms, int64 start_timestamp_ms.
Value version 1 (flexible, Kafka 4.0; written for a state of transaction version 2, KIP-890
part 2): the same fields with compact strings and arrays and tagged fields, the struct's tags
being 0 PreviousProducerId (int64), 1 NextProducerId (int64), 2 ClientTransactionVersion
(int16), each written only when not its default (-1, -1, 0).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from floodmark.constants import NO_PRODUCER_ID
from floodmark.errors import FloodmarkError
from floodmark.records import CorruptRecordError, Record, build_batch, decode_records, read_uvarint
from floodmark.replication.transactions.state import TxnMetadata, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0
VALUE_VERSION_FLEXIBLE = 1
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2


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


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _by_topic(m: TxnMetadata) -> dict[str, list[int]] | None:
    """The partitions per topic; None (Kafka writes null) for states without any."""
    if m.state is TxnState.EMPTY or m.state.is_complete:
        return None
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return by_topic


def _flexible(m: TxnMetadata) -> bool:
    return (m.client_transaction_version != 0 or m.previous_producer_id != NO_PRODUCER_ID
            or m.next_producer_id != NO_PRODUCER_ID)


def encode_value(m: TxnMetadata) -> bytes:
    """Version 0, or version 1 when a transaction version 2 field is not its default."""
    if _flexible(m):
        return _encode_flexible(m)
    by_topic = _by_topic(m)
    out = bytearray(struct.pack(">hqhib", VALUE_VERSION, m.producer_id, m.producer_epoch,
                                m.txn_timeout_ms, int(m.state)))
    if by_topic is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(by_topic))
        for topic, partitions in by_topic.items():
            out += _string(topic) + struct.pack(f">i{len(partitions)}i", len(partitions),
                                                *partitions)
    out += struct.pack(">qq", m.txn_last_update_timestamp_ms, m.txn_start_timestamp_ms)
    return bytes(out)


def _encode_flexible(m: TxnMetadata) -> bytes:
    by_topic = _by_topic(m)
    out = bytearray(struct.pack(">hqhib", VALUE_VERSION_FLEXIBLE, m.producer_id,
                                m.producer_epoch, m.txn_timeout_ms, int(m.state)))
    if by_topic is None:
        out += _uvarint(0)
    else:
        out += _uvarint(len(by_topic) + 1)
        for topic, partitions in by_topic.items():
            raw = topic.encode()
            out += _uvarint(len(raw) + 1) + raw + _uvarint(len(partitions) + 1)
            out += struct.pack(f">{len(partitions)}i", *partitions) + _uvarint(0)
    out += struct.pack(">qq", m.txn_last_update_timestamp_ms, m.txn_start_timestamp_ms)
    tags: list[tuple[int, bytes]] = []
    if m.previous_producer_id != NO_PRODUCER_ID:
        tags.append((_TAG_PREVIOUS_PRODUCER_ID, struct.pack(">q", m.previous_producer_id)))
    if m.next_producer_id != NO_PRODUCER_ID:
        tags.append((_TAG_NEXT_PRODUCER_ID, struct.pack(">q", m.next_producer_id)))
    if m.client_transaction_version != 0:
        tags.append((_TAG_CLIENT_TRANSACTION_VERSION,
                     struct.pack(">h", m.client_transaction_version)))
    out += _uvarint(len(tags))
    for tag, data in tags:
        out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


def _read_tagged(value: bytes, pos: int) -> tuple[dict[int, bytes], int]:
    (count, pos) = read_uvarint(value, pos)
    fields: dict[int, bytes] = {}
    for _ in range(count):
        tag, pos = read_uvarint(value, pos)
        size, pos = read_uvarint(value, pos)
        if pos + size > len(value):
            raise BadTxnRecord(f"tagged field {tag} of {size} bytes at {pos}")
        fields[tag] = value[pos:pos + size]
        pos += size
    return fields, pos


def _decode_flexible_partitions(value: bytes, pos: int) -> tuple[set[tuple[str, int]], int]:
    partitions: set[tuple[str, int]] = set()
    count, pos = read_uvarint(value, pos)
    for _ in range(max(count - 1, 0)):
        n, pos = read_uvarint(value, pos)
        if n == 0 or pos + n - 1 > len(value):
            raise BadTxnRecord(f"topic name of {n - 1} bytes at {pos}")
        topic = value[pos:pos + n - 1].decode()
        pos += n - 1
        k, pos = read_uvarint(value, pos)
        k = max(k - 1, 0)
        partitions.update((topic, p) for p in struct.unpack_from(f">{k}i", value, pos))
        pos += 4 * k
        _, pos = _read_tagged(value, pos)  # the topic entry's own tagged fields: none known
    return partitions, pos


def decode_value(transactional_id: str, value: bytes) -> TxnMetadata:
    try:
        version, pid, epoch, timeout_ms, status = struct.unpack_from(">hqhib", value, 0)
        if version not in (VALUE_VERSION, VALUE_VERSION_FLEXIBLE):
            raise BadTxnRecord(f"transaction log value version {version}")
        pos = 17
        tagged: dict[int, bytes] = {}
        if version == VALUE_VERSION_FLEXIBLE:
            partitions, pos = _decode_flexible_partitions(value, pos)
            last_update_ms, start_ms = struct.unpack_from(">qq", value, pos)
            tagged, pos = _read_tagged(value, pos + 16)
        else:
            (count,) = struct.unpack_from(">i", value, pos)
            pos += 4
            partitions = set()
            for _ in range(max(count, 0)):
                topic, pos = _read_string(value, pos)
                (n,) = struct.unpack_from(">i", value, pos)
                pos += 4
                partitions.update((topic, p) for p in struct.unpack_from(f">{n}i", value, pos))
                pos += 4 * n
            last_update_ms, start_ms = struct.unpack_from(">qq", value, pos)

        def tag(number: int, fmt: str, default: int) -> int:
            raw = tagged.get(number)
            return default if raw is None else int(struct.unpack(fmt, raw)[0])

        return TxnMetadata(
            transactional_id, pid, epoch, timeout_ms, TxnState(status), frozenset(partitions),
            start_ms, last_update_ms,
            client_transaction_version=tag(_TAG_CLIENT_TRANSACTION_VERSION, ">h", 0),
            previous_producer_id=tag(_TAG_PREVIOUS_PRODUCER_ID, ">q", NO_PRODUCER_ID),
            next_producer_id=tag(_TAG_NEXT_PRODUCER_ID, ">q", NO_PRODUCER_ID))
    except (struct.error, ValueError, AssertionError, CorruptRecordError) as exc:
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
