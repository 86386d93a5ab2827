"""MemoryFileSystem: page cache semantics, crash modes, directory entries."""

from __future__ import annotations

import random

import pytest

from floodmark.storage import MemoryFileSystem


def test_crash_loses_exactly_the_unsynced_bytes() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/d")
    f = fs.open("/d/a")
    fs.fsync_dir("/d")
    f.write(b"hello ")
    f.fsync()
    f.write(b"world")
    assert fs.read_file("/d/a") == b"hello world"
    assert fs.unsynced_bytes("/d/a") == 5
    fs.crash(lose_unsynced=False)  # process kill: page cache survives
    assert fs.read_file("/d/a") == b"hello world"
    fs.crash(lose_unsynced=True)  # power loss
    assert fs.read_file("/d/a") == b"hello "


def test_unsynced_truncate_is_undone_by_power_loss() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/d")
    f = fs.open("/d/a")
    fs.fsync_dir("/d")
    f.write(b"0123456789")
    f.fsync()
    f.truncate(4)
    f.write(b"xy")
    assert fs.read_file("/d/a") == b"0123xy"
    fs.crash(lose_unsynced=True)
    assert fs.read_file("/d/a") == b"0123456789"
    f = fs.open("/d/a")
    f.truncate(2)
    f.fsync()
    fs.crash(lose_unsynced=True)
    assert fs.read_file("/d/a") == b"01"


def test_directory_entries_need_a_directory_fsync() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/d")
    f = fs.open("/d/new")
    f.write(b"data")
    f.fsync()
    fs.crash(lose_unsynced=True)
    assert not fs.exists("/d/new")  # its creation was never made durable
    fs.mkdirs("/d")
    f = fs.open("/d/tmp")
    f.write(b"v2")
    f.fsync()
    fs.fsync_dir("/d")
    fs.rename("/d/tmp", "/d/final")
    fs.crash(lose_unsynced=True)
    assert fs.exists("/d/tmp") and not fs.exists("/d/final")
    fs.rename("/d/tmp", "/d/final")
    fs.fsync_dir("/d")
    fs.crash(lose_unsynced=True)
    assert fs.read_file("/d/final") == b"v2" and not fs.exists("/d/tmp")
    fs.remove("/d/final")
    fs.crash(lose_unsynced=True)
    assert fs.exists("/d/final")


def test_torn_tail_keeps_a_prefix_of_unsynced_bytes() -> None:
    for seed in range(20):
        fs = MemoryFileSystem()
        fs.mkdirs("/d")
        f = fs.open("/d/a")
        fs.fsync_dir("/d")
        f.write(b"durable")
        f.fsync()
        f.write(b"+unsynced-bytes")
        fs.crash(lose_unsynced=True, rng=random.Random(seed))
        data = fs.read_file("/d/a")
        assert (b"durable+unsynced-bytes").startswith(data) and data.startswith(b"durable")


def test_namespace_errors() -> None:
    fs = MemoryFileSystem()
    with pytest.raises(FileNotFoundError):
        fs.open("/missing/a")
    with pytest.raises(FileNotFoundError):
        fs.open("/a", create=False)
    fs.mkdirs("/x/y")
    assert fs.listdir("/x") == ["y"] and fs.is_dir("/x/y")
    fs.open("/x/y/f").write(b"1")
    fs.rmtree("/x")
    assert not fs.exists("/x/y/f")
