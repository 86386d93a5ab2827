"""A Hypothesis state machine over one Log on a MemoryFileSystem: leader and follower appends,
truncation, flushes, retention, process kills and power losses, reopen. After every step the
log must equal a simple model (a list of batches), and the epoch cache must describe the log."""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from floodmark.records import BatchHeader, Record, build_batch, iter_batches
from floodmark.replication.epochs import EpochCache
from floodmark.storage import Log, LogConfig, MemoryFileSystem

PATH = "/data/sm-0"


def epochs_of(batches: list[bytes]) -> EpochCache:
    cache = EpochCache()
    for data in batches:
        header = BatchHeader(data)
        if header.partition_leader_epoch > cache.latest_epoch:
            cache.assign(header.partition_leader_epoch, header.base_offset)
    return cache


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fs = MemoryFileSystem()
        self.config = LogConfig()
        self.log: Log
        self.model: list[bytes] = []  # stored batches, in order
        self.synced = 0  # how many model batches are known durable
        self.epoch = 0
        self.log_start = 0
        self.rng = random.Random(0)

    @initialize(
        segment_bytes=st.integers(200, 2000),
        index_interval_bytes=st.sampled_from([0, 100, 4096]),
        seed=st.integers(0, 1000),
    )
    def setup(self, segment_bytes: int, index_interval_bytes: int, seed: int) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes
        )
        self.rng = random.Random(seed)
        self.log = Log.open(PATH, self.config, fs=self.fs, now_ms=0)

    @property
    def leo(self) -> int:
        return BatchHeader(self.model[-1]).next_offset if self.model else self.log_start

    # -- operations ----------------------------------------------------------------------------
    @rule(count=st.integers(1, 4), size=st.integers(0, 120), bump=st.booleans())
    def append_as_leader(self, count: int, size: int, bump: bool) -> None:
        self.epoch += int(bump)
        data = bytearray(
            build_batch([Record(i, 1000 + i, None, self.rng.randbytes(size)) for i in range(count)])
        )
        info = self.log.append_as_leader(data, self.epoch, now_ms=0)
        assert info.first_offset == self.leo
        self.model.append(bytes(data))  # patched in place: offset and epoch stamped

    @rule(count=st.integers(1, 3), bump=st.booleans())
    def append_as_follower(self, count: int, bump: bool) -> None:
        self.epoch += int(bump)
        data = build_batch(
            [Record(i, 7, b"k", b"follower") for i in range(count)],
            base_offset=self.leo,
            partition_leader_epoch=self.epoch,
        )
        self.log.append_as_follower(data, now_ms=0)
        self.model.append(data)

    @precondition(lambda self: len(self.model) > 0)
    @rule(where=st.floats(0, 1))
    def truncate(self, where: float) -> None:
        first = BatchHeader(self.model[0]).base_offset
        target = first + int(where * (self.leo - first))
        leo = self.leo
        self.log.truncate_to(target)
        if target >= leo:
            return  # nothing to remove: no data change, no flush
        self.model = [b for b in self.model if BatchHeader(b).last_offset < target]
        if not self.model and target <= self.log_start:
            self.log_start = target  # truncated fully: the log restarts at the target
        self.synced = len(self.model)  # truncation is durable, and flushes what remains

    @rule()
    def flush(self) -> None:
        self.log.flush()
        self.synced = len(self.model)

    @precondition(lambda self: len(self.model) > 1)
    @rule(keep=st.integers(1, 5))
    def retention(self, keep: int) -> None:
        hw = self.leo
        config = LogConfig(
            segment_bytes=self.config.segment_bytes,
            index_interval_bytes=self.config.index_interval_bytes,
            retention_bytes=keep * 200,
        )
        self.log.config = config
        self.log.apply_retention(now_ms=0, high_watermark=hw)
        self.log.config = self.config
        self.log_start = self.log.log_start_offset
        kept = [b for b in self.model if BatchHeader(b).base_offset >= self.log_start]
        self.synced = max(0, self.synced - (len(self.model) - len(kept)))
        self.model = kept
        # Deleting segments is not fsynced by itself: a power loss may bring them back, which
        # the model below accepts by comparing only from the log start onwards.

    @rule()
    def process_kill_and_reopen(self) -> None:
        self.fs.crash(lose_unsynced=False)
        self._reopen(self.log.recovery_point)

    @rule(torn=st.booleans())
    def power_loss_and_reopen(self, torn: bool) -> None:
        recovery_point = self.log.recovery_point
        self.fs.crash(lose_unsynced=True, rng=self.rng if torn else None)
        self._reopen(recovery_point)
        # Whole batches appended after the last sync may survive (torn: a prefix of them).
        data = self.log.read_all()
        survivors = [d for _, d in ((p, data[p : p + h.size]) for p, h in iter_batches(data))]
        synced_model = self.model[: self.synced]
        start = self.log.log_start_offset
        synced_model = [b for b in synced_model if BatchHeader(b).base_offset >= start]
        assert survivors[: len(synced_model)] == synced_model
        assert self.model[self.synced :][: len(survivors) - len(synced_model)] == survivors[
            len(synced_model) :
        ] or len(survivors) == len(synced_model)
        self.model = [bytes(s) for s in survivors]
        self.synced = len(self.model)
        self.epoch = max(self.epoch, self.log.epoch_cache.latest_epoch)

    def _reopen(self, recovery_point: int) -> None:
        self.log = Log.open(
            PATH,
            self.config,
            fs=self.fs,
            now_ms=0,
            recovery_point=recovery_point,
            log_start_offset=self.log_start,
        )
        self.log_start = self.log.log_start_offset

    # -- invariants ----------------------------------------------------------------------------
    @invariant()
    def log_equals_model(self) -> None:
        if not hasattr(self, "log"):
            return
        start = self.log.log_start_offset
        visible = [b for b in self.model if BatchHeader(b).base_offset >= start]
        assert self.log.read_all() == b"".join(visible)
        assert self.log.log_end_offset == (
            BatchHeader(visible[-1]).next_offset if visible else self.log.log_start_offset
        )
        assert self.log.epoch_cache == epochs_of(visible) or (
            # After retention the first entry is re-based to the log start.
            [e.epoch for e in self.log.epoch_cache.entries()]
            == [e.epoch for e in epochs_of(visible).entries()]
        )
        assert self.log.recovery_point <= self.log.log_end_offset


LogMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("FLOODMARK_PROPERTY_EXAMPLES", "25")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_log_state_machine = LogMachine.TestCase
