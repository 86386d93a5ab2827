"""One partition's log: segments, appends, reads, truncation, retention, flush and recovery.

The data directory layout is Kafka's::

    <data dir>/<topic>-<partition>/00000000000000000000.log|.index|.timeindex
    <data dir>/<topic>-<partition>/leader-epoch-checkpoint

Record batches are stored exactly as bytes. A leader append validates every batch, then patches
``baseOffset`` and ``partitionLeaderEpoch`` in place (outside the CRC) and writes the whole set with
one write; a follower append stores batches as received after checking CRC and contiguity.

Beside this module: ``recovery`` (opening a directory after a clean or unclean stop), ``policies``
(which segments retention deletes, when a flush is due), ``appends``
(record-set validation, ``AppendInfo``), ``reads`` (batch ranges, search by timestamp), ``swap``
(the cleaner's crash-safe segment replacement), ``segment`` (one segment's files and indexes).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import posixpath
import threading
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence

from floodmark.errors import ErrorCode, KafkaError
from floodmark.records import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from floodmark.replication import UNDEFINED_EPOCH, AbortedTxn, EpochCache
from floodmark.storage import swap
from floodmark.storage.appends import AppendInfo, NonContiguousAppendError, validate_record_set
from floodmark.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    LeaderEpochCheckpointFile,
    TopicPartition,
)
from floodmark.storage.config import FlushPolicy, LogConfig
from floodmark.storage.fs import FileHandle, FileSystem, FlushTicket, RealFileSystem
from floodmark.storage.policies import deletable_segments, flush_due
from floodmark.storage.reads import ReadInfo, offset_for_timestamp, read_batches, read_batches_lazy
from floodmark.storage.recovery import recover_log
from floodmark.storage.segment import (
    MAX_RELATIVE_OFFSET,
    OFFSET_INDEX_ENTRY_BYTES,
    TIME_INDEX_ENTRY_BYTES,
    Segment,
    scan_batches,
)
from floodmark.storage.txn_index import EVIDENCE_SUFFIX, entry_mismatch

logger = logging.getLogger(__name__)

_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
"""Errors of a full disk: retriable, never a failed directory."""


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


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
        # Every write of leader-epoch-checkpoint started gets a version; the latest one known
        # durable is kept, so a batched write (``storage.epoch_checkpoints``) that a later one
        # overtook neither renames its older text over the newer file nor counts as durable.
        self._epoch_checkpoint_version = 0
        self._epoch_checkpoint_durable_version = 0
        # Held while the checkpoint's files are touched, by the loop's writes and by a batch's
        # worker thread (``storage.epoch_checkpoints``): a worker checks that its write is still
        # the latest and renames it under it, so no older text lands over a newer one.
        self.epoch_checkpoint_lock = threading.Lock()
        self._flush_generation = 0  # bumped by truncation: older flush tickets are stale
        self._storage_error: str | None = None
        self._last_io_error: str | None = None  # see ``_failed_write``
        self.on_trouble: Callable[[], None] | None = None
        """Called when the log meets an I/O error or goes offline (the broker's log-directory
        check looks at such logs only, not at every log each round)."""
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

    # -- Opening and recovery ----------------------------------------------------------------------
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
        recovered = recover_log(log.fs, path, log.config, log._epoch_file, log.topic_partition,
                                recovery_point=recovery_point, log_start_offset=log_start_offset,
                                clean_shutdown=clean_shutdown, gaps_allowed=log.gaps_allowed)
        log.segments = recovered.segments
        log._base_offsets = [segment.base_offset for segment in recovered.segments]
        log.log_start_offset = recovered.log_start_offset
        log.log_end_offset = recovered.log_end_offset
        log.epoch_cache = recovered.epoch_cache
        log._dir_dirty = recovered.dir_dirty
        # Recovered data is made durable (a no-op when nothing changed), so the recovery point
        # moves to the end.
        log.flush()
        # The active segment's index files reopen at its first index entry: until it is written
        # to, a partition holds one fd (its .log), not three (thousands of idle partitions ran
        # a broker into its open-files limit).
        log.active_segment.release_index_files()
        logger.info(
            "%s opened: log_start_offset=%d log_end_offset=%d segments=%d epoch cache %s",
            log._ctx(),
            log.log_start_offset,
            log.log_end_offset,
            len(log.segments),
            log.epoch_cache,
        )
        return log

    def _write_epoch_checkpoint(self) -> None:
        try:
            with self.epoch_checkpoint_lock:
                self._epoch_checkpoint_version += 1
                version = self._epoch_checkpoint_version
                self._epoch_file.write(self.epoch_cache.entries())
        except OSError as exc:
            self._epoch_checkpoint_pending = True
            raise self._failed_write("writing leader-epoch-checkpoint", exc) from exc
        self._epoch_checkpoint_pending = False
        self._epoch_checkpoint_durable_version = version

    # -- A batched (deferred) epoch checkpoint write: ``storage.epoch_checkpoints`` ----------------
    def begin_epoch_checkpoint(self) -> tuple[int, str, bytes]:
        """Start a write of the checkpoint as the cache is now: (version, path, contents).
        The caller (any thread) writes ``path + ".tmp"`` and later renames it, each holding
        ``epoch_checkpoint_lock`` and only while ``epoch_checkpoint_current(version)``; fsyncs
        the temp file before the rename and the directory after it; then calls
        ``end_epoch_checkpoint`` on the log's own thread."""
        with self.epoch_checkpoint_lock:
            self._epoch_checkpoint_version += 1
            return (self._epoch_checkpoint_version, self._epoch_file.path,
                    self._epoch_file.render(self.epoch_cache.entries()))

    def epoch_checkpoint_current(self, version: int) -> bool:
        """No later write of the checkpoint started since ``version`` (and the log is open):
        its temporary file is its own, and may be renamed over the checkpoint. Ask holding
        ``epoch_checkpoint_lock``."""
        return version == self._epoch_checkpoint_version and not self._closed

    def end_epoch_checkpoint(self, version: int, error: OSError | None, *,
                             installed: bool) -> bool:
        """The batched write ``version`` ended: its temp file synced, renamed if it was still
        current (``installed``), the directory synced. True when the file now durably holds
        at least what that write held (this write, or a later one that completed)."""
        if error is not None:
            if version == self._epoch_checkpoint_version:
                self._epoch_checkpoint_pending = True  # retried at the next append or flush
            failed = self._failed_write("writing leader-epoch-checkpoint", error)
            logger.error("%s %s", self._ctx(), failed.message)
            return False
        if installed:
            if version == self._epoch_checkpoint_version:
                self._epoch_checkpoint_pending = False
            self._epoch_checkpoint_durable_version = max(self._epoch_checkpoint_durable_version,
                                                         version)
        return self._epoch_checkpoint_durable_version >= version

    def _write_epoch_checkpoint_after_append(self) -> None:
        """The batches are written: a checkpoint that cannot be written now (full disk) is
        retried at the next append or flush; the epochs are also in the batches themselves,
        which recovery reads, so nothing is lost if the process dies first."""
        with contextlib.suppress(KafkaError):
            self._write_epoch_checkpoint()

    # -- Segments ----------------------------------------------------------------------------------
    @property
    def active_segment(self) -> Segment:
        return self.segments[-1]

    def _add_segment(self, base_offset: int) -> Segment:
        segment = Segment.create(self.fs, self.path, base_offset)
        self.segments.append(segment)
        self._base_offsets.append(base_offset)
        self._dir_dirty = True
        return segment

    def _delete_segment_files(self, segment: Segment) -> None:
        segment.delete(self.fs)
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
            and now_ms - active.roll_base_ms >= self._max_segment_ms - self._roll_jitter_ms(active)
        ):
            reason = (f"age {now_ms - active.roll_base_ms} ms >= segment.ms "
                      f"{self._max_segment_ms} - jitter {self._roll_jitter_ms(active)} ms")
        elif (len(active.index) >= self.config.segment_index_bytes // OFFSET_INDEX_ENTRY_BYTES
              # as Kafka's TimeIndex.isFull: the last entry is kept for the roll's own
              or len(active.time_index) >= self.config.segment_index_bytes
              // TIME_INDEX_ENTRY_BYTES - 1):
            reason = f"index full (segment.index.bytes {self.config.segment_index_bytes})"
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

    def _roll_jitter_ms(self, segment: Segment) -> int:
        """segment.jitter.ms: this segment's share, in [0, min(jitter, segment.ms)). Kafka draws
        it at random per segment; here it is a hash of the partition and the base offset, so
        the simulator stays reproducible and partitions still roll at different times."""
        jitter = min(self.config.segment_jitter_ms, self._max_segment_ms)
        if jitter <= 0:
            return 0
        return zlib.crc32(f"{self.topic_partition}:{segment.base_offset}".encode()) % jitter

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

    # -- Appends -----------------------------------------------------------------------------------
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
        headers = validate_record_set(buffer, self.config.max_message_bytes, self.topic_partition,
                                      leader=True)
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
        headers = validate_record_set(batches, self.config.max_message_bytes, self.topic_partition,
                                      leader=False)
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
            self._go_offline(f"could not undo a failed append at position {position}: {exc}")
            logger.error("%s %s; the log is offline", self._ctx(), self._storage_error)
            return  # offline: recovery at the next start truncates the torn tail
        (segment.bytes_since_last_index_entry, segment.max_timestamp,
         segment.offset_of_max_timestamp, segment.roll_base_ms) = saved

    def _failed_write(self, doing: str, exc: OSError) -> KafkaError:
        # Remembered for the broker's log-directory check: an I/O error takes the whole
        # directory offline (JBOD), as in Kafka. A full disk does not (ENOSPC, EDQUOT): the
        # write was undone, the answer is the retriable KAFKA_STORAGE_ERROR and writes resume
        # once space returns, without a restart (docs/storage.md; Kafka takes the directory
        # offline here).
        if exc.errno not in _DISK_FULL:
            self.last_io_error = f"{doing}: {exc.strerror or exc}"
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                          f"{self.topic_partition}: {doing} failed: {exc.strerror or exc}")

    def assign_epoch(self, epoch: int, start_offset: int, *, durable: bool = True) -> None:
        """Becoming leader of ``epoch`` (KAFKA-7415): record it at ``start_offset`` (normally
        the LEO) and make the checkpoint durable before accepting writes. ``durable=False``
        only records it: the caller makes the checkpoint durable (a batch of many partitions'
        writes, ``storage.epoch_checkpoints``) and accepts no write before that."""
        if self.epoch_cache.assign(epoch, start_offset):
            logger.info(
                "%s assigned leader epoch %d at offset %d", self._ctx(), epoch, start_offset
            )
        if durable:
            self._write_epoch_checkpoint()

    # -- Reads -------------------------------------------------------------------------------------
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
                    return read_batches_lazy(segment, position, header, max_bytes, limit,
                                             self.log_end_offset, lazy_min_bytes,
                                             lambda: self._flush_generation)
                return read_batches(segment, position, header, max_bytes, limit,
                                    self.log_end_offset)
            if start_offset >= limit:
                break
            index += 1  # the offset is past this segment's data (e.g. a gap); try the next
        return ReadInfo(b"", start_offset, start_offset, None, 0, 0)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int, int] | None:
        """(offset, timestamp_ms, leader_epoch) of the first record with timestamp >=
        ``timestamp_ms``; or for -2 (earliest) / -1 (latest) / -3 (max timestamp). None if no
        record qualifies."""
        self._check_open()
        return offset_for_timestamp(self.segments, self.log_start_offset, self.log_end_offset,
                                    self.epoch_cache, timestamp_ms)

    def iter_whole_batches(
        self, start_offset: int | None = None, end_offset: int | None = None
    ) -> Iterator[BatchHeader]:
        """The batches overlapping [start_offset, end_offset) (defaults: the whole log), each as a
        header viewing its *whole* batch, so that what needs a batch's records (the producer
        state rebuild reads every transaction marker) can decode them: ``scan_batches`` reads a
        batch that straddles a read chunk in one piece."""
        start = self.log_start_offset if start_offset is None else start_offset
        end = self.log_end_offset if end_offset is None else end_offset
        if start >= end or not self.segments:
            return
        for segment in self.segments[self._segment_for(start) :]:
            if segment.base_offset >= end:
                return
            _, position = segment.index.lookup(start)
            for _, header in scan_batches(segment.log, position, validate=False,
                                          chunk_bytes=self.config.scan_chunk_bytes):
                if header.base_offset >= end:
                    return
                if header.last_offset >= start:
                    yield header

    # -- Aborted transactions (the segments' .txnindex files) --------------------------------------
    def append_aborted_transactions(self, entries: Sequence[AbortedTxn]) -> None:
        """Index aborts just appended (leader or follower): each in the segment holding its
        marker. Made durable with the segment's next flush."""
        self._check_open()
        for entry in entries:
            segment = self.segments[self._segment_for(entry.last_offset)]
            if segment.txn_index.append([entry]):
                self._dir_dirty = True
            segment.dirty = True

    def restore_aborted_transactions(self, entries: Sequence[AbortedTxn]) -> None:
        """At open: make every segment's index hold the aborts the producer state found in the
        log (rewriting only the files that differ). Where a file and the rebuild differ, every
        differing entry is checked against the log itself (``txn_index.entry_mismatch``): the
        index keeps the entries the log bears out, from either side, so a rebuild can never
        make a right index worse; the old file is kept as ``.txnindex.before-rebuild`` and the
        differences are logged, an entry of the rebuild the log refutes as an error."""
        self._check_open()
        by_segment: defaultdict[int, list[AbortedTxn]] = defaultdict(list)
        for entry in entries:
            by_segment[self._segment_for(entry.last_offset)].append(entry)
        changed = 0
        for i, segment in enumerate(self.segments):
            rebuilt = by_segment.get(i, [])
            current = segment.txn_index.entries
            if rebuilt == current:
                continue
            kept = self._checked_aborts(segment, current, rebuilt)
            if segment.txn_index.keep_evidence():
                self._dir_dirty = True
            if segment.txn_index.restore(kept):
                segment.dirty = True
                self._dir_dirty = True
                changed += 1
        if changed:
            logger.warning("%s rebuilt the aborted-transaction index of %d segment(s) from the "
                           "log (the previous files are kept as *%s)", self._ctx(), changed,
                           EVIDENCE_SUFFIX)
            self.flush()

    def _checked_aborts(self, segment: Segment, current: list[AbortedTxn],
                        rebuilt: list[AbortedTxn]) -> list[AbortedTxn]:
        """The entries of ``rebuilt`` and ``current`` (a segment's index file) that the log
        bears out, in marker order; each difference logged."""
        def key(entry: AbortedTxn) -> tuple[int, int, int]:
            return entry.producer_id, entry.first_offset, entry.last_offset

        def mismatch(entry: AbortedTxn) -> str | None:
            return entry_mismatch(entry, self.iter_whole_batches(
                max(entry.first_offset, self.log_start_offset), entry.last_offset + 1))

        rebuilt_keys = {key(e) for e in rebuilt}
        current_keys = {key(e) for e in current}
        kept: dict[int, AbortedTxn] = {}
        for entry in rebuilt:
            if key(entry) in current_keys:
                kept[entry.last_offset] = entry
                continue
            why = mismatch(entry)
            if why is None:
                logger.warning("%s segment %d: the rebuild adds the abort %s, which the index "
                               "file lacked", self._ctx(), segment.base_offset, entry)
                kept[entry.last_offset] = entry
            else:
                logger.error("%s segment %d: the rebuilt aborted-transaction index holds %s, "
                             "which the log refutes (%s); left out", self._ctx(),
                             segment.base_offset, entry, why)
        for entry in current:
            if key(entry) in rebuilt_keys:
                continue
            why = mismatch(entry)
            if why is None:
                logger.error("%s segment %d: the rebuilt aborted-transaction index lacks %s, "
                             "which the log bears out; kept", self._ctx(), segment.base_offset,
                             entry)
                kept.setdefault(entry.last_offset, entry)
            else:
                logger.warning("%s segment %d: the index file's entry %s is not in the log "
                               "(%s); dropped", self._ctx(), segment.base_offset, entry, why)
        return [kept[last] for last in sorted(kept)]

    def collect_aborted_transactions(self, fetch_offset: int,
                                     upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), for a
        read_committed Fetch (their markers are at or after ``fetch_offset``: the search starts
        at its segment and stops where an entry's LSO reaches the bound)."""
        self._check_open()
        found: list[AbortedTxn] = []
        if upper_bound_offset <= fetch_offset:
            return found
        for segment in self.segments[self._segment_for(fetch_offset):]:
            entries, complete = segment.txn_index.collect(fetch_offset, upper_bound_offset)
            found.extend(entries)
            if complete:
                break
        return found

    # -- Truncation and retention ------------------------------------------------------------------
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
            active.txn_index.truncate_to(new_end)
            active.recompute_max_timestamp(self.config.scan_chunk_bytes)
            active.dirty = True
        else:
            # Only whole segments at or above ``offset`` had to go.
            new_end = active.next_offset(self.config.scan_chunk_bytes)
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
        count = deletable_segments(self.segments, self.log_start_offset, high_watermark,
                                   self.config, now_ms)
        if not count:
            return 0
        for segment in self.segments[:count]:
            self._delete_segment_files(segment)
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

    # -- Log compaction: replacing closed segments by their cleaned versions -----------------------
    def replace_segment(self, segment: Segment, cleaned: bytes | bytearray | None) -> None:
        """Replace a closed segment by its cleaned version (same base offset), or delete it when
        ``cleaned`` is None: ``write_cleaned_file`` then ``install_cleaned_segments``."""
        path = None if cleaned is None else self.write_cleaned_file(segment.base_offset, cleaned)
        self.install_cleaned_segments([segment], path)

    def write_cleaned_file(self, base_offset: int, data: bytes | bytearray) -> str:
        """``swap.write_cleaned_file`` in this log's directory (safe on a worker thread)."""
        return swap.write_cleaned_file(self.fs, self.path, base_offset, data)

    def discard_cleaned_file(self, path: str) -> None:
        swap.discard_cleaned_file(self.fs, path)

    def install_cleaned_segments(self, group: list[Segment], cleaned_path: str | None) -> None:
        """Put a cleaned file (from ``write_cleaned_file`` for the first segment's base offset,
        fsynced) in place of ``group``, consecutive closed segments (several are merged into
        one, as Kafka's cleaner groups small segments); or delete the group when
        ``cleaned_path`` is None (every record in it was superseded; never the first segment).
        Crash-safe as Kafka's cleaner: see ``floodmark.storage.swap``."""
        self._check_open()
        i = self.segments.index(group[0])
        j = i + len(group)
        if self.segments[i:j] != group:
            raise ValueError("a cleaned group must be consecutive segments")
        if j >= len(self.segments):
            raise ValueError("the active segment is never cleaned")
        self._was_compacted = True
        if cleaned_path is None:
            if i == 0:
                raise ValueError("the first segment is replaced, not deleted")
            for segment in group:
                self._delete_segment_files(segment)
            del self.segments[i:j]
            del self._base_offsets[i:j]
            self.fs.fsync_dir(self.path)
            self._dir_dirty = False
            return
        first = group[0].base_offset
        # The cleaner keeps every control batch, so the group's aborts stay in the replacement
        # (a crash before they are written is repaired at open, from the log).
        aborted = [e for segment in group for e in segment.txn_index.entries]
        try:
            replacement = swap.install(self.fs, self.path, group, cleaned_path,
                                       self.config.index_interval_bytes)
        except swap.SwapError as exc:
            if exc.started:
                # Half swapped: the log is offline; the next open completes the swap.
                self._go_offline(str(exc))
                logger.error("%s %s; the log is offline", self._ctx(), self._storage_error)
                raise self._failed_write(f"swapping in cleaned segment {first}",
                                         exc.cause) from exc
            raise self._failed_write(f"installing cleaned segment {first}", exc.cause) from exc
        self._dir_dirty = False
        self.segments[i:j] = [replacement]
        self._base_offsets[i:j] = [first]
        if replacement.txn_index.restore(aborted):
            replacement.txn_index.sync()
            self.fs.fsync_dir(self.path)

    # -- Flush and close ---------------------------------------------------------------------------
    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def flush_requested(self) -> bool:
        return self._flush_requested

    def request_flush(self) -> None:
        self._flush_requested = True

    def maybe_flush(self, now_ms: int) -> bool:
        """Apply the flush policy (``policies.flush_due``); returns True if it flushed."""
        due = flush_due(self.config, requested=self._flush_requested,
                        unflushed_messages=self._unflushed_messages,
                        last_flush_ms=self._last_flush_ms, now_ms=now_ms)
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
            self._go_offline(f"fsync failed: {ticket.error}")
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

    def take_offline(self, reason: str) -> None:
        """Its log directory failed (JBOD): every operation refuses with KAFKA_STORAGE_ERROR
        from now on, as after a failed fsync; the next start recovers it (if its disk is
        back)."""
        if self._storage_error is None:
            self._go_offline(reason)

    @property
    def last_io_error(self) -> str | None:
        """The last I/O error a write met (not a full disk): its directory has failed."""
        return self._last_io_error

    @last_io_error.setter
    def last_io_error(self, error: str | None) -> None:
        self._last_io_error = error
        if error is not None and self.on_trouble is not None:
            self.on_trouble()

    def _go_offline(self, reason: str) -> None:
        self._storage_error = reason
        if self.on_trouble is not None:
            self.on_trouble()

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
