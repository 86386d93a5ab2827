"""Log compaction, unit level: configs, the cleaning conditions, crash-safe swaps, retention,
producer state. The random-input properties are in tests/property/test_cleaner_props.py."""

from __future__ import annotations

import pytest

from floodmark.records import Record, build_batch, decode_records, iter_batches
from floodmark.storage import Log, LogConfig, MemoryFileSystem
from floodmark.storage.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    LogCleaner,
    cleaning_reason,
    plan_cleaning,
)

NOW = 10_000_000


def _log(fs: MemoryFileSystem, **changes: object) -> Log:
    values: dict[str, object] = {"segment.bytes": 300, "cleanup.policy": "compact",
                                 "min.cleanable.dirty.ratio": "0.01"}
    values.update(changes)
    return Log.open("/d/t-0", LogConfig.from_kafka(values), fs=fs, now_ms=NOW)


def _put(log: Log, key: bytes, value: bytes | None, ts: int = NOW, **kwargs: int) -> None:
    log.append_as_leader(build_batch([Record(0, ts, key, value)], **kwargs), 0, ts)  # type: ignore[arg-type]


def _records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in decode_records(log.read_all())]


def test_configs_kafka_names_defaults_and_validation() -> None:
    default = LogConfig()
    assert (default.cleanup_policy, default.min_cleanable_dirty_ratio, default.min_compaction_lag_ms,
            default.max_compaction_lag_ms, default.delete_retention_ms) == (
        "delete", 0.5, 0, 2**63 - 1, 86_400_000)
    assert not default.compact and default.delete
    both = LogConfig.from_kafka({"cleanup.policy": "delete, compact",
                                 "min.cleanable.dirty.ratio": "0.25",
                                 "min.compaction.lag.ms": "5", "max.compaction.lag.ms": "7",
                                 "delete.retention.ms": "9"})
    assert both.compact and both.delete and both.cleanup_policy == "compact,delete"
    kafka = both.to_kafka()
    assert kafka["cleanup.policy"] == "compact,delete"
    assert kafka["min.cleanable.dirty.ratio"] == "0.25"
    assert (kafka["min.compaction.lag.ms"], kafka["max.compaction.lag.ms"],
            kafka["delete.retention.ms"]) == ("5", "7", "9")
    broker_level = LogConfig.from_kafka({"log.cleanup.policy": "compact",
                                         "log.cleaner.min.cleanable.ratio": 0.1})
    assert broker_level.compact and not broker_level.delete
    for bad in ({"cleanup.policy": "shred"}, {"min.cleanable.dirty.ratio": "1.5"},
                {"min.compaction.lag.ms": "-1"}, {"delete.retention.ms": "-1"},
                {"cleanup.policy": "delete,delete"}):
        with pytest.raises(ValueError):
            LogConfig.from_kafka(bad)
    # Kafka 4.1: an empty policy is neither (retention removes nothing, nothing is compacted).
    neither = LogConfig.from_kafka({"cleanup.policy": ""})
    assert not neither.compact and not neither.delete
    assert neither.to_kafka()["cleanup.policy"] == ""


def test_dirty_ratio_threshold_and_min_compaction_lag() -> None:
    fs = MemoryFileSystem()
    log = _log(fs, **{"min.cleanable.dirty.ratio": "0.9"})
    for i in range(30):
        _put(log, b"k%d" % (i % 3), b"v%d" % i)
    cleaner = LogCleaner(fs, "/d")
    assert cleaner.maybe_clean(("t", 0), log, log.log_end_offset, NOW) is not None  # all dirty
    for i in range(3):  # a little new dirty data: ratio far below 0.9
        _put(log, b"k%d" % i, b"again")
    log.roll(NOW)
    plan = plan_cleaning(log, cleaner.first_dirty[("t", 0)], log.log_end_offset, NOW)
    assert 0 < plan.dirty_ratio < 0.9
    assert cleaning_reason(log, plan, NOW) is None
    assert cleaner.maybe_clean(("t", 0), log, log.log_end_offset, NOW) is None

    fs2 = MemoryFileSystem()
    young = _log(fs2, **{"min.compaction.lag.ms": "60000"})
    for i in range(30):
        _put(young, b"k%d" % (i % 3), b"v%d" % i, ts=NOW - 1000)
    assert LogCleaner(fs2, "/d").maybe_clean(("t", 0), young, young.log_end_offset, NOW) is None
    assert LogCleaner(fs2, "/d").maybe_clean(("t", 0), young, young.log_end_offset,
                                             NOW + 60_000) is not None


def test_nothing_at_or_above_the_high_watermark_is_cleaned() -> None:
    fs = MemoryFileSystem()
    log = _log(fs)
    for i in range(40):
        _put(log, b"k", b"v%d" % i)
    before = _records(log)
    result = LogCleaner(fs, "/d").maybe_clean(("t", 0), log, 20, NOW)
    assert result is not None and result.first_dirty_offset <= 20
    after = _records(log)
    assert [r for r in after if r[0] >= result.first_dirty_offset] == [
        r for r in before if r[0] >= result.first_dirty_offset]
    assert len(after) < len(before)


def test_interrupted_swap_is_completed_and_cleaned_leftovers_removed() -> None:
    """A crash after ``.swap`` was durable: recovery puts the cleaned segment in place (and
    rebuilds its indexes); a ``.cleaned`` file (not complete) is removed."""
    fs_a, fs_b = MemoryFileSystem(), MemoryFileSystem()
    logs = [_log(fs_a), _log(fs_b)]
    for plog in logs:
        for i in range(40):
            _put(plog, b"k%d" % (i % 4), b"v%d" % i)
    cleaned_log = logs[0]
    assert LogCleaner(fs_a, "/d").maybe_clean(("t", 0), cleaned_log, cleaned_log.log_end_offset,
                                              NOW) is not None
    first = cleaned_log.segments[0]
    cleaned_bytes = first.read_at(0, first.size)
    plain = logs[1]
    base_name = f"/d/t-0/{plain.segments[0].base_offset:020d}"
    plain.close()
    handle = fs_b.open(base_name + ".log.swap")
    handle.write(cleaned_bytes)
    handle.close()
    handle = fs_b.open(base_name + ".log.cleaned")
    handle.write(b"partial")
    handle.close()
    reopened = _log(fs_b)
    names = fs_b.listdir("/d/t-0")
    assert not any(n.endswith((".swap", ".cleaned")) for n in names)
    segment = reopened.segments[0]
    assert segment.read_at(0, segment.size) == cleaned_bytes
    got = {o: (k, v) for o, k, v in _records(reopened)}
    for offset, key, value in _records(cleaned_log):
        if offset < reopened.segments[1].base_offset:
            assert got[offset] == (key, value)
    assert reopened.log_end_offset == 40


def test_retention_deletes_nothing_for_compact_only_and_works_for_compact_delete() -> None:
    for policy, expect_deleted in (("compact", False), ("compact,delete", True)):
        fs = MemoryFileSystem()
        log = _log(fs, **{"cleanup.policy": policy, "retention.ms": "1000"})
        for i in range(20):
            _put(log, b"k%d" % i, b"v", ts=NOW - 100_000)
        _put(log, b"new", b"v", ts=NOW)
        log.roll(NOW)
        deleted = log.apply_retention(NOW, log.log_end_offset)
        assert (deleted > 0) == expect_deleted


def test_last_batch_of_a_producer_is_kept_empty_and_producer_state_survives() -> None:
    fs = MemoryFileSystem()
    log = _log(fs)
    for seq in range(10):
        _put(log, b"same", b"v%d" % seq, producer_id=5, producer_epoch=0, base_sequence=seq)
    for i in range(10):
        _put(log, b"same", b"plain%d" % i)  # supersedes every record of producer 5
    log.roll(NOW)
    assert LogCleaner(fs, "/d").maybe_clean(("t", 0), log, log.log_end_offset, NOW) is not None
    assert _records(log) == [(19, b"same", b"plain9")]
    headers = [h for _p, h in iter_batches(log.read_all())]
    kept = [h for h in headers if h.producer_id == 5]
    assert len(kept) == 1 and kept[0].records_count == 0
    assert (kept[0].base_offset, kept[0].base_sequence) == (9, 9)
    assert log.log_end_offset == 20


def test_checkpoint_is_written_and_read_back() -> None:
    fs = MemoryFileSystem()
    log = _log(fs)
    for i in range(40):
        _put(log, b"k%d" % (i % 2), b"v%d" % i)
    cleaner = LogCleaner(fs, "/d")
    result = cleaner.maybe_clean(("t", 0), log, log.log_end_offset, NOW)
    assert result is not None
    assert fs.exists(f"/d/{CLEANER_OFFSET_CHECKPOINT}")
    assert LogCleaner(fs, "/d").first_dirty == {("t", 0): result.first_dirty_offset}
    cleaner.forget(("t", 0))
    assert LogCleaner(fs, "/d").first_dirty == {}


def test_follower_gaps_only_for_compacted_logs() -> None:
    fs = MemoryFileSystem()
    gap = build_batch([Record(5, NOW, b"k", b"v")], base_offset=5)
    compacted = Log.open("/f/c-0", LogConfig(cleanup_policy="compact"), fs=fs, now_ms=NOW)
    compacted.append_as_follower(gap, NOW)
    assert compacted.log_end_offset == 6
    plain = Log.open("/f/p-0", LogConfig(), fs=fs, now_ms=NOW)
    with pytest.raises(Exception, match="expected 0"):
        plain.append_as_follower(gap, NOW)


def test_max_compaction_lag_rolls_the_active_segment_and_forces_cleaning() -> None:
    fs = MemoryFileSystem()
    log = _log(fs, **{"segment.bytes": "1000000", "max.compaction.lag.ms": "1000",
                      "min.cleanable.dirty.ratio": "1.0"})
    for i in range(5):
        _put(log, b"k", b"v%d" % i, ts=NOW)
    assert len(log.segments) == 1
    _put(log, b"k", b"late", ts=NOW + 1500)  # the active segment is older than the lag: roll
    assert len(log.segments) == 2
    cleaner = LogCleaner(fs, "/d")
    # Ratio 1.0 is reached here (everything cleanable is dirty), so lower the bar differently:
    # a second batch of dirty data behind a clean section is below the ratio but too old.
    assert cleaner.maybe_clean(("t", 0), log, log.log_end_offset, NOW + 1500) is not None
    for i in range(5):
        _put(log, b"k", b"w%d" % i, ts=NOW + 1500)
    _put(log, b"k", b"roll", ts=NOW + 3000)
    plan = plan_cleaning(log, cleaner.first_dirty[("t", 0)], log.log_end_offset, NOW + 3000)
    assert plan.dirty_ratio < 1.0
    reason = cleaning_reason(log, plan, NOW + 3000)
    assert reason is not None and "max.compaction.lag.ms" in reason
    assert cleaner.maybe_clean(("t", 0), log, log.log_end_offset, NOW + 3000) is not None
    assert _records(log)[-2:] == [(10, b"k", b"w4"), (11, b"k", b"roll")]


def test_job_runs_on_a_worker_thread_while_appends_go_on_and_is_dropped_after_truncation(
    tmp_path: object,
) -> None:
    import threading

    from floodmark.storage import RealFileSystem

    fs = RealFileSystem()
    root = str(tmp_path)
    config = LogConfig.from_kafka({"segment.bytes": 300, "cleanup.policy": "compact",
                                   "min.cleanable.dirty.ratio": "0.01"})
    log = Log.open(f"{root}/t-0", config, fs=fs, now_ms=NOW)
    for i in range(60):
        _put(log, b"k%d" % (i % 3), b"v%d" % i)
    cleaner = LogCleaner(fs, root)
    job = cleaner.prepare(("t", 0), log, log.log_end_offset, NOW)
    assert job is not None
    worker = threading.Thread(target=job.run)
    worker.start()
    for i in range(60, 90):  # the log keeps taking writes while the worker cleans
        _put(log, b"k%d" % (i % 3), b"v%d" % i)
    worker.join(30)
    result = cleaner.finish(("t", 0), job)
    assert result is not None and result.records_after < result.records_before
    records = _records(log)
    assert records[-30:] == [(i, b"k%d" % (i % 3), b"v%d" % i) for i in range(60, 90)]
    assert log.log_end_offset == 90

    before = _records(log)
    for i in range(90, 120):
        _put(log, b"k%d" % (i % 3), b"w%d" % i)
    log.roll(NOW)
    job = cleaner.prepare(("t", 0), log, log.log_end_offset, NOW)
    assert job is not None
    log.truncate_to(100)  # the log changes under the job: it must not be installed
    job.run()
    assert cleaner.finish(("t", 0), job) is None
    assert _records(log) == before + [(i, b"k%d" % (i % 3), b"w%d" % i) for i in range(90, 100)]
    assert not [n for n in fs.listdir(f"{root}/t-0") if n.endswith((".cleaned", ".swap"))]
    log.close()


def test_a_cleaned_log_switched_to_delete_keeps_its_gaps_on_recovery() -> None:
    """cleanup.policy changed from compact to delete after cleaning: recovery (everything
    revalidated) must still accept the gaps the cleaner left, since the cleaner checkpoint says
    the log was compacted; the broker passes that as ``was_compacted``."""
    fs = MemoryFileSystem()
    log = _log(fs)
    for i in range(60):
        _put(log, b"k%d" % (i % 3), b"v%d" % i)
    cleaner = LogCleaner(fs, "/d")
    assert cleaner.maybe_clean(("t", 0), log, log.log_end_offset, NOW) is not None
    cleaned = _records(log)
    log.close()
    as_delete = LogConfig.from_kafka({"segment.bytes": 300, "cleanup.policy": "delete"})
    reopened = Log.open("/d/t-0", as_delete, fs=fs, now_ms=NOW, recovery_point=0,
                        was_compacted=("t", 0) in LogCleaner(fs, "/d").first_dirty)
    assert _records(reopened) == cleaned and reopened.log_end_offset == 60


def test_tombstones_stamped_before_a_restart_are_removed_after_their_horizon() -> None:
    fs = MemoryFileSystem()
    log = _log(fs, **{"delete.retention.ms": "5000"})
    for i in range(30):
        _put(log, b"k%d" % (i % 3), b"v%d" % i)
    _put(log, b"k0", None)  # delete k0
    for i in range(20):
        _put(log, b"other%d" % i, b"x")
    cleaner = LogCleaner(fs, "/d")
    assert cleaner.maybe_clean(("t", 0), log, log.log_end_offset, NOW) is not None
    assert (30, b"k0", None) in _records(log)  # stamped with a horizon, still there
    restarted = LogCleaner(fs, "/d")  # a broker restart: horizons are not in memory
    assert restarted.maybe_clean(("t", 0), log, log.log_end_offset, NOW + 1000) is not None
    assert (30, b"k0", None) in _records(log)  # horizon not reached: kept
    result = restarted.maybe_clean(("t", 0), log, log.log_end_offset, NOW + 5001)
    assert result is not None and result.tombstones_removed == 1
    assert not [r for r in _records(log) if r[1] == b"k0"]
    assert restarted.maybe_clean(("t", 0), log, log.log_end_offset, NOW + 9000) is None


def test_small_segments_are_merged_while_cleaned_and_a_merged_swap_is_recovered() -> None:
    import dataclasses

    fs = MemoryFileSystem()
    log = _log(fs)
    for i in range(60):
        _put(log, b"key-%d" % i, b"v%d" % i)  # distinct keys: nothing is superseded
    before = _records(log)
    segments_before = len(log.segments)
    assert segments_before > 10
    log.config = dataclasses.replace(log.config, segment_bytes=100_000)
    result = LogCleaner(fs, "/d").maybe_clean(("t", 0), log, log.log_end_offset, NOW)
    assert result is not None and result.records_after == result.records_before
    assert len(log.segments) == 2  # everything cleanable in one segment, plus the active one
    assert _records(log) == before and log.log_end_offset == 60
    log.close()
    assert _records(Log.open("/d/t-0", log.config, fs=fs, now_ms=NOW, recovery_point=0)) == before

    # A crash after a merged swap file was made durable: recovery replaces every segment in
    # the swap file's offset range.
    fs2 = MemoryFileSystem()
    plain = _log(fs2)
    for i in range(60):
        _put(plain, b"key-%d" % i, b"v%d" % i)
    first, second, third = plain.segments[:3]
    merged = b"".join(s.read_at(0, s.size) for s in (first, second))
    names = [f"/d/t-0/{s.base_offset:020d}" for s in (first, second, third)]
    plain.close()
    handle = fs2.open(names[0] + ".log.swap")
    handle.write(merged)
    handle.close()
    reopened = _log(fs2)
    assert [s.base_offset for s in reopened.segments[:2]] == [first.base_offset,
                                                              third.base_offset]
    assert not fs2.exists(names[1] + ".log") and not fs2.exists(names[1] + ".index")
    assert _records(reopened) == before and reopened.log_end_offset == 60


def test_a_full_offset_map_stops_the_cleaning_early_and_the_next_one_goes_on() -> None:
    """Kafka's dedupe buffer: when the next dirty segment's keys do not fit, the cleaning stops
    before it; the first dirty offset says where the next cleaning starts."""
    fs = MemoryFileSystem()
    log = _log(fs)
    for i in range(60):
        _put(log, b"k%d" % (i // 10), b"v%d" % i)  # keys change every 10 records
    before = _records(log)
    cleaner = LogCleaner(fs, "/d", dedupe_buffer_bytes=40)  # room for one key
    assert cleaner.max_map_keys == 1
    first = cleaner.maybe_clean(("t", 0), log, log.log_end_offset, NOW)
    assert first is not None and first.map_full
    assert 0 < first.first_dirty_offset < log.active_segment.base_offset
    assert _records(log) == _expected_after(before, first.first_dirty_offset)
    rounds = 1
    while (result := cleaner.maybe_clean(("t", 0), log, log.log_end_offset, NOW)) is not None:
        rounds += 1
        assert rounds < 50
        if not result.map_full:
            break
    end = cleaner.first_dirty[("t", 0)]
    assert end == log.active_segment.base_offset
    assert _records(log) == _expected_after(before, end)


def _expected_after(before: list[tuple[int, bytes | None, bytes | None]],
                    end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    last = {k: o for o, k, _v in before if o < end}
    return [(o, k, v) for o, k, v in before if o >= end or last[k] == o]
