"""Kafka v2 record batches -> Arrow columns, vectorised with numpy.

A Fetch response's ``records`` field is a concatenation of v2 record batches (the last one may be
cut short by the byte budget). ``decode_batches`` decodes all the data batches of one response
together: their record bytes (decompressed where needed) are laid end to end, so the records of
every batch form one sequence; record boundaries are found for runs of equal-size records at once
(a guessed stride checked with numpy, a short Python walk where the stride changes), every other
field is decoded for all records at once with numpy (varints as a window of bytes per record), and
keys and values are gathered into contiguous Arrow binary buffers. The numpy calls are then per
Fetch response, not per Kafka batch (producers often write batches of a few hundred records),
which is what lets the Spark reader approach Spark's own ceiling (see benchmarks/spark_read.py).

Control batches (transaction markers) are skipped; under read_committed, records of aborted
transactions are dropped using the Fetch response's aborted-transactions list, as Kafka consumers do
(``floodmark.records.AbortedTracker``, the one copy of that rule).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from floodmark.errors import CorruptDataError
from floodmark.records import BatchHeader, read_varint

BATCH_HEADER_BYTES = 61
_PAD = b"\x00" * 16

CREATE_TIME = 0
LOG_APPEND_TIME = 1

TS_TYPE = pa.timestamp("us", tz="UTC")
HEADERS_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
BASE_NAMES = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


class CorruptBatchError(CorruptDataError):
    """A record batch that cannot be decoded."""


def iter_batches(buf: memoryview | bytes) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Yield (header, records bytes) for every complete batch in ``buf``; stop at a partial one."""
    mv = memoryview(buf)
    pos = 0
    end = len(mv)
    while end - pos >= 17:
        base_offset, batch_length, _, magic = struct.unpack_from(">qiib", mv, pos)
        size = 12 + batch_length
        if end - pos < size:
            return  # partial batch at the end of a fetch
        if magic != 2:
            raise CorruptBatchError(
                f"record batch at offset {base_offset} has magic {magic}; only v2 is supported")
        if batch_length < BATCH_HEADER_BYTES - 12:
            raise CorruptBatchError(f"record batch at offset {base_offset} is too short")
        hdr = BatchHeader(mv, pos)
        yield hdr, mv[pos + BATCH_HEADER_BYTES : pos + size]
        pos += size


# ---------------------------------------------------------------- decompression
def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """All of Kafka's codecs (gzip, snappy raw and xerial-framed, lz4 frame, zstd)."""
    from floodmark.compression import Compression, CompressionError
    from floodmark.compression import decompress as _decompress

    try:
        return bytes(_decompress(Compression(codec), data))
    except (ValueError, CompressionError) as exc:
        raise CorruptBatchError(f"cannot decompress a batch with codec {codec}: {exc}") from exc


# ---------------------------------------------------------------- varints
def _record_starts_py(buf: bytes, pos: int, count: int, starts: list[int], limit: int) -> int:
    """Walk ``count`` records from ``pos`` in Python; append body starts; return the end."""
    append = starts.append
    for _ in range(count):
        if pos >= limit:
            raise CorruptBatchError("record batch ends before its records count")
        b = buf[pos]
        pos += 1
        if b < 0x80:
            ln = b
        else:
            ln = b & 0x7F
            shift = 7
            while True:
                b = buf[pos]
                pos += 1
                ln |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
        append(pos)
        pos += (ln >> 1) ^ -(ln & 1)
    return pos


_GUESS_MIN = 256
_GUESS_MAX = 1 << 15


def _record_starts(buf: bytes, arr: np.ndarray, count: int, limit: int) -> np.ndarray:
    """Positions of each record's body (after its length varint), for ``count`` records laid
    end to end in ``buf[:limit]``.

    Records of one batch very often all have the same encoded size. So guess that the next
    records repeat the stride of the record at hand, check a window of guesses at once with
    numpy (the length varint found at each guessed position must give the same stride), keep the
    verified prefix (each verified record proves where the next one starts), and walk a few
    records in Python wherever the stride changes. The window doubles while whole windows verify
    and shrinks back where the stride changes, so the work stays linear in the records however
    many runs there are.
    """
    out: list[np.ndarray] = []
    done = 0
    pos = 0
    window = _GUESS_MIN
    while done < count:
        rest = count - done
        if rest >= 16:
            length, after = read_varint(buf, pos)
            size = after - pos
            stride = size + length
            if stride > 0 and size <= 5:
                # a record of the same stride has the very same length-varint bytes
                m = min(rest, window)
                guess = pos + stride * np.arange(m, dtype=np.int64)
                ok = guess + stride <= limit
                at = np.minimum(guess, limit)
                for j in range(size):
                    ok &= arr[at + j] == arr[pos + j]
                bad = np.flatnonzero(~ok)
                good = m if len(bad) == 0 else int(bad[0])
                if good >= 8:
                    out.append(guess[:good] + size)
                    done += good
                    pos += stride * good
                    window = min(window * 2, _GUESS_MAX) if good == m else _GUESS_MIN
                    continue
                window = _GUESS_MIN
        step = min(rest, 64)
        starts: list[int] = []
        pos = _record_starts_py(buf, pos, step, starts, limit)
        out.append(np.asarray(starts, dtype=np.int64))
        done += step
    if pos != limit:
        raise CorruptBatchError(f"records end at byte {pos} of {limit}: a record length is wrong")
    return np.concatenate(out) if len(out) != 1 else out[0]


def _varints(
    arr: np.ndarray, pos: np.ndarray, long: bool, strict: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at ``pos`` (one per record) -> (values int64, sizes int64).

    Byte by byte for all records at once; the loop runs as many times as the longest varint has
    bytes (1-3 in practice), up to 5 (int32) or 10 (int64).
    """
    b = arr[pos]
    raw = (b & 0x7F).astype(np.uint64)
    cont = b >= 0x80
    size = np.ones(len(pos), dtype=np.int64)
    max_bytes = 10 if long else 5
    k = 1
    while k < max_bytes and cont.any():
        b = arr[pos + k]
        raw |= np.where(cont, (b & 0x7F).astype(np.uint64) << np.uint64(7 * k), np.uint64(0))
        size += cont
        cont &= b >= 0x80
        k += 1
    if cont.any():
        if strict:
            raise CorruptBatchError("varint longer than allowed")
        size[cont] = max_bytes + 1  # a size no valid record has: fails any stride check
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, size


def _gather_equal_runs(arr: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray | None:
    """Equal-length fields whose starts advance by a constant step over a few runs (records of
    one size, where the offset-delta varint grows a byte at 64 and 8192): one strided copy per
    run. None when there are too many runs to be worth it."""
    steps = np.diff(starts)
    cuts = np.flatnonzero(steps[1:] != steps[:-1]) + 1  # a run ends where the step changes
    if len(cuts) > max(16, len(starts) // 32):
        return None
    out = np.empty((len(starts), length), dtype=np.uint8)
    bounds = [0, *(cuts + 1).tolist(), len(starts)]
    for lo, hi in itertools.pairwise(bounds):
        if hi <= lo:
            continue
        step = int(steps[lo]) if hi - lo > 1 else length
        if step < length:
            return None
        # one copy, from the strided view straight into the rows of ``out``
        out[lo:hi] = np.lib.stride_tricks.as_strided(
            arr[int(starts[lo]):], shape=(hi - lo, length), strides=(step, 1))
    return out.reshape(-1)


def _gather_binary(arr: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Binary array of arr[starts[i]: starts[i]+lengths[i]]; length -1 means null."""
    n = len(starts)
    nulls = lengths < 0
    lens = np.where(nulls, 0, lengths)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if total and n > 1 and not nulls.any() and lens[0] == lens[-1] and (lens == lens[0]).all():
        data = _gather_equal_runs(arr, starts, int(lens[0]))
        if data is not None:
            return pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if total:
        idx = np.repeat(starts - offsets[:-1], lens) + np.arange(total, dtype=np.int64)
        data = arr[idx]
    else:
        data = np.zeros(0, dtype=np.uint8)
    validity = None
    if nulls.any():
        validity = pa.array(~nulls).buffers()[1]
    return pa.Array.from_buffers(
        pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


def _const_string(value: str, n: int) -> pa.Array:
    b = value.encode()
    offsets = np.arange(0, (n + 1) * len(b), len(b), dtype=np.int32)[: n + 1]
    if len(b) == 0:
        offsets = np.zeros(n + 1, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b * n)])


def _headers_column(buf: bytes, hdr_pos: np.ndarray, counts: np.ndarray) -> pa.Array:
    n = len(counts)
    if not counts.any():
        offsets = pa.py_buffer(np.zeros(n + 1, dtype=np.int32))
        empty = pa.array([], type=HEADERS_TYPE.value_type)
        return pa.ListArray.from_buffers(HEADERS_TYPE, n, [None, offsets], children=[empty])
    rows: list[list[dict[str, object]]] = []
    for p, c in zip(hdr_pos.tolist(), counts.tolist(), strict=True):
        items: list[dict[str, object]] = []
        for _ in range(c):
            kl, p = read_varint(buf, p)
            k = buf[p : p + kl].decode("utf-8", "replace")
            p += kl
            vl, p = read_varint(buf, p)
            v = None if vl < 0 else buf[p : p + vl]
            p += max(vl, 0)
            items.append({"key": k, "value": v})
        rows.append(items)
    return pa.array(rows, type=HEADERS_TYPE)


def schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TS_TYPE),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


def decode_batch(
    hdr: BatchHeader,
    records: memoryview,
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    """Decode one data batch into Arrow, keeping only offsets in [start, end)."""
    return decode_batches([(hdr, records)], topic=topic, partition=partition, start=start,
                          end=end, include_headers=include_headers)


def decode_batches(
    batches: Sequence[tuple[BatchHeader, memoryview]],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    """Decode data batches (no control batches) into one Arrow batch, keeping only offsets in
    [start, end); None when no record is kept."""
    batches = [(h, r) for h, r in batches if h.records_count > 0]
    if not batches:
        return None
    bodies: list[bytes | memoryview] = [
        decompress(h.compression, r) if h.compression else r for h, r in batches]
    limit = sum(len(b) for b in bodies)
    body = b"".join([*bodies, _PAD])  # one copy of the records, with room for varint windows
    arr = np.frombuffer(body, dtype=np.uint8)
    counts = np.array([h.records_count for h, _ in batches], dtype=np.int64)
    n = int(counts.sum())
    p = _record_starts(body, arr, n, limit)
    ends = np.cumsum([len(b) for b in bodies])
    firsts = np.cumsum(counts) - counts
    # each batch's first record starts right after the previous batch's bytes
    gap = p[firsts[1:]] - ends[:-1]
    if ((gap < 1) | (gap > 5)).any():
        raise CorruptBatchError("a batch's records count does not match its bytes")
    ts_delta, s1 = _varints(arr, p + 1, long=True)
    q = p + 1 + s1
    off_delta, s2 = _varints(arr, q, long=False)
    q = q + s2
    key_len, s3 = _varints(arr, q, long=False)
    key_start = q + s3
    q = key_start + np.maximum(key_len, 0)
    val_len, s4 = _varints(arr, q, long=False)
    val_start = q + s4
    q = val_start + np.maximum(val_len, 0)

    if len(batches) == 1:
        h = batches[0][0]
        offsets = h.base_offset + off_delta
        if h.timestamp_type == LOG_APPEND_TIME:
            ts_ms = np.full(n, h.max_timestamp, dtype=np.int64)
        else:
            ts_ms = ts_delta + h.base_timestamp
        ts_types = np.full(n, h.timestamp_type, dtype=np.int32)
    else:
        which = np.repeat(np.arange(len(batches)), counts)
        offsets = np.array([h.base_offset for h, _ in batches], dtype=np.int64)[which] + off_delta
        log_append = np.array([h.timestamp_type == LOG_APPEND_TIME for h, _ in batches])
        base_ts = np.array([h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME
                            else h.base_timestamp for h, _ in batches], dtype=np.int64)[which]
        ts_ms = np.where(log_append[which], base_ts, base_ts + ts_delta)
        ts_types = np.array([h.timestamp_type for h, _ in batches], dtype=np.int32)[which]

    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        if not keep.any():
            return None
        idx = np.nonzero(keep)[0]
        offsets, ts_ms, ts_types, key_len, key_start = (
            offsets[idx], ts_ms[idx], ts_types[idx], key_len[idx], key_start[idx])
        val_len, val_start, q = val_len[idx], val_start[idx], q[idx]
    m = len(offsets)
    ts_us = ts_ms * 1000
    cols = [
        _gather_binary(arr, key_start, key_len),
        _gather_binary(arr, val_start, val_len),
        _const_string(topic, m),
        pa.array(np.full(m, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.Array.from_buffers(TS_TYPE, m, [None, pa.py_buffer(ts_us)]),
        pa.array(ts_types),
    ]
    names = list(BASE_NAMES)
    if include_headers:
        counts_h, s5 = _varints(arr, q, long=False)
        cols.append(_headers_column(body, q + s5, counts_h))
        names.append("headers")
    return pa.RecordBatch.from_arrays(cols, names=names)
