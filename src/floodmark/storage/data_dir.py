"""One data directory (Kafka's ``log.dirs`` entry): partition logs plus three checkpoint files.

``replication-offset-checkpoint`` (high watermarks), ``recovery-point-offset-checkpoint`` and
``log-start-offset-checkpoint`` cover every partition in the directory. An unreadable checkpoint
is never trusted: a warning is logged and the safe fallback is used (HW 0 -> clamped on load,
recovery point 0 -> full recovery, log start -> the first segment's base offset).

``lock_data_dir`` is Kafka's ``.lock`` file: a broker or controller process holds an exclusive
``fcntl`` lock on ``<dir>/.lock`` for its lifetime, so a second process on the same directory
stops at once instead of serving the same partition directories. The kernel drops the lock when
the process ends, however it ends (a SIGKILL leaves no stale lock behind).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from collections.abc import Mapping

from floodmark.errors import FloodmarkError
from floodmark.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    TopicPartition,
    clamp_high_watermark,
)
from floodmark.storage.clean_shutdown import (
    consume_clean_shutdown_marker,
    write_clean_shutdown_marker,
)
from floodmark.storage.config import LogConfig
from floodmark.storage.fs import FileSystem, RealFileSystem
from floodmark.storage.log import Log, parse_partition_dir

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"


class DataDirLockedError(FloodmarkError):
    """Another process holds the data directory's lock. ``str()`` is the one-line message."""


class DataDirLock:
    """An exclusive lock on ``<path>/.lock`` held until ``release`` or the process ends."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def lock_data_dir(path: str) -> DataDirLock:
    """Take the data directory's lock (creating the directory if needed), or raise
    ``DataDirLockedError`` naming the holder's pid when another process has it. The descriptor
    is not inherited by child processes (PEP 446), so only this process holds the lock."""
    os.makedirs(path, exist_ok=True)
    lock_path = os.path.join(path, LOCK_FILE)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        holder = _lock_holder(lock_path)
        raise DataDirLockedError(
            f"data directory {path} is in use by another process{holder} "
            f"(it holds {lock_path}); stop it first or use another --data-dir"
        ) from None
    # Who holds it, for the next process's message (informational: the lock is the flock).
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return DataDirLock(path, fd)


def lock_data_dirs(paths: list[str]) -> list[DataDirLock]:
    """``lock_data_dir`` on each directory once (``--data-dir`` and every ``log.dirs`` entry,
    the same directory named twice locked once); all or none: on a refusal the locks already
    taken are released and the ``DataDirLockedError`` raised."""
    locks: list[DataDirLock] = []
    seen: set[str] = set()
    try:
        for path in paths:
            os.makedirs(path, exist_ok=True)
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                locks.append(lock_data_dir(path))
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    return locks


def _lock_holder(lock_path: str) -> str:
    try:
        with open(lock_path, encoding="ascii", errors="replace") as handle:
            text = handle.read(32).strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


class DataDir:
    """Owns one data directory. ``logs`` holds the partition logs opened through it."""

    def __init__(self, path: str, fs: FileSystem | None = None) -> None:
        self.path = path.rstrip("/") or "/"
        self.fs: FileSystem = fs if fs is not None else RealFileSystem()
        self.fs.mkdirs(self.path)
        self.logs: dict[TopicPartition, Log] = {}
        self.high_watermark_file = OffsetCheckpointFile(
            self.fs, f"{self.path}/{REPLICATION_OFFSET_CHECKPOINT}"
        )
        self.recovery_point_file = OffsetCheckpointFile(
            self.fs, f"{self.path}/{RECOVERY_POINT_CHECKPOINT}"
        )
        self.log_start_offset_file = OffsetCheckpointFile(
            self.fs, f"{self.path}/{LOG_START_OFFSET_CHECKPOINT}"
        )
        # Read (and removed) once: logs opened from now on know whether the last stop was clean.
        self.clean_shutdown = consume_clean_shutdown_marker(self.fs, self.path)

    def partition_path(self, tp: TopicPartition | tuple[str, int]) -> str:
        topic, partition = tp
        return f"{self.path}/{topic}-{partition}"

    def partitions_on_disk(self) -> list[TopicPartition]:
        """Partition directories present (``<topic>-<partition>``), sorted."""
        found: list[TopicPartition] = []
        for name in self.fs.listdir(self.path):
            tp = parse_partition_dir(name)
            if tp is not None and self.fs.is_dir(f"{self.path}/{name}"):
                found.append(tp)
        return sorted(found)

    # -- checkpoints --------------------------------------------------------------------------
    def _read_checkpoint(
        self, checkpoint: OffsetCheckpointFile, what: str
    ) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except CorruptCheckpointError as exc:
            logger.warning("data dir %s: %s; %s", self.path, exc, what)
            return {}

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """Checkpointed HWs; {} (HW 0, clamped on load) if the file is corrupt."""
        return self._read_checkpoint(
            self.high_watermark_file, "high watermarks fall back to 0 (clamped to log start)"
        )

    def read_recovery_points(self) -> dict[TopicPartition, int]:
        return self._read_checkpoint(
            self.recovery_point_file, "recovering every log from its first segment"
        )

    def read_log_start_offsets(self) -> dict[TopicPartition, int]:
        return self._read_checkpoint(
            self.log_start_offset_file, "log start offsets fall back to the first segment"
        )

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        self.high_watermark_file.write(dict(high_watermarks))

    def checkpoint_recovery_points(self) -> None:
        self.recovery_point_file.write({tp: log.recovery_point for tp, log in self.logs.items()})

    def checkpoint_log_start_offsets(self) -> None:
        self.log_start_offset_file.write(
            {tp: log.log_start_offset for tp, log in self.logs.items()}
        )

    def high_watermark_for(
        self, tp: TopicPartition, checkpointed: Mapping[TopicPartition, int]
    ) -> int:
        """The HW a loaded partition starts with: the checkpoint clamped to [log start, LEO]."""
        log = self.logs[tp]
        return clamp_high_watermark(checkpointed.get(tp), log.log_start_offset, log.log_end_offset)

    # -- logs ---------------------------------------------------------------------------------
    def load_all(
        self, config_for: Mapping[TopicPartition, LogConfig] | LogConfig, *, now_ms: int
    ) -> dict[TopicPartition, Log]:
        """Open every partition directory present, using the checkpointed recovery points and
        log start offsets."""
        recovery = self.read_recovery_points()
        starts = self.read_log_start_offsets()
        for tp in self.partitions_on_disk():
            config = (
                config_for if isinstance(config_for, LogConfig) else config_for.get(tp, LogConfig())
            )
            self._open(tp, config, now_ms, recovery.get(tp, 0), starts.get(tp, 0))
        return dict(self.logs)

    def _open(
        self,
        tp: TopicPartition,
        config: LogConfig,
        now_ms: int,
        recovery_point: int,
        log_start_offset: int,
    ) -> Log:
        log = Log.open(
            self.partition_path(tp),
            config,
            fs=self.fs,
            now_ms=now_ms,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=self.clean_shutdown,
        )
        self.logs[tp] = log
        return log

    def get_or_create_log(
        self, tp: TopicPartition | tuple[str, int], config: LogConfig | None = None, *, now_ms: int
    ) -> Log:
        """The open log of ``tp``; opens (recovering) or creates it if needed."""
        key = TopicPartition(*tp)
        existing = self.logs.get(key)
        if existing is not None:
            return existing
        created = not self.fs.exists(self.partition_path(key))
        recovery = {} if created else self.read_recovery_points()
        starts = {} if created else self.read_log_start_offsets()
        log = self._open(
            key, config or LogConfig(), now_ms, recovery.get(key, 0), starts.get(key, 0)
        )
        if created:
            self.fs.fsync_dir(self.path)
        return log

    def delete_log(self, tp: TopicPartition | tuple[str, int]) -> None:
        key = TopicPartition(*tp)
        log = self.logs.pop(key, None)
        if log is not None:
            log.close()
        path = self.partition_path(key)
        if self.fs.exists(path):
            self.fs.rmtree(path)
            self.fs.fsync_dir(self.path)

    def flush_all(self) -> None:
        for log in self.logs.values():
            log.flush()

    def close(self, high_watermarks: Mapping[TopicPartition, int] | None = None) -> None:
        """Clean shutdown: flush logs, write all checkpoints, close, then the clean-shutdown
        marker (not if a log is offline after an fsync error)."""
        for log in self.logs.values():
            log.close()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        if high_watermarks is not None:
            self.write_high_watermarks(high_watermarks)
        if not any(log.offline for log in self.logs.values()):
            write_clean_shutdown_marker(self.fs, self.path)
        self.logs.clear()
