"""The broker's deadline heap of partitions (``broker.partition_timers``): pure unit tests."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from floodmark.broker.broker import Broker
from floodmark.broker.config import BrokerConfig
from floodmark.broker.partition_timers import PartitionTimers


def test_only_the_due_partitions_are_popped_in_deadline_order() -> None:
    timers = PartitionTimers()
    for i, deadline in enumerate([500, 100, 300, None]):
        timers.arm(("t", i), deadline)
    assert len(timers) == 3 and timers.next_deadline_ms() == 100
    assert timers.pop_due(99) == []
    assert timers.pop_due(300) == [("t", 1), ("t", 2)]
    assert timers.next_deadline_ms() == 500 and len(timers) == 1


def test_an_earlier_deadline_replaces_a_later_one_never_the_reverse() -> None:
    timers = PartitionTimers()
    timers.arm(("t", 0), 1000)
    timers.arm(("t", 0), 200)  # a produce parked with a short timeout
    assert timers.next_deadline_ms() == 200
    timers.arm(("t", 0), 5000)  # later: the early entry stays (one spurious look, not a miss)
    assert timers.pop_due(200) == [("t", 0)]
    assert timers.pop_due(10_000) == []  # the replaced entry at 1000 is stale
    assert timers.next_deadline_ms() is None


def test_touched_partitions_are_re_read_and_discarded_ones_forgotten() -> None:
    timers = PartitionTimers()
    deadlines = {("t", 0): 700, ("t", 1): 400}
    timers.arm(("t", 0), 900)
    timers.arm(("t", 1), 900)
    timers.touch(("t", 0))
    timers.touch(("t", 1))
    timers.discard(("t", 1))
    timers.refresh(deadlines.get)
    assert timers.next_deadline_ms() == 700
    assert timers.pop_due(1000) == [("t", 0)]


def test_stale_entries_are_bounded() -> None:
    timers = PartitionTimers()
    for deadline in range(10_000, 0, -1):  # each one earlier: each leaves a stale entry
        timers.arm(("t", 0), deadline)
    assert len(timers._heap) <= 2 * len(timers) + 64
    assert timers.pop_due(1) == [("t", 0)]


def test_an_idle_broker_ticks_only_the_partitions_with_work_due(tmp_path: Path) -> None:
    """A real single-node broker in this process with 64 idle partitions: between the aligned
    due times nothing is ticked; at the HW checkpoint's time each partition once; and an idle
    broker does not rewrite its checkpoint files."""
    config = BrokerConfig.load(data_dir=tmp_path / "data", listen="127.0.0.1:9999",
                               overrides=["offsets.topic.num.partitions=1"])
    broker = Broker(config)
    broker.open()
    try:
        asyncio.run(broker.create_topic("t", 64, 1, {}))
        assert len(broker.partition_timers) == len(broker.partitions)
        first = broker.partition_timers.next_deadline_ms()
        assert first is not None

        def due() -> dict[tuple[str, int], int | None]:
            return {k: ps.driver.next_deadline_ms() for k, ps in broker.partitions.items()}

        before = due()
        assert min(d for d in before.values() if d is not None) == first
        broker.tick_partitions(first - 1)
        assert due() == before  # nothing was due: nothing ran
        broker.tick_partitions(first)
        after = due()
        for key, deadline in before.items():  # the due ones ran once and were re-armed
            assert (after[key] or 0) > first if deadline == first else after[key] == deadline
        assert broker.partition_timers.next_deadline_ms() == min(
            d for d in after.values() if d is not None)
        broker.checkpoint()
        hw_file = broker.storage.dirs[0].path / "replication-offset-checkpoint"
        written = hw_file.stat().st_mtime_ns
        os.utime(hw_file, ns=(0, 0))
        broker.checkpoint()  # nothing changed: not rewritten
        assert hw_file.stat().st_mtime_ns == 0 != written
    finally:
        broker.close()
