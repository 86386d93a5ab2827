"""Reading a partition log: whole batches from one segment (read into memory or as a file slice
for ``sendfile``), and ListOffsets' search by timestamp. ``Log.read`` finds the segment and the
first batch; the functions here take it from there."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from floodmark.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from floodmark.records import HEADER_SIZE, NO_TIMESTAMP, BatchHeader, decode_batch
from floodmark.replication import EpochCache
from floodmark.storage.file_slice import FileSlice
from floodmark.storage.segment import Segment, scan_headers

# ListOffsets special timestamps.


@dataclass(frozen=True, slots=True)
class ReadInfo:
    """Whole batches read from one segment.

    ``records`` holds the bytes; ``segment_path``/``position``/``size`` say where they are in the
    segment file. ``next_offset`` is the offset after the last batch returned (==
    ``first_offset`` when nothing was read).

    Lazy reads (``Log.read(..., lazy_min_bytes=n)``) of at least ``n`` bytes leave ``records``
    empty and return ``file_slice`` instead: the range with its own descriptor, to be sent with
    ``os.sendfile`` (or read) later and then closed; see ``floodmark.storage.file_slice``.
    """

    records: bytes | memoryview
    first_offset: int
    next_offset: int
    segment_path: str | None
    position: int
    size: int
    fileno: int | None = None  # the segment's OS file descriptor (RealFileSystem); only valid
    # until the segment is deleted or the log closed: use ``file_slice`` to send later
    file_slice: FileSlice | None = None

    @property
    def is_empty(self) -> bool:
        return self.size == 0


def read_batches(segment: Segment, position: int, first: BatchHeader, max_bytes: int,
                 limit: int, log_end_offset: int) -> ReadInfo:
    """Whole batches from ``first`` (at ``position``), at least that one even if larger than
    ``max_bytes``, none holding an offset at or beyond ``limit``."""
    available = segment.size - position
    if limit < log_end_offset:
        # Reading for a consumer below the LEO: no need to read past the first indexed batch
        # at or beyond the limit.
        bound = segment.index.position_at_or_after(limit)
        if bound is not None and bound > position:
            available = min(available, bound - position)
    want = max(first.size, min(max_bytes, available))
    data = segment.read_at(position, want)
    end = 0
    next_offset = first.base_offset
    view = memoryview(data)
    while end + 61 <= len(data):
        header = BatchHeader(view, end)
        if header.next_offset > limit or end + header.size > len(data):
            break
        if end > 0 and end + header.size > max_bytes:
            break
        end += header.size
        next_offset = header.next_offset
    records = view[:end] if end < len(data) else data
    return ReadInfo(
        records,
        first.base_offset,
        next_offset,
        segment.path,
        position,
        end,
        segment.log.fileno(),
    )


def read_batches_lazy(segment: Segment, position: int, first: BatchHeader, max_bytes: int,
                      limit: int, log_end_offset: int, lazy_min_bytes: int,
                      truncation_generation: Callable[[], int]) -> ReadInfo:
    """The range ``read_batches`` would return, found without reading the records: jump to
    the last offset-index entry inside the byte budget (index entries sit at batch starts,
    so every batch before one is whole), then walk the few headers after it. A range of at
    least ``lazy_min_bytes`` is returned as a file slice, which goes stale when the log's
    ``truncation_generation`` moves."""
    segment_size = segment.size
    byte_bound = min(position + max(first.size, max_bytes), segment_size)
    if limit < log_end_offset:
        bound = segment.index.position_at_or_after(limit)
        if bound is not None and bound > position:
            byte_bound = min(byte_bound, bound)
    end = position + first.size
    next_offset = first.next_offset
    index = segment.index
    i = bisect.bisect_right(index.positions, byte_bound) - 1
    if i >= 0 and index.positions[i] > end:
        entry_offset = index.base_offset + index.relative_offsets[i]
        if entry_offset <= limit:
            end, next_offset = index.positions[i], entry_offset
    while end + HEADER_SIZE <= byte_bound:
        header = BatchHeader(segment.read_at(end, HEADER_SIZE))
        if header.next_offset > limit or end + header.size > byte_bound:
            break
        end += header.size
        next_offset = header.next_offset
    size = end - position
    if size < lazy_min_bytes:
        records = segment.read_at(position, size)
        return ReadInfo(records, first.base_offset, next_offset, segment.path, position,
                        size, segment.log.fileno())
    handle = segment.log.duplicate()
    file_slice = FileSlice(handle, position, size, truncation_generation(),
                           truncation_generation)
    return ReadInfo(b"", first.base_offset, next_offset, segment.path, position, size,
                    handle.fileno(), file_slice)


def _first_record_at(segment: Segment, batch_last_offset: int, timestamp_ms: int,
                     log_start_offset: int) -> int:
    """The offset of the first record stamped ``timestamp_ms``, scanning from the batch the
    segment's max-timestamp bookkeeping names (that keeps the batch's last offset, as the time
    index does). KIP-734 answers the record itself, as Kafka does since KAFKA-16310."""
    _, position = segment.index.lookup(batch_last_offset)
    for pos, header in scan_headers(segment.log, position):
        if header.next_offset <= log_start_offset or header.max_timestamp < timestamp_ms:
            continue
        _, records = decode_batch(segment.read_at(pos, header.size), 0, validate=False)
        for record in records:
            if record.offset >= log_start_offset and record.timestamp_ms == timestamp_ms:
                return record.offset
        if header.last_offset >= batch_last_offset:
            break
    return max(batch_last_offset, log_start_offset)


def offset_for_timestamp(segments: Sequence[Segment], log_start_offset: int,
                         log_end_offset: int, epoch_cache: EpochCache,
                         timestamp_ms: int) -> tuple[int, int, int] | None:
    """(offset, timestamp_ms, leader_epoch) of the first record with timestamp >=
    ``timestamp_ms``; or for -2 (earliest) / -1 (latest) / -3 (max timestamp). None if no
    record qualifies."""
    if timestamp_ms == EARLIEST_TIMESTAMP:
        return (
            log_start_offset,
            NO_TIMESTAMP,
            epoch_cache.epoch_for_offset(log_start_offset),
        )
    if timestamp_ms == LATEST_TIMESTAMP:
        return log_end_offset, NO_TIMESTAMP, epoch_cache.latest_epoch
    if timestamp_ms == MAX_TIMESTAMP:
        best: Segment | None = None
        for segment in segments:
            if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None or best.max_timestamp == NO_TIMESTAMP:
            return None
        offset = _first_record_at(best, best.offset_of_max_timestamp, best.max_timestamp,
                                  log_start_offset)
        return offset, best.max_timestamp, epoch_cache.epoch_for_offset(offset)
    for segment in segments:
        if segment.size == 0 or segment.max_timestamp < timestamp_ms:
            continue
        start = max(segment.time_index.lookup_below(timestamp_ms), log_start_offset)
        _, position = segment.index.lookup(start)
        for pos, header in scan_headers(segment.log, position):
            if (
                header.max_timestamp < timestamp_ms
                or header.next_offset <= log_start_offset
            ):
                continue
            data = segment.read_at(pos, header.size)
            _, records = decode_batch(data, 0, validate=False)
            for record in records:
                if (
                    record.offset >= log_start_offset
                    and record.timestamp_ms >= timestamp_ms
                ):
                    return record.offset, record.timestamp_ms, header.partition_leader_epoch
    return None
