"""Kafka v2 record batches (magic 2): a zero-copy header view, CRC-32C, and a full builder/decoder.

Layout of a batch (big-endian, 61-byte header, then ``recordsCount`` records, maybe compressed)::

    0  baseOffset i64          8  batchLength i32 (bytes after this field)
    12 partitionLeaderEpoch i32   16 magic i8      17 crc u32 (CRC-32C of attributes..end)
    21 attributes i16          23 lastOffsetDelta i32     27 baseTimestamp i64
    35 maxTimestamp i64        43 producerId i64   51 producerEpoch i16
    53 baseSequence i32        57 recordsCount i32        61 records...

``baseOffset`` and ``partitionLeaderEpoch`` sit before the CRC'd range, so the leader patches them
in place without recomputing the CRC. On the hot path a batch stays opaque bytes; records are only
decoded where a feature needs them (CLI, simulator checks, Spark, offset-for-timestamp).
"""

from __future__ import annotations

import enum
import functools
import importlib.machinery
import importlib.util
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from floodmark.compression import Compression, CompressionError, compress, decompress
from floodmark.constants import NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from floodmark.errors import CorruptDataError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MAGIC_V2 = 2
NO_TIMESTAMP = -1
NO_SEQUENCE = -1

BASE_OFFSET_POS = 0
LENGTH_POS = 8
PARTITION_LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
LAST_OFFSET_DELTA_POS = 23
BASE_TIMESTAMP_POS = 27
MAX_TIMESTAMP_POS = 35
RECORDS_COUNT_POS = 57

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == HEADER_SIZE
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

Buffer = bytes | bytearray | memoryview


class TimestampType(enum.IntEnum):
    """``message.timestamp.type``: who sets the timestamp (attributes bit 3)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @classmethod
    def parse(cls, value: str | int | TimestampType) -> TimestampType:
        if isinstance(value, TimestampType):
            return value
        if isinstance(value, int):
            return cls(value)
        normalized = value.strip().replace("_", "").replace("-", "").lower()
        if normalized == "createtime":
            return cls.CREATE_TIME
        if normalized == "logappendtime":
            return cls.LOG_APPEND_TIME
        raise ValueError(f"unknown timestamp type {value!r}")


CREATE_TIME = TimestampType.CREATE_TIME
LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME


class CorruptRecordError(CorruptDataError, ValueError):
    """A record batch is short, truncated, of the wrong magic, or fails its CRC."""

    def __init__(self, message: str, position: int = -1) -> None:
        super().__init__(message)
        self.position = position


def _crc32c_function() -> Callable[[Any], int]:
    """The ``crc32c`` package's C function, loaded without the package's ``__init__``: that
    one asks ``importlib.metadata`` for the package's own version, which imports email, zipfile,
    csv and datetime and reads the installed distributions' metadata (more CPU than the rest of
    a CLI command's start-up takes). Imported as usual when the extension is not found alone or
    the package is loaded already."""
    if "crc32c" not in sys.modules:
        found = importlib.util.find_spec("crc32c")  # finds, does not run, the package
        places = None if found is None else found.submodule_search_locations
        spec = (None if places is None
                else importlib.machinery.PathFinder.find_spec("crc32c._crc32c", list(places)))
        if spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.crc32c  # type: ignore[no-any-return]
    import crc32c

    return crc32c.crc32c


_crc32c = _crc32c_function()


def crc32c_of(data: Buffer) -> int:
    return int(_crc32c(data))


class BatchHeader:
    """A view of one v2 batch header at ``position`` in ``buffer`` (the buffer is not copied).

    All fields are unpacked once with a single ``struct`` call; ``buffer``/``position`` are kept
    so that ``verify_crc`` and the in-place patch helpers can reach the batch bytes.
    """

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "buffer",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "records_count",
    )

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    buffer: Buffer
    position: int

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        if len(buffer) - position < HEADER_SIZE:
            raise CorruptRecordError(
                f"record batch header at position {position} is short: "
                f"{max(0, len(buffer) - position)} of {HEADER_SIZE} bytes",
                position,
            )
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = _HEADER.unpack_from(buffer, position)
        self.buffer = buffer
        self.position = position

    # -- derived properties -----------------------------------------------------------------
    @property
    def size(self) -> int:
        """Total bytes of the batch: 12 + batchLength."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def batch_bytes(self) -> memoryview:
        """The whole batch as a memoryview (no copy)."""
        return memoryview(self.buffer)[self.position : self.position + self.size]

    def compute_crc(self) -> int:
        end = self.position + self.size
        return crc32c_of(memoryview(self.buffer)[self.position + ATTRIBUTES_POS : end])

    def verify_crc(self) -> bool:
        """True when the stored CRC matches attributes..end (the batch must be complete)."""
        if len(self.buffer) < self.position + self.size:
            return False
        return self.compute_crc() == self.crc

    def validate(self) -> None:
        """Raise CorruptRecordError unless this is a complete, well-formed magic-2 batch."""
        validate_batch_at(self.buffer, self.position, header=self)

    def __repr__(self) -> str:
        return (
            f"BatchHeader(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"size={self.size}, partition_leader_epoch={self.partition_leader_epoch}, "
            f"magic={self.magic}, records_count={self.records_count}, "
            f"compression={self.compression.name}, max_timestamp={self.max_timestamp})"
        )


# -- in-place patches (outside the CRC) -----------------------------------------------------------
def set_base_offset(buffer: bytearray | memoryview, position: int, base_offset: int) -> None:
    _I64.pack_into(buffer, position + BASE_OFFSET_POS, base_offset)


def set_partition_leader_epoch(buffer: bytearray | memoryview, position: int, epoch: int) -> None:
    _I32.pack_into(buffer, position + PARTITION_LEADER_EPOCH_POS, epoch)


def set_log_append_time(buffer: bytearray | memoryview, position: int, timestamp_ms: int) -> None:
    """Mark the batch LOG_APPEND_TIME with ``maxTimestamp = timestamp_ms``; recomputes the CRC
    (attributes and maxTimestamp are inside the CRC'd range, as in Kafka)."""
    (attributes,) = _I16.unpack_from(buffer, position + ATTRIBUTES_POS)
    _I16.pack_into(buffer, position + ATTRIBUTES_POS, attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buffer, position + MAX_TIMESTAMP_POS, timestamp_ms)
    (length,) = _I32.unpack_from(buffer, position + LENGTH_POS)
    end = position + LOG_OVERHEAD + length
    crc = crc32c_of(memoryview(buffer)[position + ATTRIBUTES_POS : end])
    _U32.pack_into(buffer, position + CRC_POS, crc)


# -- validation and iteration -------------------------------------------------------------------
def validate_batch_at(
    buffer: Buffer, position: int, *, header: BatchHeader | None = None
) -> BatchHeader:
    """Check the batch at ``position``: complete header, sane length, magic 2, CRC. Returns it."""
    size_available = len(buffer)
    available = size_available - position
    if available < HEADER_SIZE:
        if available < LOG_OVERHEAD:
            raise CorruptRecordError(
                f"truncated record batch at position {position}: {available} bytes, "
                f"need at least {LOG_OVERHEAD} for offset and length",
                position,
            )
        _, length = _PREFIX.unpack_from(buffer, position)
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"record batch at position {position} has batchLength {length}, "
                f"smaller than the minimum {HEADER_SIZE - LOG_OVERHEAD}",
                position,
            )
        raise CorruptRecordError(
            f"truncated record batch header at position {position}: {available} of "
            f"{HEADER_SIZE} bytes",
            position,
        )
    hdr = header if header is not None else BatchHeader(buffer, position)
    length = hdr.batch_length
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"record batch at position {position} has batchLength {length}, "
            f"smaller than the minimum {HEADER_SIZE - LOG_OVERHEAD}",
            position,
        )
    if hdr.magic != MAGIC_V2:
        raise CorruptRecordError(
            f"record batch at position {position} has magic {hdr.magic}, only magic 2 is supported",
            position,
        )
    end = position + LOG_OVERHEAD + length
    if end > size_available:
        raise CorruptRecordError(
            f"truncated record batch at position {position}: batchLength says "
            f"{LOG_OVERHEAD + length} bytes, only {available} present",
            position,
        )
    if hdr.last_offset_delta < 0 or hdr.records_count < 0:
        raise CorruptRecordError(
            f"record batch at position {position} has negative lastOffsetDelta "
            f"({hdr.last_offset_delta}) or recordsCount ({hdr.records_count})",
            position,
        )
    codec = hdr.attributes & COMPRESSION_MASK
    if codec > max(Compression):
        raise CorruptRecordError(
            f"record batch at position {position} (base offset {hdr.base_offset}) names "
            f"compression codec id {codec}, which does not exist",
            position,
        )
    actual = _crc32c(memoryview(buffer)[position + ATTRIBUTES_POS : end])
    if actual != hdr.crc:
        raise CorruptRecordError(
            f"record batch at position {position} (base offset {hdr.base_offset}) fails CRC-32C: "
            f"stored {hdr.crc:#010x}, computed {actual:#010x}",
            position,
        )
    return hdr


def iter_batches(buffer: Buffer, *, validate: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch in a concatenation of batches.

    With ``validate`` every batch is checked (``validate_batch_at``) and a short trailing fragment
    raises CorruptRecordError; without it only the framing is followed (lengths must still fit).
    """
    position = 0
    end = len(buffer)
    while position < end:
        if validate:
            header = validate_batch_at(buffer, position)
        else:
            header = BatchHeader(buffer, position)
            if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > end:
                raise CorruptRecordError(
                    f"truncated or malformed record batch at position {position}", position
                )
        yield position, header
        position += header.size


def batch_headers(buffer: Buffer, *, validate: bool = True) -> list[BatchHeader]:
    return [h for _, h in iter_batches(buffer, validate=validate)]


# -- varints ------------------------------------------------------------------------------------
def zigzag_encode(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag varint (Kafka's signed varint / varlong)."""
    encoded = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)


def read_uvarint(buffer: Buffer, position: int, max_bytes: int = 10,
                 end: int | None = None) -> tuple[int, int]:
    """Read an unsigned varint at ``position`` (the protocol's compact lengths, tag counts and
    the records' zigzag-encoded fields before decoding), within ``buffer[:end]``; returns
    (value, next position). The one varint reader (Spark's vectorized decoder aside): truncated
    or over-long input raises ``CorruptRecordError``."""
    if end is None:
        end = len(buffer)
    if position < end:
        first = buffer[position]
        if first < 0x80:  # the common case: one byte
            return first, position + 1
    result = 0
    shift = 0
    limit = 7 * max_bytes
    while True:
        if position >= end:
            raise CorruptRecordError("truncated varint", position)
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift >= limit:
            raise CorruptRecordError(f"varint longer than {max_bytes} bytes", position)


def read_varint(buffer: Buffer, position: int) -> tuple[int, int]:
    """Read a zigzag varint at ``position``; returns (value, next position)."""
    result, position = read_uvarint(buffer, position)
    return (result >> 1) ^ -(result & 1), position


def varint_size(value: int) -> int:
    encoded = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while encoded >= 0x80:
        encoded >>= 7
        size += 1
    return size


# -- records ------------------------------------------------------------------------------------
Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """One record. ``offset`` is absolute when decoded; when building, offset deltas are taken
    relative to the first record's ``offset`` (so 0, 1, 2... or any absolute run both work)."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


_SMALL_VARINT_LIMIT = 1 << 13
"""Zigzag varints of -1 .. this - 1 (null lengths, the lengths of small keys, values and
headers, offset deltas in a batch, close timestamps) come from a table built once: a producer
encodes six of them per record, and the table is what keeps that off its profile."""


@functools.cache
def _small_varints() -> tuple[bytes, ...]:
    table = []
    for value in range(-1, _SMALL_VARINT_LIMIT):
        out = bytearray()
        write_varint(out, value)
        table.append(bytes(out))
    return tuple(table)


def _varint_bytes(value: int) -> bytes:
    if -1 <= value < _SMALL_VARINT_LIMIT:
        return _small_varints()[value + 1]
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def _encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, record: Record) -> None:
    small = _small_varints()
    limit = _SMALL_VARINT_LIMIT
    parts = [b"\0",  # record attributes (unused)
             small[timestamp_delta + 1] if -1 <= timestamp_delta < limit
             else _varint_bytes(timestamp_delta),
             small[offset_delta + 1] if -1 <= offset_delta < limit
             else _varint_bytes(offset_delta)]
    for field_bytes in (record.key, record.value):
        if field_bytes is None:
            parts.append(small[0])  # -1: null
        else:
            n = len(field_bytes)
            parts.append(small[n + 1] if n < limit else _varint_bytes(n))
            parts.append(field_bytes)
    headers = record.headers
    parts.append(_varint_bytes(len(headers)))
    for name, value in headers:
        encoded_name = name.encode("utf-8")
        parts.append(_varint_bytes(len(encoded_name)))
        parts.append(encoded_name)
        if value is None:
            parts.append(small[0])
        else:
            parts.append(_varint_bytes(len(value)))
            parts.append(value)
    body = b"".join(parts)
    n = len(body)
    out += small[n + 1] if n < limit else _varint_bytes(n)
    out += body


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: Compression = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    timestamp_type: TimestampType = CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
    base_timestamp: int | None = None,
) -> bytes:
    """Build one v2 record batch with a valid CRC-32C."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    first_offset = records[0].offset
    if base_timestamp is None:
        base_timestamp = min(r.timestamp_ms for r in records)
    body = bytearray()
    last_offset_delta = 0
    max_timestamp = max(r.timestamp_ms for r in records)
    for record in records:
        delta = record.offset - first_offset
        if delta < last_offset_delta or (delta == last_offset_delta and body):
            raise ValueError("record offsets within a batch must be strictly increasing")
        last_offset_delta = delta
        _encode_record(body, delta, record.timestamp_ms - base_timestamp, record)
    payload: bytes | bytearray = body
    codec = Compression(compression)
    if codec is not Compression.NONE:
        payload = compress(codec, body)
    attributes = int(codec) & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    return _seal_batch(payload, base_offset, partition_leader_epoch, attributes, last_offset_delta,
                       base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                       len(records))


def _seal_batch(payload: bytes | bytearray, base_offset: int, partition_leader_epoch: int,
                attributes: int, last_offset_delta: int, base_timestamp: int, max_timestamp: int,
                producer_id: int, producer_epoch: int, base_sequence: int,
                records_count: int) -> bytes:
    """The v2 header in front of ``payload`` (the encoded, maybe compressed, records), with its
    CRC-32C: the one place a batch header is written."""
    batch = bytearray(HEADER_SIZE + len(payload))
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    batch[HEADER_SIZE:] = payload
    _U32.pack_into(batch, CRC_POS, crc32c_of(memoryview(batch)[ATTRIBUTES_POS:]))
    return bytes(batch)


def reseal_batch(header: BatchHeader, attributes: int, payload: bytes | bytearray) -> bytes:
    """The batch ``header`` describes with new ``attributes`` and ``payload`` (the same records,
    encoded under another codec): every other header field kept, the CRC computed again."""
    return _seal_batch(payload, header.base_offset, header.partition_leader_epoch, attributes,
                       header.last_offset_delta, header.base_timestamp, header.max_timestamp,
                       header.producer_id, header.producer_epoch, header.base_sequence,
                       header.records_count)


def rebuild_batch(
    header: BatchHeader, records: Sequence[Record], *, delete_horizon_ms: int | None = None
) -> bytes:
    """The batch ``header`` describes, holding only ``records`` (the log cleaner's rewrite).

    Kept as Kafka keeps them: base offset, lastOffsetDelta (so the batch still ends where it
    ended), partition leader epoch, producer id/epoch, base sequence, timestamp type,
    transactional/control flags, maxTimestamp and the codec. Records keep their offsets and
    timestamps. ``delete_horizon_ms`` sets the delete-horizon attribute with baseTimestamp =
    the horizon (KIP-534; record timestamps stay right, their deltas are taken from it). With
    no records the result is an empty batch (recordsCount 0, uncompressed, no payload).
    """
    attributes = header.attributes & ~COMPRESSION_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms
    elif header.attributes & DELETE_HORIZON_MASK:
        base_timestamp = header.base_timestamp
    elif records:
        base_timestamp = min(r.timestamp_ms for r in records)
    else:
        base_timestamp = header.base_timestamp
    body = bytearray()
    previous = -1
    for record in records:
        delta = record.offset - header.base_offset
        if delta <= previous or delta > header.last_offset_delta:
            raise ValueError("records must be in offset order and inside the batch")
        previous = delta
        _encode_record(body, delta, record.timestamp_ms - base_timestamp, record)
    payload: bytes | bytearray = body
    if records and header.compression is not Compression.NONE:
        payload = compress(header.compression, body)
        attributes |= int(header.compression) & COMPRESSION_MASK
    return _seal_batch(payload, header.base_offset, header.partition_leader_epoch, attributes,
                       header.last_offset_delta, base_timestamp, header.max_timestamp,
                       header.producer_id, header.producer_epoch, header.base_sequence,
                       len(records))


def simple_batch(
    values: Sequence[bytes | None],
    *,
    timestamp_ms: int = 0,
    keys: Sequence[bytes | None] | None = None,
    **kwargs: object,
) -> bytes:
    """Convenience: a batch of ``values`` (offset deltas 0.., one timestamp), for tests/sim/CLI."""
    records = [
        Record(i, timestamp_ms, keys[i] if keys is not None else None, value)
        for i, value in enumerate(values)
    ]
    return build_batch(records, **kwargs)  # type: ignore[arg-type]


def _read_bytes(buffer: Buffer, position: int) -> tuple[bytes | None, int]:
    length, position = read_varint(buffer, position)
    if length < 0:
        return None, position
    end = position + length
    if end > len(buffer):
        raise CorruptRecordError("record field runs past the end of the batch", position)
    return bytes(buffer[position:end]), end


def _decode_records(header: BatchHeader, payload: Buffer) -> list[Record]:
    records: list[Record] = []
    position = 0
    log_append = header.timestamp_type == LOG_APPEND_TIME
    for _ in range(header.records_count):
        length, position = read_varint(payload, position)
        end = position + length
        if length < 0 or end > len(payload):
            raise CorruptRecordError(
                f"record of {length} bytes runs past the end of batch {header.base_offset}",
                header.position,
            )
        position += 1  # attributes
        timestamp_delta, position = read_varint(payload, position)
        offset_delta, position = read_varint(payload, position)
        key, position = _read_bytes(payload, position)
        value, position = _read_bytes(payload, position)
        header_count, position = read_varint(payload, position)
        if header_count < 0 or header_count > length:
            raise CorruptRecordError(f"bad record header count {header_count}", header.position)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            name_bytes, position = _read_bytes(payload, position)
            header_value, position = _read_bytes(payload, position)
            headers.append(((name_bytes or b"").decode("utf-8", "replace"), header_value))
        if position != end:
            raise CorruptRecordError(
                f"record length {length} disagrees with its fields in batch {header.base_offset}",
                header.position,
            )
        timestamp = header.max_timestamp if log_append else header.base_timestamp + timestamp_delta
        records.append(
            Record(header.base_offset + offset_delta, timestamp, key, value, tuple(headers))
        )
    if position != len(payload):
        raise CorruptRecordError(
            f"batch {header.base_offset} has {len(payload) - position} bytes after its "
            f"{header.records_count} records",
            header.position,
        )
    return records


def decode_batch(
    buffer: Buffer, position: int = 0, *, validate: bool = True
) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``position`` into its header and records (decompressing as needed).
    The buffer must hold the whole batch: a header-only view, or a batch cut by a read, is a
    CorruptRecordError, never fewer records."""
    header = validate_batch_at(buffer, position) if validate else BatchHeader(buffer, position)
    if position + header.size > len(buffer):
        raise CorruptRecordError(
            f"batch {header.base_offset} at position {position} is not whole in this buffer: "
            f"{len(buffer) - position} of {header.size} bytes (a header-only view or a cut read)",
            position,
        )
    start = position + HEADER_SIZE
    payload: Buffer = memoryview(buffer)[start : position + header.size]
    if header.compression is not Compression.NONE:
        try:
            payload = decompress(header.compression, payload)
        except CompressionError as exc:
            raise CorruptRecordError(
                f"batch {header.base_offset} at position {position}: {exc}", position
            ) from exc
    return header, _decode_records(header, payload)


def decode_records(buffer: Buffer, *, validate: bool = True) -> list[Record]:
    """All records of a concatenation of batches."""
    out: list[Record] = []
    for position, _header in iter_batches(buffer, validate=validate):
        out.extend(decode_batch(buffer, position, validate=False)[1])
    return out


# -- control batches (transaction markers) ------------------------------------------------------
class ControlType(enum.IntEnum):
    """The ``type`` in a control record's key (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1


_CONTROL_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """A commit or abort marker: the one record of a control batch (Kafka's
    ``EndTransactionMarker``): key = (version i16, type i16), value = (version i16, coordinator
    epoch i32)."""

    control_type: ControlType
    coordinator_epoch: int

    @property
    def committed(self) -> bool:
        return self.control_type is ControlType.COMMIT


def build_marker_batch(producer_id: int, producer_epoch: int, marker: EndTxnMarker, *,
                       timestamp_ms: int, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
                       ) -> bytes:
    """The control batch a partition leader appends for WriteTxnMarkers (transactional and
    control attributes, no sequence, uncompressed, one record)."""
    return _seal_batch(_marker_record(int(marker.control_type), marker.coordinator_epoch), 0,
                       partition_leader_epoch, TRANSACTIONAL_MASK | CONTROL_MASK, 0,
                       timestamp_ms, timestamp_ms, producer_id, producer_epoch, NO_SEQUENCE, 1)


@functools.lru_cache(maxsize=256)
def _marker_record(control_type: int, coordinator_epoch: int) -> bytes:
    """A marker's one record (offset and timestamp deltas 0): the same bytes for every marker
    of a type and coordinator epoch, so encoded once, not once per marker."""
    body = bytearray()
    _encode_record(body, 0, 0, Record(0, 0, _CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type),
                                      _MARKER_VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)))
    return bytes(body)


def _control_record(header: BatchHeader) -> tuple[int, Record]:
    """The control type and record of a control batch (whose whole bytes ``header`` views).
    Raises CorruptRecordError if the batch is not a well-formed control batch."""
    if not header.is_control:
        raise CorruptRecordError(f"batch {header.base_offset} is not a control batch",
                                 header.position)
    records = decode_batch(header.buffer, header.position, validate=False)[1]
    if len(records) != 1 or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control batch {header.base_offset} has no control key",
                                 header.position)
    _version, kind = _CONTROL_KEY.unpack_from(records[0].key)
    return kind, records[0]


def control_type_of(header: BatchHeader) -> int:
    """The ``type`` of a control batch's record: ``ControlType`` values for transaction markers,
    others (KRaft's leader change, snapshot headers...) for records a consumer skips. Raises
    CorruptRecordError if the batch is not a whole, well-formed control batch."""
    return _control_record(header)[0]


def read_end_txn_marker(header: BatchHeader) -> EndTxnMarker:
    """The marker of a control batch (whose whole bytes ``header`` views). Raises
    CorruptRecordError if it is not one: an unknown control type, a short key or value, a
    buffer that does not hold the whole batch."""
    kind, record = _control_record(header)
    value = record.value
    if kind not in (ControlType.ABORT, ControlType.COMMIT):
        raise CorruptRecordError(f"control batch {header.base_offset} has control type {kind}, "
                                 "not a transaction marker", header.position)
    if value is None or len(value) < _MARKER_VALUE.size:
        raise CorruptRecordError(f"transaction marker {header.base_offset} has a short value",
                                 header.position)
    _value_version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    return EndTxnMarker(ControlType(kind), coordinator_epoch)


@dataclass
class AbortedTracker:
    """read_committed filtering, as a Kafka consumer does it: given the aborted transactions
    overlapping a run of batches ((producer id, first offset) pairs, a Fetch answer's list or a
    segment's ``.txnindex``), a producer's batches are aborted from the first offset of one of
    its aborted transactions until its ABORT marker. Feed the batches in offset order; entries
    whose marker lies before the first batch fed must be left out."""

    pending: list[tuple[int, int]] = field(default_factory=list)  # (first_offset, producer_id)
    aborted_pids: set[int] = field(default_factory=set)

    @classmethod
    def from_response(cls, aborted: Sequence[tuple[int, int]]) -> AbortedTracker:
        """From (producer id, first offset) pairs."""
        return cls(sorted((first, pid) for pid, first in aborted))

    def skip(self, hdr: BatchHeader) -> bool:
        """True when the batch must not be shown: a control batch, or aborted data."""
        while self.pending and self.pending[0][0] <= hdr.last_offset:
            self.aborted_pids.add(self.pending.pop(0)[1])
        if hdr.is_control:
            if hdr.producer_id in self.aborted_pids and _is_abort_marker(hdr):
                self.aborted_pids.discard(hdr.producer_id)
            return True
        return hdr.is_transactional and hdr.producer_id in self.aborted_pids


def _is_abort_marker(hdr: BatchHeader) -> bool:
    """An unknown control type ends nothing (as in Kafka's consumer); a control batch that
    cannot be decoded is corruption and raises."""
    return control_type_of(hdr) == ControlType.ABORT
