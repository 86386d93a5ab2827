"""A replica's restart through the storage engine (issue 28).

A model state holds a replica's log as values and no producer state: the producer state (open
transactions, the LSO, the aborted transactions) is what a broker rebuilds from its log when it
opens it. ``Restarts`` makes that literal. For a log and an HW it writes the log's real batches
into a real ``floodmark.storage.Log`` on a ``MemoryFileSystem``, closes it and opens it again
with ``LogConfig.scan_chunk_bytes`` tiny, so that batches straddle the read chunks. Then it runs
the broker's start-up path on it: ``Log.open`` (recovery), a ``Partition`` holding the HW,
``ReplicaDriver.load_producer_state`` (``ProducerStateTable.rebuild`` over
``Log.iter_whole_batches``, then ``Log.restore_aborted_transactions`` into the segments'
``.txnindex``). What a read_committed consumer of that replica is served comes from the same
objects, as the broker's Fetch serves it: the LSO from the rebuilt producer state, the records
below it from ``Log.read``, the aborted transactions from the ``.txnindex``
(``Log.collect_aborted_transactions``).

The log is written the way a follower's fetch path writes it (``ReplicaDriver.
on_fetch_response``: ``append_as_follower``, the batches recorded by a ``ProducerStateTable``,
the aborts it returns appended to the ``.txnindex``), then restarted in one of two ways:
``with_index`` keeps that ``.txnindex`` (an ordinary restart: ``restore_aborted_transactions``
compares the rebuild with it), otherwise the file is gone (a crash lost the unsynced index
write), so what a consumer is served depends on the rebuild alone.

Each (log, HW, chunk size) is restarted once per model run and memoised: a state costs a lookup.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from floodmark.mc.pieces import Batches, Entry, ModelPorts, partition_config
from floodmark.records import iter_batches
from floodmark.replication import AbortedTxn, ProducerStateTable, ReplicaDriver, Truncation
from floodmark.storage import Log, LogConfig, MemoryFileSystem

LOG_DIR = "/data/t-0"
READ_MAX_BYTES = 1 << 20
"""A consumer's fetch size: more than any model log holds."""
_STORAGE_LOGGERS = ("floodmark.storage.log", "floodmark.storage.recovery")


@dataclass(frozen=True, slots=True)
class Restarted:
    """What a replica restarted over a log holds, and what it serves read_committed."""

    scan_chunk_bytes: int
    with_index: bool
    """The ``.txnindex`` the live path wrote was there at the restart (else it was lost)."""
    producers: ProducerStateTable
    """The table ``load_producer_state`` rebuilt (shared by the memo: copy it before use)."""
    last_stable_offset: int
    records: bytes
    """``Log.read(0, ..., LSO)``: the batches a read_committed fetch from offset 0 gets."""
    aborted: tuple[AbortedTxn, ...]
    """``Log.collect_aborted_transactions`` over those batches: the restored ``.txnindex``."""
    open_transactions: tuple[tuple[int, int], ...]
    """(producer id, first offset) of the transactions the rebuild left open."""


class _BelowError(logging.Filter):
    """Drops the storage's warnings about a rebuilt ``.txnindex`` (every model restart rebuilds
    one: no index file was written); errors still go through."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


@contextmanager
def _quiet_storage() -> Iterator[None]:
    quiet = _BelowError()
    loggers = [logging.getLogger(name) for name in _STORAGE_LOGGERS]
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


class Restarts:
    """Memoised restarts of model logs through the storage engine (see the module docstring)."""

    __slots__ = ("_batches", "_frozen", "_memo", "performed")

    def __init__(self, batches: Batches) -> None:
        self._batches = batches
        self._memo: dict[tuple[tuple[Entry, ...], int, int, bool], Restarted] = {}
        self._frozen: dict[tuple[tuple[Entry, ...], int, int], bytes] = {}
        self.performed = 0
        """Restarts actually run through the storage (the rest were memo hits)."""

    def restart(self, log: tuple[Entry, ...], hw: int, scan_chunk_bytes: int, *,
                with_index: bool = True) -> Restarted:
        key = (log, hw, scan_chunk_bytes, with_index)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._restart(log, hw, scan_chunk_bytes, with_index)
        return found

    def producer_state(self, log: tuple[Entry, ...], hw: int,
                       scan_chunk_bytes: int) -> ProducerStateTable:
        """A fresh copy of the producer state a restart over ``log`` rebuilt (the caller's
        partition goes on from it: appends and markers change it)."""
        key = (log, hw, scan_chunk_bytes)
        frozen = self._frozen.get(key)
        if frozen is None:
            table = self.restart(log, hw, scan_chunk_bytes).producers
            frozen = self._frozen[key] = pickle.dumps(table, pickle.HIGHEST_PROTOCOL)
        copied = pickle.loads(frozen)  # a deep copy, at a third of copy.deepcopy's cost
        assert isinstance(copied, ProducerStateTable)
        return copied

    def _restart(self, log: tuple[Entry, ...], hw: int, scan_chunk_bytes: int,
                 with_index: bool) -> Restarted:
        self.performed += 1
        config = LogConfig(scan_chunk_bytes=scan_chunk_bytes)
        fs = MemoryFileSystem()
        fs.mkdirs(LOG_DIR)
        with _quiet_storage():
            before = Log.open(LOG_DIR, config, fs=fs, now_ms=0)
            if log:
                # What the follower's fetch path does with fetched batches.
                fetched = b"".join(self._batches.encode(o, *entry) for o, entry in enumerate(log))
                before.append_as_follower(fetched, 0)
                live_aborts = ProducerStateTable().record_batches(
                    h for _p, h in iter_batches(fetched, validate=False))
                if live_aborts:
                    before.append_aborted_transactions(live_aborts)
            before.flush(0)
            index_files = [s.txn_index.path for s in before.segments]
            before.close()
            if not with_index:
                for path in index_files:
                    if fs.exists(path):
                        fs.remove(path)
            storage = Log.open(LOG_DIR, config, fs=fs, now_ms=0)
            try:
                # The broker's start-up path (``PartitionState``): the HW checkpoint clamped to
                # the log, then the producer state and the .txnindex rebuilt from the log.
                partition = ReplicaDriver.open(
                    partition_config(0, Truncation.LEADER_EPOCH, 1), storage, ModelPorts(),
                    checkpointed_high_watermark=hw, now_ms=0).partition
                lso = partition.last_stable_offset
                read = storage.read(0, READ_MAX_BYTES, lso)
                aborted = tuple(storage.collect_aborted_transactions(0, read.next_offset))
                records = bytes(read.records)
            finally:
                storage.close()
        return Restarted(scan_chunk_bytes, with_index, partition.producers, lso, records, aborted,
                         tuple(sorted(partition.producers.open_transactions().items())))


__all__ = ["Restarted", "Restarts"]
