"""The partition's periodic work as the core's own timers (``replication.schedule``,
``Partition.next_deadline_ms`` / ``Partition.tick``): pure unit tests over a ``FakeLog``."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.replication.test_replication_core import FakeLog, leader_with, reg

from floodmark.broker.partition_state import PartitionState
from floodmark.constants import ACKS_ALL
from floodmark.errors import ErrorCode
from floodmark.replication.election import AlterPartitionRequest, PartitionRegistration
from floodmark.replication.partition import (
    CheckpointHighWatermark,
    FlushLog,
    FollowerAction,
    FollowerActionKind,
    NextFetch,
    Partition,
    PartitionConfig,
    ProposeIsr,
)
from floodmark.replication.purgatory import CompleteProduce
from floodmark.replication.reads import FetchIsolation, read_bound
from floodmark.replication.schedule import PeriodicWork, Schedule, first_due_ms
from floodmark.storage.config import FlushPolicy, LogConfig
from floodmark.storage.log import Log


def test_due_times_align_to_the_interval_so_partitions_share_a_checkpoint() -> None:
    a = Schedule({PeriodicWork.CHECKPOINT: 5000})
    b = Schedule({PeriodicWork.CHECKPOINT: 5000})
    a.start(1_234)
    b.start(4_999)
    assert a.next_deadline_ms() == b.next_deadline_ms() == 5000
    assert first_due_ms(5000, 5000) == 10_000  # strictly after


def test_take_due_rearms_and_runs_a_missed_task_once() -> None:
    s = Schedule({PeriodicWork.ISR_CHECK: 100, PeriodicWork.FLUSH: 250})
    s.start(0, {PeriodicWork.FLUSH: 30})
    assert s.next_deadline_ms() == 30
    assert s.take_due(29) == []
    assert s.take_due(30) == [PeriodicWork.FLUSH]
    assert s.due_ms[PeriodicWork.FLUSH] == 280
    assert s.take_due(100) == [PeriodicWork.ISR_CHECK]
    assert s.due_ms[PeriodicWork.ISR_CHECK] == 200
    # paused for a long time: each task runs once, then from the next aligned time on
    assert s.take_due(1_010) == [PeriodicWork.ISR_CHECK, PeriodicWork.FLUSH]
    assert s.due_ms == {PeriodicWork.ISR_CHECK: 1_100, PeriodicWork.FLUSH: 1_250}


def test_a_first_due_time_in_the_past_is_now() -> None:
    s = Schedule({PeriodicWork.FLUSH: 10})
    s.start(500, {PeriodicWork.FLUSH: 20})
    assert s.next_deadline_ms() == 500


def test_an_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="flush interval must be positive"):
        Schedule({PeriodicWork.FLUSH: 0})


def test_without_timers_only_a_parked_produce_has_a_deadline() -> None:
    p = Partition(PartitionConfig("t", 0, 1))
    assert p.next_deadline_ms() is None
    log = FakeLog()
    leader = leader_with(log, reg([1, 2], [1, 2], 1), 0)
    base, last = log.append(0)
    leader.on_leader_append(log, 7, ACKS_ALL, base, last, 0, 300)
    assert leader.next_deadline_ms() == 300
    assert leader.tick(log, 299) == []
    assert leader.tick(log, 300) == [CompleteProduce(7, ErrorCode.REQUEST_TIMED_OUT, -1)]
    assert leader.next_deadline_ms() is None


def test_tick_runs_the_isr_check_flush_and_checkpoint_when_due() -> None:
    log = FakeLog()
    log.append(0, 4)
    leader = leader_with(log, reg([1, 2], [1, 2], 1), 0, lag_ms=1000)
    leader.config = PartitionConfig("t", 0, 1, replica_lag_time_max_ms=1000,
                                    flush_check_interval_ms=400, checkpoint_interval_ms=700)
    leader.high_watermark = 2
    leader.start_timers(0)
    assert leader.next_deadline_ms() == 400
    assert leader.tick(log, 400) == [FlushLog()]
    assert leader.next_deadline_ms() == 500
    assert leader.tick(log, 500) == []  # ISR check: replica 2 lags less than 1000 ms yet
    assert leader.tick(log, 700) == [CheckpointHighWatermark(2)]
    assert leader.tick(log, 1000) == [FlushLog()]  # replica 2 is 1000 ms behind: not more
    effects = leader.tick(log, 1500)  # ISR check again: replica 2 never fetched, 1500 ms
    assert [type(e) for e in effects] == [ProposeIsr, FlushLog, CheckpointHighWatermark]
    assert effects[0].request.new_isr == (1,)  # type: ignore[union-attr]


def test_a_broker_partition_flushes_through_its_policy_and_asks_for_one_checkpoint(
        tmp_path: Path) -> None:
    """The broker's side (``PartitionState``): the core's ``FlushLog`` and
    ``CheckpointHighWatermark`` reach the broker's hooks, keyed by the partition."""

    class Hooks:
        def __init__(self) -> None:
            self.flushed: list[tuple[str, int]] = []
            self.checkpoints = 0

        def wake_fetches(self, key: tuple[str, int]) -> None: ...
        def wake_replica_fetches(self, key: tuple[str, int]) -> None: ...
        def complete_produce(self, produce_id: int, error: ErrorCode, base_offset: int) -> None:
            ...
        def propose_isr(self, key: tuple[str, int], request: AlterPartitionRequest) -> None:
            raise AssertionError("RF=1 never proposes")

        def flush_log(self, key: tuple[str, int]) -> None:
            self.flushed.append(key)

        def checkpoint_due(self) -> None:
            self.checkpoints += 1

    hooks = Hooks()
    interval = LogConfig(flush_interval_ms=1000, flush_policy=FlushPolicy.INTERVAL)
    plog = Log.open(str(tmp_path / "t-0"), interval, now_ms=0)
    ps = PartitionState("t", 0, node_id=1, log=plog, hooks=hooks, flush_check_interval_ms=500,
                        checkpoint_interval_ms=5000, opened_ms=1_200)
    ps.apply_metadata(PartitionRegistration((1,), (1,), 1, 0, 0), 1_200)
    assert ps.driver.next_deadline_ms() == 1_500
    ps.driver.tick(1_500)
    assert hooks.flushed == [("t", 0)] and hooks.checkpoints == 0
    ps.driver.tick(5_000)
    assert hooks.flushed == [("t", 0)] * 2 and hooks.checkpoints == 1
    # Kafka's default flush policy (the OS writes back) never flushes on a check: no timer.
    ps.reconfigure(LogConfig(), 1, 5_200)
    assert ps.driver.next_deadline_ms() == 10_000  # the checkpoint's, at the same phase
    ps.reconfigure(interval, 1, 5_200)
    assert ps.driver.next_deadline_ms() == 5_500
    plog.close()


def test_a_log_with_the_os_flush_policy_has_no_flush_timer(tmp_path: Path) -> None:
    plog = Log.open(str(tmp_path / "t-0"), now_ms=0)
    ps = PartitionState("t", 0, node_id=1, log=plog, flush_check_interval_ms=500,
                        replica_lag_time_max_ms=30_000, opened_ms=1_200)
    assert ps.driver.next_deadline_ms() == 15_000  # the ISR check only
    plog.close()


def test_the_next_fetch_follows_the_action() -> None:
    assert FollowerAction(FollowerActionKind.APPEND).next_fetch is NextFetch.NOW
    assert FollowerAction(FollowerActionKind.IGNORE).next_fetch is NextFetch.NOW
    assert (FollowerAction(FollowerActionKind.RETRY, backoff=True).next_fetch
            is NextFetch.AFTER_BACKOFF)
    assert FollowerAction(FollowerActionKind.STOP).next_fetch is NextFetch.ON_NEW_METADATA


def test_a_leader_that_stepped_down_refuses_consumers_not_replicas() -> None:
    log = FakeLog()
    log.append(0, 3)
    leader = leader_with(log, reg([1, 2], [1, 2], 1), 0)
    leader.high_watermark = 3
    for isolation in (FetchIsolation.HIGH_WATERMARK, FetchIsolation.TXN_COMMITTED):
        bound = read_bound(leader, log, 0, -1, isolation, stepped_down=True)
        assert bound.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert bound.high_watermark == -1 and not bound.has_data
    bound = read_bound(leader, log, 0, -1, FetchIsolation.LOG_END, stepped_down=True)
    assert bound.error is ErrorCode.NONE and bound.read_upto == 3
