"""Recovering a partition log's directory at open, after a clean or an unclean stop.

Segments holding offsets at or after the recovery point are fully validated; the first bad or
torn batch and everything after it are truncated (with a warning), later segments too. Missing
or insane indexes are rebuilt; the epoch cache is loaded (or rebuilt from the batches if its
checkpoint is unreadable) and reconciled with the recovered log. Nothing is written unless
something changed; what was touched is marked for the log's first flush (segments' ``dirty``,
``dir_dirty`` for created or removed names), which ``Log.open`` runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from floodmark.records import HEADER_SIZE, NO_TIMESTAMP, BatchHeader, CorruptRecordError
from floodmark.replication import EpochCache, EpochEntry
from floodmark.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CorruptCheckpointError,
    LeaderEpochCheckpointFile,
    TopicPartition,
)
from floodmark.storage.config import LogConfig
from floodmark.storage.fs import FileSystem
from floodmark.storage.segment import (
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    Segment,
    scan_batches,
    scan_headers,
)
from floodmark.storage.swap import CLEANED_SUFFIX, SWAP_SUFFIX, complete_swaps
from floodmark.storage.txn_index import TXN_INDEX_EVIDENCE_SUFFIX, TXN_INDEX_SUFFIX

logger = logging.getLogger(__name__)

STRAY_SUFFIXES = (".tmp", ".deleted", CLEANED_SUFFIX, SWAP_SUFFIX)


@dataclass(slots=True)
class RecoveredLog:
    """What recovery found: the log's segments (oldest first) and offsets, its epoch cache,
    and whether the directory needs an fsync (names were created or removed)."""

    segments: list[Segment]
    log_start_offset: int
    log_end_offset: int
    epoch_cache: EpochCache
    dir_dirty: bool


def recover_log(fs: FileSystem, path: str, config: LogConfig, epoch_file: LeaderEpochCheckpointFile,
                topic_partition: TopicPartition, *, recovery_point: int, log_start_offset: int,
                clean_shutdown: bool, gaps_allowed: bool) -> RecoveredLog:
    """Recover the log in ``path`` (creating the directory if needed).

    ``clean_shutdown``: data up to ``recovery_point`` is known to be on disk; if the log also
    ends there, nothing needs an fsync. Without it, the recovered segments are always marked
    for an fsync (the checkpointed recovery point may be stale after a truncation).
    ``gaps_allowed``: offsets may jump between batches (a compacted log)."""
    return _Recovery(fs, path, config, epoch_file, topic_partition, gaps_allowed).run(
        recovery_point, log_start_offset, clean_shutdown)


@dataclass(eq=False, slots=True)
class _Recovery:
    fs: FileSystem
    path: str
    config: LogConfig
    epoch_file: LeaderEpochCheckpointFile
    topic_partition: TopicPartition
    gaps_allowed: bool
    segments: list[Segment] = field(default_factory=list)
    epoch_cache: EpochCache = field(default_factory=EpochCache)
    dir_dirty: bool = False
    # (leader epoch, base offset) of every batch the scans validated, in log order.
    recovered_epochs: list[tuple[int, int]] = field(default_factory=list)

    def _ctx(self) -> str:
        return f"[partition {self.topic_partition} epoch {self.epoch_cache.latest_epoch}]"

    def run(self, recovery_point: int, log_start_offset: int,
            clean_shutdown: bool) -> RecoveredLog:
        fs = self.fs
        if not fs.is_dir(self.path):
            fs.mkdirs(self.path)
            self.dir_dirty = True
        names = fs.listdir(self.path)
        if complete_swaps(fs, self.path, self._ctx(), names):
            self.dir_dirty = True
            names = fs.listdir(self.path)
        bases = self._segment_bases(names)
        epoch_entries_ok = True
        epoch_file_existed = LEADER_EPOCH_CHECKPOINT in names
        entries: list[EpochEntry] = []
        try:
            entries = self.epoch_file.read()
            self.epoch_cache = EpochCache(entries)
        except CorruptCheckpointError as exc:
            logger.warning(
                "%s %s; rebuilding the leader epoch cache from the log", self._ctx(), exc
            )
            epoch_entries_ok = False
            self.epoch_cache = EpochCache()

        recovered = self._recover_segments(bases, recovery_point, frozenset(names))
        if self.segments:
            log_end_offset = self.segments[-1].next_offset(self.config.scan_chunk_bytes)
            if not clean_shutdown or log_end_offset != recovery_point:
                # Data past the recovery point may exist only in the page cache (the previous
                # process died before flushing): it becomes durable before the recovery point
                # moves past it. After an unclean stop the checkpointed recovery point may
                # even be stale (a truncation lowered it, the log grew back), so the recovered
                # segments are synced whatever it says. Only after a clean shutdown that left
                # the log ending at its recovery point is everything known to be on disk.
                for segment in recovered:
                    segment.dirty = True
                # The previous process may also have created files (a roll) whose directory
                # entries never reached the disk: the directory is synced with them, or a power
                # loss after the recovery point moved would take a whole segment away.
                self.dir_dirty = True
            # Empty trailing segments left by a crash right after a roll are fine; an empty
            # first segment whose name is above log start is fine too.
        else:
            log_end_offset = log_start_offset
        log_start_offset = max(
            log_start_offset, self.segments[0].base_offset if self.segments else log_start_offset
        )
        if log_end_offset < log_start_offset or not self.segments:
            if self.segments:
                logger.warning(
                    "%s log end offset %d is below log start offset %d; starting an empty log",
                    self._ctx(),
                    log_end_offset,
                    log_start_offset,
                )
            for segment in self.segments:
                segment.delete(fs)
            log_end_offset = log_start_offset
            self.segments = [Segment.create(fs, self.path, log_start_offset)]
            self.dir_dirty = True
        # Epoch cache: rebuild from batches when the checkpoint was unreadable; in every case
        # add the epochs of recovered batches (their assign() may not have reached the file).
        if not epoch_entries_ok:
            self._rebuild_epoch_cache(log_start_offset, log_end_offset)
        else:
            # The batches recovery scanned are the truth from the first of them on: drop cache
            # entries from there and re-add the epochs those batches carry (Kafka assigns an
            # epoch during recovery only when it is newer than the latest). This repairs a
            # checkpoint that ran ahead of, or behind, the data that survived a crash.
            if self.recovered_epochs:
                self.epoch_cache.truncate_from_end(self.recovered_epochs[0][1])
            for epoch, base_offset in self.recovered_epochs:
                if base_offset < log_end_offset and epoch > self.epoch_cache.latest_epoch:
                    self.epoch_cache.assign(epoch, base_offset)
        self.epoch_cache.truncate_from_end(log_end_offset)
        self.epoch_cache.truncate_from_start(log_start_offset)
        if not (epoch_entries_ok and epoch_file_existed
                and self.epoch_cache.entries() == tuple(entries)):
            # The rename becomes durable with the directory fsync of the log's first flush.
            self.epoch_file.write(self.epoch_cache.entries(), sync_dir=False)
            self.dir_dirty = True
        return RecoveredLog(self.segments, log_start_offset, log_end_offset, self.epoch_cache,
                            self.dir_dirty)

    def _segment_bases(self, names: list[str]) -> list[int]:
        """Base offsets of the segment files, sorted; leftovers and orphan indexes removed."""
        fs = self.fs
        bases: list[int] = []
        for name in names:
            full = f"{self.path}/{name}"
            if name.endswith(STRAY_SUFFIXES):
                logger.info("%s removing leftover file %s", self._ctx(), full)
                fs.remove(full)
                self.dir_dirty = True
                continue
            stem, dot, suffix = name.partition(".")
            if not dot or not stem.isdigit() or len(stem) != 20:
                continue
            if "." + suffix == LOG_SUFFIX:
                bases.append(int(stem))
        bases.sort()
        for name in names:
            stem, dot, suffix = name.partition(".")
            if (
                dot
                and "." + suffix in (*INDEX_SUFFIXES, TXN_INDEX_SUFFIX, TXN_INDEX_EVIDENCE_SUFFIX)
                and stem.isdigit()
                and int(stem) not in bases
            ):
                fs.remove(f"{self.path}/{name}")  # an index without its segment
                self.dir_dirty = True
        return bases

    def _recover_segments(self, bases: list[int], recovery_point: int,
                          names: frozenset[str]) -> list[Segment]:
        """Open every segment, validating those at or after the recovery point; returns those
        validated. Stops at the first corrupt point, deleting the later segments. ``names``:
        the directory's files (``_segment_bases`` removed only strays and orphan indexes)."""
        fs = self.fs
        recovered_from: int | None = None
        recovered: list[Segment] = []
        for i, base in enumerate(bases):
            segment = Segment(fs, self.path, base, names=names)
            self.segments.append(segment)
            if not segment.index_files_existed:
                self.dir_dirty = True  # they are created below
            is_last = i == len(bases) - 1
            next_base = bases[i + 1] if not is_last else None
            needs_recovery = is_last or (next_base is not None and next_base > recovery_point)
            if recovered_from is not None:
                needs_recovery = True
            if not needs_recovery:
                if not segment.load_indexes():
                    logger.warning(
                        "%s index files of segment %d failed the sanity check; rebuilding",
                        self._ctx(),
                        base,
                    )
                    segment.rebuild_indexes(self.config.index_interval_bytes,
                                            chunk_bytes=self.config.scan_chunk_bytes)
                    segment.on_become_inactive()
                    segment.dirty = True
                segment.release_index_files()
                continue
            recovered.append(segment)
            segment.detach_indexes()
            truncated_at = self._recover_segment(segment, recovery_point)
            cut = segment.dirty  # the segment file was truncated
            if truncated_at is None and next_base is not None:
                segment_end = segment.next_offset(self.config.scan_chunk_bytes)
                # A compacted log may end a segment early (the cleaner removed its last
                # records); the next segment must still not start inside this one.
                bad_end = (segment_end > next_base if self.gaps_allowed
                           else segment_end != next_base)
                if bad_end:
                    logger.warning(
                        "%s recovery: segment %d ends at offset %d but the next segment starts "
                        "at %d; dropping the later segments",
                        self._ctx(),
                        base,
                        segment_end,
                        next_base,
                    )
                    truncated_at = segment_end
            if truncated_at is None and next_base is not None:
                segment.on_become_inactive()
            # Index files are written only where they differ from what the scan rebuilt; a
            # truncated segment file was marked dirty by _recover_segment.
            segment.dirty = segment.attach_indexes() or cut
            if truncated_at is None and next_base is not None:
                segment.release_index_files()
            if truncated_at is not None:
                recovered_from = truncated_at
                # Everything after a corrupt point is discarded: later segments too.
                for later in bases[i + 1 :]:
                    for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES, TXN_INDEX_SUFFIX,
                                   TXN_INDEX_EVIDENCE_SUFFIX):
                        full = f"{self.path}/{later:020d}{suffix}"
                        if fs.exists(full):
                            fs.remove(full)
                    logger.warning(
                        "%s deleting segment %d after corrupt data at offset %d",
                        self._ctx(),
                        later,
                        truncated_at,
                    )
                self.dir_dirty = True
                break
        return recovered

    def _trusted_prefix(self, segment: Segment, recovery_point: int) -> tuple[int, int]:
        """(position, offset) up to which the segment was flushed before the recovery point,
        found through a sane offset index; (0, base) when nothing can be trusted."""
        if recovery_point <= segment.base_offset or not segment.load_indexes():
            return 0, segment.base_offset
        entry_offset, entry_position = segment.index.lookup(recovery_point)
        if entry_position == 0:
            return 0, segment.base_offset
        head = segment.read_at(entry_position, HEADER_SIZE)
        if len(head) < HEADER_SIZE or BatchHeader(head).base_offset != entry_offset:
            return 0, segment.base_offset  # the index disagrees with the data: trust neither
        segment.index.truncate_to_position(entry_position + 1)
        segment.time_index.truncate_to_offset(entry_offset)
        segment.max_timestamp = segment.time_index.last_timestamp
        rel = segment.time_index.relative_offsets
        segment.offset_of_max_timestamp = (
            segment.base_offset + rel[-1] if rel else segment.base_offset
        )
        return entry_position, entry_offset

    def _recover_segment(self, segment: Segment, recovery_point: int = 0) -> int | None:
        """Validate the batches after the recovery point (from the last index entry at or
        below it; from the start if the indexes are not sane); truncate at the first bad one.
        Returns the offset the segment was cut at (None if it was intact). Index entries for the
        validated part are rebuilt from the scan."""
        start_position, expected = self._trusted_prefix(segment, recovery_point)
        if start_position == 0:
            segment.index.reset()
            segment.time_index.reset()
            segment.max_timestamp = NO_TIMESTAMP
            segment.offset_of_max_timestamp = segment.base_offset
            segment.roll_base_ms = None
        segment.bytes_since_last_index_entry = 0
        cut_position: int | None = None
        reason = ""
        try:
            gaps_allowed = self.gaps_allowed  # the cleaner leaves gaps between batches
            for position, header in scan_batches(segment.log, start_position, validate=True,
                                                 chunk_bytes=self.config.scan_chunk_bytes):
                if header.base_offset != expected and not (
                    gaps_allowed and header.base_offset > expected
                ):
                    cut_position, reason = (
                        position,
                        (
                            f"batch base offset {header.base_offset} differs from the expected "
                            f"{expected} (not contiguous)"
                        ),
                    )
                    break
                if header.last_offset - segment.base_offset > MAX_RELATIVE_OFFSET:
                    cut_position, reason = position, "offset beyond the segment's range"
                    break
                segment.note_header(header, position, self.config.index_interval_bytes)
                expected = header.next_offset
                self.recovered_epochs.append((header.partition_leader_epoch, header.base_offset))
        except CorruptRecordError as exc:
            cut_position, reason = exc.position, str(exc)
        if cut_position is None:
            return None
        segment.dirty = True
        logger.warning(
            "%s recovery: truncating segment %d at position %d (offset %d), %d bytes dropped: %s",
            self._ctx(),
            segment.base_offset,
            cut_position,
            expected,
            segment.size - cut_position,
            reason,
        )
        segment.log.truncate(cut_position)
        segment.index.truncate_to_position(cut_position)
        segment.time_index.truncate_to_offset(expected)
        return expected

    def _rebuild_epoch_cache(self, log_start_offset: int, log_end_offset: int) -> None:
        """From the epochs the batches of [log_start_offset, log_end_offset) carry."""
        self.epoch_cache = EpochCache()
        for segment in self.segments:
            if segment.base_offset >= log_end_offset:
                break
            for _, header in scan_headers(segment.log, 0,
                                          chunk_bytes=self.config.scan_chunk_bytes):
                if header.base_offset >= log_end_offset:
                    break
                if header.last_offset >= log_start_offset and header.partition_leader_epoch >= 0:
                    self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
