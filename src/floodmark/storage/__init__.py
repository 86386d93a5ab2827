"""Kafka's on-disk log layout over a file-system seam: segments, indexes, checkpoints, recovery."""

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

__all__ = [
    "AppendInfo",
    "CorruptCheckpointError",
    "DataDir",
    "FileSlice",
    "FileSystem",
    "FlushPolicy",
    "LeaderEpochCheckpointFile",
    "Log",
    "LogConfig",
    "MemoryFileSystem",
    "NonContiguousAppendError",
    "OffsetCheckpointFile",
    "ReadInfo",
    "RealFileSystem",
    "StaleSliceError",
    "TopicPartition",
    "clamp_high_watermark",
]
