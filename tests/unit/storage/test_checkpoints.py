"""Checkpoint files: formats, round trips, rejects, HW clamp; DataDir fallbacks."""

from __future__ import annotations

import pytest

from floodmark.records import simple_batch
from floodmark.replication.epochs import EpochEntry
from floodmark.storage import (
    CorruptCheckpointError,
    DataDir,
    LeaderEpochCheckpointFile,
    LogConfig,
    MemoryFileSystem,
    OffsetCheckpointFile,
    RealFileSystem,
    TopicPartition,
    clamp_high_watermark,
)
from floodmark.storage.fs import FileSystem


@pytest.fixture(params=["memory", "real"])
def fs_dir(request: pytest.FixtureRequest, tmp_path: object) -> tuple[FileSystem, str]:
    if request.param == "memory":
        fs = MemoryFileSystem()
        fs.mkdirs("/data")
        return fs, "/data"
    return RealFileSystem(), str(tmp_path)


def write_raw(fs: FileSystem, path: str, text: str) -> None:
    if fs.exists(path):
        fs.remove(path)
    handle = fs.open(path)
    handle.write(text.encode())
    handle.close()


def test_offset_checkpoint_round_trip_and_format(fs_dir: tuple[FileSystem, str]) -> None:
    fs, d = fs_dir
    path = f"{d}/replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(fs, path)
    assert checkpoint.read() == {}
    offsets = {TopicPartition("orders", 1): 877, TopicPartition("orders", 0): 1523}
    checkpoint.write(offsets)
    assert fs.read_file(path) == b"0\n2\norders 0 1523\norders 1 877\n"
    assert checkpoint.read() == offsets
    assert not fs.exists(path + ".tmp")


def test_leader_epoch_checkpoint_round_trip(fs_dir: tuple[FileSystem, str]) -> None:
    fs, d = fs_dir
    path = f"{d}/leader-epoch-checkpoint"
    checkpoint = LeaderEpochCheckpointFile(fs, path)
    entries = [EpochEntry(0, 0), EpochEntry(2, 1400), EpochEntry(5, 1523)]
    checkpoint.write(entries)
    assert fs.read_file(path) == b"0\n3\n0 0\n2 1400\n5 1523\n"
    assert checkpoint.read() == entries


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("1\n0\n", 1, "version"),
        ("", 1, "empty"),
        ("0\n", 2, "count"),
        ("0\nx\n", 2, "malformed entry count"),
        ("0\n2\nt 0 5\n", 4, "count line says 2"),
        ("0\n1\nt 0 5\nt 1 6\n", 4, "count line says 1"),
        ("0\n1\nt 0\n", 3, "expected 3 fields"),
        ("0\n1\nt zero 5\n", 3, "partition"),
        ("0\n1\nt 0 five\n", 3, "offset"),
        ("0\n2\nt 0 5\nt 0 6\n", 4, "duplicate"),
    ],
)
def test_offset_checkpoint_rejects(
    fs_dir: tuple[FileSystem, str], text: str, line: int, reason: str
) -> None:
    fs, d = fs_dir
    path = f"{d}/recovery-point-offset-checkpoint"
    write_raw(fs, path, text)
    with pytest.raises(CorruptCheckpointError, match=reason) as excinfo:
        OffsetCheckpointFile(fs, path).read()
    assert excinfo.value.path == path and excinfo.value.line == line
    assert path in str(excinfo.value)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("0\n2\n1 0\n1 5\n", "not increasing"),
        ("0\n2\n3 10\n4 5\n", "not increasing"),
        ("0\n1\n-1 0\n", "negative"),
        ("0\n1\n1 0 7\n", "expected 2 fields"),
        ("2\n0\n", "version"),
    ],
)
def test_leader_epoch_checkpoint_rejects(
    fs_dir: tuple[FileSystem, str], text: str, reason: str
) -> None:
    fs, d = fs_dir
    path = f"{d}/leader-epoch-checkpoint"
    write_raw(fs, path, text)
    with pytest.raises(CorruptCheckpointError, match=reason):
        LeaderEpochCheckpointFile(fs, path).read()


def test_clamp_high_watermark() -> None:
    assert clamp_high_watermark(50, 10, 31) == 31  # above LEO -> LEO
    assert clamp_high_watermark(5, 10, 31) == 10  # below log start -> log start
    assert clamp_high_watermark(20, 10, 31) == 20
    assert clamp_high_watermark(None, 0, 31) == 0


def test_data_dir_checkpoints_and_fallbacks(fs_dir: tuple[FileSystem, str]) -> None:
    fs, d = fs_dir
    data_dir = DataDir(f"{d}/logs", fs)
    tp = TopicPartition("events", 3)
    log = data_dir.get_or_create_log(tp, LogConfig(), now_ms=0)
    log.append_as_leader(simple_batch([b"a", b"b", b"c"]), 0, 0)
    data_dir.write_high_watermarks({tp: 99})
    data_dir.close()
    assert data_dir.partitions_on_disk() == [tp]
    assert data_dir.read_recovery_points() == {tp: 3}
    assert data_dir.read_log_start_offsets() == {tp: 0}
    reopened = DataDir(f"{d}/logs", fs)
    logs = reopened.load_all(LogConfig(), now_ms=0)
    assert logs[tp].log_end_offset == 3
    assert reopened.high_watermark_for(tp, reopened.read_high_watermarks()) == 3  # clamped
    write_raw(fs, f"{d}/logs/replication-offset-checkpoint", "0\n5\nevents 3 1\n")
    assert reopened.read_high_watermarks() == {}
    assert reopened.high_watermark_for(tp, reopened.read_high_watermarks()) == 0
    reopened.delete_log(tp)
    assert reopened.partitions_on_disk() == []
