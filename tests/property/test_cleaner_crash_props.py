"""Crash safety of log compaction: a power loss at any file-system step of a cleaning.

The log is written and flushed, then cleaned on a MemoryFileSystem that "loses power" (unsynced
bytes and directory entries are undone, torn writes allowed) just before its k-th write, fsync,
truncate, open, rename or remove. Whatever k: the reopened log ends where it ended, every record
in it is the one written at its offset, the last record of every key is the latest written (or,
for a deleted key whose tombstone was removed, the key is gone: it never comes back), no
``.cleaned`` or ``.swap`` file is left, and cleaning again keeps all of that.
"""

from __future__ import annotations

import os
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.records import Record, build_batch, decode_records
from floodmark.storage import Log, LogConfig, MemoryFileSystem
from floodmark.storage.cleaner import LogCleaner

SETTINGS = settings(
    max_examples=int(os.environ.get("FLOODMARK_PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
NOW = 1_000_000


class PowerLoss(Exception):
    pass


class _Handle:
    def __init__(self, inner: Any, fs: CrashingFS) -> None:
        self._inner = inner
        self._fs = fs

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name in ("write", "fsync", "truncate"):
            def counted(*args: Any) -> Any:
                self._fs.step()
                return attr(*args)
            return counted
        if name == "duplicate":
            return lambda: _Handle(attr(), self._fs)
        return attr


class CrashingFS(MemoryFileSystem):
    """Raises PowerLoss at the ``crash_at``-th counted step once armed."""

    def __init__(self) -> None:
        super().__init__()
        self.crash_at: int | None = None
        self.steps = 0

    def step(self) -> None:
        if self.crash_at is None:
            return
        self.steps += 1
        if self.steps >= self.crash_at:
            self.crash_at = None
            raise PowerLoss

    def open(self, path: str, *, create: bool = True) -> Any:
        self.step()
        return _Handle(super().open(path, create=create), self)

    def rename(self, source: str, destination: str) -> None:
        self.step()
        super().rename(source, destination)

    def remove(self, path: str) -> None:
        self.step()
        super().remove(path)

    def fsync_dir(self, path: str) -> None:
        self.step()
        super().fsync_dir(path)


def _records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in decode_records(log.read_all())]


def _check(log: Log, original: list[tuple[int, bytes | None, bytes | None]], leo: int) -> None:
    assert log.log_end_offset == leo
    written = {o: (k, v) for o, k, v in original}
    got = _records(log)
    assert [o for o, _k, _v in got] == sorted({o for o, _k, _v in got})
    for offset, key, value in got:
        assert written[offset] == (key, value)
    # Key by key, what a reader ends up with is what was written last: the latest record is
    # there, or (a tombstone removed after delete.retention.ms) nothing of that key is; an
    # older record may be there too (its removal was lost), never instead of the latest.
    latest = {k: o for o, k, _v in original}
    last_held: dict[bytes | None, int] = {}
    for offset, key, _value in got:
        last_held[key] = offset
    for key, offset in latest.items():
        if written[offset][1] is None:
            assert last_held.get(key, offset) == offset, f"deleted key {key!r} came back"
        else:
            assert last_held.get(key) == offset, f"latest value of {key!r} is missing"


@SETTINGS
@given(updates=st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=5, max_size=80),
       crash_at=st.integers(1, 80), seed=st.integers(0, 2**16))
def test_power_loss_at_any_step_of_a_cleaning(updates: list[tuple[int, bool]], crash_at: int,
                                              seed: int) -> None:
    fs = CrashingFS()
    config = LogConfig(segment_bytes=250, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.0, index_interval_bytes=64)
    log = Log.open("/d/t-0", config, fs=fs, now_ms=NOW)
    for i, (key, tombstone) in enumerate(updates):
        value = None if tombstone else b"value-%d" % i
        log.append_as_leader(build_batch([Record(0, NOW, b"k%d" % key, value)]), 0, NOW)
    log.flush()
    original = _records(log)
    leo = log.log_end_offset
    cleaner = LogCleaner(fs, "/d")
    fs.crash_at = crash_at
    try:
        cleaner.maybe_clean(("t", 0), log, leo, NOW)
        cleaner.maybe_clean(("t", 0), log, leo, NOW + config.delete_retention_ms + 1)
    except PowerLoss:
        pass
    except Exception as exc:  # a KafkaError wrapping the injected failure is a crash too
        assert isinstance(exc.__cause__, PowerLoss) or "PowerLoss" in repr(exc), exc
    fs.crash_at = None
    fs.crash(lose_unsynced=True, rng=random.Random(seed))
    reopened = Log.open("/d/t-0", config, fs=fs, now_ms=NOW, recovery_point=0)
    assert not [n for n in fs.listdir("/d/t-0") if n.endswith((".cleaned", ".swap"))]
    _check(reopened, original, leo)
    LogCleaner(fs, "/d").maybe_clean(("t", 0), reopened, leo, NOW)
    _check(reopened, original, leo)
