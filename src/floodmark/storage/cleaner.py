"""Log compaction: Kafka's log cleaner for logs with ``cleanup.policy`` containing ``compact``.

The log is seen as Kafka sees it:

    log start ... [clean section] first dirty offset [dirty section] first uncleanable ... LEO

- The **first uncleanable offset** is ``min(base of the active segment, high watermark, base of
  the first segment whose largest timestamp is younger than min.compaction.lag.ms)``. Only closed
  segments lying wholly below it are cleaned: the active segment never is, nor anything a
  follower has not yet got (replicas clean independently, and only below their own HW, so they
  agree on what survives). The broker passes the partition's last stable offset as the "high
  watermark" (the HW itself without transactions): a record of a transaction still open may yet
  be aborted, so it must not supersede anything yet.
- The **first dirty offset** is where the previous cleaning stopped; it is kept per partition in
  the data directory's ``cleaner-offset-checkpoint`` (Kafka's file and format).
- The **dirty ratio** is ``dirty bytes / (clean bytes + dirty bytes)`` over the cleanable
  segments. A log is cleaned when it is at least ``min.cleanable.dirty.ratio``, when its oldest
  dirty data is older than ``max.compaction.lag.ms``, or when a tombstone's delete horizon has
  passed.

Cleaning builds a map key -> last offset over the dirty section, then rewrites every cleanable
segment (clean and dirty) keeping a record only if no later record with its key exists in the
map. Records of aborted transactions (the segments' ``.txnindex``, walked with the consumers'
rule ``records.AbortedTracker``) never enter the map: a committed record is never cleaned away
because of an aborted one. They and the markers are kept, as the index that hides them is. Batches keep their base offset and lastOffsetDelta, records keep their offsets, so no
offset ever moves and the log end offset stays where it is. A batch left without records is
dropped, unless it is the last batch of its producer id in the log (kept empty, as Kafka keeps
it, so that idempotent-producer state survives a restart). Records without a key are dropped
(the produce path refuses them for compacted topics).

Tombstones (a null value) follow KIP-534: the first cleaning that sees one stamps its batch with
a delete horizon (``now + delete.retention.ms``, in baseTimestamp with the delete-horizon
attribute); it is kept until a cleaning after that horizon removes it. A consumer that reads the
topic from the start within delete.retention.ms of the cleaning therefore sees the delete.

Segments are swapped crash-safely (``Log.write_cleaned_file`` then
``Log.install_cleaned_segments``: ``.cleaned``, fsync, ``.swap``, rename) and their indexes
rebuilt. Like Kafka, consecutive segments whose sizes add up to at most ``segment.bytes`` are
merged into one while being cleaned (their offsets must fit one segment's relative offsets). The checkpoint is written after the swaps are durable. The work that reads and
rewrites data (``CleaningJob.run``) touches no state of the log and runs on a worker thread in
the broker; only the plan and the swaps run on the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from floodmark.records import (
    DELETE_HORIZON_MASK,
    NO_TIMESTAMP,
    AbortedTracker,
    BatchHeader,
    Record,
    decode_batch,
    iter_batches,
    rebuild_batch,
)
from floodmark.replication import AbortedTxn
from floodmark.storage.checkpoints import CorruptCheckpointError, OffsetCheckpointFile
from floodmark.storage.fs import FileHandle, FileSystem
from floodmark.storage.log import Log
from floodmark.storage.segment import MAX_RELATIVE_OFFSET, Segment, scan_headers

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024  # Kafka's log.cleaner.dedupe.buffer.size


@dataclass(frozen=True, slots=True)
class CleanablePlan:
    """Which closed segments can be cleaned now, and how dirty they are."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    segments: tuple[Segment, ...]  # closed, wholly below the first uncleanable offset
    dirty_from: int  # index into ``segments`` of the first dirty one
    clean_bytes: int
    dirty_bytes: int
    end_offset: int  # base offset of the segment after the last cleanable one

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def dirty_segments(self) -> tuple[Segment, ...]:
        return self.segments[self.dirty_from :]


@dataclass(slots=True)
class CleanResult:
    """What one cleaning did."""

    first_dirty_offset: int  # the new one: where the next cleaning's dirty section starts
    reason: str
    segments_rewritten: int = 0
    segments_deleted: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_before: int = 0
    records_after: int = 0
    tombstones_removed: int = 0
    keyless_removed: int = 0
    next_delete_horizon_ms: int | None = None  # earliest horizon of a tombstone still kept
    run_seconds: float = 0.0  # reading and rewriting (the part off the event loop)
    map_full: bool = False  # the offset map could not take the whole dirty section

    @property
    def changed(self) -> bool:
        return bool(self.segments_rewritten or self.segments_deleted)

    def describe(self) -> str:
        return (
            f"{self.reason}: {self.records_before} -> {self.records_after} records, "
            f"{self.bytes_before} -> {self.bytes_after} bytes, {self.segments_rewritten} "
            f"segment(s) rewritten, {self.segments_deleted} deleted, {self.tombstones_removed} "
            f"tombstone(s) removed in {self.run_seconds:.2f} s; first dirty offset now "
            f"{self.first_dirty_offset}{' (offset map full)' if self.map_full else ''}"
        )


def first_uncleanable_offset(log: Log, high_watermark: int, now_ms: int) -> int:
    """min(active segment base, HW, first segment younger than min.compaction.lag.ms)."""
    limit = min(log.active_segment.base_offset, high_watermark)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for segment in log.segments[:-1]:
            if segment.base_offset >= limit:
                break
            if segment.max_timestamp != NO_TIMESTAMP and now_ms - segment.max_timestamp < lag:
                return segment.base_offset
    return limit


def plan_cleaning(log: Log, first_dirty_offset: int, high_watermark: int,
                  now_ms: int) -> CleanablePlan:
    """The cleanable segments of ``log`` given the checkpointed first dirty offset (clamped to
    the log start when it is outside the log, e.g. after a truncation)."""
    uncleanable = first_uncleanable_offset(log, high_watermark, now_ms)
    if not log.log_start_offset <= first_dirty_offset <= log.log_end_offset:
        first_dirty_offset = log.log_start_offset
    segments: list[Segment] = []
    end_offset = log.segments[0].base_offset
    for i, segment in enumerate(log.segments[:-1]):
        upper = log.segments[i + 1].base_offset
        if upper > uncleanable:
            break
        segments.append(segment)
        end_offset = upper
    dirty_from = len(segments)
    for i in range(len(segments)):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else end_offset
        if upper > first_dirty_offset:
            dirty_from = i
            break
    clean_bytes = sum(s.size for s in segments[:dirty_from])
    dirty_bytes = sum(s.size for s in segments[dirty_from:])
    return CleanablePlan(max(first_dirty_offset, log.log_start_offset), uncleanable,
                         tuple(segments), dirty_from, clean_bytes, dirty_bytes, end_offset)


def cleaning_reason(log: Log, plan: CleanablePlan, now_ms: int,
                    next_delete_horizon_ms: int | None = None) -> str | None:
    """Why the log should be cleaned now (None: it should not)."""
    config = log.config
    if not config.compact or not plan.segments:
        return None
    if plan.dirty_bytes > 0:
        if plan.dirty_ratio >= config.min_cleanable_dirty_ratio:
            return (f"dirty ratio {plan.dirty_ratio:.3f} >= min.cleanable.dirty.ratio "
                    f"{config.min_cleanable_dirty_ratio}")
        oldest = plan.dirty_segments[0].roll_base_ms
        if oldest is not None and now_ms - oldest > config.max_compaction_lag_ms:
            return f"dirty data older than max.compaction.lag.ms {config.max_compaction_lag_ms}"
    if next_delete_horizon_ms is not None and now_ms >= next_delete_horizon_ms:
        return "a tombstone's delete horizon has passed"
    return None


# A segment's data as the cleaner reads it: a duplicated handle and the size to read up to,
# both taken on the thread that owns the log, so that the read is safe on any thread.
Source = tuple[FileHandle, int]


def aborted_tracker(aborted: list[AbortedTxn], start_offset: int) -> AbortedTracker:
    """The consumers' rule over batches read from ``start_offset`` on, for the aborts among
    ``aborted`` that end there or later."""
    return AbortedTracker.from_response([(a.producer_id, a.first_offset) for a in aborted
                                         if a.last_offset >= start_offset])


def _segment_keys(handle: FileHandle, size: int,
                  tracker: AbortedTracker | None = None) -> dict[bytes, int]:
    offsets: dict[bytes, int] = {}
    data = handle.read_at(0, size)
    for position, header in iter_batches(data, validate=False):
        if header.is_control or (tracker is not None and tracker.skip(header)):
            continue
        for record in decode_batch(data, position, validate=False)[1]:
            if record.key is not None:
                offsets[record.key] = record.offset
    return offsets


def build_offset_map(sources: list[Source], max_keys: int | None = None,
                     tracker: AbortedTracker | None = None) -> tuple[dict[bytes, int], int]:
    """key -> offset of its last record over ``sources`` (Kafka's dedupe buffer), and how many
    of them it covers: like Kafka, when the next segment's keys would not fit in ``max_keys``
    the map (and so this cleaning) stops before it; the first segment is always taken.
    ``tracker`` (fed the sources' batches in order) leaves out aborted transactions' records."""
    offsets: dict[bytes, int] = {}
    for count, (handle, size) in enumerate(sources):
        keys = _segment_keys(handle, size, tracker)
        if max_keys is not None and count > 0:
            new = sum(1 for key in keys if key not in offsets)
            if len(offsets) + new > max_keys:
                return offsets, count
        offsets.update(keys)
    return offsets, len(sources)


def last_batch_of_producers(sources: list[Source]) -> dict[int, int]:
    """producer id -> base offset of its last batch in ``sources`` (those batches are kept)."""
    last: dict[int, int] = {}
    for handle, size in sources:
        for _position, header in scan_headers(handle, 0, size):
            if header.producer_id >= 0:
                last[header.producer_id] = header.base_offset
    return last


@dataclass(slots=True)
class _SegmentCleaning:
    """Rewrites one segment's batches; collects the counts into ``result``."""

    offset_map: Mapping[bytes, int]
    producers_last: Mapping[int, int]
    now_ms: int
    delete_retention_ms: int
    result: CleanResult
    horizons: list[int] = field(default_factory=list)

    def clean(self, data: bytes) -> bytearray | None:
        """The cleaned bytes, or None when nothing in ``data`` changes."""
        out = bytearray()
        changed = False
        for position, header in iter_batches(data, validate=False):
            raw = data[position : position + header.size]
            if header.is_control:
                out += raw
                continue
            records = decode_batch(data, position, validate=False)[1]
            self.result.records_before += len(records)
            kept, horizon = self._filter(header, records)
            self.result.records_after += len(kept)
            if len(kept) == len(records) and horizon is None and (
                records or self._keep_empty(header)
            ):
                out += raw
                continue
            changed = True
            if kept or self._keep_empty(header):
                out += rebuild_batch(header, kept, delete_horizon_ms=horizon)
        return out if changed else None

    def _keep_empty(self, header: BatchHeader) -> bool:
        return (
            header.producer_id >= 0
            and self.producers_last.get(header.producer_id) == header.base_offset
        )

    def _filter(self, header: BatchHeader, records: list[Record]) -> tuple[list[Record], int | None]:
        has_horizon = bool(header.attributes & DELETE_HORIZON_MASK)
        kept: list[Record] = []
        tombstones = False
        for record in records:
            if record.key is None:
                self.result.keyless_removed += 1
                continue
            latest = self.offset_map.get(record.key)
            if latest is not None and record.offset < latest:
                continue
            if record.value is None:
                if has_horizon and self.now_ms >= header.base_timestamp:
                    self.result.tombstones_removed += 1
                    continue
                tombstones = True
            kept.append(record)
        new_horizon: int | None = None
        if tombstones:
            if has_horizon:
                self.horizons.append(header.base_timestamp)
            else:
                new_horizon = self.now_ms + self.delete_retention_ms
                self.horizons.append(new_horizon)
        return kept, new_horizon


def group_segments(segments: tuple[Segment, ...], end_offset: int, sizes: list[int],
                   max_bytes: int) -> list[list[int]]:
    """Kafka's grouping: runs of consecutive segments (indexes into ``segments``, the last of
    which ends at ``end_offset``) whose original sizes add up to at most ``max_bytes`` and whose
    offsets fit one segment (relative offsets below 2^31)."""
    groups: list[list[int]] = []
    for k in range(len(segments)):
        upper = segments[k + 1].base_offset if k + 1 < len(segments) else end_offset
        if groups:
            group = groups[-1]
            total = sum(sizes[g] for g in group) + sizes[k]
            first_base = segments[group[0]].base_offset
            if total <= max_bytes and upper - 1 - first_base <= MAX_RELATIVE_OFFSET:
                group.append(k)
                continue
        groups.append([k])
    return groups


@dataclass(slots=True)
class CleaningJob:
    """One cleaning of one log, in three steps: ``prepare_cleaning`` (on the thread that owns
    the log: the plan, and duplicated handles with sizes of every segment), ``run`` (anywhere,
    e.g. ``asyncio.to_thread``: the offset map, the rewritten segments, written and fsynced as
    ``.cleaned`` files; the log is not touched) and ``install`` (on the owning thread: the
    swaps). The log may append, roll or serve reads meanwhile; if it was truncated, closed or
    lost a planned segment (retention), ``install`` drops the job and nothing changes."""

    log: Log
    plan: CleanablePlan
    now_ms: int
    result: CleanResult
    generation: int
    sources: list[Source]  # the plan's segments
    tail: list[Source]  # every later segment, for the producers' last batches
    first_segment: Segment
    max_map_keys: int | None = None
    aborted: list[AbortedTxn] = field(default_factory=list)  # overlapping the plan
    outputs: list[tuple[list[Segment], str | None]] = field(default_factory=list)
    error: OSError | None = None
    done: bool = False

    def run(self) -> None:
        """Build and write the cleaned segments. Never raises an OSError: it is kept in
        ``error`` and reported by ``install``."""
        started = time.monotonic()
        try:
            self._run()
            self.result.run_seconds = time.monotonic() - started
        except OSError as exc:
            self.error = exc
            self.discard()
        finally:
            for handle, _size in self.sources + self.tail:
                handle.close()
            self.done = True

    def _run(self) -> None:
        result = self.result
        plan = self.plan
        dirty_start = (plan.segments[plan.dirty_from].base_offset
                       if plan.dirty_from < len(plan.segments) else plan.end_offset)
        offset_map, mapped = build_offset_map(self.sources[plan.dirty_from :], self.max_map_keys,
                                              aborted_tracker(self.aborted, dirty_start))
        cleaning = _SegmentCleaning(
            offset_map=offset_map,
            producers_last=last_batch_of_producers(self.sources + self.tail),
            now_ms=self.now_ms,
            delete_retention_ms=self.log.config.delete_retention_ms,
            result=result,
        )
        # Everything up to the end of the last dirty segment the map covers is cleaned.
        count = plan.dirty_from + mapped
        segments = plan.segments[:count]
        end = plan.segments[count].base_offset if count < len(plan.segments) else plan.end_offset
        if count < len(plan.segments):
            result.map_full = True
        result.first_dirty_offset = max(end, plan.first_dirty_offset)
        for group in group_segments(segments, end, [size for _h, size in self.sources[:count]],
                                    self.log.config.segment_bytes):
            parts: list[bytes | bytearray] = []
            changed = len(group) > 1  # merging is a change of its own
            for k in group:
                handle, size = self.sources[k]
                result.bytes_before += size
                data = handle.read_at(0, size)
                cleaned = cleaning.clean(data)
                changed = changed or cleaned is not None
                parts.append(data if cleaned is None else cleaned)
            members = [segments[k] for k in group]
            if not changed:
                result.bytes_after += len(parts[0])
                continue
            merged = b"".join(parts)
            result.segments_deleted += len(group) - 1
            if not merged and members[0] is not self.first_segment:
                self.outputs.append((members, None))
                result.segments_deleted += 1
            else:
                path = self.log.write_cleaned_file(members[0].base_offset, merged)
                self.outputs.append((members, path))
                result.segments_rewritten += 1
                result.bytes_after += len(merged)
        result.next_delete_horizon_ms = min(cleaning.horizons) if cleaning.horizons else None

    def discard(self) -> None:
        for _segment, path in self.outputs:
            if path is not None:
                self.log.discard_cleaned_file(path)
        self.outputs = []

    def still_valid(self) -> bool:
        log = self.log
        if log.closed or log.offline or log.truncation_generation != self.generation:
            return False
        if log.segments[0] is not self.first_segment:
            return False
        live = set(map(id, log.segments[:-1]))
        return all(id(segment) in live for group, _path in self.outputs for segment in group)

    def install(self) -> CleanResult | None:
        """Swap the cleaned segments in (owning thread). None if the job no longer applies."""
        if self.error is not None:
            raise self.error
        if not self.still_valid():
            logger.info("%s cleaning dropped: the log changed meanwhile", self.log)
            self.discard()
            return None
        for group, path in self.outputs:
            self.log.install_cleaned_segments(group, path)
        self.outputs = []
        return self.result


def prepare_cleaning(log: Log, plan: CleanablePlan, now_ms: int, reason: str = "requested",
                     max_map_keys: int | None = None) -> CleaningJob:
    """The job for ``plan`` (on the thread that owns the log)."""
    planned = {id(s) for s in plan.segments}
    sources = [(s.log.duplicate(), s.size) for s in plan.segments]
    tail = [(s.log.duplicate(), s.size) for s in log.segments if id(s) not in planned]
    result = CleanResult(first_dirty_offset=max(plan.end_offset, plan.first_dirty_offset),
                         reason=reason)
    start = plan.segments[0].base_offset if plan.segments else plan.end_offset
    aborted = log.collect_aborted_transactions(start, plan.end_offset)
    return CleaningJob(log, plan, now_ms, result, log.truncation_generation, sources, tail,
                       log.segments[0], max_map_keys, aborted=aborted)


def clean_log(log: Log, plan: CleanablePlan, now_ms: int, reason: str = "requested") -> CleanResult:
    """Clean the plan's segments of ``log`` on this thread (see the module docstring); the swaps
    are durable when this returns."""
    job = prepare_cleaning(log, plan, now_ms, reason)
    job.run()
    result = job.install()
    assert result is not None
    return result


class LogCleaner:
    """The cleaner's per-data-directory state: first dirty offsets (``cleaner-offset-checkpoint``)
    and, in memory, the earliest delete horizon of the tombstones each log still holds."""

    @staticmethod
    def keys_for(dedupe_buffer_bytes: int) -> int:
        """Kafka's sizing: 24 bytes (a 16-byte hash and an 8-byte offset) per key at a 0.9 load
        factor; here it is a bound on the number of keys (a Python dict entry costs more)."""
        return max(1, int(dedupe_buffer_bytes * 0.9) // 24)

    def __init__(self, fs: FileSystem, data_dir: str,
                 dedupe_buffer_bytes: int = DEDUPE_BUFFER_BYTES) -> None:
        self.max_map_keys = self.keys_for(dedupe_buffer_bytes)
        self._file = OffsetCheckpointFile(fs, f"{data_dir}/{CLEANER_OFFSET_CHECKPOINT}")
        self.first_dirty: dict[tuple[str, int], int] = {}
        self.next_horizon: dict[tuple[str, int], int] = {}
        if fs.exists(self._file.path):
            try:
                self.first_dirty = {(tp.topic, tp.partition): offset
                                    for tp, offset in self._file.read().items()}
            except CorruptCheckpointError as exc:
                # Cleaning from the log start again is always correct, only slower.
                logger.warning("ignoring corrupt cleaner checkpoint: %s", exc)
        # The tombstone horizons of logs cleaned before are not known after a restart: one pass
        # over their clean sections finds them (and removes tombstones already due).
        self.next_horizon = {key: 0 for key in self.first_dirty}

    def maybe_clean(self, key: tuple[str, int], log: Log, high_watermark: int,
                    now_ms: int) -> CleanResult | None:
        """Clean ``log`` now, on this thread, if it is compacted and due (dirty ratio, max lag,
        tombstone horizon)."""
        job = self.prepare(key, log, high_watermark, now_ms)
        if job is None:
            return None
        job.run()
        return self.finish(key, job)

    def prepare(self, key: tuple[str, int], log: Log, high_watermark: int,
                now_ms: int) -> CleaningJob | None:
        """The cleaning job for ``log`` if one is due (owning thread); run it anywhere, then
        pass it to ``finish`` on the owning thread."""
        if not log.config.compact or log.closed or log.offline:
            return None
        plan = plan_cleaning(log, self.first_dirty.get(key, log.log_start_offset),
                             high_watermark, now_ms)
        reason = cleaning_reason(log, plan, now_ms, self.next_horizon.get(key))
        if reason is None:
            return None
        return prepare_cleaning(log, plan, now_ms, reason, self.max_map_keys)

    def finish(self, key: tuple[str, int], job: CleaningJob) -> CleanResult | None:
        """Install a job's cleaned segments, then record the new first dirty offset."""
        result = job.install()
        if result is None:
            return None
        if result.next_delete_horizon_ms is None:
            self.next_horizon.pop(key, None)
        else:
            self.next_horizon[key] = result.next_delete_horizon_ms
        if self.first_dirty.get(key) != result.first_dirty_offset:
            self.first_dirty[key] = result.first_dirty_offset
            self.write_checkpoint()
        return result

    def forget(self, key: tuple[str, int]) -> None:
        """The partition was deleted."""
        self.next_horizon.pop(key, None)
        if self.first_dirty.pop(key, None) is not None:
            self.write_checkpoint()

    def write_checkpoint(self) -> None:
        self._file.write(self.first_dirty)
