"""Hypothesis stateful test: batched leader-epoch-checkpoint writes (``storage.epoch_checkpoints``)
interleaved with each other, with synchronous writes on the loop, with appends, and with power
loss at any point, on the simulator's disk.

After a crash (unsynced bytes and directory entries lost, torn tails kept at random):

* the checkpoint parses, and holds exactly the cache as it was when some write of it started
  (never a mix, never text nobody wrote, never older text renamed over newer);
* its latest epoch is at least every epoch already reported durable (a synchronous
  ``assign_epoch`` that returned, or a batch's ``on_durable``): the new leader's rule — no
  write accepted before its epoch start is on disk — rests on that report.
"""

from __future__ import annotations

import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from floodmark.records import simple_batch
from floodmark.replication.epochs import EpochEntry
from floodmark.storage import Log, LogConfig, MemoryFileSystem
from floodmark.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from floodmark.storage.epoch_checkpoints import EpochCheckpointBatch

PATH = "/data/t-0"


class _Running:
    def __init__(self, batch: EpochCheckpointBatch) -> None:
        self.batch = batch
        self.phase = 0
        self.dirs: list[str] = []
        self.failed: dict[str, OSError] = {}


class EpochCheckpointWrites(RuleBasedStateMachine):
    @initialize()
    def fresh(self) -> None:
        self.fs = MemoryFileSystem()
        self.log = Log.open(PATH, LogConfig(), fs=self.fs, now_ms=0)
        self.next_epoch = 0
        self.running: list[_Running] = []
        self.written: list[tuple[EpochEntry, ...]] = [()]  # what some write held (Log.open: [])
        self.durable_epoch = -1  # the highest epoch reported durable

    def _fired(self, epoch: int) -> None:
        self.durable_epoch = max(self.durable_epoch, epoch)

    @rule()
    def append(self) -> None:
        before = self.log.epoch_cache.entries()
        epoch = max(self.log.epoch_cache.latest_epoch, 0)
        self.log.append_as_leader(simple_batch([b"v"]), leader_epoch=epoch, now_ms=1)
        if self.log.epoch_cache.entries() != before:  # (a first epoch: written at once)
            self.written.append(self.log.epoch_cache.entries())
            self._fired(epoch)

    @rule()
    def assign_now(self) -> None:
        epoch = self.next_epoch
        self.next_epoch += 1
        self.log.assign_epoch(epoch, self.log.log_end_offset)
        self.written.append(self.log.epoch_cache.entries())
        self._fired(epoch)

    @precondition(lambda self: len(self.running) < 3)
    @rule()
    def assign_in_a_batch(self) -> None:
        epoch = self.next_epoch
        self.next_epoch += 1
        self.log.assign_epoch(epoch, self.log.log_end_offset, durable=False)
        batch = EpochCheckpointBatch()
        batch.add(self.log, lambda _now_ms: self._fired(epoch))
        self.running.append(_Running(batch))

    @precondition(lambda self: bool(self.running))
    @rule(pick=st.integers(0, 2))
    def step(self, pick: int) -> None:
        run = self.running[pick % len(self.running)]
        if run.phase == 0:
            run.batch.prepare()
            self.written.append(self.log.epoch_cache.entries())
        elif run.phase == 1:
            run.batch.write_files()
        elif run.phase == 2:
            run.batch.sync_files()
        elif run.phase == 3:
            run.dirs = run.batch.install()
        elif run.phase == 4:
            run.failed = run.batch.sync_dirs(run.dirs)
        else:
            run.batch.finish(run.failed, 0)
            self.running.remove(run)
        run.phase += 1

    @rule(seed=st.integers(0, 2**16), lose=st.booleans())
    def crash(self, seed: int, lose: bool) -> None:
        self.fs.crash(lose_unsynced=lose, rng=random.Random(seed))
        checkpoint = LeaderEpochCheckpointFile(self.fs, f"{PATH}/{LEADER_EPOCH_CHECKPOINT}")
        on_disk = tuple(checkpoint.read())  # raises if torn or mixed
        assert on_disk in self.written, (on_disk, self.written)
        latest = on_disk[-1].epoch if on_disk else -1
        assert latest >= self.durable_epoch, (on_disk, self.durable_epoch)
        self.fresh()

    @invariant()
    def cache_only_grows(self) -> None:
        epochs = [e.epoch for e in self.log.epoch_cache.entries()]
        assert epochs == sorted(epochs)


TestEpochCheckpointWrites = EpochCheckpointWrites.TestCase
TestEpochCheckpointWrites.settings = settings(max_examples=150, stateful_step_count=30,
                                              deadline=None)
