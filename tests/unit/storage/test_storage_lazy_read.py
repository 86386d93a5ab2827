"""Lazy reads (``Log.read(..., lazy_min_bytes=n)``): the same batches as an ordinary read, as a
FileSlice whose descriptor outlives segment deletion and which refuses to serve bytes after a
truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.records import simple_batch
from floodmark.storage import Log, LogConfig, MemoryFileSystem, RealFileSystem
from floodmark.storage.file_slice import StaleSliceError


def batch(i: int, records: int = 2, size: int = 30) -> bytes:
    return simple_batch([bytes([65 + i % 26]) * size] * records, timestamp_ms=1_000 + i)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 400)), min_size=1, max_size=40),
    segment_bytes=st.sampled_from([600, 2_000, 1 << 20]),
    index_interval_bytes=st.sampled_from([1, 150, 4096]),
    reads=st.lists(
        st.tuples(st.floats(0, 1), st.integers(1, 5_000), st.floats(0, 1.2)), min_size=1,
        max_size=12,
    ),
)
def test_lazy_read_returns_the_same_batches(
    sizes: list[tuple[int, int]],
    segment_bytes: int,
    index_interval_bytes: int,
    reads: list[tuple[float, int, float]],
) -> None:
    fs = MemoryFileSystem()
    log = Log.open("/d/t-0", LogConfig(segment_bytes=segment_bytes,
                                       index_interval_bytes=index_interval_bytes),
                   fs=fs, now_ms=0)
    for i, (records, size) in enumerate(sizes):
        log.append_as_leader(batch(i, records, size), leader_epoch=1, now_ms=1_000 + i)
    leo = log.log_end_offset
    for where, max_bytes, bound_at in reads:
        start = int(where * leo)
        bound = None if bound_at > 1 else int(bound_at * leo)
        eager = log.read(start, max_bytes, bound)
        lazy = log.read(start, max_bytes, bound, lazy_min_bytes=0)
        small = log.read(start, max_bytes, bound, lazy_min_bytes=10**9)
        assert (lazy.first_offset, lazy.next_offset, lazy.position, lazy.size) == (
            eager.first_offset, eager.next_offset, eager.position, eager.size)
        assert small.file_slice is None and bytes(small.records) == bytes(eager.records)
        if eager.size == 0:
            continue
        assert lazy.file_slice is not None and lazy.records == b""
        assert len(lazy.file_slice) == eager.size
        assert lazy.file_slice.read() == bytes(eager.records)
        lazy.file_slice.close()


def real_log(tmp_path: Path) -> Log:
    log = Log.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=1_000, index_interval_bytes=100),
                   fs=RealFileSystem(), now_ms=0)
    for i in range(30):
        log.append_as_leader(batch(i), leader_epoch=1, now_ms=1_000 + i)
    return log


def test_slice_survives_retention_deleting_its_segment(tmp_path: Path) -> None:
    log = real_log(tmp_path)
    assert len(log.segment_base_offsets()) > 3
    info = log.read(0, 10_000, lazy_min_bytes=1)
    assert info.file_slice is not None
    expected = bytes(log.read(0, 10_000).records)
    fd = info.file_slice.fileno()
    assert fd is not None
    log.maybe_increment_log_start_offset(log.segment_base_offsets()[2], log.log_end_offset)
    assert log.apply_retention(now_ms=2_000, high_watermark=log.log_end_offset) >= 2
    assert not os.path.exists(info.segment_path or "")
    log.close()
    # The unlinked file is still readable and sendable through the slice's own descriptor.
    assert os.pread(fd, info.size, info.position) == expected
    assert info.file_slice.is_current()
    assert info.file_slice.read() == expected
    info.file_slice.close()
    assert info.file_slice.fileno() is None
    with pytest.raises(OSError):
        os.fstat(fd)


def test_slice_goes_stale_on_truncation(tmp_path: Path) -> None:
    log = real_log(tmp_path)
    leo = log.log_end_offset
    info = log.read(leo - 2, 10_000, lazy_min_bytes=1)
    assert info.file_slice is not None and info.file_slice.is_current()
    log.truncate_to(leo - 4)
    log.append_as_leader(batch(77) + batch(78), leader_epoch=2, now_ms=5_000)
    assert not info.file_slice.is_current()
    with pytest.raises(StaleSliceError):
        info.file_slice.read()
    info.file_slice.close()


def test_small_lazy_read_comes_back_as_bytes(tmp_path: Path) -> None:
    log = real_log(tmp_path)
    info = log.read(0, 10_000, lazy_min_bytes=1 << 20)
    assert info.file_slice is None and bytes(info.records) == bytes(log.read(0, 10_000).records)
