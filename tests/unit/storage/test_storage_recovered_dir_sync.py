"""A segment file created by a roll just before a process kill has a directory entry that may
not be on disk yet. Recovery after the kill syncs the recovered data and moves the recovery
point; it must sync the directory too, or a power loss afterwards takes the whole segment (and
records below the recovery point) away. Found by the storage state machine (hypothesis)."""

from __future__ import annotations

from floodmark.records import Record, build_batch
from floodmark.storage.config import LogConfig
from floodmark.storage.fs import MemoryFileSystem
from floodmark.storage.log import Log

PATH = "/d/t-0"


def test_recovered_segments_directory_is_synced_before_the_recovery_point_moves() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs(PATH)
    config = LogConfig(segment_bytes=200, index_interval_bytes=0)
    log = Log.open(PATH, config, fs=fs, now_ms=0)
    log.append_as_leader(bytearray(build_batch([Record(0, 1, None, b"ab")])), 0, now_ms=0)
    log.append_as_leader(bytearray(build_batch([Record(i, 1, None, b"x" * 28)
                                                for i in range(2)])), 0, now_ms=0)
    assert log.segment_base_offsets() == [0, 1]  # the second batch rolled a new segment
    fs.crash(lose_unsynced=False)  # process kill: the page cache survives, nothing was synced
    log = Log.open(PATH, config, fs=fs, now_ms=0, recovery_point=0)
    log.flush()
    assert log.recovery_point == 3
    fs.crash(lose_unsynced=True)  # power loss
    log = Log.open(PATH, config, fs=fs, now_ms=0, recovery_point=3)
    assert log.log_end_offset == 3 and log.segment_base_offsets() == [0, 1]
