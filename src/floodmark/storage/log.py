"""One partition's log: segments, appends, reads, truncation, retention, flush and recovery.

The data directory layout is Kafka's::

    <data dir>/<topic>-<partition>/00000000000000000000.log|.index|.timeindex
    <data dir>/<topic>-<partition>/leader-epoch-checkpoint

Record batches are stored exactly as bytes. A leader append validates every batch, then patches
``baseOffset`` and ``partitionLeaderEpoch`` in place (outside the CRC) and writes the whole set with
one write; a follower append stores batches as received after checking CRC and contiguity.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass

from floodmark.errors import ErrorCode, KafkaError
from floodmark.records import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    CorruptRecordError,
    decode_batch,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batch_at,
)
from floodmark.replication.epochs import UNDEFINED_EPOCH, EpochCache, EpochEntry
from floodmark.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CorruptCheckpointError,
    LeaderEpochCheckpointFile,
    TopicPartition,
)
from floodmark.storage.config import FlushPolicy, LogConfig
from floodmark.storage.file_slice import FileSlice
from floodmark.storage.fs import FileHandle, FileSystem, RealFileSystem
from floodmark.storage.segment import (
    MAX_RELATIVE_OFFSET,
    Segment,
    scan_batches,
    segment_file_name,
)

logger = logging.getLogger(__name__)

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

_LOG_SUFFIX = ".log"
_INDEX_SUFFIXES = (".index", ".timeindex")
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_STRAY_SUFFIXES = (".tmp", ".deleted", CLEANED_SUFFIX, SWAP_SUFFIX)


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    num_records: int
    num_batches: int
    max_timestamp_ms: int
    log_append_time_ms: int
    first_batch_epoch: int
    offset_of_max_timestamp: int = -1


class FlushTicket:
    """fsyncs captured by ``Log.begin_flush``; ``run`` may execute on any thread."""

    __slots__ = ("directory", "done", "error", "fs", "generation", "handles", "target_offset")

    def __init__(
        self,
        fs: FileSystem,
        handles: list[FileHandle],
        directory: str | None,
        target_offset: int,
        generation: int,
    ) -> None:
        self.fs = fs
        self.handles = handles
        self.directory = directory
        self.target_offset = target_offset
        self.generation = generation
        self.done = False
        self.error: OSError | None = None

    def run(self) -> None:
        """fsync every captured file (and the directory), then close the duplicates. Never
        raises: a failure is recorded and reported by ``Log.complete_flush``."""
        try:
            for handle in self.handles:
                handle.fsync()
            if self.directory is not None:
                self.fs.fsync_dir(self.directory)
            self.done = True
        except OSError as exc:
            self.error = exc
        finally:
            for handle in self.handles:
                handle.close()


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


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


class NonContiguousAppendError(KafkaError):
    """A follower append whose batches do not continue the log exactly at its end offset
    (Kafka's UnexpectedAppendOffsetException)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)


class Log:
    """A partition log over a FileSystem. Construct with ``Log.open`` (runs recovery)."""

    def __init__(self, path: str, config: LogConfig, fs: FileSystem, now_ms: int) -> None:
        self.path = path
        self.config = config
        self.fs = fs
        name = posixpath.basename(path.rstrip("/"))
        self.topic_partition = parse_partition_dir(name) or TopicPartition(name, 0)
        self.segments: list[Segment] = []
        self._base_offsets: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.recovery_point = 0
        self.epoch_cache = EpochCache()
        self._epoch_file = LeaderEpochCheckpointFile(fs, f"{path}/{LEADER_EPOCH_CHECKPOINT}")
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._flush_requested = False
        self._dir_dirty = False
        self._closed = False
        self._epoch_checkpoint_pending = False
        self._recovered_epochs: list[tuple[int, int]] = []
        self._flush_generation = 0  # bumped by truncation: older flush tickets are stale
        self._storage_error: str | None = None
        self._was_compacted = False  # see ``gaps_allowed``
        # Bytes read per step when scanning from an index entry to a batch: one index interval
        # plus room for the next header.
        self._scan_bytes = min(self.config.index_interval_bytes + 2 * HEADER_SIZE, 1 << 20)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic_partition}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self.segments)})"
        )

    def _ctx(self) -> str:
        return f"[partition {self.topic_partition} epoch {self.epoch_cache.latest_epoch}]"

    # ========================================================================================
    # Opening and recovery
    # ========================================================================================
    @classmethod
    def open(
        cls,
        path: str,
        config: LogConfig | None = None,
        *,
        fs: FileSystem | None = None,
        now_ms: int,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        was_compacted: bool = False,
    ) -> Log:
        """Open (creating if needed) the log in ``path`` and recover it.

        ``clean_shutdown``: the data directory's clean-shutdown marker was present (see
        ``storage.clean_shutdown``), so data up to ``recovery_point`` is known to be on disk; if
        the log also ends there, nothing needs an fsync. Without it, the recovered segments are
        always fsynced (the checkpointed recovery point may be stale after a truncation).
        ``was_compacted``: the cleaner has cleaned this log before (its cleaner checkpoint says
        so), so gaps between offsets are expected even if the topic is no longer compacted
        (see ``gaps_allowed``).

        Segments holding offsets at or after ``recovery_point`` are fully validated; the first
        bad or torn batch and everything after it are truncated (with a warning). Missing or
        insane indexes are rebuilt; the epoch cache is loaded (or rebuilt from the batches if
        its checkpoint is unreadable) and reconciled with the recovered log.
        """
        log = cls(path, config or LogConfig(), fs if fs is not None else RealFileSystem(), now_ms)
        log._was_compacted = was_compacted
        log._recover(now_ms, recovery_point, log_start_offset, clean_shutdown)
        return log

    def _recover(
        self, now_ms: int, recovery_point: int, log_start_offset: int, clean_shutdown: bool
    ) -> None:
        # Nothing is written unless something changed, and after a clean shutdown (recovery
        # point == log end offset, indexes and epoch checkpoint as on disk) nothing is fsynced
        # either. Every modification below marks what it touched for the final flush
        # (segments' ``dirty``, ``_dir_dirty`` for created or removed names).
        fs = self.fs
        if not fs.is_dir(self.path):
            fs.mkdirs(self.path)
            self._dir_dirty = True
        if self._complete_swaps():
            self._dir_dirty = True
        names = fs.listdir(self.path)
        bases: list[int] = []
        for name in names:
            full = f"{self.path}/{name}"
            if name.endswith(_STRAY_SUFFIXES):
                logger.info("%s removing leftover file %s", self._ctx(), full)
                fs.remove(full)
                self._dir_dirty = True
                continue
            stem, dot, suffix = name.partition(".")
            if not dot or not stem.isdigit() or len(stem) != 20:
                continue
            if "." + suffix == _LOG_SUFFIX:
                bases.append(int(stem))
        bases.sort()
        for name in names:
            stem, dot, suffix = name.partition(".")
            if (
                dot
                and "." + suffix in _INDEX_SUFFIXES
                and stem.isdigit()
                and int(stem) not in bases
            ):
                fs.remove(f"{self.path}/{name}")  # an index without its segment
                self._dir_dirty = True
        epoch_entries_ok = True
        epoch_file_existed = LEADER_EPOCH_CHECKPOINT in names
        entries: list[EpochEntry] = []
        try:
            entries = self._epoch_file.read()
            self.epoch_cache = EpochCache(entries)
        except CorruptCheckpointError as exc:
            logger.warning(
                "%s %s; rebuilding the leader epoch cache from the log", self._ctx(), exc
            )
            epoch_entries_ok = False
            self.epoch_cache = EpochCache()

        recovered_from: int | None = None
        recovered: list[Segment] = []
        for i, base in enumerate(bases):
            segment = Segment(fs, self.path, base)
            self.segments.append(segment)
            self._base_offsets.append(base)
            if not segment.index_files_existed:
                self._dir_dirty = True  # they are created below
            is_last = i == len(bases) - 1
            next_base = bases[i + 1] if not is_last else None
            needs_recovery = is_last or (next_base is not None and next_base > recovery_point)
            if recovered_from is not None:
                needs_recovery = True
            if not needs_recovery:
                if not self._load_indexes(segment):
                    logger.warning(
                        "%s index files of segment %d failed the sanity check; rebuilding",
                        self._ctx(),
                        base,
                    )
                    segment.rebuild_indexes(self.config.index_interval_bytes)
                    segment.on_become_inactive()
                    segment.dirty = True
                segment.release_index_files()
                continue
            recovered.append(segment)
            segment.detach_indexes()
            truncated_at = self._recover_segment(segment, recovery_point)
            cut = segment.dirty  # the segment file was truncated
            if truncated_at is None and next_base is not None:
                segment_end = self._segment_next_offset(segment)
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
                    for suffix in (_LOG_SUFFIX, *_INDEX_SUFFIXES):
                        full = f"{self.path}/{later:020d}{suffix}"
                        if fs.exists(full):
                            fs.remove(full)
                    logger.warning(
                        "%s deleting segment %d after corrupt data at offset %d",
                        self._ctx(),
                        later,
                        truncated_at,
                    )
                self._dir_dirty = True
                break

        if self.segments:
            last = self.segments[-1]
            self.log_end_offset = self._segment_next_offset(last)
            if not clean_shutdown or self.log_end_offset != recovery_point:
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
                self._dir_dirty = True
            # Empty trailing segments left by a crash right after a roll are fine; an empty
            # first segment whose name is above log start is fine too.
        else:
            self.log_end_offset = log_start_offset
        self.log_start_offset = max(
            log_start_offset, self.segments[0].base_offset if self.segments else log_start_offset
        )
        if self.log_end_offset < self.log_start_offset or not self.segments:
            if self.segments:
                logger.warning(
                    "%s log end offset %d is below log start offset %d; starting an empty log",
                    self._ctx(),
                    self.log_end_offset,
                    self.log_start_offset,
                )
            self._delete_all_segments()
            self.log_end_offset = self.log_start_offset
            self._add_segment(self.log_start_offset)
        # Epoch cache: rebuild from batches when the checkpoint was unreadable; in every case
        # add the epochs of recovered batches (their assign() may not have reached the file).
        if not epoch_entries_ok:
            self._rebuild_epoch_cache()
        else:
            # The batches recovery scanned are the truth from the first of them on: drop cache
            # entries from there and re-add the epochs those batches carry (Kafka assigns an
            # epoch during recovery only when it is newer than the latest). This repairs a
            # checkpoint that ran ahead of, or behind, the data that survived a crash.
            if self._recovered_epochs:
                self.epoch_cache.truncate_from_end(self._recovered_epochs[0][1])
            for epoch, base_offset in self._recovered_epochs:
                if base_offset < self.log_end_offset and epoch > self.epoch_cache.latest_epoch:
                    self.epoch_cache.assign(epoch, base_offset)
        self._recovered_epochs = []
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        if not (epoch_entries_ok and epoch_file_existed and self.epoch_cache.entries() == tuple(entries)):
            # The rename becomes durable with the directory fsync of the flush below.
            self._epoch_file.write(self.epoch_cache.entries(), sync_dir=False)
            self._dir_dirty = True
        # Recovered data is made durable (a no-op when nothing changed), so the recovery point
        # moves to the end.
        self.flush()
        logger.info(
            "%s opened: log_start_offset=%d log_end_offset=%d segments=%d epoch cache %s",
            self._ctx(),
            self.log_start_offset,
            self.log_end_offset,
            len(self.segments),
            self.epoch_cache,
        )

    def _complete_swaps(self) -> bool:
        """Finish a segment replacement the cleaner made durable but did not complete: a
        ``<base>.log.swap`` is a whole, fsynced cleaned segment, so it replaces ``<base>.log``
        (Kafka's ``.swap`` files). Its index files are removed, to be rebuilt. A ``.cleaned``
        file was not complete yet and is removed with the other leftovers. True if anything
        was renamed or removed."""
        fs = self.fs
        changed = False
        for name in fs.listdir(self.path):
            if not name.endswith(_LOG_SUFFIX + SWAP_SUFFIX):
                continue
            stem = name[: -len(_LOG_SUFFIX + SWAP_SUFFIX)]
            if not stem.isdigit() or len(stem) != 20:
                continue
            swap_path = f"{self.path}/{name}"
            base = int(stem)
            end = base + 1
            handle = fs.open(swap_path, create=False)
            try:
                for _position, header in scan_batches(handle, 0, validate=False):
                    end = header.next_offset
            except CorruptRecordError:
                pass  # it was fsynced whole; at worst fewer old segments are replaced
            finally:
                handle.close()
            # The swap file replaces every segment whose base offset lies in its range (the
            # segments it was merged from), and its own base's index files (rebuilt).
            for other in fs.listdir(self.path):
                other_stem, dot, suffix = other.partition(".")
                if not (dot and other_stem.isdigit() and len(other_stem) == 20):
                    continue
                other_base = int(other_stem)
                in_range = base < other_base < end and "." + suffix in (_LOG_SUFFIX,
                                                                         *_INDEX_SUFFIXES)
                own_index = other_base == base and "." + suffix in _INDEX_SUFFIXES
                if in_range or own_index:
                    fs.remove(f"{self.path}/{other}")
            fs.rename(swap_path, f"{self.path}/{stem}{_LOG_SUFFIX}")
            logger.warning("%s recovery: completed the interrupted swap of cleaned segment %s",
                           self._ctx(), stem)
            changed = True
        return changed

    def _load_indexes(self, segment: Segment) -> bool:
        size = segment.size
        ok = segment.index_files_existed and segment.index.load(size) and segment.time_index.load()
        if ok and size > 0 and len(segment.time_index) == 0:
            ok = False  # a closed, non-empty segment always has its final time index entry
        if ok:
            segment.max_timestamp = segment.time_index.last_timestamp
            if segment.time_index.relative_offsets:
                segment.offset_of_max_timestamp = (
                    segment.base_offset + segment.time_index.relative_offsets[-1]
                )
            segment.roll_base_ms = (
                segment.time_index.timestamps[0] if segment.time_index.timestamps else None
            )
        return ok

    def _trusted_prefix(self, segment: Segment, recovery_point: int) -> tuple[int, int]:
        """(position, offset) up to which the segment was flushed before the recovery point,
        found through a sane offset index; (0, base) when nothing can be trusted."""
        if recovery_point <= segment.base_offset or not self._load_indexes(segment):
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
            for position, header in scan_batches(segment.log, start_position, validate=True):
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
                self._recovered_epochs.append((header.partition_leader_epoch, header.base_offset))
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

    def _segment_next_offset(self, segment: Segment) -> int:
        """Next offset after the segment's last batch (its base offset when empty)."""
        _, start = segment.index.lookup(2**63 - 1)
        next_offset = segment.base_offset
        for _, header in scan_batches(segment.log, start, validate=False):
            next_offset = header.next_offset
        return next_offset

    def _rebuild_epoch_cache(self) -> None:
        self.epoch_cache = EpochCache()
        self._assign_epochs_from(self.log_start_offset)

    def _assign_epochs_from(self, start_offset: int) -> None:
        for header in self.iter_batch_headers(start_offset=start_offset):
            if header.partition_leader_epoch >= 0:
                self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

    def _write_epoch_checkpoint(self) -> None:
        try:
            self._epoch_file.write(self.epoch_cache.entries())
        except OSError as exc:
            self._epoch_checkpoint_pending = True
            raise self._failed_write("writing leader-epoch-checkpoint", exc) from exc
        self._epoch_checkpoint_pending = False

    def _write_epoch_checkpoint_after_append(self) -> None:
        """The batches are written: a checkpoint that cannot be written now (full disk) is
        retried at the next append or flush; the epochs are also in the batches themselves,
        which recovery reads, so nothing is lost if the process dies first."""
        with contextlib.suppress(KafkaError):
            self._write_epoch_checkpoint()

    # ========================================================================================
    # Segments
    # ========================================================================================
    @property
    def active_segment(self) -> Segment:
        return self.segments[-1]

    def _add_segment(self, base_offset: int) -> Segment:
        segment = Segment(self.fs, self.path, base_offset)
        segment.log.truncate(0)
        segment.index.reset()
        segment.time_index.reset()
        self.segments.append(segment)
        self._base_offsets.append(base_offset)
        self._dir_dirty = True
        segment.dirty = True
        return segment

    def _delete_segment_files(self, segment: Segment) -> None:
        segment.close()
        for path in segment.file_paths():
            if self.fs.exists(path):
                self.fs.remove(path)
        self._dir_dirty = True

    def _delete_all_segments(self) -> None:
        for segment in self.segments:
            self._delete_segment_files(segment)
        self.segments = []
        self._base_offsets = []

    def _maybe_roll(self, incoming_bytes: int, last_offset: int, now_ms: int) -> Segment:
        active = self.active_segment
        size = active.size
        if size == 0:
            return active
        reason = ""
        if size + incoming_bytes > self.config.segment_bytes:
            reason = f"size {size} + {incoming_bytes} > segment.bytes {self.config.segment_bytes}"
        elif (
            active.roll_base_ms is not None
            and now_ms - active.roll_base_ms >= self._max_segment_ms
        ):
            reason = f"age {now_ms - active.roll_base_ms} ms >= segment.ms {self._max_segment_ms}"
        elif last_offset - active.base_offset > MAX_RELATIVE_OFFSET:
            reason = "relative offsets would overflow"
        if not reason:
            return active
        return self.roll(now_ms, reason)

    @property
    def gaps_allowed(self) -> bool:
        """Offsets may jump between batches: the log is compacted (or was: its cleaned segments
        keep their gaps if cleanup.policy changes to delete). Recovery and follower appends
        then accept increasing offsets (Kafka's rule); other logs must be contiguous."""
        return self.config.compact or self._was_compacted

    @property
    def _max_segment_ms(self) -> int:
        """segment.ms; for a compacted log at most max.compaction.lag.ms (as Kafka rolls it), so
        that records in the active segment become cleanable within that lag."""
        if self.config.compact:
            return min(self.config.segment_ms, self.config.max_compaction_lag_ms)
        return self.config.segment_ms

    def roll(self, now_ms: int, reason: str = "requested") -> Segment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        active = self.active_segment
        if active.size == 0:
            return active
        active.on_become_inactive()
        active.release_index_files()  # inactive segments keep one fd (their .log) open
        segment = self._add_segment(self.log_end_offset)
        segment.roll_base_ms = now_ms
        logger.info(
            "%s rolled new segment at offset %d (%s)", self._ctx(), self.log_end_offset, reason
        )
        return segment

    def _segment_for(self, offset: int) -> int:
        """Index into self.segments of the segment that would hold ``offset``."""
        return max(0, bisect.bisect_right(self._base_offsets, offset) - 1)

    # ========================================================================================
    # Appends
    # ========================================================================================
    def _validate_set(
        self, buffer: bytearray | memoryview | bytes, *, leader: bool
    ) -> list[tuple[int, BatchHeader]]:
        """Validate every batch of a produce/fetch record set; raise before anything is written.

        CORRUPT_MESSAGE for framing/magic/CRC errors (and, from producers, a recordsCount that
        disagrees with lastOffsetDelta); MESSAGE_TOO_LARGE above ``max.message.bytes``."""
        out: list[tuple[int, BatchHeader]] = []
        position = 0
        end = len(buffer)
        max_bytes = self.config.max_message_bytes
        try:
            while position < end:
                header = validate_batch_at(buffer, position)
                size = header.batch_length + LOG_OVERHEAD
                if size > max_bytes:
                    raise KafkaError(
                        ErrorCode.MESSAGE_TOO_LARGE,
                        f"{self.topic_partition}: batch at position {position} is {size} bytes, "
                        f"max.message.bytes is {max_bytes}",
                    )
                if leader and (
                    header.records_count <= 0
                    or header.last_offset_delta != header.records_count - 1
                ):
                    raise KafkaError(
                        ErrorCode.CORRUPT_MESSAGE,
                        f"{self.topic_partition}: batch at position {position} has recordsCount "
                        f"{header.records_count} but lastOffsetDelta {header.last_offset_delta}",
                    )
                out.append((position, header))
                position += size
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{self.topic_partition}: {exc}") from exc
        return out

    def append_as_leader(
        self, batches: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int
    ) -> AppendInfo:
        """Validate, assign offsets from the LEO, stamp ``leader_epoch``, write. All or nothing.

        A writable buffer is patched in place; a read-only one is copied once first.
        """
        self._check_open()
        buffer: bytearray | memoryview
        if isinstance(batches, bytearray) or (
            isinstance(batches, memoryview) and not batches.readonly
        ):
            buffer = batches
        else:
            buffer = bytearray(batches)
        headers = self._validate_set(buffer, leader=True)
        if not headers:
            return self._empty_append_info(leader_epoch)
        log_append = self.config.message_timestamp_type == LOG_APPEND_TIME
        next_offset = self.log_end_offset
        first_offset = next_offset
        num_records = 0
        max_timestamp = NO_TIMESTAMP
        offset_of_max = first_offset
        entries: list[tuple[int, int, int, int, int]] = []
        for position, header in headers:
            set_base_offset(buffer, position, next_offset)
            set_partition_leader_epoch(buffer, position, leader_epoch)
            if log_append:
                set_log_append_time(buffer, position, now_ms)
            last = next_offset + header.last_offset_delta
            timestamp = now_ms if log_append else header.max_timestamp
            if timestamp > max_timestamp:
                max_timestamp, offset_of_max = timestamp, last
            num_records += header.records_count
            entries.append((position, next_offset, last, timestamp, header.size))
            next_offset = last + 1
        info = AppendInfo(
            first_offset=first_offset,
            last_offset=next_offset - 1,
            num_records=num_records,
            num_batches=len(headers),
            max_timestamp_ms=max_timestamp,
            log_append_time_ms=now_ms if log_append else NO_TIMESTAMP,
            first_batch_epoch=leader_epoch,
            offset_of_max_timestamp=offset_of_max,
        )
        self._write(buffer, now_ms, info, entries)
        if leader_epoch >= 0 and self.epoch_cache.assign(leader_epoch, first_offset):
            self._write_epoch_checkpoint_after_append()
        return info

    def append_as_follower(
        self, batches: bytes | bytearray | memoryview, now_ms: int
    ) -> AppendInfo:
        """Store batches exactly as received. Each batch must start at the offset after the
        previous one, the first at the LEO, else NonContiguousAppendError (a KafkaError) and
        nothing is appended. The epoch cache gets ``assign(batch epoch, base offset)`` per batch."""
        self._check_open()
        headers = self._validate_set(batches, leader=False)
        if not headers:
            return self._empty_append_info(UNDEFINED_EPOCH)
        expected = self.log_end_offset
        num_records = 0
        max_timestamp = NO_TIMESTAMP
        offset_of_max = expected
        entries: list[tuple[int, int, int, int, int]] = []
        # A compacted leader's log has gaps where the cleaner removed records (Kafka accepts
        # any increasing offsets from the fetch offset on); other logs must be contiguous.
        gaps_allowed = self.gaps_allowed
        for position, header in headers:
            if header.base_offset != expected and not (
                gaps_allowed and header.base_offset > expected
            ):
                raise NonContiguousAppendError(
                    f"{self.topic_partition}: follower append of batch at position {position} "
                    f"with base offset {header.base_offset}, expected {expected} "
                    f"(log end offset {self.log_end_offset}); nothing appended",
                )
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
            num_records += header.records_count
            expected = header.next_offset
            entries.append(
                (
                    position,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                    header.size,
                )
            )
        first = headers[0][1]
        info = AppendInfo(
            first_offset=first.base_offset,
            last_offset=expected - 1,
            num_records=num_records,
            num_batches=len(headers),
            max_timestamp_ms=max_timestamp,
            log_append_time_ms=NO_TIMESTAMP,
            first_batch_epoch=first.partition_leader_epoch,
            offset_of_max_timestamp=offset_of_max,
        )
        self._write(batches, now_ms, info, entries)
        changed = False
        for _, header in headers:
            if header.partition_leader_epoch >= 0:
                changed |= self.epoch_cache.assign(
                    header.partition_leader_epoch, header.base_offset
                )
        if changed:
            self._write_epoch_checkpoint_after_append()
        return info

    def _empty_append_info(self, epoch: int) -> AppendInfo:
        return AppendInfo(
            self.log_end_offset, self.log_end_offset - 1, 0, 0, NO_TIMESTAMP, NO_TIMESTAMP, epoch
        )

    def _write(
        self,
        buffer: bytes | bytearray | memoryview,
        now_ms: int,
        info: AppendInfo,
        entries: list[tuple[int, int, int, int, int]],
    ) -> None:
        """Write a validated set; ``entries`` are (position in set, base offset, last offset,
        max timestamp, size) per batch, for the indexes."""
        try:
            segment = self._maybe_roll(len(buffer), info.last_offset, now_ms)
        except OSError as exc:
            raise self._failed_write("rolling a new segment", exc) from exc
        position = segment.size
        saved = (segment.bytes_since_last_index_entry, segment.max_timestamp,
                 segment.offset_of_max_timestamp, segment.roll_base_ms)
        try:
            segment.log.write(buffer)
            if segment.roll_base_ms is None:
                segment.roll_base_ms = now_ms
            interval = self.config.index_interval_bytes
            note = segment.note_batch
            for rel_position, base, last, timestamp, size in entries:
                note(base, last, timestamp, size, position + rel_position, interval)
        except OSError as exc:
            # A full disk (ENOSPC, EDQUOT) or an I/O error part-way: put the segment and its
            # indexes back as they were, so the log stays whole and the LEO does not move.
            self._undo_append(segment, position, info.first_offset, saved)
            raise self._failed_write("appending", exc) from exc
        segment.dirty = True
        self.log_end_offset = info.last_offset + 1
        if self._epoch_checkpoint_pending:
            self._write_epoch_checkpoint_after_append()
        self._unflushed_messages += info.num_records
        policy = self.config.flush_policy
        if policy is FlushPolicy.GROUP_COMMIT:
            self._flush_requested = True
        elif (
            policy is FlushPolicy.INTERVAL
            and self._unflushed_messages >= self.config.flush_interval_messages
        ):
            self.flush(now_ms)

    def _undo_append(self, segment: Segment, position: int, first_offset: int,
                     saved: tuple[int, int, int, int | None]) -> None:
        try:
            segment.log.truncate(position)
            segment.index.truncate_to_position(position)
            segment.time_index.truncate_to_offset(first_offset)
        except OSError as exc:  # pragma: no cover - truncation frees space; EIO only
            self._storage_error = f"could not undo a failed append at position {position}: {exc}"
            logger.error("%s %s; the log is offline", self._ctx(), self._storage_error)
            return  # offline: recovery at the next start truncates the torn tail
        (segment.bytes_since_last_index_entry, segment.max_timestamp,
         segment.offset_of_max_timestamp, segment.roll_base_ms) = saved

    def _failed_write(self, doing: str, exc: OSError) -> KafkaError:
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                          f"{self.topic_partition}: {doing} failed: {exc.strerror or exc}")

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Becoming leader of ``epoch`` (KAFKA-7415): record it at ``start_offset`` (normally
        the LEO) and make the checkpoint durable before accepting writes."""
        if self.epoch_cache.assign(epoch, start_offset):
            logger.info(
                "%s assigned leader epoch %d at offset %d", self._ctx(), epoch, start_offset
            )
        self._write_epoch_checkpoint()

    # ========================================================================================
    # Reads
    # ========================================================================================
    @property
    def truncation_generation(self) -> int:
        """Bumped by every truncation (bytes at a file position may differ afterwards)."""
        return self._flush_generation

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset_exclusive: int | None = None,
        *,
        lazy_min_bytes: int | None = None,
    ) -> ReadInfo:
        """Whole batches from the one containing ``start_offset``, at least one (if any
        qualifies) even if it is larger than ``max_bytes`` (KIP-74). Only one segment is read.

        ``max_offset_exclusive`` (the HW for consumers) bounds the read: no batch holding an
        offset at or beyond it is returned, so a consumer never sees an offset >= HW even if the
        bound fell inside a batch (it never does in practice: HWs are batch boundaries).

        ``lazy_min_bytes``: find the batch range from headers and the offset index only, without
        reading the data; a range of at least that many bytes is returned as ``file_slice`` (the
        caller must close it), a smaller one is read into ``records`` as usual. Same batches,
        offsets and bytes as an ordinary read."""
        self._check_open()
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{self.topic_partition}: offset {start_offset} outside "
                f"[{self.log_start_offset}, {self.log_end_offset}]",
            )
        limit = (
            self.log_end_offset
            if max_offset_exclusive is None
            else min(max_offset_exclusive, self.log_end_offset)
        )
        index = self._segment_for(start_offset)
        while index < len(self.segments):
            segment = self.segments[index]
            found = (
                segment.find_batch(start_offset, self._scan_bytes) if start_offset < limit else None
            )
            if found is not None:
                position, header = found
                if header.next_offset > limit:
                    break
                if lazy_min_bytes is not None:
                    return self._read_lazy(segment, position, header, max_bytes, limit,
                                           lazy_min_bytes)
                return self._read_from(segment, position, header, max_bytes, limit)
            if start_offset >= limit:
                break
            index += 1  # the offset is past this segment's data (e.g. a gap); try the next
        return ReadInfo(b"", start_offset, start_offset, None, 0, 0)

    def _read_from(
        self, segment: Segment, position: int, first: BatchHeader, max_bytes: int, limit: int
    ) -> ReadInfo:
        available = segment.size - position
        if limit < self.log_end_offset:
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

    def _read_lazy(
        self,
        segment: Segment,
        position: int,
        first: BatchHeader,
        max_bytes: int,
        limit: int,
        lazy_min_bytes: int,
    ) -> ReadInfo:
        """The range ``_read_from`` would return, found without reading the records: jump to
        the last offset-index entry inside the byte budget (index entries sit at batch starts,
        so every batch before one is whole), then walk the few headers after it."""
        segment_size = segment.size
        byte_bound = min(position + max(first.size, max_bytes), segment_size)
        if limit < self.log_end_offset:
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
        file_slice = FileSlice(handle, position, size, self._flush_generation,
                               lambda: self._flush_generation)
        return ReadInfo(b"", first.base_offset, next_offset, segment.path, position, size,
                        handle.fileno(), file_slice)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int, int] | None:
        """(offset, timestamp_ms, leader_epoch) of the first record with timestamp >=
        ``timestamp_ms``; or for -2 (earliest) / -1 (latest) / -3 (max timestamp). None if no
        record qualifies."""
        self._check_open()
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return (
                self.log_start_offset,
                NO_TIMESTAMP,
                self.epoch_cache.epoch_for_offset(self.log_start_offset),
            )
        if timestamp_ms == LATEST_TIMESTAMP:
            return self.log_end_offset, NO_TIMESTAMP, self.epoch_cache.latest_epoch
        if timestamp_ms == MAX_TIMESTAMP:
            best: Segment | None = None
            for segment in self.segments:
                if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                    best = segment
            if best is None or best.max_timestamp == NO_TIMESTAMP:
                return None
            offset = max(best.offset_of_max_timestamp, self.log_start_offset)
            return offset, best.max_timestamp, self.epoch_cache.epoch_for_offset(offset)
        for segment in self.segments:
            if segment.size == 0 or segment.max_timestamp < timestamp_ms:
                continue
            start = max(segment.time_index.lookup_below(timestamp_ms), self.log_start_offset)
            _, position = segment.index.lookup(start)
            for pos, header in scan_batches(segment.log, position, validate=False):
                if (
                    header.max_timestamp < timestamp_ms
                    or header.next_offset <= self.log_start_offset
                ):
                    continue
                data = segment.read_at(pos, header.size)
                _, records = decode_batch(data, 0, validate=False)
                for record in records:
                    if (
                        record.offset >= self.log_start_offset
                        and record.timestamp_ms >= timestamp_ms
                    ):
                        return record.offset, record.timestamp_ms, header.partition_leader_epoch
        return None

    def iter_batch_headers(
        self, start_offset: int | None = None, end_offset: int | None = None
    ) -> Iterator[BatchHeader]:
        """Headers of the batches overlapping [start_offset, end_offset) (defaults: whole log)."""
        start = self.log_start_offset if start_offset is None else start_offset
        end = self.log_end_offset if end_offset is None else end_offset
        if start >= end or not self.segments:
            return
        for segment in self.segments[self._segment_for(start) :]:
            if segment.base_offset >= end:
                return
            _, position = segment.index.lookup(start)
            for _, header in scan_batches(segment.log, position, validate=False):
                if header.base_offset >= end:
                    return
                if header.last_offset >= start:
                    yield header

    # ========================================================================================
    # Truncation and retention
    # ========================================================================================
    def truncate_to(self, offset: int) -> None:
        """Remove every batch containing an offset >= ``offset`` (batch granularity: a batch
        that straddles ``offset`` goes entirely, so the LEO may end up below ``offset``).

        Unlike Kafka (which leaves it to the OS), a truncation is made durable at once: the log
        is flushed before the epoch checkpoint is rewritten, so a crash can neither resurrect
        truncated (divergent) batches nor leave the checkpoint describing a log that is gone."""
        self._check_open()
        if offset >= self.log_end_offset:
            if self.epoch_cache.truncate_from_end(self.log_end_offset):
                self._write_epoch_checkpoint()
            return
        if offset <= self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            segment = self.segments.pop()
            self._base_offsets.pop()
            self._delete_segment_files(segment)
        active = self.active_segment
        found = active.find_batch(offset, self._scan_bytes)
        if found is not None:
            position, header = found
            # min(): in a compacted log ``offset`` may fall in a gap before this batch.
            new_end = min(header.base_offset, offset)
            active.log.truncate(position)
            active.index.truncate_to_position(position)
            active.time_index.truncate_to_offset(new_end)
            self._recompute_max_timestamp(active)
            active.dirty = True
        else:
            # Only whole segments at or above ``offset`` had to go.
            new_end = self._segment_next_offset(active)
        old_end = self.log_end_offset
        self.log_end_offset = new_end
        self._flush_generation += 1
        self.recovery_point = min(self.recovery_point, new_end)
        logger.info(
            "%s truncated log from end offset %d to %d (requested %d)",
            self._ctx(),
            old_end,
            new_end,
            offset,
        )
        self.flush()
        if self.epoch_cache.truncate_from_end(self.log_end_offset):
            self._write_epoch_checkpoint()

    def _recompute_max_timestamp(self, segment: Segment) -> None:
        """After a truncation: the time index's last entry holds the maximum timestamp up to
        the last offset-index entry (both were truncated consistently); scan from there."""
        time_index = segment.time_index
        segment.max_timestamp = time_index.last_timestamp
        segment.offset_of_max_timestamp = segment.base_offset + (
            time_index.relative_offsets[-1] if time_index.relative_offsets else 0
        )
        segment.bytes_since_last_index_entry = 0
        start = segment.index.positions[-1] if segment.index.positions else 0
        for _, header in scan_batches(segment.log, start, validate=False):
            if header.max_timestamp > segment.max_timestamp:
                segment.max_timestamp = header.max_timestamp
                segment.offset_of_max_timestamp = header.last_offset
            segment.bytes_since_last_index_entry += header.size
        if segment.size == 0:
            segment.roll_base_ms = None

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything; the log restarts empty at ``offset`` (epoch cache cleared)."""
        self._check_open()
        self._delete_all_segments()
        self._add_segment(offset)
        self.log_start_offset = offset
        self.log_end_offset = offset
        self._flush_generation += 1
        self.recovery_point = offset
        self.flush()  # durable before the checkpoint changes, as in truncate_to
        self.epoch_cache.clear()
        self._write_epoch_checkpoint()
        logger.info("%s truncated fully, log restarts at offset %d", self._ctx(), offset)

    def maybe_increment_log_start_offset(self, offset: int, high_watermark: int) -> bool:
        """Advance the log start offset (DeleteRecords, retention); never past the HW.
        Segments entirely below it are deleted by the next ``apply_retention``."""
        if offset > high_watermark:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{self.topic_partition}: cannot move log start offset to {offset}, "
                f"beyond the high watermark {high_watermark}",
            )
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        if self.epoch_cache.truncate_from_start(offset):
            self._write_epoch_checkpoint()
        logger.info("%s log start offset advanced to %d", self._ctx(), offset)
        return True

    def apply_retention(self, now_ms: int, high_watermark: int) -> int:
        """Delete whole segments entirely below the HW that are beyond the log start offset,
        older than retention.ms, or in excess of retention.bytes. Returns how many went."""
        self._check_open()
        deletable: list[Segment] = []
        total = sum(s.size for s in self.segments)
        for i, segment in enumerate(self.segments[:-1]):  # never the active segment
            upper = self.segments[i + 1].base_offset  # exclusive upper bound of this segment
            if upper > high_watermark:
                break
            if upper <= self.log_start_offset:
                deletable.append(segment)
                total -= segment.size
                continue
            if not self.config.delete:
                break  # cleanup.policy=compact: only the log start offset deletes segments
            expired = (
                self.config.retention_ms >= 0
                and segment.max_timestamp != NO_TIMESTAMP
                and now_ms - segment.max_timestamp > self.config.retention_ms
            )
            too_big = (
                self.config.retention_bytes >= 0
                and total - segment.size >= self.config.retention_bytes
            )
            if not (expired or too_big):
                break
            deletable.append(segment)
            total -= segment.size
        if not deletable:
            return 0
        for segment in deletable:
            self._delete_segment_files(segment)
        count = len(deletable)
        del self.segments[:count]
        del self._base_offsets[:count]
        new_start = self.segments[0].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.epoch_cache.truncate_from_start(new_start)
            self._write_epoch_checkpoint()
        logger.info(
            "%s retention deleted %d segment(s); log_start_offset=%d",
            self._ctx(),
            count,
            self.log_start_offset,
        )
        return count

    # ========================================================================================
    # Log compaction: replacing closed segments by their cleaned versions
    # ========================================================================================
    def replace_segment(self, segment: Segment, cleaned: bytes | bytearray | None) -> None:
        """Replace a closed segment by its cleaned version (same base offset), or delete it when
        ``cleaned`` is None: ``write_cleaned_file`` then ``install_cleaned_segments``."""
        path = None if cleaned is None else self.write_cleaned_file(segment.base_offset, cleaned)
        self.install_cleaned_segments([segment], path)

    def cleaned_file_path(self, base_offset: int) -> str:
        return f"{self.path}/{segment_file_name(base_offset, _LOG_SUFFIX)}{CLEANED_SUFFIX}"

    def write_cleaned_file(self, base_offset: int, data: bytes | bytearray) -> str:
        """Write and fsync ``<base>.log.cleaned``; returns its path. Touches no state of the
        log, so it may run on a worker thread. A partial file is removed on error."""
        path = self.cleaned_file_path(base_offset)
        fs = self.fs
        try:
            if fs.exists(path):
                fs.remove(path)
            handle = fs.open(path)
            try:
                handle.write(data)
                handle.fsync()
            finally:
                handle.close()
        except OSError:
            self.discard_cleaned_file(path)
            raise
        return path

    def discard_cleaned_file(self, path: str) -> None:
        with contextlib.suppress(OSError):
            if self.fs.exists(path):
                self.fs.remove(path)

    def install_cleaned_segments(self, group: list[Segment], cleaned_path: str | None) -> None:
        """Put a cleaned file (from ``write_cleaned_file`` for the first segment's base offset,
        fsynced) in place of ``group``, consecutive closed segments (several are merged into
        one, as Kafka's cleaner groups small segments); or delete the group when
        ``cleaned_path`` is None (every record in it was superseded; never the first segment).

        Crash-safe as Kafka's cleaner: ``.cleaned`` is renamed ``<base>.log.swap`` and the
        directory fsynced (from here on, recovery completes the swap: the swap file replaces
        every segment whose base offset lies in its offset range); the other segments of the
        group and the old index files are removed, the swap file is renamed over
        ``<base>.log``, and the indexes are rebuilt from the new data. Offsets are untouched:
        the batches keep theirs.
        """
        self._check_open()
        i = self.segments.index(group[0])
        j = i + len(group)
        if self.segments[i:j] != group:
            raise ValueError("a cleaned group must be consecutive segments")
        if j >= len(self.segments):
            raise ValueError("the active segment is never cleaned")
        fs = self.fs
        self._was_compacted = True
        if cleaned_path is None:
            if i == 0:
                raise ValueError("the first segment is replaced, not deleted")
            for segment in group:
                self._delete_segment_files(segment)
            del self.segments[i:j]
            del self._base_offsets[i:j]
            fs.fsync_dir(self.path)
            self._dir_dirty = False
            return
        first = group[0]
        log_path = first.log.path
        swap_path = log_path + SWAP_SUFFIX
        try:
            fs.rename(cleaned_path, swap_path)
            fs.fsync_dir(self.path)
        except OSError as exc:
            # Nothing was replaced yet: drop the file, the old segments stay.
            for path in (cleaned_path, swap_path):
                self.discard_cleaned_file(path)
            raise self._failed_write(f"installing cleaned segment {first.base_offset}",
                                     exc) from exc
        try:
            for segment in group[1:]:
                self._delete_segment_files(segment)
            first.close()
            for path in (first.index.file.path, first.time_index.file.path):
                if fs.exists(path):
                    fs.remove(path)
            fs.rename(swap_path, log_path)
            fs.fsync_dir(self.path)
            self._dir_dirty = False
        except OSError as exc:
            # Half swapped: the log is offline; the next open completes the swap.
            self._storage_error = f"swapping in cleaned segment {first.base_offset}: {exc}"
            logger.error("%s %s; the log is offline", self._ctx(), self._storage_error)
            raise self._failed_write(f"swapping in cleaned segment {first.base_offset}",
                                     exc) from exc
        replacement = Segment(fs, self.path, first.base_offset)
        replacement.rebuild_indexes(self.config.index_interval_bytes)
        replacement.on_become_inactive()
        replacement.flush()
        replacement.release_index_files()
        self.segments[i:j] = [replacement]
        self._base_offsets[i:j] = [first.base_offset]

    # ========================================================================================
    # Flush and close
    # ========================================================================================
    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def flush_requested(self) -> bool:
        return self._flush_requested

    def request_flush(self) -> None:
        self._flush_requested = True

    def maybe_flush(self, now_ms: int) -> bool:
        """Apply the flush policy; returns True if it flushed."""
        policy = self.config.flush_policy
        due = False
        if policy is FlushPolicy.GROUP_COMMIT or self._flush_requested:
            due = self._flush_requested
        if policy is FlushPolicy.INTERVAL:
            if self._unflushed_messages >= self.config.flush_interval_messages:
                due = True
            interval = self.config.flush_interval_ms
            if (
                interval is not None
                and self._unflushed_messages > 0
                and now_ms - self._last_flush_ms >= interval
            ):
                due = True
        if due:
            self.flush(now_ms)
        return due

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment with unsynced data (and the directory if segments were created or
        deleted); the recovery point becomes the log end offset. An fsync error is fatal for the
        log (KAFKA_STORAGE_ERROR from then on): after a failed fsync the kernel may have dropped
        the dirty pages, so retrying could report success for data that is gone."""
        ticket = self.begin_flush(now_ms)
        ticket.run()
        self.complete_flush(ticket)

    def begin_flush(self, now_ms: int | None = None) -> FlushTicket:
        """Capture the pending fsyncs (on the thread that owns the log). ``ticket.run()`` does
        the fsyncs and may run on a worker thread (it holds its own duplicated handles, so the
        log may keep appending, roll or delete segments meanwhile); then call
        ``complete_flush(ticket)`` on the owning thread to advance the recovery point."""
        self._check_open()
        handles: list[FileHandle] = []
        for segment in self.segments:
            if segment.dirty:
                handles.extend(segment.take_sync_handles())
        directory = self.path if self._dir_dirty else None
        self._dir_dirty = False
        self._unflushed_messages = 0
        self._flush_requested = False
        if now_ms is not None:
            self._last_flush_ms = now_ms
        return FlushTicket(self.fs, handles, directory, self.log_end_offset, self._flush_generation)

    def complete_flush(self, ticket: FlushTicket) -> None:
        if not ticket.done:
            self._storage_error = f"fsync failed: {ticket.error}"
            logger.error("%s %s; the log is offline", self._ctx(), self._storage_error)
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{self.topic_partition}: {self._storage_error}"
            )
        if ticket.generation == self._flush_generation:
            target = min(ticket.target_offset, self.log_end_offset)
            self.recovery_point = max(self.recovery_point, target)

    def close(self) -> None:
        """Flush (unless the log is offline after an fsync error) and close every file."""
        if self._closed:
            return
        try:
            if self._storage_error is None:
                self.flush()
        finally:
            for segment in self.segments:
                segment.close()
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def offline(self) -> bool:
        """An fsync failed: the log refuses every operation until it is reopened."""
        return self._storage_error is not None

    def _check_open(self) -> None:
        if self._storage_error is not None:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{self.topic_partition}: {self._storage_error}"
            )
        if self._closed:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{self.topic_partition}: log is closed"
            )

    # -- introspection ------------------------------------------------------------------------
    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_base_offsets(self) -> list[int]:
        return list(self._base_offsets)

    def read_all(self) -> bytes:
        """Every batch from the log start, concatenated (tests, simulator checks, CLI)."""
        out = bytearray()
        offset = self.log_start_offset
        while offset < self.log_end_offset:
            info = self.read(offset, 1 << 30)
            if info.is_empty:
                break
            out += info.records
            offset = info.next_offset
        return bytes(out)
