"""Everything the broker asks of ``floodmark.storage``, in one place.

Opening (and so recovering) partition logs with their Kafka-named configuration, the log
directories (``log.dirs``: placement of new replicas, the start-up scan, each directory's id and
three checkpoint files: HW, recovery point, log start), flushing, deleting a partition's
directory, swapping in a replica moved to another directory, and reading a whole partition (for
the committed-offset replay).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from floodmark.broker.config import BrokerConfig, Configs, ConfigValue
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.setting_keys import (
    FLOODMARK_UNSAFE_POWER_LOSS_PAGE_CACHE,
    LOG_CLEANER_DEDUPE_BUFFER_SIZE,
)
from floodmark.errors import ErrorCode, KafkaError
from floodmark.metadata import TopicMeta
from floodmark.settings import validate_topic_configs
from floodmark.storage import (
    DELETE_SUFFIX,
    FUTURE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CopyState,
    CorruptCheckpointError,
    DirUsage,
    FileSystem,
    Log,
    LogCleaner,
    LogConfig,
    OffsetCheckpointFile,
    PageCacheFileSystem,
    RealFileSystem,
    check_or_set_topic_id,
    choose_log_dir,
    clamp_high_watermark,
    consume_clean_shutdown_marker,
    directory_bytes,
    fsync_directory,
    load_or_create_directory_id,
    move_name,
    scan_log_dirs,
    write_clean_shutdown_marker,
)

log = logging.getLogger(__name__)

# (sequence, per log directory: (high watermarks, recovery points, log start offsets))
Offsets = dict[tuple[str, int], int]
CheckpointSnapshot = tuple[int, dict[Path, tuple[Offsets, Offsets, Offsets]]]


BROKEN_DISK_ERRNOS = frozenset({errno.EIO, errno.EROFS, errno.ENODEV, errno.ENXIO})
"""Write errors that fail a log directory as a whole (Kafka fails it on any I/O error). A full
disk (ENOSPC) does not: its writes are refused with KAFKA_STORAGE_ERROR until space is freed
(deleting a topic, retention), and the directory keeps serving reads."""


class LogDir:
    """One entry of ``log.dirs`` as this broker holds it: its ``directory.id`` (KIP-858), the
    three checkpoints read at start, and whether its last stop was clean."""

    def __init__(self, fs: FileSystem, path: Path) -> None:
        self.path = path
        self.fs = fs
        fs.mkdirs(str(path))
        self.directory_id = load_or_create_directory_id(fs, str(path))
        self.hw = self._read_checkpoint(REPLICATION_OFFSET_CHECKPOINT)
        self.recovery = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        self.log_start = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        # Was the last stop clean (every log flushed, checkpoints written)? Then logs that end
        # at their recovery point open without any fsync. The marker is removed now, so a crash
        # from here on counts as unclean.
        self.clean_shutdown = consume_clean_shutdown_marker(fs, str(path))
        st = os.stat(path)
        self._identity = (st.st_dev, st.st_ino)
        # Why the directory failed (an I/O error, the directory gone); None while it serves.
        self.offline: str | None = None
        # A write the directory's disk refused for good (EIO, EROFS), seen outside a log.
        self.io_failure: str | None = None

    def failure(self) -> str | None:
        """Why the directory can no longer be used: gone, or replaced by another (unmounted,
        moved), or its disk refused a write for good; None when it is still the directory the
        broker opened and writable."""
        if self.io_failure is not None:
            return self.io_failure
        try:
            st = os.stat(self.path)
        except OSError as exc:
            return f"{self.path}: {exc.strerror or exc}"
        if (st.st_dev, st.st_ino) != self._identity:
            return f"{self.path} is no longer the directory the broker opened"
        return None

    def checkpoint_file(self, name: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(self.fs, str(self.path / name))

    def _read_checkpoint(self, name: str) -> Offsets:
        if not (self.path / name).exists():
            return {}
        try:
            return {(tp.topic, tp.partition): off
                    for tp, off in self.checkpoint_file(name).read().items()}
        except CorruptCheckpointError as exc:
            # Never trusted blindly: HW falls back to 0 (it is re-derived from the log at once for
            # RF=1), recovery point to 0 (full validation), log start to the first segment.
            log.warning("ignoring corrupt checkpoint: %s", exc)
            return {}

    def forget(self, key: tuple[str, int]) -> None:
        for table in (self.hw, self.recovery, self.log_start):
            table.pop(key, None)

    def usable_bytes(self) -> int:
        try:
            st = os.statvfs(self.path)
        except OSError:
            return -1
        return st.f_bavail * st.f_frsize

    def device(self) -> int:
        """The file system the directory is on (-1 when it cannot be read)."""
        try:
            return os.stat(self.path).st_dev
        except OSError:
            return -1

    def total_bytes(self) -> int:
        try:
            st = os.statvfs(self.path)
        except OSError:
            return -1
        return st.f_blocks * st.f_frsize


@dataclass
class FutureReplica:
    """A replica being moved to another log directory (AlterReplicaLogDirs): its ``-future``
    copy and what the copy rounds have done so far."""

    destination: LogDir
    path: Path
    copy: CopyState = field(default_factory=CopyState)
    # The copy holds every offset below this (the source's LEO when the last round began).
    copied_log_end_offset: int = 0

    @property
    def copied_bytes(self) -> int:
        return directory_bytes(str(self.path))


@dataclass(frozen=True, slots=True)
class LogOpening:
    """One partition's log to open: what ``Storage.begin_open`` decided on the event loop.
    ``run`` does the file work (and so may take long: a new log's files and directory are
    fsynced, an old one is recovered); it touches nothing but the log's own directory, so
    openings run on worker threads, several at once."""

    key: tuple[str, int]
    where: LogDir
    fs: FileSystem
    config: LogConfig
    now_ms: int
    topic_id: uuid.UUID | None
    recovery_point: int
    log_start_offset: int
    clean_shutdown: bool
    was_compacted: bool

    @property
    def path(self) -> str:
        return str(self.where.path / f"{self.key[0]}-{self.key[1]}")

    def run(self) -> Log:
        """Open (recover) the log; any thread. With ``topic_id``, the directory's
        ``partition.metadata`` is checked first (written, durably, when missing): a directory
        of another topic of the same name raises INCONSISTENT_TOPIC_ID and is left as it
        is."""
        path = self.path
        existed = self.fs.is_dir(path)
        if self.topic_id is not None and existed:
            self._check_topic_id(path, self.topic_id)
        plog = Log.open(
            path, self.config, fs=self.fs, now_ms=self.now_ms,
            recovery_point=self.recovery_point, log_start_offset=self.log_start_offset,
            clean_shutdown=self.clean_shutdown, was_compacted=self.was_compacted)
        if self.topic_id is not None and not existed:
            try:
                self._check_topic_id(path, self.topic_id)
            except (OSError, KafkaError):
                plog.close()
                raise
        return plog

    def _check_topic_id(self, path: str, topic_id: uuid.UUID) -> None:
        if check_or_set_topic_id(self.fs, path, topic_id):
            log.info("partition %s-%d: partition.metadata written (topic id %s)", self.key[0],
                     self.key[1], topic_id)


class Storage:
    def __init__(self, data_dir: Path, config: BrokerConfig) -> None:
        """``data_dir`` keeps the broker-wide files (the cleaner's checkpoint); partitions live
        in ``config.log_dirs`` (``log.dirs``, else ``data_dir`` alone). Every log directory is
        scanned now: a partition in two of them raises ``DuplicatePartitionError``."""
        self.data_dir = data_dir
        # UNSAFE test mode: unsynced writes live in this process, so a SIGKILL is a power cut
        # (floodmark chaos run --faults power-loss).
        page_cache = bool(config.value(FLOODMARK_UNSAFE_POWER_LOSS_PAGE_CACHE))
        self.fs = PageCacheFileSystem() if page_cache else RealFileSystem()
        # Fetch may sendfile from segment files only when they hold every byte.
        self.sendfile_capable = not page_cache
        self._checkpoint_lock = threading.Lock()
        # Logs that met an I/O error or went offline since the broker last looked
        # (``Log.on_trouble``): its log-directory check looks at these, not at every log.
        self._troubled: set[tuple[str, int]] = set()
        # Replicas placed or moved in a log directory and not yet seen assigned there in the
        # metadata (AssignReplicasToDirs, ``broker.dir_assignments``).
        self.unassigned: set[tuple[str, int]] = set()
        # New replicas placed in a log directory whose logs are being opened (``begin_open``):
        # counted there by ``place`` as if open already.
        self._placing: dict[tuple[str, int], LogDir] = {}
        self._snapshot_seq = 0
        self._written_seq = 0
        self._written: dict[tuple[Path, str], Offsets] = {}  # (dir, file) -> what it holds
        broker_values = {k: v for k, v in config.settings.items() if v is not None}
        self.base_config = LogConfig.from_kafka(broker_values)
        self.dirs = [LogDir(self.fs, path) for path in config.log_dirs]
        by_path = {str(d.path): d for d in self.dirs}
        self._where: dict[tuple[str, int], LogDir] = {
            (tp.topic, tp.partition): by_path[path]
            for tp, path in scan_log_dirs(self.fs, list(by_path)).items()}
        self.clean_shutdown = all(d.clean_shutdown for d in self.dirs)
        self.moving: dict[tuple[str, int], FutureReplica] = {}
        # Log compaction: first dirty offsets (cleaner-offset-checkpoint) per partition.
        self.cleaner = LogCleaner(self.fs, str(data_dir),
                                  config.value(LOG_CLEANER_DEDUPE_BUFFER_SIZE))

    def validate_topic_configs(self, configs: Mapping[str, ConfigValue]) -> Configs:
        """The registry's check (``floodmark.settings``), the one the controller applies too."""
        return validate_topic_configs(configs)

    def dir_of(self, topic: str, partition: int) -> LogDir | None:
        """The log directory holding the partition (None: not on this broker)."""
        return self._where.get((topic, partition))

    def place(self, exclude: LogDir | None = None) -> LogDir:
        """Where a new replica goes (``log_dirs.choose_log_dir``)."""
        candidates = [d for d in self.dirs if d is not exclude and d.offline is None]
        if not candidates:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "no online log directory")
        counts = {id(d): 0 for d in candidates}
        for d in (*self._where.values(), *self._placing.values()):
            if id(d) in counts:
                counts[id(d)] += 1
        # Directories on one file system share its free space: one reading per device, so
        # they tie on space (and go by partition count) however the disk changes meanwhile.
        usable_by_device: dict[int, int] = {}
        usage = []
        for d in candidates:
            device = d.device()
            if device not in usable_by_device:
                usable_by_device[device] = d.usable_bytes()
            usage.append(DirUsage(usable_by_device[device], counts[id(d)]))
        return candidates[choose_log_dir(usage)]


    def open_log(self, topic: str, partition: int, topic_configs: Mapping[str, ConfigValue],
                 now_ms: int, topic_id: uuid.UUID | None = None) -> tuple[Log, int]:
        """Open (recover) a partition's log, here and now (``begin_open``, ``LogOpening.run``,
        ``finish_open``)."""
        opening = self.begin_open(topic, partition, topic_configs, now_ms, topic_id)
        try:
            plog = opening.run()
        except BaseException:
            self.abandon_open(opening)
            raise
        return self.finish_open(opening, plog)

    def begin_open(self, topic: str, partition: int, topic_configs: Mapping[str, ConfigValue],
                   now_ms: int, topic_id: uuid.UUID | None = None) -> LogOpening:
        """The first step of opening a partition's log (no file is touched): its configuration
        and log directory (a new replica's is chosen now and counted by ``place`` until
        ``finish_open`` or ``abandon_open``). The file work is ``LogOpening.run``, on any
        thread."""
        key = (topic, partition)
        cfg = LogConfig.from_kafka(dict(topic_configs), self.base_config)
        where = self._where.get(key)
        if where is not None and where.offline is not None:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{topic}-{partition}: log dir {where.path} is offline")
        if where is None:
            where = self.place()
            self._placing[key] = where
            log.info("partition %s-%d: new replica placed in log dir %s", topic, partition,
                     where.path)
        return LogOpening(
            key, where, self.fs, cfg, now_ms, topic_id,
            recovery_point=where.recovery.get(key, 0),
            log_start_offset=where.log_start.get(key, 0),
            clean_shutdown=where.clean_shutdown,
            was_compacted=key in self.cleaner.first_dirty)

    def finish_open(self, opening: LogOpening, plog: Log) -> tuple[Log, int]:
        """The last step, after ``opening.run()`` returned ``plog`` (every file it made is
        durable): the replica is this directory's, to be assigned there in the metadata;
        returns the log and its checkpointed high watermark, clamped to the log."""
        key = opening.key
        self._placing.pop(key, None)
        where = opening.where
        if where.offline is not None:  # the directory failed while the log was opened
            plog.close()
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{key[0]}-{key[1]}: log dir {where.path} is offline")
        self._where[key] = where
        self.unassigned.add(key)
        self._watched(key, plog)
        hw = clamp_high_watermark(where.hw.get(key), plog.log_start_offset, plog.log_end_offset)
        return plog, hw

    def abandon_open(self, opening: LogOpening) -> None:
        """``opening.run()`` failed (or its log is not wanted any more): the directory chosen
        for it no longer counts it."""
        self._placing.pop(opening.key, None)

    def take_offline(self, where: LogDir, reason: str) -> list[tuple[str, int]]:
        """The directory failed: no new replica goes there, no checkpoint or clean-shutdown
        marker is written there; returns the partitions it holds (the broker takes them
        offline)."""
        where.offline = reason
        return sorted(k for k, d in self._where.items() if d is where)

    def offline_partitions(self) -> list[tuple[str, int]]:
        return sorted(k for k, d in self._where.items() if d.offline is not None)

    def offline_directory_ids(self) -> list[str]:
        return [d.directory_id for d in self.dirs if d.offline is not None]

    def is_offline(self, key: tuple[str, int]) -> bool:
        where = self._where.get(key)
        return where is not None and where.offline is not None

    def dir_named(self, path: str) -> LogDir | None:
        """The log directory ``path`` names (as given in log.dirs or resolved), else None."""
        for d in self.dirs:
            if path in (str(d.path), str(d.path.resolve())):
                return d
        return None

    # -- moving a replica between log directories (AlterReplicaLogDirs) ------------------------
    def begin_move(self, key: tuple[str, int], destination: LogDir) -> FutureReplica:
        name = move_name(key, uuid.uuid4().hex, FUTURE_SUFFIX)
        future = FutureReplica(destination, destination.path / name)
        self.moving[key] = future
        return future

    def abort_move(self, key: tuple[str, int]) -> None:
        future = self.moving.pop(key, None)
        if future is not None:
            shutil.rmtree(future.path, ignore_errors=True)

    def finish_move(self, key: tuple[str, int], old: Log, now_ms: int) -> Log:
        """Swap in the future copy. ``old`` is flushed and closed and the copy holds every byte
        of it, fsynced. The source is renamed ``-delete`` first, then the copy to its final
        name, then the source removed: a crash between the renames leaves the ``-delete`` copy,
        which the next start makes live again (``log_dirs.scan_log_dirs``)."""
        future = self.moving.pop(key)
        source = self._where[key]
        name = f"{key[0]}-{key[1]}"
        live = source.path / name
        moved_id = future.path.name[len(name) + 1:-len(FUTURE_SUFFIX)]
        deleted = source.path / move_name(key, moved_id, DELETE_SUFFIX)
        os.rename(live, deleted)
        fsync_directory(str(source.path))
        target = future.destination.path / name
        try:
            os.rename(future.path, target)
            fsync_directory(str(future.destination.path))
        except OSError:
            os.rename(deleted, live)
            shutil.rmtree(future.path, ignore_errors=True)
            raise
        self._where[key] = future.destination
        self.unassigned.add(key)
        source.forget(key)
        moved = self._watched(key, Log.open(
            str(target), old.config, fs=self.fs, now_ms=now_ms,
            recovery_point=old.recovery_point, log_start_offset=old.log_start_offset,
            clean_shutdown=True, was_compacted=key in self.cleaner.first_dirty))
        shutil.rmtree(deleted, ignore_errors=True)
        return moved

    def reopen(self, old: Log, now_ms: int) -> Log:
        """A log closed after a flush, opened again where it is (a move that failed)."""
        key = (old.topic_partition.topic, old.topic_partition.partition)
        return self._watched(key, Log.open(
            old.path, old.config, fs=self.fs, now_ms=now_ms,
            recovery_point=old.recovery_point, log_start_offset=old.log_start_offset,
            clean_shutdown=True, was_compacted=key in self.cleaner.first_dirty))

    def _watched(self, key: tuple[str, int], plog: Log) -> Log:
        plog.on_trouble = functools.partial(self._troubled.add, key)
        return plog

    def take_troubled(self) -> set[tuple[str, int]]:
        """The partitions whose log met an I/O error or went offline since the last call."""
        troubled, self._troubled = self._troubled, set()
        return troubled

    def read_all(self, plog: Log, upto: int) -> Iterator[bytes | memoryview]:
        offset = plog.log_start_offset
        while offset < upto:
            info = plog.read(offset, 1 << 20, upto)
            data = info.records
            if not data:
                break
            yield data
            if info.next_offset <= offset:
                break
            offset = info.next_offset

    def maybe_flush(self, plog: Log, now_ms: int) -> None:
        plog.maybe_flush(now_ms)

    def flush(self, plog: Log) -> None:
        plog.flush()

    def checkpoint_snapshot(self, partitions: Mapping[tuple[str, int], PartitionState]
                            ) -> CheckpointSnapshot:
        self._snapshot_seq += 1
        per_dir: dict[Path, tuple[Offsets, Offsets, Offsets]] = {
            d.path: ({}, {}, {}) for d in self.dirs}
        for key, ps in partitions.items():
            where = self._where.get(key)
            if where is None:
                continue
            hw, rec, start = per_dir[where.path]
            hw[key] = ps.high_watermark
            rec[key] = ps.log.recovery_point
            start[key] = ps.log.log_start_offset
        return self._snapshot_seq, per_dir

    def write_checkpoint_snapshot(self, snapshot: CheckpointSnapshot) -> None:
        """May run on a worker thread; the lock keeps a shutdown write from interleaving. Every
        directory is tried; the first failure is raised after the others were written."""
        seq, per_dir = snapshot
        failure: OSError | None = None
        with self._checkpoint_lock:
            if seq <= self._written_seq:
                return  # a newer snapshot (e.g. the shutdown one) is already on disk
            self._written_seq = seq
            for d in self.dirs:
                if d.offline is not None:
                    continue
                hw, rec, start = per_dir.get(d.path, ({}, {}, {}))
                try:
                    for name, offsets in ((REPLICATION_OFFSET_CHECKPOINT, hw),
                                          (RECOVERY_POINT_CHECKPOINT, rec),
                                          (LOG_START_OFFSET_CHECKPOINT, start)):
                        # An idle broker's offsets do not change: its files are not rewritten
                        # (and fsynced) every interval. This is their only writer.
                        if self._written.get((d.path, name)) != offsets:
                            d.checkpoint_file(name).write(offsets)
                            self._written[(d.path, name)] = offsets
                except OSError as exc:
                    failure = failure or exc
                    if exc.errno in BROKEN_DISK_ERRNOS:
                        d.io_failure = f"writing its checkpoints: {exc.strerror or exc}"
        if failure is not None:
            raise failure

    def write_checkpoints(self, partitions: Mapping[tuple[str, int], PartitionState]) -> None:
        self.write_checkpoint_snapshot(self.checkpoint_snapshot(partitions))

    def mark_clean_shutdown(self, logs: Iterable[Log]) -> None:
        """After every log was flushed and closed and the checkpoints were written: the next
        start may trust the recovery points of each directory, except a failed one and one
        holding a log that went offline after an fsync error."""
        unclean = {Path(plog.path).parent for plog in logs if plog.offline}
        for d in self.dirs:
            if d.offline is not None:
                continue
            if d.path in unclean:
                log.warning("log dir %s: not marking a clean shutdown: a log is offline after "
                            "an fsync error", d.path)
                continue
            write_clean_shutdown_marker(self.fs, str(d.path))

    def delete_log(self, topic: str, partition: int) -> None:
        where = self._where.pop((topic, partition), None)
        if where is not None:
            shutil.rmtree(where.path / f"{topic}-{partition}", ignore_errors=True)
            where.forget((topic, partition))
        try:
            self.cleaner.forget((topic, partition))
        except OSError as exc:
            log.warning("cleaner checkpoint after deleting %s-%d failed: %s", topic, partition,
                        exc)

    def remove_orphans(self, topics: Mapping[str, TopicMeta]) -> None:
        """Partition directories of topics deleted while the broker was down are removed."""
        known = {f"{t}-{p.partition}" for t, m in topics.items() for p in m.partitions}
        for key, where in list(self._where.items()):
            name = f"{key[0]}-{key[1]}"
            if name not in known:
                log.warning("removing partition directory %s of a deleted topic",
                            where.path / name)
                shutil.rmtree(where.path / name, ignore_errors=True)
                del self._where[key]
                where.forget(key)
