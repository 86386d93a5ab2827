"""A full disk during an append: the log is put back exactly as it was, the error is Kafka's
KAFKA_STORAGE_ERROR, and appends work again once space returns (issue 8, part 3).

A file system that tears a write after a byte budget (like ENOSPC part-way through ``write``)
stands in for a full disk: real ``Log`` code over ``MemoryFileSystem``."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from floodmark.errors import ErrorCode, KafkaError
from floodmark.records import decode_records, simple_batch
from floodmark.storage.config import LogConfig
from floodmark.storage.fs import MemoryFileSystem
from floodmark.storage.log import Log


class FullDisk:
    """Wraps a file system: once ``budget`` bytes are spent, writes fail with ENOSPC after
    writing whatever still fits (a torn write)."""

    def __init__(self, inner: MemoryFileSystem) -> None:
        self.inner = inner
        self.budget: int | None = None

    def open(self, path: str, *, create: bool = True) -> Any:
        return _Handle(self, self.inner.open(path, create=create))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Handle:
    def __init__(self, disk: FullDisk, inner: Any) -> None:
        self.disk = disk
        self.inner = inner

    def write(self, data: bytes | bytearray | memoryview) -> int:
        budget = self.disk.budget
        if budget is not None and len(data) > budget:
            if budget:
                self.inner.write(bytes(data[:budget]))
            self.disk.budget = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        if budget is not None:
            self.disk.budget = budget - len(data)
        return int(self.inner.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _open(disk: FullDisk) -> Log:
    disk.mkdirs("/d/t-0")
    return Log.open("/d/t-0", LogConfig(index_interval_bytes=1), fs=disk, now_ms=0)  # type: ignore[arg-type]


def _values(log: Log) -> list[bytes | None]:
    return [r.value for r in decode_records(log.read_all())]


@pytest.mark.parametrize("budget", [0, 10, 70, 100])
def test_torn_append_is_undone_and_reported_as_storage_error(budget: int) -> None:
    disk = FullDisk(MemoryFileSystem())
    log = _open(disk)
    for i in range(3):
        log.append_as_leader(simple_batch([b"ok-%d" % i]), 0, 1)
    size_before = log.active_segment.size
    index_before = list(log.active_segment.index.positions)
    disk.budget = budget
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(simple_batch([b"x" * 200]), 0, 2)
    assert info.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert "No space left" in str(info.value)
    assert log.log_end_offset == 3
    assert log.active_segment.size == size_before
    assert log.active_segment.index.positions == index_before
    assert _values(log) == [b"ok-0", b"ok-1", b"ok-2"]
    disk.budget = None  # space returns
    info2 = log.append_as_leader(simple_batch([b"after"]), 0, 3)
    assert info2.first_offset == 3
    assert _values(log) == [b"ok-0", b"ok-1", b"ok-2", b"after"]
    log.close()
    reopened = Log.open("/d/t-0", LogConfig(), fs=disk.inner, now_ms=4)
    assert _values(reopened) == [b"ok-0", b"ok-1", b"ok-2", b"after"]


def test_epoch_checkpoint_on_a_full_disk_does_not_fail_a_written_append() -> None:
    disk = FullDisk(MemoryFileSystem())
    log = _open(disk)
    log.append_as_leader(simple_batch([b"a"]), 0, 1)
    batch = simple_batch([b"b"])
    disk.budget = len(batch) + 8 + 12  # the data and its index entries fit, the checkpoint not
    info = log.append_as_leader(batch, 1, 2)  # a new epoch: the checkpoint is rewritten
    assert info.first_offset == 1 and log.log_end_offset == 2
    assert log._epoch_checkpoint_pending
    disk.budget = None
    log.append_as_leader(simple_batch([b"c"]), 1, 3)  # the pending checkpoint is retried
    log.close()
    reopened = Log.open("/d/t-0", LogConfig(), fs=disk.inner, now_ms=4)
    assert reopened.epoch_cache.as_pairs() == [[0, 0], [1, 1]]
    assert _values(reopened) == [b"a", b"b", b"c"]
