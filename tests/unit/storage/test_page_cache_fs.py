"""The unsafe page-cache file system: what is not fsynced lives only in this process, so a new
instance over the same directory (a restarted process) sees exactly what a power cut leaves."""

from __future__ import annotations

from pathlib import Path

from floodmark.storage.page_cache import PageCacheFileSystem


def test_unsynced_appends_are_readable_but_lost_on_a_power_cut(tmp_path: Path) -> None:
    path = str(tmp_path / "00000000000000000000.log")
    fs = PageCacheFileSystem()
    f = fs.open(path)
    f.write(b"synced-")
    f.fsync()
    f.write(b"cached")
    assert f.size() == 13 and fs.size(path) == 13
    assert f.read_at(0, 100) == b"synced-cached"
    assert f.read_at(4, 6) == b"ed-cac"
    assert f.read_at(9, 100) == b"ched" and f.read_at(13, 5) == b""
    assert fs.read_file(path) == b"synced-cached"
    assert f.fileno() is None  # never sendfile past the real bytes
    f.close()
    again = fs.open(path)  # the page cache outlives a close, as the kernel's does
    assert again.read_at(0, 100) == b"synced-cached"
    assert fs.unsynced_bytes() == 6
    assert Path(path).read_bytes() == b"synced-"  # the disk
    after_power_cut = PageCacheFileSystem()
    assert after_power_cut.read_file(path) == b"synced-"
    assert after_power_cut.open(path).size() == 7


def test_fsync_through_a_duplicate_and_truncate_and_rename(tmp_path: Path) -> None:
    fs = PageCacheFileSystem()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    f = fs.open(a)
    f.write(b"0123456789")
    f.duplicate().fsync()  # a flush on another thread uses a duplicate
    f.write(b"abcdef")
    f.truncate(13)
    assert f.read_at(0, 100) == b"0123456789abc"
    f.truncate(4)  # below the synced size: the real file is cut
    assert f.read_at(0, 100) == b"0123" and Path(a).read_bytes() == b"0123"
    f.write(b"xy")
    fs.rename(a, b)
    assert fs.read_file(b) == b"0123xy"
    g = fs.open(b)
    g.fsync()
    assert PageCacheFileSystem().read_file(b) == b"0123xy"
    fs.remove(b)
    assert fs.unsynced_bytes() == 0

