"""Kafka v2 record batches -> Arrow columns, vectorised with numpy.

A Fetch response's ``records`` field is a concatenation of v2 record batches (the last one may be
cut short by the byte budget). ``visible_rows`` turns the batches of one answer into the rows a
consumer is shown, in one Arrow batch: CRC-32C checked (Kafka's ``check.crcs``), control batches
skipped, and under read_committed the records of aborted transactions dropped using the answer's
aborted-transactions list, as Kafka consumers do (``floodmark.records.AbortedTracker``, the one
copy of that rule).

``decode_batches`` decodes all the data batches of an answer together, with numpy calls per
answer, not per Kafka batch (producers often write batches of a few hundred records): their
record bytes (decompressed where needed) are laid end to end, so the records of every batch form
one sequence; record boundaries are found a run of equal-size records at a time (a guessed stride
checked on strided views, a short Python walk where the stride changes); every other field is
decoded for all records at once (varints with ``np.take`` gathers, one per byte); keys and values
become Arrow binary columns with one strided copy per run of equal-size fields, or Arrow's
``take`` of the fields out of the records seen as (field, gap) pairs. No Python object per
record, which is what lets the Spark reader approach Spark's own ceiling (see
benchmarks/spark_read.py and benchmarks/spark_read_path.py). Reading uncompressed records where
they lie in the answer (no copy) was tried and measured no cheaper.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Iterator, Sequence
from types import ModuleType

import numpy as np
import pyarrow as pa

from floodmark.errors import CorruptDataError
from floodmark.records import (
    LOG_APPEND_TIME,
    AbortedTracker,
    BatchHeader,
    CorruptRecordError,
    read_uvarint,
    read_varint,
)

_COMPILED_ABI = 1


def _load_compiled() -> ModuleType | None:
    """The compiled decoder, when it was built from this tree's ``_recdecode.c`` (setup.py
    builds it; optional: without it numpy decodes; an older build answers another ABI_VERSION
    and is left unused)."""
    try:  # by name: an optional extension module, not a dependency of the package's graph
        _recdecode = importlib.import_module("floodmark.spark._recdecode")
    except ImportError:
        return None
    return _recdecode if getattr(_recdecode, "ABI_VERSION", None) == _COMPILED_ABI else None


_compiled = _load_compiled()

BATCH_HEADER_BYTES = 61
_PAD = b"\x00" * 16
MAX_RECORDS_BYTES = (1 << 31) - 1
"""What one Fetch response's records may decompress to: Arrow binary columns index them with
int32 offsets."""

CREATE_TIME = 0

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


# ---------------------------------------------------------------- record boundaries
def _record_starts_py(buf: bytes, pos: int, count: int, starts: list[int], ends: list[int],
                      limit: int) -> int:
    """Walk ``count`` records from ``pos`` in Python; append each body's start and end; return
    the end of the last."""
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
                if pos >= limit or shift > 28:
                    raise CorruptBatchError("a record length varint is longer than 5 bytes")
                b = buf[pos]
                pos += 1
                ln |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
        ln = (ln >> 1) ^ -(ln & 1)
        if ln < 0:
            raise CorruptBatchError(f"a record has the negative length {ln}")
        starts.append(pos)
        pos += ln
        ends.append(pos)
    return pos


_GUESS_MIN = 256
_GUESS_MAX = 1 << 15


def _record_starts(buf: bytes, count: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each record's body (after its length varint), for ``count`` records laid
    end to end in ``buf[:limit]``.

    Records of one batch very often all have the same encoded size. So guess that the next
    records repeat the stride of the record at hand, check a window of guesses at once with
    numpy (the length varint found at each guessed position must have the very same bytes: a
    strided view, no index arrays), keep the verified prefix (each verified record proves where
    the next one starts), and walk a few records in Python wherever the stride changes. The
    window doubles while whole windows verify and shrinks back where the stride changes, so the
    work stays linear in the records however many runs there are.
    """
    starts = np.empty(count, dtype=np.int64)
    ends = np.empty(count, dtype=np.int64)
    done = 0
    pos = 0
    window = _GUESS_MIN
    while done < count:
        rest = count - done
        if rest >= 16:
            length, after = read_varint(buf, pos)
            size = after - pos
            stride = size + length
            # only guesses whose whole record lies inside the records are made
            m = min(rest, window, (limit - pos) // stride) if stride > 0 else 0
            if m >= 8 and size <= 5:
                ok = np.ndarray((m,), np.uint8, buf, pos, (stride,)) == buf[pos]
                for j in range(1, size):
                    ok &= np.ndarray((m,), np.uint8, buf, pos + j, (stride,)) == buf[pos + j]
                good = m if ok.all() else int(ok.argmin())  # argmin: the first False
                if good >= 8:
                    first = pos + size
                    starts[done : done + good] = np.arange(first, first + stride * good, stride)
                    ends[done : done + good] = np.arange(pos + stride, pos + stride * (good + 1),
                                                         stride)
                    done += good
                    pos += stride * good
                    window = min(window * 2, _GUESS_MAX) if good == m else _GUESS_MIN
                    continue
                window = _GUESS_MIN
        step = min(rest, 64)
        s: list[int] = []
        e: list[int] = []
        pos = _record_starts_py(buf, pos, step, s, e, limit)
        starts[done : done + step] = s
        ends[done : done + step] = e
        done += step
    if pos != limit:
        raise CorruptBatchError(f"records end at byte {pos} of {limit}: a record length is wrong")
    return starts, ends


# ---------------------------------------------------------------- varints
def _varints(arr: np.ndarray, pos: np.ndarray, long: bool) -> tuple[np.ndarray, np.ndarray | int]:
    """Zigzag varints at ``pos`` (one per record) -> (values int64, sizes: an integer array, or
    the int 1 when every varint is one byte).

    For all records at once, with ``np.take`` (a gather, several times cheaper than fancy
    indexing). Deltas and lengths almost always fit in one or two bytes, which take one or two
    gathers and a few operations; longer varints go byte by byte, up to 5 bytes (int32) or 10
    (int64). ``arr`` is padded and ``take`` clips, so a corrupt length reads garbage, never
    past the buffer; the caller checks every field against its record's end."""
    b0 = np.take(arr, pos, mode="clip")
    more = b0 >> 7  # 1 where a second byte follows
    if not more.any():
        v = b0.astype(np.int64)
        return (v >> 1) ^ -(v & 1), 1
    b1 = np.take(arr, pos + 1, mode="clip")
    more2 = (b1 >> 7) & more  # 1 where a third byte follows
    raw = (b0 & 0x7F).astype(np.int64) | (b1 & 0x7F * more).astype(np.int64) << 7
    if not more2.any():
        return (raw >> 1) ^ -(raw & 1), more + 1
    b2 = np.take(arr, pos + 2, mode="clip")
    if not (b2 & (more2 << 7)).any():  # no varint has a fourth byte
        raw |= (b2 * more2).astype(np.int64) << 14
        return (raw >> 1) ^ -(raw & 1), more + more2 + 1
    raw_u = (b0 & 0x7F).astype(np.uint64)
    cont = more.astype(bool)
    size = np.ones(len(pos), dtype=np.int64)
    max_bytes = 10 if long else 5
    k = 1
    while cont.any():
        if k == max_bytes:
            raise CorruptBatchError("varint longer than allowed")
        b = np.take(arr, pos + k, mode="clip")
        raw_u |= ((b & 0x7F) * cont).astype(np.uint64) << np.uint64(7 * k)
        size += cont
        cont &= b >= 0x80
        k += 1
    values = (raw_u >> np.uint64(1)).view(np.int64) ^ -(raw_u & np.uint64(1)).view(np.int64)
    return values, size


# ---------------------------------------------------------------- keys and values
_MAX_RUNS_DIVISOR = 32


def _equal_runs(body: bytes, starts: np.ndarray, length: int) -> np.ndarray | None:
    """Equal-length fields whose starts advance by a constant step over a few runs (records of
    one size, where the offset-delta varint grows a byte at 64 and 8192): one strided copy per
    run. None when there are too many runs to be worth it."""
    n = len(starts)
    steps = starts[1:] - starts[:-1]
    cuts = np.flatnonzero(steps[1:] != steps[:-1]) + 1  # a run ends where the step changes
    if len(cuts) > max(16, n // _MAX_RUNS_DIVISOR):
        return None
    out = np.empty((n, length), dtype=np.uint8)
    lo = 0
    for hi in [*(cuts + 1).tolist(), n]:
        if hi <= lo:
            continue
        step = int(steps[lo]) if hi - lo > 1 else length
        if step < length:
            return None
        # one copy, from the strided view straight into the rows of ``out``
        out[lo:hi] = np.ndarray((hi - lo, length), np.uint8, body, int(starts[lo]), (step, 1))
        lo = hi
    return out.reshape(-1)


def _binary_column(body: bytes, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Binary array of body[starts[i]: starts[i]+lengths[i]]; length -1 means null. The fields
    must be in order and apart (checked by the caller against the records' ends)."""
    n = len(starts)
    nulls = lengths < 0
    any_null = bool(nulls.any())
    if not any_null and n > 1 and lengths[0] == lengths[-1] and (lengths == lengths[0]).all():
        length = int(lengths[0])
        data = _equal_runs(body, starts, length) if length else np.empty(0, np.uint8)
        if data is not None:
            offsets = np.arange(0, (n + 1) * length, length, dtype=np.int32) if length \
                else np.zeros(n + 1, dtype=np.int32)
            return pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    # Any lengths: the body seen as 2n binary values, each field and the gap after it (zero
    # copy), and Arrow's take of the fields (one memcpy each, in C++).
    ends = starts + lengths if not any_null else starts + np.where(nulls, 0, lengths)
    bounds = np.empty(2 * n + 1, dtype=np.int32)
    bounds[0 : 2 * n : 2] = starts
    bounds[1 : 2 * n : 2] = ends
    bounds[2 * n] = bounds[2 * n - 1]
    both = pa.Array.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(bounds),
                                                      pa.py_buffer(body)])
    fields = both.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int32)))
    if not any_null:
        return fields
    validity = pa.array(~nulls).buffers()[1]
    return pa.Array.from_buffers(pa.binary(), n, [validity, *fields.buffers()[1:]])


def _const_string(value: str, n: int) -> pa.Array:
    b = value.encode()
    offsets = np.arange(0, (n + 1) * len(b), len(b), dtype=np.int32)[: n + 1]
    if len(b) == 0:
        offsets = np.zeros(n + 1, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b * n)])


def _header_varint(buf: bytes, p: int, end: int) -> tuple[int, int]:
    """A header's zigzag varint length at ``p``, inside its record (which ends at ``end``): an
    over-long or cut varint is the same refusal as the compiled decoder's."""
    try:
        raw, p = read_uvarint(buf, p, end=end)
    except CorruptRecordError as exc:
        raise CorruptBatchError(f"a record header's length: {exc}") from None
    return (raw >> 1) ^ -(raw & 1), p


def _headers_column(buf: bytes, hdr_pos: np.ndarray, counts: np.ndarray,
                    ends: np.ndarray) -> pa.Array:
    """The headers of each record (a count at ``hdr_pos``, then that many key/value pairs),
    which must end where the record ends."""
    n = len(counts)
    if (counts < 0).any():
        raise CorruptBatchError("a record has a negative headers count")
    if not counts.any():
        if (hdr_pos != ends).any():
            raise CorruptBatchError("a record's fields end before the record does")
        offsets = pa.py_buffer(np.zeros(n + 1, dtype=np.int32))
        empty = pa.array([], type=HEADERS_TYPE.value_type)
        return pa.ListArray.from_buffers(HEADERS_TYPE, n, [None, offsets], children=[empty])
    rows: list[list[dict[str, object]]] = []
    for p, c, e in zip(hdr_pos.tolist(), counts.tolist(), ends.tolist(), strict=True):
        items: list[dict[str, object]] = []
        for _ in range(c):
            kl, p = _header_varint(buf, p, e)
            if kl < 0 or p + kl > e:
                raise CorruptBatchError("a record header's key runs past the record's end")
            k = buf[p : p + kl].decode("utf-8", "replace")
            p += kl
            vl, p = _header_varint(buf, p, e)
            if p + max(vl, 0) > e:
                raise CorruptBatchError("a record header's value runs past the record's end")
            v = None if vl < 0 else buf[p : p + vl]
            p += max(vl, 0)
            items.append({"key": k, "value": v})
        if p != e:
            raise CorruptBatchError("a record's headers do not end where the record does")
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
    [start, end); None when no record is kept. With the compiled decoder where it was built,
    else with numpy (the same columns, the same refusals: tests/spark/test_decode.py)."""
    batches = [(h, r) for h, r in batches if h.records_count > 0]
    if not batches:
        return None
    bodies: list[bytes | memoryview] = [
        decompress(h.compression, r) if h.compression else r for h, r in batches]
    sizes = [len(b) for b in bodies]
    limit = sum(sizes)
    if limit > MAX_RECORDS_BYTES:
        raise CorruptBatchError(f"the records of one Fetch response take {limit} bytes "
                                f"decompressed, more than {MAX_RECORDS_BYTES}")
    if _compiled is not None:
        rb = _decode_compiled(_compiled, batches, bodies, topic=topic, partition=partition,
                              start=start, end=end, include_headers=include_headers)
        if rb is not _NOT_UTF8:
            return rb
    try:
        return _decode_numpy(batches, bodies, sizes, topic=topic, partition=partition,
                             start=start, end=end, include_headers=include_headers)
    except CorruptRecordError as exc:  # a varint the record codec refused: the same refusal
        raise CorruptBatchError(str(exc)) from None


_NOT_UTF8 = pa.record_batch([pa.array([0])], names=["not utf-8"])
"""The compiled decoder's answer for header keys that are not UTF-8: the numpy decoder then
replaces their bad bytes, as Python's ``decode("utf-8", "replace")`` does."""


def _decode_compiled(
    compiled: ModuleType,
    batches: Sequence[tuple[BatchHeader, memoryview]],
    bodies: Sequence[bytes | memoryview],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    """``decode_batches`` with ``_recdecode.c``: one pass over the records in C writes the
    columns' buffers, which become Arrow arrays here without a copy."""
    args = [(body, h.records_count, h.base_offset,
             h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else h.base_timestamp,
             int(h.timestamp_type)) for (h, _), body in zip(batches, bodies, strict=True)]
    try:
        (m, offsets, ts_us, ts_types, k_valid, k_offsets, k_data, v_valid, v_offsets, v_data,
         headers) = compiled.decode(args, start, end, include_headers)
    except ValueError as exc:
        raise CorruptBatchError(str(exc)) from None
    if m == 0:
        return None
    buf = pa.py_buffer
    cols = [
        pa.Array.from_buffers(pa.binary(), m, [k_valid and buf(k_valid), buf(k_offsets),
                                               buf(k_data)]),
        pa.Array.from_buffers(pa.binary(), m, [v_valid and buf(v_valid), buf(v_offsets),
                                               buf(v_data)]),
        _const_string(topic, m),
        pa.array(np.full(m, partition, dtype=np.int32)),
        pa.Array.from_buffers(pa.int64(), m, [None, buf(offsets)]),
        pa.Array.from_buffers(TS_TYPE, m, [None, buf(ts_us)]),
        pa.Array.from_buffers(pa.int32(), m, [None, buf(ts_types)]),
    ]
    names = list(BASE_NAMES)
    if include_headers:
        count, lists, hk_offsets, hk_data, hv_valid, hv_offsets, hv_data = headers
        keys = pa.Array.from_buffers(pa.string(), count, [None, buf(hk_offsets), buf(hk_data)])
        if count:
            try:
                keys.validate(full=True)
            except pa.ArrowInvalid:
                return _NOT_UTF8
        values = pa.Array.from_buffers(pa.binary(), count, [hv_valid and buf(hv_valid),
                                                            buf(hv_offsets), buf(hv_data)])
        pairs = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
        cols.append(pa.ListArray.from_buffers(HEADERS_TYPE, m, [None, buf(lists)],
                                              children=[pairs]))
        names.append("headers")
    return pa.RecordBatch.from_arrays(cols, names=names)


def _decode_numpy(
    batches: Sequence[tuple[BatchHeader, memoryview]],
    bodies: Sequence[bytes | memoryview],
    sizes: Sequence[int],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    """``decode_batches`` with numpy calls per answer (the decoder where the compiled one was
    not built)."""
    limit = sum(sizes)
    body = b"".join([*bodies, _PAD])  # one copy of the records, with room for varint windows
    arr = np.frombuffer(body, dtype=np.uint8)
    counts = np.array([h.records_count for h, _ in batches], dtype=np.int64)
    n = int(counts.sum())
    p, rec_end = _record_starts(body, n, limit)
    if len(batches) > 1:
        # each batch's last record ends where the batch's bytes end
        lasts = np.cumsum(counts)[:-1] - 1
        if (rec_end[lasts] != np.cumsum(sizes)[:-1]).any():
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
    # every field inside its record (so the columns below read only what they should)
    if not ((q <= rec_end).all() and (key_len >= -1).all() and (val_len >= -1).all()):
        raise CorruptBatchError("a record's key or value runs past the record's end")

    h0 = batches[0][0]
    if len(batches) == 1:
        offsets = off_delta + h0.base_offset
    else:
        offsets = off_delta + np.repeat(
            np.array([h.base_offset for h, _ in batches], dtype=np.int64), counts)
    types = [h.timestamp_type for h, _ in batches]
    if all(t == CREATE_TIME for t in types):
        ts_ms = ts_delta + (h0.base_timestamp if len(batches) == 1 else np.repeat(
            np.array([h.base_timestamp for h, _ in batches], dtype=np.int64), counts))
    else:
        log_append = np.repeat(np.array([t == LOG_APPEND_TIME for t in types]), counts)
        base_ts = np.repeat(np.array([h.max_timestamp if t == LOG_APPEND_TIME
                                      else h.base_timestamp for (h, _), t in zip(
                                          batches, types, strict=True)], dtype=np.int64), counts)
        ts_ms = np.where(log_append, base_ts, base_ts + ts_delta)
    if all(t == types[0] for t in types):
        ts_types = np.full(n, types[0], dtype=np.int32)
    else:
        ts_types = np.repeat(np.array(types, dtype=np.int32), counts)

    if not (offsets.min() >= start and offsets.max() < end):
        keep = (offsets >= start) & (offsets < end)
        if not keep.any():
            return None
        idx = np.flatnonzero(keep)
        offsets, ts_ms, ts_types, key_len, key_start = (
            offsets[idx], ts_ms[idx], ts_types[idx], key_len[idx], key_start[idx])
        val_len, val_start, q, rec_end = val_len[idx], val_start[idx], q[idx], rec_end[idx]
    m = len(offsets)
    cols = [
        _binary_column(body, key_start, key_len),
        _binary_column(body, val_start, val_len),
        _const_string(topic, m),
        pa.array(np.full(m, partition, dtype=np.int32)),
        pa.array(offsets),
        pa.Array.from_buffers(TS_TYPE, m, [None, pa.py_buffer(ts_ms * 1000)]),
        pa.array(ts_types),
    ]
    names = list(BASE_NAMES)
    if include_headers:
        counts_h, s5 = _varints(arr, q, long=False)
        cols.append(_headers_column(body, q + s5, counts_h, rec_end))
        names.append("headers")
    return pa.RecordBatch.from_arrays(cols, names=names)


# ---------------------------------------------------------------- one Fetch answer
def batches_in_range(
    records: memoryview | bytes, start: int, end: int
) -> tuple[list[tuple[BatchHeader, memoryview]], int]:
    """The complete batches of a Fetch answer's records below ``end`` (from the batch headers
    only; batches wholly before ``start`` too, which read_committed's tracker must see), and the
    offset after the last, where the next Fetch starts (``start`` when none reaches past it)."""
    selected = []
    next_offset = start
    for hdr, body in iter_batches(records):
        if hdr.base_offset >= end:
            break
        next_offset = max(next_offset, min(hdr.next_offset, end))
        selected.append((hdr, body))
    return selected, next_offset


def visible_rows(
    batches: Sequence[tuple[BatchHeader, memoryview]],
    aborted: Sequence[tuple[int, int]],
    *,
    read_committed: bool,
    check_crcs: bool,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    """The rows a Kafka consumer is shown of the ``batches`` of one Fetch answer (in offset
    order), offsets in [start, end), in one Arrow batch (None when there are none): with
    ``check_crcs`` (Kafka's ``check.crcs``) every batch is checked against its CRC-32C first;
    control batches are never shown; under read_committed the batches of aborted transactions
    are dropped by the answer's (producer id, first offset) list, with
    ``floodmark.records.AbortedTracker``, the one copy of that rule."""
    if check_crcs:
        for hdr, _ in batches:
            if not hdr.verify_crc():
                raise CorruptBatchError(
                    f"record batch at offset {hdr.base_offset} of {topic}-{partition} fails its "
                    f"CRC-32C (stored {hdr.crc:#010x}): corrupted on the wire or on disk "
                    "(kafka.check.crcs=true)")
    tracker = AbortedTracker.from_response(aborted) if read_committed else None
    data = []
    for hdr, body in batches:
        # the tracker sees every batch in order, those before ``start`` too: an abort marker
        # there ends an aborted transaction that the answer's list still names
        try:
            hidden = tracker.skip(hdr) if tracker is not None else hdr.is_control
        except CorruptRecordError as exc:  # a control batch whose marker cannot be read
            raise CorruptBatchError(f"control batch at offset {hdr.base_offset} of "
                                    f"{topic}-{partition}: {exc}") from None
        if not hidden and hdr.next_offset > start:
            data.append((hdr, body))
    # every data batch of the answer in one Arrow batch: one set of numpy calls per answer
    # (fetch.max.bytes bounds its size), not per Kafka batch
    return decode_batches(data, topic=topic, partition=partition, start=start, end=end,
                          include_headers=include_headers)
