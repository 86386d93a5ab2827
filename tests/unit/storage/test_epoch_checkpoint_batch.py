"""Batched leader-epoch-checkpoint writes (``storage.epoch_checkpoints``) and the new leader's
wait for them (``Partition.epoch_start_pending``): the order of a durable write holds for the
whole batch, a crash at any point leaves each checkpoint whole (old or new), ``on_durable``
comes only when the new entry survives power loss, and a leader accepts no write before it."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from floodmark.broker.partition_state import PartitionState
from floodmark.errors import ErrorCode
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.epochs import EpochEntry
from floodmark.replication.partition import EpochQuery, FollowerFetch
from floodmark.storage import Log, LogConfig, MemoryFileSystem, RealFileSystem
from floodmark.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from floodmark.storage.epoch_checkpoints import EpochCheckpointBatch
from floodmark.storage.fs import FileSystem


def _logs(fs: FileSystem, root: str, count: int) -> list[Log]:
    return [Log.open(f"{root}/t-{i}", LogConfig(), fs=fs, now_ms=0) for i in range(count)]


def _on_disk(fs: FileSystem, log: Log) -> list[EpochEntry]:
    """What the checkpoint file says (read directly: opening the log would also reconcile the
    cache with the (empty) log and drop entries at its end, as Kafka does)."""
    return LeaderEpochCheckpointFile(fs, f"{log.path}/{LEADER_EPOCH_CHECKPOINT}").read()


def _deferred(batch: EpochCheckpointBatch, log: Log, epoch: int, fired: list[int]) -> None:
    log.assign_epoch(epoch, log.log_end_offset, durable=False)
    batch.add(log, lambda _now_ms: fired.append(epoch))


def test_batch_makes_every_checkpoint_durable() -> None:
    fs = MemoryFileSystem()
    logs = _logs(fs, "/data", 5)
    batch = EpochCheckpointBatch()
    fired: list[int] = []
    for epoch, log in enumerate(logs, start=3):
        _deferred(batch, log, epoch, fired)
    dir_fsyncs = fs.dir_fsync_count
    assert batch.run_now(0) == 5
    assert sorted(fired) == [3, 4, 5, 6, 7]
    assert fs.dir_fsync_count - dir_fsyncs == 5  # each partition directory once
    fs.crash(lose_unsynced=True)
    for epoch, log in enumerate(logs, start=3):
        assert _on_disk(fs, log) == [EpochEntry(epoch, 0)]
        assert not fs.exists(f"{log.path}/{LEADER_EPOCH_CHECKPOINT}.tmp")


PHASES = 6  # prepare, write_files, sync_files, install, sync_dirs, finish


def _run_phases(batch: EpochCheckpointBatch, upto: int) -> None:
    dirs: list[str] = []
    failed: dict[str, OSError] = {}
    for phase in range(upto):
        if phase == 0:
            batch.prepare()
        elif phase == 1:
            batch.write_files()
        elif phase == 2:
            batch.sync_files()
        elif phase == 3:
            dirs = batch.install()
        elif phase == 4:
            failed = batch.sync_dirs(dirs)
        else:
            batch.finish(failed, 0)


def _start(batch: EpochCheckpointBatch) -> None:
    batch.prepare()
    batch.write_files()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("cut", range(PHASES + 1))
def test_power_loss_at_any_phase_leaves_old_or_new(cut: int, seed: int) -> None:
    """Each checkpoint already holds epoch 1 durably; a batch adds epoch 2. Power is lost after
    ``cut`` phases (with torn unsynced tails): every file parses and holds the old or the new
    entries; ``on_durable`` fired only in the last phase, and then the new ones survived."""
    fs = MemoryFileSystem()
    logs = _logs(fs, "/data", 3)
    for log in logs:
        log.assign_epoch(1, 0)
    batch = EpochCheckpointBatch()
    fired: list[int] = []
    for log in logs:
        _deferred(batch, log, 2, fired)
    _run_phases(batch, cut)
    assert fired == ([2, 2, 2] if cut == PHASES else [])
    fs.crash(lose_unsynced=True, rng=random.Random(seed))
    old, new = [EpochEntry(1, 0)], [EpochEntry(2, 0)]  # (2 starts where 1 did: replaces it)
    for log in logs:
        on_disk = _on_disk(fs, log)
        assert on_disk in (old, new)
        if fired:
            assert on_disk == new


def test_a_later_synchronous_write_wins_and_covers_the_batch() -> None:
    fs = MemoryFileSystem()
    (log,) = _logs(fs, "/data", 1)
    batch = EpochCheckpointBatch()
    fired: list[int] = []
    _deferred(batch, log, 1, fired)
    _start(batch)
    log.assign_epoch(2, 0)  # on the loop, while the batch's fsyncs run: durable at once
    _run_phases_after_prepare(batch)
    assert fired == [1]  # the file durably holds what the batch held, and more
    fs.crash(lose_unsynced=True)
    assert _on_disk(fs, log) == [EpochEntry(2, 0)]


def _run_phases_after_prepare(batch: EpochCheckpointBatch) -> None:
    """The phases after ``_start``."""
    batch.sync_files()
    batch.finish(batch.sync_dirs(batch.install()), 0)


def test_an_overtaken_batch_is_not_durable_the_later_one_is() -> None:
    fs = MemoryFileSystem()
    (log,) = _logs(fs, "/data", 1)
    first, second = EpochCheckpointBatch(), EpochCheckpointBatch()
    fired: list[int] = []
    _deferred(first, log, 1, fired)
    _start(first)
    _deferred(second, log, 2, fired)
    _start(second)
    _run_phases_after_prepare(first)  # its older text is not renamed over the newer write
    assert fired == []
    fs.crash(lose_unsynced=False)  # (a process kill: nothing is lost, nothing was installed)
    assert _on_disk(fs, log) == []
    _run_phases_after_prepare(second)
    assert fired == [2]
    fs.crash(lose_unsynced=True)
    assert _on_disk(fs, log) == [EpochEntry(2, 0)]


def test_a_failed_fsync_reports_the_log_and_never_calls_on_durable() -> None:
    fs = MemoryFileSystem()
    logs = _logs(fs, "/data", 2)
    batch = EpochCheckpointBatch()
    fired: list[int] = []
    for epoch, log in enumerate(logs):
        _deferred(batch, log, epoch, fired)
    fs.fail_next_fsyncs(1)  # the first temp file's fsync: EIO
    assert batch.run_now(0) == 1
    assert fired == [1]
    assert logs[0].last_io_error is not None and "leader-epoch-checkpoint" in logs[0].last_io_error
    assert logs[1].last_io_error is None


def test_a_log_closed_meanwhile_is_skipped() -> None:
    fs = MemoryFileSystem()
    logs = _logs(fs, "/data", 2)
    batch = EpochCheckpointBatch()
    fired: list[int] = []
    for epoch, log in enumerate(logs):
        _deferred(batch, log, epoch, fired)
    _start(batch)
    logs[0].close()
    fs.rmtree(logs[0].path)  # removed and deleted (StopReplica) while the fsyncs ran
    _run_phases_after_prepare(batch)
    assert fired == [1]


def test_real_files_on_an_event_loop(tmp_path: Path) -> None:
    fs = RealFileSystem()
    logs = _logs(fs, str(tmp_path), 20)
    batch = EpochCheckpointBatch()
    fired: list[int] = []
    for log in logs:
        _deferred(batch, log, 7, fired)
    ticks = 0

    async def main() -> int:
        nonlocal ticks
        task = asyncio.create_task(batch.run(lambda: 0))
        while not task.done():  # the loop keeps running while the fsyncs are on the worker
            ticks += 1
            await asyncio.sleep(0)
        return await task

    assert asyncio.run(main()) == 20
    assert fired == [7] * 20 and ticks > 0
    for log in logs:
        assert _on_disk(fs, log) == [EpochEntry(7, 0)]
        assert not Path(f"{log.path}/{LEADER_EPOCH_CHECKPOINT}.tmp").exists()


def test_run_now_concurrent_on_real_files(tmp_path: Path) -> None:
    """A lone broker opening its partitions (no event loop yet) runs the batch in line with
    its fsyncs on threads: every checkpoint durable, the same phases, no temp file left."""
    fs = RealFileSystem()
    logs = _logs(fs, str(tmp_path), 20)
    batch = EpochCheckpointBatch()
    fired: list[int] = []
    for log in logs:
        _deferred(batch, log, 9, fired)
    assert batch.run_now(0, concurrent=True) == 20
    assert fired == [9] * 20
    for log in logs:
        assert _on_disk(fs, log) == [EpochEntry(9, 0)]
        assert not Path(f"{log.path}/{LEADER_EPOCH_CHECKPOINT}.tmp").exists()


# -- the new leader waits for the batch ------------------------------------------------------------
def _leader_state(fs: FileSystem, epoch_writes: EpochCheckpointBatch | None) -> PartitionState:
    """The broker's partition (``PartitionState.apply_metadata`` defers the new leader's
    AssignEpoch into the batch)."""
    (log,) = _logs(fs, "/data", 1)
    ps = PartitionState("t", 0, node_id=1, log=log)
    registration = PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 5, 5)
    ps.apply_metadata(registration, 0, epoch_writes=epoch_writes)
    return ps


def _leader(fs: FileSystem, epoch_writes: EpochCheckpointBatch | None) -> ReplicaDriver:
    return _leader_state(fs, epoch_writes).driver


def test_new_leader_takes_no_write_before_its_epoch_is_durable() -> None:
    fs = MemoryFileSystem()
    batch = EpochCheckpointBatch()
    driver = _leader(fs, batch)
    core, log = driver.partition, driver.log
    assert core.is_leader and core.leader_epoch == 5
    assert core.check_produce(-1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert core.check_produce(1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    fetch = driver.partition.handle_follower_fetch(log, FollowerFetch(2, 0, -1, 5, 0), 0)
    assert fetch.error is ErrorCode.UNKNOWN_LEADER_EPOCH and not fetch.effects
    assert core.remote_log_end_offsets() == {2: -1, 3: -1}  # the fetch recorded nothing
    error, _ = core.handle_epoch_query(log, EpochQuery(2, 5, 4))
    assert error is ErrorCode.UNKNOWN_LEADER_EPOCH
    fs.crash(lose_unsynced=True)  # before the batch ran: nothing of epoch 5 was accepted
    assert _on_disk(fs, log) == []  # type: ignore[arg-type]


def test_new_leader_takes_writes_once_the_batch_is_durable() -> None:
    fs = MemoryFileSystem()
    batch = EpochCheckpointBatch()
    driver = _leader(fs, batch)
    assert batch.run_now(0) == 1
    core, log = driver.partition, driver.log
    assert core.check_produce(-1) is ErrorCode.NONE
    assert core.handle_follower_fetch(log, FollowerFetch(2, 0, -1, 5, 0), 0).error \
        is ErrorCode.NONE
    assert core.handle_epoch_query(log, EpochQuery(2, 5, 4))[0] is ErrorCode.NONE
    fs.crash(lose_unsynced=True)
    assert _on_disk(fs, log) == [EpochEntry(5, 0)]  # type: ignore[arg-type]


def test_a_stale_durable_call_changes_nothing() -> None:
    fs = MemoryFileSystem()
    first = EpochCheckpointBatch()
    ps = _leader_state(fs, first)
    driver = ps.driver
    registration = PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 6, 6)  # re-elected: epoch 6
    second = EpochCheckpointBatch()
    ps.apply_metadata(registration, 0, epoch_writes=second)
    first.run_now(0)  # epoch 5's write: overtaken, and not this leadership's
    assert driver.partition.check_produce(1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    second.run_now(0)
    assert driver.partition.check_produce(1) is ErrorCode.NONE


def test_without_a_batch_the_epoch_is_durable_before_apply_returns() -> None:
    fs = MemoryFileSystem()
    driver = _leader(fs, None)
    assert driver.partition.check_produce(1) is ErrorCode.NONE
    fs.crash(lose_unsynced=True)
    assert _on_disk(fs, driver.log) == [EpochEntry(5, 0)]  # type: ignore[arg-type]


def test_an_overtaken_batch_never_installs_the_later_batchs_unsynced_file() -> None:
    """Both batches write ``<file>.tmp``: the first one's rename would move the second one's
    temp file (not fsynced yet) into place, and its directory fsync make that durable."""
    fs = MemoryFileSystem()
    (log,) = _logs(fs, "/data", 1)
    log.assign_epoch(1, 0)
    first, second = EpochCheckpointBatch(), EpochCheckpointBatch()
    fired: list[int] = []
    _deferred(first, log, 2, fired)
    _start(first)
    _deferred(second, log, 3, fired)
    _start(second)
    first.sync_files()
    assert first.install() == []
    fs.crash(lose_unsynced=True)
    assert _on_disk(fs, log) == [EpochEntry(1, 0)]


def test_no_isr_shrink_while_followers_cannot_fetch() -> None:
    """The followers are refused until the epoch start is durable: that is not lag. Once it
    is, the in-sync ones count as caught up from then (as at the start of a leadership)."""
    fs = MemoryFileSystem()
    batch = EpochCheckpointBatch()
    driver = _leader(fs, batch)
    core, log = driver.partition, driver.log
    late_ms = 10 * core.config.replica_lag_time_max_ms
    assert core.maybe_shrink_isr(log, late_ms) == []
    assert batch.run_now(late_ms) == 1
    assert core.maybe_shrink_isr(log, late_ms + 1) == []
    assert core.isr == (1, 2, 3)
    assert core.maybe_shrink_isr(log, late_ms + core.config.replica_lag_time_max_ms + 1)
