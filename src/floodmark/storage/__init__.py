"""Kafka's on-disk log layout over a file-system seam: segments, indexes, checkpoints, recovery."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face
from floodmark.storage.appends import AppendInfo, NonContiguousAppendError
from floodmark.storage.checkpoints import (
    CorruptCheckpointError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    TopicPartition,
    clamp_high_watermark,
)
from floodmark.storage.config import FlushPolicy, LogConfig
from floodmark.storage.data_dir import DataDir
from floodmark.storage.file_slice import FileSlice, StaleSliceError
from floodmark.storage.fs import FileSystem, MemoryFileSystem, RealFileSystem
from floodmark.storage.log import Log
from floodmark.storage.reads import ReadInfo

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.storage.checkpoints import (
        LOG_START_OFFSET_CHECKPOINT,
        RECOVERY_POINT_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
        write_text_atomically,
    )
    from floodmark.storage.clean_shutdown import (
        consume_clean_shutdown_marker,
        write_clean_shutdown_marker,
    )
    from floodmark.storage.cleaner import LogCleaner
    from floodmark.storage.data_dir import (
        DataDirLock,
        DataDirLockedError,
        lock_data_dir,
        lock_data_dirs,
    )
    from floodmark.storage.epoch_checkpoints import EpochCheckpointBatch
    from floodmark.storage.fs import FileHandle
    from floodmark.storage.log_dirs import (
        DELETE_SUFFIX,
        DIRECTORY_ID_KEY,
        FUTURE_SUFFIX,
        META_PROPERTIES,
        BadMetaPropertiesError,
        DirUsage,
        choose_log_dir,
        load_or_create_directory_id,
        move_name,
        new_directory_id,
        parse_log_dirs,
        scan_log_dirs,
    )
    from floodmark.storage.page_cache import PageCacheFileSystem
    from floodmark.storage.partition_metadata import check_or_set_topic_id
    from floodmark.storage.policies import flush_checks_needed
    from floodmark.storage.replica_move import (
        CopyState,
        directory_bytes,
        fsync_directory,
        fsync_tree,
        sync_copy,
    )

__all__ = [
    "DELETE_SUFFIX",
    "DIRECTORY_ID_KEY",
    "FUTURE_SUFFIX",
    "LOG_START_OFFSET_CHECKPOINT",
    "META_PROPERTIES",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "AppendInfo",
    "BadMetaPropertiesError",
    "CopyState",
    "CorruptCheckpointError",
    "DataDir",
    "DataDirLock",
    "DataDirLockedError",
    "DirUsage",
    "EpochCheckpointBatch",
    "FileHandle",
    "FileSlice",
    "FileSystem",
    "FlushPolicy",
    "LeaderEpochCheckpointFile",
    "Log",
    "LogCleaner",
    "LogConfig",
    "MemoryFileSystem",
    "NonContiguousAppendError",
    "OffsetCheckpointFile",
    "PageCacheFileSystem",
    "ReadInfo",
    "RealFileSystem",
    "StaleSliceError",
    "TopicPartition",
    "check_or_set_topic_id",
    "choose_log_dir",
    "clamp_high_watermark",
    "consume_clean_shutdown_marker",
    "directory_bytes",
    "flush_checks_needed",
    "fsync_directory",
    "fsync_tree",
    "load_or_create_directory_id",
    "lock_data_dir",
    "lock_data_dirs",
    "move_name",
    "new_directory_id",
    "parse_log_dirs",
    "scan_log_dirs",
    "sync_copy",
    "write_clean_shutdown_marker",
    "write_text_atomically",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
