"""Log: appends (leader/follower), reads, segments, indexes, truncation, retention, recovery."""

from __future__ import annotations

import pytest

from floodmark.errors import ErrorCode, KafkaError
from floodmark.records import (
    LOG_APPEND_TIME,
    BatchHeader,
    Record,
    TimestampType,
    build_batch,
    decode_records,
    iter_batches,
    simple_batch,
)
from floodmark.replication.epochs import EpochCache
from floodmark.storage import (
    FlushPolicy,
    Log,
    LogConfig,
    MemoryFileSystem,
    NonContiguousAppendError,
    RealFileSystem,
)
from floodmark.storage.fs import FileSystem


@pytest.fixture(params=["memory", "real"])
def fs_and_dir(request: pytest.FixtureRequest, tmp_path: object) -> tuple[FileSystem, str]:
    if request.param == "memory":
        return MemoryFileSystem(), "/data/topic-0"
    return RealFileSystem(), f"{tmp_path}/topic-0"


def open_log(fs: FileSystem, path: str, **config: object) -> Log:
    return Log.open(path, LogConfig(**config), fs=fs, now_ms=0)  # type: ignore[arg-type]


def batch(n: int, *, ts: int = 0, size: int = 10) -> bytes:
    return simple_batch([bytes([65 + i % 26]) * size for i in range(n)], timestamp_ms=ts)


def test_leader_append_assigns_offsets_and_stamps_epoch(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path)
    info = log.append_as_leader(batch(3) + batch(2), leader_epoch=4, now_ms=10)
    assert (info.first_offset, info.last_offset, info.num_records, info.num_batches) == (0, 4, 5, 2)
    assert info.first_batch_epoch == 4
    assert log.log_end_offset == 5
    headers = [h for _, h in iter_batches(log.read_all())]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 4)]
    assert all(h.verify_crc() for h in headers)
    assert log.epoch_cache == EpochCache([(4, 0)])
    log.append_as_leader(batch(1), leader_epoch=6, now_ms=11)
    assert log.epoch_cache == EpochCache([(4, 0), (6, 5)])


def test_bad_crc_in_set_appends_nothing(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path)
    log.append_as_leader(batch(2), leader_epoch=0, now_ms=0)
    bad = bytearray(batch(2) + batch(2))
    bad[-1] ^= 0xFF
    before = log.read_all()
    with pytest.raises(KafkaError) as excinfo:
        log.append_as_leader(bad, leader_epoch=0, now_ms=0)
    assert excinfo.value.code is ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 2
    assert log.read_all() == before
    with pytest.raises(KafkaError) as excinfo:
        log.append_as_leader(batch(2)[:-4], leader_epoch=0, now_ms=0)
    assert excinfo.value.code is ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 2


def test_message_too_large(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path, max_message_bytes=200)
    with pytest.raises(KafkaError) as excinfo:
        log.append_as_leader(batch(1, size=500), leader_epoch=0, now_ms=0)
    assert excinfo.value.code is ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0


def test_follower_append_keeps_bytes_and_checks_contiguity(
    fs_and_dir: tuple[FileSystem, str],
) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path)
    first = build_batch(
        [Record(0, 5, None, b"a"), Record(1, 6, None, b"b")],
        base_offset=0,
        partition_leader_epoch=1,
    )
    second = build_batch([Record(0, 7, None, b"c")], base_offset=2, partition_leader_epoch=3)
    info = log.append_as_follower(first + second, now_ms=0)
    assert (info.first_offset, info.last_offset, info.first_batch_epoch) == (0, 2, 1)
    assert log.read_all() == first + second
    assert log.epoch_cache == EpochCache([(1, 0), (3, 2)])
    gap = build_batch([Record(0, 7, None, b"d")], base_offset=5, partition_leader_epoch=3)
    with pytest.raises(NonContiguousAppendError):
        log.append_as_follower(gap, now_ms=0)
    overlap = build_batch([Record(0, 7, None, b"d")], base_offset=3, partition_leader_epoch=3)
    # Second batch in the set does not continue the first: nothing is appended.
    bad_set = overlap + build_batch([Record(0, 7, None, b"e")], base_offset=3)
    with pytest.raises(NonContiguousAppendError):
        log.append_as_follower(bad_set, now_ms=0)
    assert log.log_end_offset == 3
    assert log.read_all() == first + second


def test_log_append_time(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path, message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    info = log.append_as_leader(batch(2, ts=5), leader_epoch=0, now_ms=777)
    assert info.log_append_time_ms == 777
    header = BatchHeader(log.read_all())
    assert header.timestamp_type == LOG_APPEND_TIME and header.max_timestamp == 777
    assert header.verify_crc()


def test_segments_roll_by_size_and_time(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    one = len(batch(1))
    log = open_log(fs, path, segment_bytes=one * 3, segment_ms=1000)
    for i in range(7):
        log.append_as_leader(batch(1), leader_epoch=0, now_ms=i)
    assert log.segment_base_offsets() == [0, 3, 6]
    names = fs.listdir(path)
    assert "00000000000000000003.log" in names and "00000000000000000003.index" in names
    assert "00000000000000000006.timeindex" in names
    log.append_as_leader(batch(1), leader_epoch=0, now_ms=5000)
    assert log.segment_base_offsets() == [0, 3, 6, 7]


def test_reads_positions_max_bytes_and_bounds(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path, index_interval_bytes=100)
    sizes = []
    for _ in range(20):
        b = batch(2, size=40)
        sizes.append(len(b))
        log.append_as_leader(b, leader_epoch=0, now_ms=0)
    assert len(log.active_segment.index) > 3  # sparse index has entries
    whole = log.read_all()
    info = log.read(7, 10_000)
    # Offset 7 is inside the batch [6, 7] which starts at byte 3 * batch size.
    assert info.first_offset == 6 and info.position == 3 * sizes[0]
    assert bytes(info.records) == whole[info.position :]
    assert fs.read_file(info.segment_path)[info.position : info.position + info.size] == bytes(
        info.records
    )  # type: ignore[arg-type]
    info = log.read(0, sizes[0] * 2 + 1)
    assert info.size == sizes[0] * 2 and info.next_offset == 4
    info = log.read(0, 1)  # KIP-74: at least one batch
    assert info.size == sizes[0] and info.next_offset == 2
    info = log.read(0, 10_000, max_offset_exclusive=6)
    assert info.next_offset == 6
    info = log.read(4, 10_000, max_offset_exclusive=5)  # batch [4,5] crosses the limit
    assert info.is_empty
    assert log.read(5, 10_000, max_offset_exclusive=5).is_empty
    assert log.read(6, 10_000, max_offset_exclusive=6).is_empty
    assert log.read(40, 10_000).is_empty
    for bad in (-1, 41):
        with pytest.raises(KafkaError) as excinfo:
            log.read(bad, 100)
        assert excinfo.value.code is ErrorCode.OFFSET_OUT_OF_RANGE


def test_index_lookup_matches_scan(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path, index_interval_bytes=50)
    for i in range(30):
        log.append_as_leader(batch(1 + i % 3), leader_epoch=0, now_ms=0)
    seg = log.active_segment
    positions = {h.base_offset: p for p, h in iter_batches(log.read_all())}
    for rel, pos in zip(seg.index.relative_offsets, seg.index.positions, strict=True):
        assert positions[rel] == pos
    for offset in range(log.log_end_offset):
        found = seg.find_batch(offset)
        assert found is not None
        position, header = found
        assert header.base_offset <= offset <= header.last_offset
        assert positions[header.base_offset] == position


def test_truncate_to_batch_granularity(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path, segment_bytes=len(batch(2)) * 2)
    for epoch in range(1, 6):
        log.append_as_leader(batch(2), leader_epoch=epoch, now_ms=0)
    assert log.log_end_offset == 10 and log.segment_base_offsets() == [0, 4, 8]
    log.truncate_to(5)  # batch [4, 5] goes entirely
    assert log.log_end_offset == 4
    assert log.segment_base_offsets() == [0, 4]
    assert log.epoch_cache == EpochCache([(1, 0), (2, 2)])
    assert [r.offset for r in decode_records(log.read_all())] == [0, 1, 2, 3]
    log.append_as_leader(batch(1), leader_epoch=9, now_ms=0)
    assert log.log_end_offset == 5
    reopened = Log.open(path, log.config, fs=fs, now_ms=0)
    assert reopened.log_end_offset == 5
    assert reopened.epoch_cache == EpochCache([(1, 0), (2, 2), (9, 4)])
    reopened.truncate_to(100)  # at/above LEO: no effect on data
    assert reopened.log_end_offset == 5
    reopened.truncate_fully_and_start_at(50)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (50, 50)
    assert len(reopened.epoch_cache) == 0
    reopened.append_as_leader(batch(1), leader_epoch=10, now_ms=0)
    assert reopened.read(50, 1000).first_offset == 50


def test_retention_never_past_high_watermark(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    one = len(batch(1))
    log = open_log(fs, path, segment_bytes=one * 2, retention_bytes=0)
    for i in range(8):
        log.append_as_leader(batch(1, ts=i), leader_epoch=0, now_ms=0)
    assert log.segment_base_offsets() == [0, 2, 4, 6]
    assert log.apply_retention(now_ms=0, high_watermark=3) == 1  # only [0,2) is below HW 3
    assert log.log_start_offset == 2
    assert log.apply_retention(now_ms=0, high_watermark=8) == 2  # never the active segment
    assert log.log_start_offset == 6 and log.segment_base_offsets() == [6]
    with pytest.raises(KafkaError):
        log.read(5, 100)


def test_retention_by_time(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    one = len(batch(1))
    log = open_log(fs, path, segment_bytes=one * 2, retention_ms=100)
    for ts in (0, 10, 500, 510, 520):
        log.append_as_leader(batch(1, ts=ts), leader_epoch=0, now_ms=ts)
    assert log.apply_retention(now_ms=200, high_watermark=5) == 1
    assert log.log_start_offset == 2


def test_log_start_offset_never_past_hw(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path, segment_bytes=len(batch(1)) * 2)
    for epoch in (1, 1, 2, 2, 3):
        log.append_as_leader(batch(1), leader_epoch=epoch, now_ms=0)
    with pytest.raises(KafkaError) as excinfo:
        log.maybe_increment_log_start_offset(4, high_watermark=3)
    assert excinfo.value.code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.maybe_increment_log_start_offset(3, high_watermark=3)
    assert log.epoch_cache == EpochCache([(2, 3), (3, 4)])
    assert log.apply_retention(0, 3) == 1  # segment [0, 2) is wholly below log start
    assert log.read(3, 100).first_offset == 3


def test_offset_for_timestamp(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path, index_interval_bytes=1, segment_bytes=400)
    for i in range(10):
        records = [Record(0, 100 * i, None, b"a"), Record(1, 100 * i + 50, None, b"b")]
        log.append_as_leader(build_batch(records), leader_epoch=i // 5, now_ms=0)
    assert log.offset_for_timestamp(0) == (0, 0, 0)
    assert log.offset_for_timestamp(120) == (3, 150, 0)
    assert log.offset_for_timestamp(600) == (12, 600, 1)
    assert log.offset_for_timestamp(951) is None
    assert log.offset_for_timestamp(-2) == (0, -1, 0)
    assert log.offset_for_timestamp(-1) == (20, -1, 1)
    assert log.offset_for_timestamp(-3) == (19, 950, 1)
    reopened = Log.open(path, log.config, fs=fs, now_ms=0, recovery_point=20)
    assert reopened.offset_for_timestamp(120) == (3, 150, 0)


def test_max_timestamp_answers_the_record_not_its_batch(
        fs_and_dir: tuple[FileSystem, str]) -> None:
    """KIP-734 (-3): the offset of the record holding the largest timestamp (KAFKA-16310), even
    when it is not the last of its batch; the first of equal ones; the log start bounds it."""
    fs, path = fs_and_dir
    log = open_log(fs, path)
    log.append_as_leader(build_batch([Record(0, 10, None, b"a"), Record(1, 20, None, b"b")]),
                         leader_epoch=0, now_ms=0)
    log.append_as_leader(build_batch([Record(0, 90, None, b"c"), Record(1, 30, None, b"d"),
                                      Record(2, 90, None, b"e")]), leader_epoch=1, now_ms=0)
    log.append_as_leader(build_batch([Record(0, 40, None, b"f")]), leader_epoch=1, now_ms=0)
    assert log.offset_for_timestamp(-3) == (2, 90, 1)
    reopened = Log.open(path, log.config, fs=fs, now_ms=0, recovery_point=0)
    assert reopened.offset_for_timestamp(-3) == (2, 90, 1)
    assert reopened.maybe_increment_log_start_offset(3, high_watermark=6)
    assert reopened.offset_for_timestamp(-3) == (4, 90, 1)


def test_reopen_round_trip_and_index_rebuild(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path, segment_bytes=500, index_interval_bytes=60)
    for i in range(40):
        log.append_as_leader(batch(1 + i % 4), leader_epoch=i // 10, now_ms=i)
    data = log.read_all()
    segments = log.segment_base_offsets()
    log.close()
    # Damage an index of a closed segment: it must be rebuilt on open.
    index_path = f"{path}/{segments[1]:020d}.index"
    handle = fs.open(index_path)
    handle.write(b"\x00\x00\x00")
    handle.close()
    reopened = Log.open(path, log.config, fs=fs, now_ms=0, recovery_point=log.log_end_offset)
    assert reopened.read_all() == data
    assert reopened.segment_base_offsets() == segments
    assert reopened.epoch_cache == log.epoch_cache
    assert fs.size(index_path) % 8 == 0
    for offset in range(reopened.log_end_offset):
        assert reopened.read(offset, 1).first_offset <= offset


def test_corrupt_epoch_checkpoint_is_rebuilt_from_batches(
    fs_and_dir: tuple[FileSystem, str],
) -> None:
    fs, path = fs_and_dir
    log = open_log(fs, path)
    for epoch in (1, 1, 3, 5):
        log.append_as_leader(batch(2), leader_epoch=epoch, now_ms=0)
    expected = log.epoch_cache
    log.close()
    checkpoint = f"{path}/leader-epoch-checkpoint"
    fs.remove(checkpoint)
    handle = fs.open(checkpoint)
    handle.write(b"0\n7\n1 0\n")
    handle.close()
    reopened = Log.open(path, LogConfig(), fs=fs, now_ms=0, recovery_point=8)
    assert reopened.epoch_cache == expected
    assert fs.read_file(checkpoint) == b"0\n3\n1 0\n3 4\n5 6\n"


def test_flush_policies_move_recovery_point() -> None:
    fs = MemoryFileSystem()
    log = Log.open(
        "/d/t-0",
        LogConfig(flush_policy=FlushPolicy.INTERVAL, flush_interval_messages=3),
        fs=fs,
        now_ms=0,
    )
    log.append_as_leader(batch(2), 0, 0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(2), 0, 0)
    assert log.recovery_point == 4
    timed = Log.open(
        "/d/t-1",
        LogConfig(flush_policy=FlushPolicy.INTERVAL, flush_interval_ms=100),
        fs=fs,
        now_ms=0,
    )
    timed.append_as_leader(batch(1), 0, 10)
    assert not timed.maybe_flush(50)
    assert timed.maybe_flush(100) and timed.recovery_point == 1
    group = Log.open("/d/t-2", LogConfig(flush_policy=FlushPolicy.GROUP_COMMIT), fs=fs, now_ms=0)
    group.append_as_leader(batch(1), 0, 0)
    group.append_as_leader(batch(1), 0, 0)
    assert group.flush_requested and group.recovery_point == 0
    before = fs.fsync_count
    assert group.maybe_flush(0)
    assert group.recovery_point == 2 and not group.flush_requested
    assert not group.maybe_flush(0)
    os_log = Log.open("/d/t-3", LogConfig(), fs=fs, now_ms=0)
    os_log.append_as_leader(batch(1), 0, 0)
    assert not os_log.maybe_flush(10**12) and os_log.recovery_point == 0
    assert fs.fsync_count >= before


def test_log_config_from_kafka() -> None:
    config = LogConfig.from_kafka(
        {
            "segment.bytes": "1024",
            "retention.ms": 5000,
            "message.timestamp.type": "LogAppendTime",
            "flush.messages": "10",
            "unknown.thing": "x",
        }
    )
    assert config.segment_bytes == 1024 and config.retention_ms == 5000
    assert config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    assert config.flush_policy is FlushPolicy.INTERVAL and config.flush_interval_messages == 10
    assert LogConfig.from_kafka({}).flush_policy is FlushPolicy.OS
    assert LogConfig.from_kafka({"log.roll.hours": 1}).segment_ms == 3600_000
    assert (
        LogConfig.from_kafka({"flush.policy": "group-commit"}).flush_policy
        is FlushPolicy.GROUP_COMMIT
    )
    assert LogConfig().to_kafka()["segment.bytes"] == str(1024**3)
    with pytest.raises(ValueError):
        LogConfig(segment_bytes=10)


def test_read_info_gives_a_real_fd_for_sendfile(tmp_path: object) -> None:
    import os

    log = Log.open(f"{tmp_path}/t-0", LogConfig(), now_ms=0)
    for _ in range(5):
        log.append_as_leader(batch(3), leader_epoch=2, now_ms=0)
    info = log.read(4, 10_000)
    assert info.fileno is not None
    assert os.pread(info.fileno, info.size, info.position) == bytes(info.records)
    mem = Log.open("/t-0", LogConfig(), fs=MemoryFileSystem(), now_ms=0)
    mem.append_as_leader(batch(1), leader_epoch=0, now_ms=0)
    assert mem.read(0, 100).fileno is None


def test_power_loss_keeps_exactly_the_flushed_batches() -> None:
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes=len(batch(2)) * 3)
    log = Log.open("/data/t-0", config, fs=fs, now_ms=0)
    for _ in range(4):
        log.append_as_leader(batch(2), leader_epoch=1, now_ms=0)
    log.flush()
    flushed = log.read_all()
    for _ in range(4):  # crosses a segment roll: the new segment file itself is unsynced
        log.append_as_leader(batch(2), leader_epoch=2, now_ms=0)
    everything = log.read_all()
    fs.crash(lose_unsynced=False)  # process kill: the page cache survives
    survived = Log.open("/data/t-0", config, fs=fs, now_ms=0, recovery_point=8)
    assert survived.read_all() == everything
    assert survived.epoch_cache == EpochCache([(1, 0), (2, 8)])
    for _ in range(2):
        survived.append_as_leader(batch(2), leader_epoch=3, now_ms=0)
    survived.flush()
    durable = survived.read_all()
    survived.append_as_leader(batch(2), leader_epoch=4, now_ms=0)
    fs.crash(lose_unsynced=True)
    recovered = Log.open("/data/t-0", config, fs=fs, now_ms=0, recovery_point=20)
    assert recovered.read_all() == durable
    assert recovered.log_end_offset == 20
    assert recovered.epoch_cache == EpochCache([(1, 0), (2, 8), (3, 16)])
    assert flushed == durable[: len(flushed)]


def test_truncation_is_durable_across_power_loss() -> None:
    """A follower truncates divergent (flushed) data and appends the leader's, then loses power
    before flushing: the truncation stands (it is made durable at once), the new batch is lost,
    and the epoch cache describes the surviving log."""
    fs = MemoryFileSystem()
    log = Log.open("/data/t-0", LogConfig(), fs=fs, now_ms=0)
    for epoch in (1, 1, 2, 2):
        log.append_as_leader(batch(1), leader_epoch=epoch, now_ms=0)
    log.flush()
    before = log.read_all()
    log.truncate_to(2)
    assert log.recovery_point == 2
    leader_batch = build_batch(
        [Record(0, 0, None, b"leader")], base_offset=2, partition_leader_epoch=3
    )
    log.append_as_follower(leader_batch, now_ms=0)
    assert log.epoch_cache == EpochCache([(1, 0), (3, 2)])  # checkpoint written (durable)
    fs.crash(lose_unsynced=True)
    recovered = Log.open("/data/t-0", LogConfig(), fs=fs, now_ms=0, recovery_point=4)
    assert recovered.read_all() == before[: 2 * len(batch(1))]
    assert recovered.epoch_cache == EpochCache([(1, 0)])


def test_missing_index_files_are_rebuilt(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    config = LogConfig(segment_bytes=600, index_interval_bytes=50)
    log = Log.open(path, config, fs=fs, now_ms=0)
    for i in range(30):
        log.append_as_leader(batch(2, ts=i), leader_epoch=0, now_ms=0)
    bases = log.segment_base_offsets()
    entries = [(list(s.index.positions), list(s.time_index.timestamps)) for s in log.segments]
    log.close()
    assert len(bases) >= 4
    fs.remove(f"{path}/{bases[0]:020d}.index")
    fs.remove(f"{path}/{bases[1]:020d}.timeindex")
    fs.remove(f"{path}/{bases[2]:020d}.index")
    fs.remove(f"{path}/{bases[2]:020d}.timeindex")
    reopened = Log.open(path, config, fs=fs, now_ms=0, recovery_point=log.log_end_offset)
    assert [
        (list(s.index.positions), list(s.time_index.timestamps)) for s in reopened.segments
    ] == entries
    assert reopened.offset_for_timestamp(7) == (14, 7, 0)


def test_iter_whole_batches_range(fs_and_dir: tuple[FileSystem, str]) -> None:
    fs, path = fs_and_dir
    log = Log.open(path, LogConfig(segment_bytes=len(batch(3)) * 2), fs=fs, now_ms=0)
    for epoch in range(6):
        log.append_as_leader(batch(3), leader_epoch=epoch, now_ms=0)
    all_bases = [h.base_offset for h in log.iter_whole_batches()]
    assert all_bases == [0, 3, 6, 9, 12, 15]
    assert [h.base_offset for h in log.iter_whole_batches(start_offset=4, end_offset=12)] == [
        3,
        6,
        9,
    ]
    assert [h.partition_leader_epoch for h in log.iter_whole_batches(start_offset=15)] == [5]
    assert list(log.iter_whole_batches(start_offset=18)) == []


def test_data_dir_recovers_everything_when_recovery_checkpoint_is_corrupt() -> None:
    from floodmark.storage import DataDir

    fs = MemoryFileSystem()
    data_dir = DataDir("/data", fs)
    log = data_dir.get_or_create_log(("t", 0), LogConfig(), now_ms=0)
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=0)
    data_dir.close()
    handle = fs.open("/data/recovery-point-offset-checkpoint")
    handle.truncate(1)
    handle.close()
    segment = "/data/t-0/00000000000000000000.log"
    fs.corrupt(segment, fs.size(segment) - 1, b"\xff")
    reopened = DataDir("/data", fs)
    assert reopened.read_recovery_points() == {}
    logs = reopened.load_all(LogConfig(), now_ms=0)
    assert logs[("t", 0)].log_end_offset == 0  # the corrupt batch was found and truncated


def test_recovery_validates_only_after_the_recovery_point() -> None:
    """Like Kafka, data flushed below the recovery point is trusted on open; recovery point 0
    validates everything (so bit rot there is found)."""
    fs = MemoryFileSystem()
    config = LogConfig(index_interval_bytes=100)
    log = Log.open("/d/t-0", config, fs=fs, now_ms=0)
    for _ in range(20):
        log.append_as_leader(batch(2, size=30), leader_epoch=1, now_ms=0)
    log.close()
    segment = "/d/t-0/00000000000000000000.log"
    fs.corrupt(segment, 70, b"\x00\x01")  # inside the first batch's records
    trusted = Log.open("/d/t-0", config, fs=fs, now_ms=0, recovery_point=40)
    assert trusted.log_end_offset == 40
    trusted.close()
    full = Log.open("/d/t-0", config, fs=fs, now_ms=0, recovery_point=0)
    assert full.log_end_offset == 0


def test_dump_log_tool(tmp_path: object) -> None:
    import io

    from floodmark.storage.dump import dump_partition, main

    path = f"{tmp_path}/t-0"
    log = Log.open(path, LogConfig(segment_bytes=300, index_interval_bytes=10), now_ms=0)
    for epoch in (1, 1, 2):
        log.append_as_leader(
            build_batch([Record(0, 5, b"key", b"value-%d" % epoch)]), epoch, now_ms=0
        )
    log.append_as_leader(batch(2, size=200), 2, now_ms=0)
    log.close()
    out = io.StringIO()
    assert dump_partition(path, out, records=True, index=True) == 0
    text = out.getvalue()
    assert "leader-epoch-checkpoint: {1:0, 2:2}" in text
    assert "partition.metadata: topic_id=none" in text  # a bare log: no topic id recorded
    assert "base_offset=2 last_offset=2 count=1 leader_epoch=2" in text
    assert "offset=1 timestamp=5 key=key value=value-1" in text
    assert "index (sane)" in text
    with open(f"{path}/00000000000000000000.log", "r+b") as f:
        f.seek(70)
        f.write(b"\xff")
    out = io.StringIO()
    assert dump_partition(path, out) == 1
    assert "CORRUPT" in out.getvalue()
    assert main([path]) == 1


def test_deferred_flush_on_a_worker_thread(tmp_path: object) -> None:
    import threading

    config = LogConfig(segment_bytes=len(batch(2)) * 2)
    log = Log.open(f"{tmp_path}/t-0", config, now_ms=0)
    for _ in range(3):
        log.append_as_leader(batch(2), leader_epoch=1, now_ms=0)
    ticket = log.begin_flush()
    assert ticket.target_offset == 6 and ticket.handles
    worker = threading.Thread(target=ticket.run)
    worker.start()
    # The owning thread keeps appending (and rolling) while the fsyncs run.
    for _ in range(3):
        log.append_as_leader(batch(2), leader_epoch=1, now_ms=0)
    worker.join(timeout=30)
    assert ticket.done
    log.complete_flush(ticket)
    assert log.recovery_point == 6  # only what the ticket covered
    log.flush()
    assert log.recovery_point == 12


def test_flush_ticket_is_stale_after_truncation() -> None:
    fs = MemoryFileSystem()
    log = Log.open("/d/t-0", LogConfig(), fs=fs, now_ms=0)
    for _ in range(4):
        log.append_as_leader(batch(1), leader_epoch=1, now_ms=0)
    ticket = log.begin_flush()
    log.truncate_to(2)
    for _ in range(3):
        log.append_as_leader(batch(1), leader_epoch=2, now_ms=0)
    ticket.run()
    log.complete_flush(ticket)
    assert log.recovery_point == 2  # the ticket described data that was truncated away


def test_fsync_failure_takes_the_log_offline() -> None:
    fs = MemoryFileSystem()
    log = Log.open("/d/t-0", LogConfig(), fs=fs, now_ms=0)
    log.append_as_leader(batch(1), leader_epoch=1, now_ms=0)
    fs.fail_next_fsyncs(1)
    with pytest.raises(KafkaError) as excinfo:
        log.flush()
    assert excinfo.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert log.recovery_point == 0
    with pytest.raises(KafkaError) as excinfo:
        log.append_as_leader(batch(1), leader_epoch=1, now_ms=0)
    assert excinfo.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    log.close()  # closes without flushing
    fs.crash(lose_unsynced=True)
    reopened = Log.open("/d/t-0", LogConfig(), fs=fs, now_ms=0)
    assert reopened.log_end_offset == 0  # the write never became durable
