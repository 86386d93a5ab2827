"""What the leader checks and rewrites in a produced record set before it appends it (Kafka's
``LogValidator``, the parts floodmark has): KIP-937's bounds on CreateTime timestamps and the
topic's ``compression.type``.

* **Timestamps.** With ``message.timestamp.type=CreateTime`` every record's timestamp must lie
  in ``[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]``; a record
  outside is refused with INVALID_TIMESTAMP and Kafka's per-record message (KIP-467's
  ``record_errors``), and nothing of the set is appended. A record without a timestamp (-1) is
  not checked, as in Kafka. The future bound is first checked on each batch's ``maxTimestamp``
  (the same field the time index and ListOffsets trust), so records are decoded only when a
  batch may hold an offender or when the past bound is finite.
* **Compression.** ``producer`` keeps the client's batches as they are. Any other codec
  (``uncompressed`` included) re-compresses each batch whose codec differs: the records'
  encoding is codec-independent, so the payload is decompressed and compressed again and the
  header is kept field for field (offset deltas, timestamps, producer id/epoch, base sequence,
  transactional flag), only the codec bits, the length and the CRC change. A batch already in
  the topic's codec is kept as it is, whatever level it was written with (Kafka does the same).
"""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.compression import Compression, CompressionError, compress, decompress
from floodmark.records import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    CorruptRecordError,
    decode_batch,
    iter_batches,
    reseal_batch,
)

LONG_MAX = 2**63 - 1
TIMESTAMP_ERROR_MESSAGE = "One or more records have been rejected due to invalid timestamp"


@dataclass(frozen=True, slots=True)
class TimestampBounds:
    before_max_ms: int = LONG_MAX
    after_max_ms: int = 3_600_000

    @property
    def unbounded(self) -> bool:
        return self.before_max_ms >= LONG_MAX and self.after_max_ms >= LONG_MAX


def out_of_range_timestamps(records: bytes | memoryview, bounds: TimestampBounds,
                            now_ms: int) -> list[tuple[int, str]] | None:
    """(index of the record in its batch, Kafka's message) for every CreateTime record outside
    the bounds; [] when all are inside; None when a batch cannot be decoded."""
    if bounds.unbounded:
        return []
    low = now_ms - bounds.before_max_ms
    high = now_ms + bounds.after_max_ms
    refused: list[tuple[int, str]] = []
    try:
        for position, header in iter_batches(records, validate=False):
            if bounds.before_max_ms >= LONG_MAX and header.max_timestamp <= high:
                continue  # no record is later than the batch's maxTimestamp
            for index, record in enumerate(decode_batch(records, position, validate=False)[1]):
                ts = record.timestamp_ms
                if ts != NO_TIMESTAMP and (now_ms - ts > bounds.before_max_ms
                                           or ts - now_ms > bounds.after_max_ms):
                    refused.append((index, f"Timestamp {ts} of message with offset "
                                           f"{record.offset} is out of range. The timestamp "
                                           f"should be within [{low}, {high}]"))
    except CorruptRecordError:
        return None
    return refused


@dataclass(frozen=True, slots=True)
class TargetCompression:
    """A topic's ``compression.type`` other than ``producer``, with its level (None: the
    codec's default)."""

    codec: Compression
    level: int | None = None


def target_compression(compression_type: str, gzip_level: int, lz4_level: int,
                       zstd_level: int) -> TargetCompression | None:
    """``compression.type`` and the KIP-390 levels -> what the leader stores; None for
    ``producer`` (keep the client's codec)."""
    name = compression_type.strip().lower()
    if name == "producer":
        return None
    codec = Compression.NONE if name == "uncompressed" else Compression.parse(name)
    level = {Compression.GZIP: None if gzip_level == -1 else gzip_level,
             Compression.LZ4: lz4_level, Compression.ZSTD: zstd_level}.get(codec)
    return TargetCompression(codec, level)


def recompress(records: bytes | memoryview, target: TargetCompression) -> bytes | memoryview:
    """``records`` with every batch in ``target``'s codec (unchanged, not copied, when every
    batch already is). CorruptRecordError when a batch cannot be decompressed."""
    batches = list(iter_batches(records, validate=False))
    if all(h.compression is target.codec for _, h in batches):
        return records
    out = bytearray()
    for position, header in batches:
        if header.compression is target.codec:
            out += header.batch_bytes()
        else:
            out += _recompress_batch(records, position, header, target)
    return bytes(out)


def _recompress_batch(records: bytes | memoryview, position: int, header: BatchHeader,
                      target: TargetCompression) -> bytes:
    payload = memoryview(records)[position + HEADER_SIZE:position + header.size]
    try:
        plain = decompress(header.compression, payload)
        body = compress(target.codec, plain, target.level)
    except CompressionError as exc:
        raise CorruptRecordError(f"batch {header.base_offset}: {exc}", position) from exc
    attributes = (header.attributes & ~COMPRESSION_MASK) | int(target.codec)
    return reseal_batch(header, attributes, body)
