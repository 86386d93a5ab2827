"""Log.open writes and fsyncs nothing for a cleanly closed log (clean-shutdown marker present),
rewrites nothing unchanged after an unclean stop, and still syncs what recovery changed or what
may be unsynced (issue 3 follow-up: slow broker start with many partitions)."""

from __future__ import annotations

import random

from floodmark.records import simple_batch
from floodmark.storage import Log, LogConfig, MemoryFileSystem
from floodmark.storage.data_dir import DataDir

PATH = "/data/topic-0"
# Small segments and index interval: several segments, each with offset/time index entries.
CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=200)


def batch(i: int) -> bytes:
    return simple_batch([bytes([65 + i % 26]) * 40] * 3, timestamp_ms=1_000 + i)


def written_log(fs: MemoryFileSystem, batches: int = 40, epochs: int = 3) -> Log:
    log = Log.open(PATH, CONFIG, fs=fs, now_ms=0)
    for i in range(batches):
        log.append_as_leader(batch(i), leader_epoch=i * epochs // batches, now_ms=1_000 + i)
    return log


def test_reopening_a_cleanly_closed_log_performs_no_fsync_and_no_write() -> None:
    fs = MemoryFileSystem()
    log = written_log(fs)
    assert len(log.segment_base_offsets()) > 2  # several segments with index entries
    log.close()
    recovery_point, leo = log.recovery_point, log.log_end_offset
    assert recovery_point == leo
    before = fs.snapshot()
    fsyncs = (fs.file_fsync_count, fs.dir_fsync_count)
    reopened = Log.open(PATH, CONFIG, fs=fs, now_ms=5_000, recovery_point=recovery_point,
                        clean_shutdown=True)
    assert (fs.file_fsync_count, fs.dir_fsync_count) == fsyncs
    assert fs.snapshot() == before  # not a byte rewritten (indexes, epoch checkpoint)
    assert reopened.log_end_offset == leo and reopened.recovery_point == leo
    assert reopened.epoch_cache.entries() == log.epoch_cache.entries()
    # And it is fully usable: appends, reads, a later power loss after a flush keep the data.
    reopened.append_as_leader(batch(99), leader_epoch=5, now_ms=6_000)
    reopened.flush()
    data = reopened.read_all()
    fs.crash(lose_unsynced=True)
    again = Log.open(PATH, CONFIG, fs=fs, now_ms=7_000, recovery_point=reopened.recovery_point)
    assert again.read_all() == data


def test_unclean_open_rewrites_nothing_but_syncs_the_recovered_segment() -> None:
    """Without the clean-shutdown marker the checkpointed recovery point may be stale, so the
    recovered (last) segment is fsynced, and the partition directory with it (a segment created
    just before the stop may have a directory entry that never reached the disk), but unchanged
    files are not rewritten."""
    fs = MemoryFileSystem()
    log = written_log(fs)
    log.close()
    before = fs.snapshot()
    files, dirs = fs.file_fsync_count, fs.dir_fsync_count
    Log.open(PATH, CONFIG, fs=fs, now_ms=5_000, recovery_point=log.recovery_point)
    assert fs.snapshot() == before
    assert fs.file_fsync_count - files == 1  # the active segment's .log
    assert fs.dir_fsync_count == dirs + 1  # and the partition directory


def test_data_dir_clean_restart_of_many_partitions_performs_one_fsync() -> None:
    fs = MemoryFileSystem()
    data_dir = DataDir("/data", fs)
    for p in range(20):
        log = data_dir.get_or_create_log(("t", p), CONFIG, now_ms=0)
        for i in range(p % 4):
            log.append_as_leader(batch(i), leader_epoch=1, now_ms=1_000 + i)
    data_dir.close({})
    files, dirs = fs.file_fsync_count, fs.dir_fsync_count
    reopened = DataDir("/data", fs)
    assert reopened.clean_shutdown
    logs = reopened.load_all(CONFIG, now_ms=2_000)
    assert len(logs) == 20
    # Only the removal of the clean-shutdown marker, once for the whole directory.
    assert (fs.file_fsync_count - files, fs.dir_fsync_count - dirs) == (0, 1)
    # A crash now is an unclean stop: the marker's removal is durable.
    fs.crash(lose_unsynced=True)
    assert not DataDir("/data", fs).clean_shutdown


def test_stale_recovery_point_after_truncation_is_not_trusted_without_the_marker() -> None:
    """A truncation lowers the recovery point, the log grows back to exactly the value still in
    the (stale) checkpoint, the process is killed: the regrown tail is only in the page cache,
    and the open must sync it although the log ends at the checkpointed recovery point."""
    fs = MemoryFileSystem()
    log = written_log(fs, batches=10)
    log.flush()
    stale_checkpoint = log.recovery_point
    leo = log.log_end_offset
    log.truncate_to(leo - 6)  # two 3-record batches
    log.append_as_leader(batch(40) + batch(41), leader_epoch=9, now_ms=9_000)
    assert log.log_end_offset == stale_checkpoint
    data = log.read_all()
    fs.crash(lose_unsynced=False)
    reopened = Log.open(PATH, CONFIG, fs=fs, now_ms=10_000, recovery_point=stale_checkpoint)
    fs.crash(lose_unsynced=True, rng=random.Random(3))
    after = Log.open(PATH, CONFIG, fs=fs, now_ms=11_000, recovery_point=reopened.recovery_point)
    assert after.read_all() == data


def test_open_after_a_process_kill_syncs_the_unflushed_tail() -> None:
    """Data past the recovery point may be only in the page cache: the open makes it durable
    before moving the recovery point, so a power loss right after the open loses nothing."""
    fs = MemoryFileSystem()
    log = written_log(fs)
    log.flush()
    recovery_point = log.recovery_point
    for i in range(5):
        log.append_as_leader(batch(50 + i), leader_epoch=7, now_ms=2_000 + i)
    data = log.read_all()
    fs.crash(lose_unsynced=False)  # process kill: the page cache survives
    fsyncs = fs.file_fsync_count
    reopened = Log.open(PATH, CONFIG, fs=fs, now_ms=3_000, recovery_point=recovery_point)
    assert fs.file_fsync_count > fsyncs
    assert reopened.recovery_point == reopened.log_end_offset == log.log_end_offset
    assert reopened.epoch_cache.latest_epoch == 7  # the checkpoint was repaired from the data
    fs.crash(lose_unsynced=True, rng=random.Random(1))
    after = Log.open(PATH, CONFIG, fs=fs, now_ms=4_000, recovery_point=reopened.recovery_point)
    assert after.read_all() == data
    assert after.epoch_cache.entries() == reopened.epoch_cache.entries()


def test_open_with_a_missing_index_rebuilds_and_syncs_it() -> None:
    fs = MemoryFileSystem()
    log = written_log(fs)
    log.close()
    last = log.segment_base_offsets()[-1]
    index_path = f"{PATH}/{last:020d}.index"
    expected = fs.read_file(index_path)
    assert expected  # the active segment has index entries
    fs.remove(index_path)
    fs.fsync_dir(PATH)
    dir_fsyncs = fs.dir_fsync_count
    reopened = Log.open(PATH, CONFIG, fs=fs, now_ms=5_000, recovery_point=log.recovery_point)
    assert fs.read_file(index_path) == expected
    assert fs.dir_fsync_count > dir_fsyncs  # the re-created file's name is made durable
    fs.crash(lose_unsynced=True)
    assert fs.durable_bytes(index_path) == expected
    assert Log.open(PATH, CONFIG, fs=fs, now_ms=6_000).read_all() == reopened.read_all()


def test_open_with_a_stale_epoch_checkpoint_rewrites_it_durably() -> None:
    fs = MemoryFileSystem()
    log = written_log(fs)
    log.close()
    checkpoint = f"{PATH}/leader-epoch-checkpoint"
    good = fs.read_file(checkpoint)
    handle = fs.open(checkpoint)
    handle.truncate(0)
    handle.write(b"0\n1\n0 0\n")  # only epoch 0: behind the data
    handle.fsync()
    Log.open(PATH, CONFIG, fs=fs, now_ms=5_000, recovery_point=0)
    assert fs.read_file(checkpoint) == good
    fs.crash(lose_unsynced=True)
    assert fs.read_file(checkpoint) == good


def test_an_opened_log_holds_only_its_active_log_file_open_until_written() -> None:
    # Issue 26: three fds per idle partition ran a broker with thousands of partitions into
    # its open-files limit; the index files reopen at the first index entry.
    fs = MemoryFileSystem()
    log = Log.open(PATH, CONFIG, fs=fs, now_ms=0)
    active = log.active_segment
    assert not active.index.file.is_open and not active.time_index.file.is_open
    for i in range(10):
        log.append_as_leader(batch(i), leader_epoch=0, now_ms=1_000 + i)
    log.flush()
    assert active.index.file.is_open  # written: kept open while the segment is active
    entries = list(active.index.relative_offsets)
    assert entries
    log.close()
    reopened = Log.open(PATH, CONFIG, fs=fs, now_ms=5_000, recovery_point=log.recovery_point,
                        clean_shutdown=True)
    assert list(reopened.active_segment.index.relative_offsets) == entries
    assert not reopened.active_segment.index.file.is_open
    assert reopened.read(0, 1 << 20).records  # reads need no index file
