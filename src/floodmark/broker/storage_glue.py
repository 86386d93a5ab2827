"""Everything the broker asks of ``floodmark.storage``, in one place.

Opening (and so recovering) partition logs with their Kafka-named configuration, the three
per-directory checkpoint files (HW, recovery point, log start), flushing, deleting a partition's
directory, and reading a whole partition (for the committed-offset replay).
"""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from floodmark.broker.config import BrokerConfig, Configs, ConfigValue
from floodmark.broker.partition_state import PartitionState
from floodmark.errors import KafkaError
from floodmark.metadata import TopicMeta
from floodmark.settings import validate_topic_configs
from floodmark.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    clamp_high_watermark,
)
from floodmark.storage.clean_shutdown import (
    consume_clean_shutdown_marker,
    write_clean_shutdown_marker,
)
from floodmark.storage.cleaner import LogCleaner
from floodmark.storage.config import LogConfig
from floodmark.storage.fs import RealFileSystem
from floodmark.storage.log import Log
from floodmark.storage.page_cache import PageCacheFileSystem
from floodmark.storage.partition_metadata import check_or_set_topic_id

log = logging.getLogger(__name__)

# (sequence, high watermarks, recovery points, log start offsets) per (topic, partition)
CheckpointSnapshot = tuple[int, dict[tuple[str, int], int], dict[tuple[str, int], int],
                           dict[tuple[str, int], int]]

class Storage:
    def __init__(self, data_dir: Path, config: BrokerConfig) -> None:
        self.data_dir = data_dir
        # UNSAFE test mode: unsynced writes live in this process, so a SIGKILL is a power cut
        # (floodmark chaos run --faults power-loss).
        page_cache = bool(config.get("floodmark.unsafe.power.loss.page.cache"))
        self.fs = PageCacheFileSystem() if page_cache else RealFileSystem()
        # Fetch may sendfile from segment files only when they hold every byte.
        self.sendfile_capable = not page_cache
        self._checkpoint_lock = threading.Lock()
        self._snapshot_seq = 0
        self._written_seq = 0
        broker_values = {k: v for k, v in config.settings.items() if v is not None}
        self.base_config = LogConfig.from_kafka(broker_values)
        self._hw = self._read_checkpoint(REPLICATION_OFFSET_CHECKPOINT)
        self._recovery = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        self._log_start = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        # Was the last stop clean (every log flushed, checkpoints written)? Then logs that end
        # at their recovery point open without any fsync. The marker is removed now, so a crash
        # from here on counts as unclean.
        self.clean_shutdown = consume_clean_shutdown_marker(self.fs, str(data_dir))
        # Log compaction: first dirty offsets (cleaner-offset-checkpoint) per partition.
        self.cleaner = LogCleaner(self.fs, str(data_dir),
                                  config.get_int("log.cleaner.dedupe.buffer.size"))

    def _checkpoint_file(self, name: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(self.fs, str(self.data_dir / name))

    def _read_checkpoint(self, name: str) -> dict[tuple[str, int], int]:
        path = self.data_dir / name
        if not path.exists():
            return {}
        try:
            return {(tp.topic, tp.partition): off
                    for tp, off in self._checkpoint_file(name).read().items()}
        except CorruptCheckpointError as exc:
            # Never trusted blindly: HW falls back to 0 (it is re-derived from the log at once for
            # RF=1), recovery point to 0 (full validation), log start to the first segment.
            log.warning("ignoring corrupt checkpoint: %s", exc)
            return {}

    def validate_topic_configs(self, configs: Mapping[str, ConfigValue]) -> Configs:
        """The registry's check (``floodmark.settings``), the one the controller applies too."""
        return validate_topic_configs(configs)

    def log_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def open_log(self, topic: str, partition: int, topic_configs: Mapping[str, ConfigValue],
                 now_ms: int, topic_id: uuid.UUID | None = None) -> tuple[Log, int]:
        """Open (recover) a partition's log. With ``topic_id``, the directory's
        ``partition.metadata`` is checked first (written when missing): a directory of another
        topic of the same name raises INCONSISTENT_TOPIC_ID and is left as it is."""
        key = (topic, partition)
        cfg = LogConfig.from_kafka(dict(topic_configs), self.base_config)
        path = str(self.log_dir(topic, partition))
        existed = self.fs.is_dir(path)
        if topic_id is not None and existed:
            self._check_topic_id(topic, partition, path, topic_id)
        plog = Log.open(
            path, cfg, fs=self.fs, now_ms=now_ms,
            recovery_point=self._recovery.get(key, 0),
            log_start_offset=self._log_start.get(key, 0),
            clean_shutdown=self.clean_shutdown,
            was_compacted=key in self.cleaner.first_dirty,
        )
        if topic_id is not None and not existed:
            try:
                self._check_topic_id(topic, partition, path, topic_id)
            except (OSError, KafkaError):
                plog.close()
                raise
        hw = clamp_high_watermark(self._hw.get(key), plog.log_start_offset, plog.log_end_offset)
        return plog, hw

    def _check_topic_id(self, topic: str, partition: int, path: str, topic_id: uuid.UUID) -> None:
        if check_or_set_topic_id(self.fs, path, topic_id):
            log.info("partition %s-%d: partition.metadata written (topic id %s)", topic,
                     partition, topic_id)

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
        return (
            self._snapshot_seq,
            {k: ps.high_watermark for k, ps in partitions.items()},
            {k: ps.log.recovery_point for k, ps in partitions.items()},
            {k: ps.log.log_start_offset for k, ps in partitions.items()},
        )

    def write_checkpoint_snapshot(self, snapshot: CheckpointSnapshot) -> None:
        """May run on a worker thread; the lock keeps a shutdown write from interleaving."""
        seq, hw, rec, start = snapshot
        with self._checkpoint_lock:
            if seq <= self._written_seq:
                return  # a newer snapshot (e.g. the shutdown one) is already on disk
            self._written_seq = seq
            self._checkpoint_file(REPLICATION_OFFSET_CHECKPOINT).write(hw)
            self._checkpoint_file(RECOVERY_POINT_CHECKPOINT).write(rec)
            self._checkpoint_file(LOG_START_OFFSET_CHECKPOINT).write(start)

    def write_checkpoints(self, partitions: Mapping[tuple[str, int], PartitionState]) -> None:
        self.write_checkpoint_snapshot(self.checkpoint_snapshot(partitions))

    def mark_clean_shutdown(self, logs: Iterable[Log]) -> None:
        """After every log was flushed and closed and the checkpoints were written: the next
        start may trust the recovery points (not if a log went offline after an fsync error)."""
        if any(plog.offline for plog in logs):
            log.warning("not marking a clean shutdown: a log is offline after an fsync error")
            return
        write_clean_shutdown_marker(self.fs, str(self.data_dir))

    def delete_log(self, topic: str, partition: int) -> None:
        shutil.rmtree(self.log_dir(topic, partition), ignore_errors=True)
        for table in (self._hw, self._recovery, self._log_start):
            table.pop((topic, partition), None)
        try:
            self.cleaner.forget((topic, partition))
        except OSError as exc:
            log.warning("cleaner checkpoint after deleting %s-%d failed: %s", topic, partition,
                        exc)

    def remove_orphans(self, topics: Mapping[str, TopicMeta]) -> None:
        """Partition directories of topics deleted while the broker was down are removed."""
        known = {f"{t}-{p.partition}" for t, m in topics.items() for p in m.partitions}
        for child in self.data_dir.iterdir():
            if child.is_dir() and child.name not in known and "-" in child.name:
                suffix = child.name.rsplit("-", 1)[1]
                if suffix.isdigit():
                    log.warning("removing partition directory %s of a deleted topic", child)
                    shutil.rmtree(child, ignore_errors=True)
