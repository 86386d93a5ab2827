"""Many partitions' ``leader-epoch-checkpoint`` writes made durable as one batch.

A broker that one metadata batch makes leader of hundreds of partitions used to write each
partition's checkpoint in turn on its event loop: temp file, fsync, rename, fsync of the
directory, a few milliseconds each (tens on a loaded disk), so a few hundred partitions stalled
heartbeats for seconds and the controller fenced the broker. ``EpochCheckpointBatch`` keeps the
order that makes one write safe (the temp file is durable before the rename; the rename is
durable after the directory's fsync) for all of them at once, with all file work in one call on
a worker thread:

1. ``prepare`` (event loop): each log's cache as it is now, rendered
   (``Log.begin_epoch_checkpoint`` numbers the write); no I/O.
2. ``write_files`` (worker): write each ``<file>.tmp``;
3. ``sync_files`` (worker): fsync them (several at once: ``FSYNC_THREADS``);
4. ``install`` (worker): rename each over its checkpoint;
5. ``sync_dirs`` (worker): fsync each partition directory once (likewise).
6. ``finish`` (event loop): ``Log.end_epoch_checkpoint`` says whether the checkpoint now holds
   that write durably; ``on_durable`` is called for those that do. Until then the new leader
   accepts no write (``Partition.epoch_start_pending``), so no record of the new epoch can be
   acknowledged before its start offset is on disk, as with the write on the loop before.

Steps 2 and 4 touch a log's files only holding its ``epoch_checkpoint_lock`` and only while no
later write of that checkpoint has started (a synchronous one on the loop, or another batch):
the temp file is then this write's own, and a newer text is never replaced by an older one.
The loop's own writes take the same lock (at most one rename's wait).

Everything goes through the log's ``FileSystem``, so the simulator's disk
(``MemoryFileSystem``, which loses what was not fsynced) runs the same steps (``run_now``: the
same phases, in line). A failed write is reported by the log (``last_io_error``: its directory
goes offline as for any I/O error) and its leader stays closed to writes.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from floodmark.storage.fs import FileHandle
from floodmark.storage.log import Log

logger = logging.getLogger(__name__)

FSYNC_THREADS = 8
"""fsyncs issued at once by ``run``: a journaling file system commits concurrent fsyncs
together (measured on ext4, loaded 2-core machine: 200 files in 1.33 s one after another,
0.10-0.14 s eight at a time). ``run_now`` (the simulator's disk) issues them one by one."""

_T = TypeVar("_T")


def _each(items: list[_T], action: Callable[[_T], None], threads: int) -> None:
    """``action`` on every item, on up to ``threads`` threads (none extra for one). Each
    thread takes a share of the items (one task a thread, not one a item: handing 10,000
    items one by one to a pool cost more CPU than their fsyncs)."""
    if threads <= 1 or len(items) <= 1:
        for item in items:
            action(item)
        return
    workers = min(threads, len(items))

    def share(first: int) -> None:
        for item in items[first::workers]:
            action(item)

    with ThreadPoolExecutor(max_workers=workers,
                            thread_name_prefix="epoch-checkpoint-fsync") as pool:
        for _ in pool.map(share, range(workers)):
            pass


@dataclass(eq=False, slots=True)
class _Write:
    log: Log
    callbacks: list[Callable[[int], None]] = field(default_factory=list)
    version: int = 0
    path: str = ""
    text: bytes = b""
    handle: FileHandle | None = None
    synced: bool = False
    installed: bool = False
    error: OSError | None = None


class EpochCheckpointBatch:
    """Collects logs (``add``, the driver's ``EpochCheckpointWrites``), then makes their
    checkpoints durable: ``await run()`` on an event loop, or ``run_now()``."""

    def __init__(self) -> None:
        self._writes: dict[int, _Write] = {}  # by id(log): one write per log and batch
        self._started = False

    def add(self, log: Log, on_durable: Callable[[int], None]) -> None:
        if self._started:
            raise RuntimeError("an epoch checkpoint batch takes no log once it runs")
        write = self._writes.get(id(log))
        if write is None:
            write = self._writes[id(log)] = _Write(log)
        write.callbacks.append(on_durable)

    def __len__(self) -> int:
        return len(self._writes)

    # -- the phases ----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Event loop: take each log's entries as they are now (no I/O)."""
        self._started = True
        for write in self._writes.values():
            if not write.log.closed:
                write.version, write.path, write.text = write.log.begin_epoch_checkpoint()

    def write_files(self, threads: int = 1) -> None:
        """Any thread: write every temp file that is still its log's latest write."""
        _each([w for w in self._writes.values() if w.version], self._write_file, threads)

    def _write_file(self, write: _Write) -> None:
        log = write.log
        temp = write.path + ".tmp"
        with log.epoch_checkpoint_lock:
            if not log.epoch_checkpoint_current(write.version):
                return  # a later write replaces this one (and syncs its own)
            try:
                if log.fs.exists(temp):
                    log.fs.remove(temp)
                write.handle = log.fs.open(temp)
                write.handle.write(write.text)
            except OSError as exc:
                write.error = exc
                self._close(write)

    def sync_files(self, threads: int = 1) -> None:
        """Any thread: fsync every temp file written (on ``threads`` threads), then close it."""
        _each([w for w in self._writes.values() if w.handle is not None], self._sync_file,
              threads)

    def _sync_file(self, write: _Write) -> None:
        assert write.handle is not None
        try:
            write.handle.fsync()
            write.synced = True
        except OSError as exc:
            write.error = exc
        finally:
            self._close(write)

    def install(self, threads: int = 1) -> list[str]:
        """Any thread: rename the synced temp files of writes still the latest of their log;
        returns the directories to fsync."""
        _each([w for w in self._writes.values() if w.synced and w.error is None],
              self._install, threads)
        dirs = {posixpath.dirname(w.path) or ".": None for w in self._writes.values()
                if w.installed}
        return list(dirs)

    @staticmethod
    def _install(write: _Write) -> None:
        log = write.log
        with log.epoch_checkpoint_lock:
            if not log.epoch_checkpoint_current(write.version):
                return  # a later write replaces this one (and syncs its own)
            try:
                log.fs.rename(write.path + ".tmp", write.path)
            except OSError as exc:
                write.error = exc
                return
        write.installed = True

    def sync_dirs(self, dirs: list[str], threads: int = 1) -> dict[str, OSError]:
        """Any thread: fsync each directory once (on ``threads`` threads); returns the
        failures by directory."""
        failed: dict[str, OSError] = {}
        fs = {posixpath.dirname(w.path) or ".": w.log.fs for w in self._writes.values()
              if w.installed}

        def sync(directory: str) -> None:
            try:
                fs[directory].fsync_dir(directory)
            except OSError as exc:
                failed[directory] = exc

        _each(dirs, sync, threads)
        return failed

    def finish(self, failed_dirs: dict[str, OSError], now_ms: int) -> int:
        """Event loop: tell each log how its write ended; call ``on_durable(now_ms)`` of those
        now durable. Returns how many logs are."""
        durable = 0
        for write in self._writes.values():
            log = write.log
            if write.version == 0 or log.closed:
                continue  # closed (removed, or its directory failed) meanwhile: nothing to do
            error = write.error
            if write.installed and error is None:
                error = failed_dirs.get(posixpath.dirname(write.path) or ".")
            if not log.end_epoch_checkpoint(write.version, error, installed=write.installed):
                continue
            durable += 1
            for callback in write.callbacks:
                callback(now_ms)
        return durable

    def write_durably(self, threads: int = 1) -> dict[str, OSError]:
        """Steps 2 to 5, in order (any thread), each step's files on ``threads`` threads at
        once; returns the directories that failed."""
        self.write_files(threads)
        self.sync_files(threads)
        return self.sync_dirs(self.install(threads), threads)

    # -- running it ------------------------------------------------------------------------------
    async def run(self, clock_ms: Callable[[], int]) -> int:
        """The phases, every file operation in one call on a worker thread (the event loop
        keeps serving meanwhile)."""
        self.prepare()
        failed = await asyncio.to_thread(self.write_durably, FSYNC_THREADS)
        return self.finish(failed, clock_ms())

    def run_now(self, now_ms: int, *, concurrent: bool = False) -> int:
        """The same phases in line (the simulator, tests, a caller with no event loop: a lone
        broker opening its partitions). ``concurrent``: each step's fsyncs on
        ``FSYNC_THREADS`` threads (a real disk; the simulator's issues them one by one)."""
        self.prepare()
        return self.finish(self.write_durably(FSYNC_THREADS if concurrent else 1), now_ms)

    @staticmethod
    def _close(write: _Write) -> None:
        if write.handle is not None:
            try:
                write.handle.close()
            except OSError as exc:  # pragma: no cover - close of a written file: EIO only
                write.error = write.error or exc
            write.handle = None
