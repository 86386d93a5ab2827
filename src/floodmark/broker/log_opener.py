"""Partition logs opened off the event loop, in batches.

Opening a new partition's log is file work that waits on the disk: the directory, the empty
segment and index files, the epoch checkpoint and ``partition.metadata``, each made durable
(five to seven fsyncs, a few milliseconds each on a quiet disk, tens on a loaded one). A cluster
member that the metadata names a replica of thousands of new partitions did it on its event loop,
one partition after the other: tens of seconds in which no heartbeat, fetch or request was
served, so the controller fenced it.

``LogOpener`` takes the openings a metadata batch asks for (``Storage.begin_open``, on the loop:
no file touched) and runs their file work (``LogOpening.run``) on worker threads,
``OPEN_THREADS`` at once (a journaling file system commits concurrent fsyncs together), at most
``OPEN_BATCH`` a round; each round's logs come back to the loop together (``on_opened``), where
the broker hosts them and applies their metadata as it is then. A log is handed over only once
``run`` returned, so a partition is never served before its files are durable, exactly as when
it was opened on the loop. An opening no longer wanted when its turn comes (the topic was
deleted meanwhile) is dropped without touching the disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from floodmark.broker.config import Configs
from floodmark.broker.context import PartitionKey
from floodmark.broker.storage_glue import LogOpening, Storage
from floodmark.storage import Log

log = logging.getLogger(__name__)

OPEN_THREADS = 8
"""Openings run at once: their fsyncs are committed together (as ``FSYNC_THREADS`` of the
batched epoch checkpoints)."""
OPEN_BATCH = 64
"""Openings a round at most: the first partitions serve while later ones are still opened, and
one round's hand-over is a short step of the loop."""


@dataclass(frozen=True, slots=True)
class Opened:
    """One opening's outcome: its log (None when ``run`` failed: ``error``)."""

    opening: LogOpening
    configs: Configs
    log: Log | None
    error: Exception | None


def _run(opening: LogOpening) -> Log | Exception:
    try:
        return opening.run()
    except Exception as exc:  # handed to the loop, which reports it per partition
        return exc


def open_all(openings: list[LogOpening], threads: int) -> list[Log | Exception]:
    """Any thread: run every opening, up to ``threads`` at once; each one's log or error, in
    order."""
    if threads <= 1 or len(openings) <= 1:
        return [_run(o) for o in openings]
    with ThreadPoolExecutor(max_workers=min(threads, len(openings)),
                            thread_name_prefix="log-open") as pool:
        return list(pool.map(_run, openings))


class LogOpener:
    """Openings queued by the event loop, run on worker threads by one task, handed back in
    rounds (``on_opened``). ``wanted(key)``: is the partition still to be opened here (asked
    on the loop when its round starts)?"""

    def __init__(self, storage: Storage, on_opened: Callable[[list[Opened]], None],
                 wanted: Callable[[PartitionKey], bool], *, threads: int = OPEN_THREADS,
                 batch: int = OPEN_BATCH) -> None:
        self._storage = storage
        self._on_opened = on_opened
        self._wanted = wanted
        self._threads = threads
        self._batch = batch
        self._queue: deque[tuple[LogOpening, Configs]] = deque()
        self._pending: set[PartitionKey] = set()  # queued or running
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False

    def __contains__(self, key: PartitionKey) -> bool:
        """Is the partition's log being opened (queued or running)?"""
        return key in self._pending

    def __len__(self) -> int:
        return len(self._pending)

    def request(self, opening: LogOpening, configs: Configs) -> None:
        """Open ``opening``'s log (once: a partition being opened is not asked for again)."""
        if self._closed:
            self._storage.abandon_open(opening)
            return
        if opening.key in self._pending:
            self._storage.abandon_open(opening)
            return
        self._pending.add(opening.key)
        self._queue.append((opening, configs))
        self._idle.clear()
        if self._task is None:
            self._task = asyncio.create_task(self._drain())

    async def idle(self) -> None:
        """Until nothing is queued or running."""
        await self._idle.wait()

    def close(self) -> None:
        """No more rounds; the running one's logs are closed when its threads finish."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
        for opening, _ in self._queue:
            self._storage.abandon_open(opening)
        self._queue.clear()

    async def _drain(self) -> None:
        try:
            while self._queue and not self._closed:
                await self._round()
        finally:
            self._task = None
            if not self._queue or self._closed:
                self._pending.clear()
                self._idle.set()

    async def _round(self) -> None:
        chosen: list[tuple[LogOpening, Configs]] = []
        while self._queue and len(chosen) < self._batch:
            opening, configs = self._queue.popleft()
            if self._wanted(opening.key):
                chosen.append((opening, configs))
            else:
                self._pending.discard(opening.key)
                self._storage.abandon_open(opening)
        if not chosen:
            return
        openings = [o for o, _ in chosen]
        started = time.monotonic()
        future = asyncio.get_running_loop().run_in_executor(
            None, open_all, openings, self._threads)
        try:
            outcomes = await asyncio.shield(future)
        except asyncio.CancelledError:
            # The broker stops: the threads finish their files; the logs they open are closed.
            future.add_done_callback(lambda f: self._discard(openings, f.result()))
            raise
        for opening in openings:
            self._pending.discard(opening.key)
        if self._closed:
            self._discard(openings, outcomes)
            return
        results = [Opened(o, c, r if isinstance(r, Log) else None,
                          None if isinstance(r, Log) else r)
                   for (o, c), r in zip(chosen, outcomes, strict=True)]
        log.info("opened %d partition logs in %.0f ms (%d failed, %d more queued)",
                 len(results), (time.monotonic() - started) * 1000,
                 sum(r.log is None for r in results), len(self._queue))
        try:
            self._on_opened(results)
        except Exception:  # never stop opening the partitions queued after these
            log.exception("hosting %d opened partition logs failed", len(results))

    def _discard(self, openings: list[LogOpening], outcomes: list[Log | Exception]) -> None:
        for opening, outcome in zip(openings, outcomes, strict=True):
            self._storage.abandon_open(opening)
            if isinstance(outcome, Log):
                outcome.close()
