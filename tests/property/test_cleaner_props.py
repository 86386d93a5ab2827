"""Property tests for log compaction (storage/cleaner.py) on MemoryFileSystem.

Random keyed updates and deletes, random batch sizes, codecs, segment sizes and high watermarks.
After cleaning: every surviving record is the one written at its offset (offsets never move),
below the cleaned end exactly the last record of each key survives, nothing at or above it
changes, the active segment is byte for byte the same, the log end offset does not move, the
latest record of every key survives, tombstones go only after delete.retention.ms, the log
reopens (recovery accepts the gaps) and a follower replicates it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.compression import Compression
from floodmark.records import Record, build_batch, decode_records
from floodmark.storage import Log, LogConfig, MemoryFileSystem
from floodmark.storage.cleaner import LogCleaner

SETTINGS = settings(
    max_examples=int(os.environ.get("FLOODMARK_PROPERTY_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

DELETE_RETENTION_MS = 10_000
NOW_MS = 1_000_000

# A batch: (records as (key index, value or None for a tombstone), compressed?, idempotent?)
record_st = st.tuples(st.integers(0, 5), st.one_of(st.none(), st.binary(min_size=0, max_size=40)))
batches_st = st.lists(
    st.tuples(st.lists(record_st, min_size=1, max_size=5), st.booleans(), st.booleans()),
    min_size=1,
    max_size=40,
)


def _write(log: Log, batches: list[tuple[list[tuple[int, bytes | None]], bool, bool]]) -> None:
    sequence = 0
    for i, (records, compressed, idempotent) in enumerate(batches):
        recs = [Record(j, NOW_MS - 100_000 + i, b"key-%d" % k, v) for j, (k, v) in enumerate(records)]
        kwargs: dict[str, int] = {}
        if idempotent:
            kwargs = {"producer_id": 7, "producer_epoch": 0, "base_sequence": sequence}
            sequence += len(recs)
        data = build_batch(recs, compression=Compression.GZIP if compressed else Compression.NONE,
                           **kwargs)  # type: ignore[arg-type]
        log.append_as_leader(data, 0, NOW_MS - 100_000 + i)


def _records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in decode_records(log.read_all())]


def _expected(original: list[tuple[int, bytes | None, bytes | None]], end: int,
              tombstones_due_below: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """Below ``end`` only the last record of each key (among offsets below ``end``) is kept,
    and not if it is a tombstone below ``tombstones_due_below`` (stamped by an earlier cleaning
    whose horizon has passed); at or above ``end`` everything is kept."""
    last: dict[bytes | None, int] = {}
    for offset, key, _value in original:
        if offset < end:
            last[key] = offset
    out = []
    for offset, key, value in original:
        below_and_latest = offset < end and last[key] == offset
        due = value is None and offset < tombstones_due_below
        if offset >= end or (below_and_latest and not due):
            out.append((offset, key, value))
    return out


@SETTINGS
@given(batches=batches_st, segment_bytes=st.integers(150, 900),
       hw_fraction=st.floats(0.0, 1.0), max_map_keys=st.sampled_from([None, 1, 2, 4]))
def test_cleaning_keeps_the_latest_record_per_key_at_its_offset(
    batches: list[tuple[list[tuple[int, bytes | None]], bool, bool]],
    segment_bytes: int,
    hw_fraction: float,
    max_map_keys: int | None,
) -> None:
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes=segment_bytes, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.0, delete_retention_ms=DELETE_RETENTION_MS,
                       index_interval_bytes=100)
    log = Log.open("/d/t-0", config, fs=fs, now_ms=NOW_MS)
    _write(log, batches)
    original = _records(log)
    leo = log.log_end_offset
    hw = int(leo * hw_fraction)
    active = log.active_segment
    active_bytes = active.read_at(0, active.size)
    active_base = active.base_offset

    cleaner = LogCleaner(fs, "/d")
    if max_map_keys is not None:  # a tiny dedupe buffer: the first cleaning may stop early
        cleaner.max_map_keys = max_map_keys
    result = cleaner.maybe_clean(("t", 0), log, hw, NOW_MS)
    after = _records(log)
    end = result.first_dirty_offset if result is not None else 0
    assert end <= min(hw, active_base)
    assert after == _expected(original, end)
    assert log.log_end_offset == leo and log.log_start_offset == 0
    assert log.active_segment.base_offset == active_base
    assert log.active_segment.read_at(0, log.active_segment.size) == active_bytes
    by_offset = {o: (k, v) for o, k, v in original}
    for offset, key, value in after:
        assert by_offset[offset] == (key, value)  # nothing moved
    latest = {key: offset for offset, key, _v in original}
    survivors = {offset for offset, _k, _v in after}
    assert set(latest.values()) <= survivors
    if result is not None:
        assert cleaner.first_dirty[("t", 0)] == end

    # A second cleaning after the delete horizon (with an unbounded map: it takes the rest of
    # the dirty section too) removes the tombstones the first one stamped.
    cleaner.max_map_keys = 10**9
    result2 = cleaner.maybe_clean(("t", 0), log, hw, NOW_MS + DELETE_RETENTION_MS + 1)
    after2 = _records(log)
    end2 = result2.first_dirty_offset if result2 is not None else end
    tombstones_below = any(v is None for o, _k, v in after if o < end)
    if result is not None and not result.map_full:
        assert (result2 is not None) == tombstones_below
    assert after2 == _expected(original, end2, tombstones_due_below=end)
    assert log.log_end_offset == leo

    # Recovery accepts the gaps (a crash: no clean shutdown, everything revalidated).
    log.close()
    reopened = Log.open("/d/t-0", config, fs=fs, now_ms=NOW_MS, recovery_point=0)
    assert _records(reopened) == after2
    assert reopened.log_end_offset == leo

    # A follower replicates the compacted log from offset 0 (it meets the gaps, too).
    follower = Log.open("/f/t-0", config, fs=fs, now_ms=NOW_MS)
    while follower.log_end_offset < leo:
        info = reopened.read(follower.log_end_offset, 700)
        assert info.size > 0
        follower.append_as_follower(info.records, NOW_MS)
    assert _records(follower) == after2
    assert follower.log_end_offset == leo
