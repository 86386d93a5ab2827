"""KIP-932's share coordinator, as a sans-I/O core: the latest state of every share partition
whose ``__share_group_state`` partition this broker leads, and the rules of
Read/Write/DeleteShareGroupState.

A share partition's state is written by the leader of the share partition (the topic
partition) and kept here, at the leader of the state partition that ``coordinator_key`` hashes
to; a new leader of the share partition reads it back before it serves ShareFetch. The core
decides what a request writes; the shell (``handlers.share_state_apis``) appends it with
acks=all and, once it is replicated, hands it back (``written``): only what a failover of this
coordinator keeps is ever answered.

InitializeShareGroupState (Kafka 4.1's group coordinator initializes the state of the partitions
a share group newly subscribes to, ``initialize``): a state that does not exist is stored at the
given state epoch and start offset (-1: not placed yet; the partition's leader places it by
``share.auto.offset.reset`` when it first loads it); a lower state epoch than the stored one is
FENCED_STATE_EPOCH; a state that exists is never wiped by it unless the state epoch is higher and
a start offset is given (floodmark's choice: a retried or late initialization of a partition
whose leader already wrote its progress changes nothing).

Fencing, as Kafka's share coordinator: every request carries the share partition's leader
epoch. A write or read with a lower leader epoch than the stored one is FENCED_LEADER_EPOCH (a
leader that lost its partition must not overwrite its successor's state); a read with a higher
one first stores that epoch, so the old leader's later writes are refused. A write with a lower
state epoch is FENCED_STATE_EPOCH (AlterShareGroupOffsets and DeleteShareGroupOffsets bump it).

Loading follows leadership, as the group coordinator's: a state partition this broker leads at
a new leader epoch is replayed from its log (``load``) before any request for its keys is
answered (COORDINATOR_LOAD_IN_PROGRESS meanwhile), and forgotten when another broker leads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from floodmark.broker.share_group.partition import ShareState
from floodmark.broker.share_group.state_records import (
    BadShareStateRecord,
    ShareKey,
    Snapshot,
    coordinator_key,
    decode_key,
    decode_value,
)
from floodmark.errors import ErrorCode
from floodmark.metadata import coordinator_partition
from floodmark.records import decode_batch, iter_batches

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Decision:
    """What a request needs: an error, or the record to store first (None: nothing to
    store) and the snapshot to answer (a read)."""

    error: ErrorCode
    store: Snapshot | None = None
    answer: Snapshot | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class LoadReport:
    snapshots: int
    unreadable: int


class ShareCoordinator:
    def __init__(self) -> None:
        self.snapshots: dict[ShareKey, Snapshot] = {}
        self.loaded: dict[int, int] = {}  # state partition -> leader epoch it was loaded at
        self._positions: dict[ShareKey, int] = {}  # key -> log offset applied last

    # -- which keys this coordinator serves ------------------------------------------------
    @staticmethod
    def partition_of(key: ShareKey, num_partitions: int) -> int:
        return coordinator_partition(coordinator_key(key), num_partitions)

    def unload(self, index: int, num_partitions: int) -> int:
        """Forget the keys of state partition ``index``; how many there were."""
        self.loaded.pop(index, None)
        gone = [k for k in self.snapshots if self.partition_of(k, num_partitions) == index]
        for k in gone:
            del self.snapshots[k]
        for k in [k for k in self._positions if self.partition_of(k, num_partitions) == index]:
            del self._positions[k]
        return len(gone)

    def load(self, index: int, leader_epoch: int, num_partitions: int,
             batches: Iterable[bytes | memoryview]) -> LoadReport:
        """Replay state partition ``index`` from nothing (its whole log, in offset order)."""
        self.unload(index, num_partitions)
        unreadable = 0
        for chunk in batches:
            for position, header in iter_batches(chunk):
                if header.is_control:
                    continue
                for rec in decode_batch(chunk, position, validate=False)[1]:
                    if rec.key is None:
                        continue
                    try:
                        key = decode_key(rec.key)
                        snap = decode_value(rec.value) if rec.value is not None else None
                    except BadShareStateRecord:
                        unreadable += 1
                        continue
                    self._apply(key, snap, rec.offset)
        self.loaded[index] = leader_epoch
        mine = sum(1 for k in self.snapshots if self.partition_of(k, num_partitions) == index)
        return LoadReport(mine, unreadable)

    def _apply(self, key: ShareKey, snap: Snapshot | None, log_offset: int) -> None:
        if self._positions.get(key, -1) > log_offset:
            return  # a later record of the key was applied already
        self._positions[key] = log_offset
        if snap is None:
            self.snapshots.pop(key, None)
        else:
            self.snapshots[key] = snap

    def written(self, key: ShareKey, snap: Snapshot | None, log_offset: int) -> None:
        """A record of ``key`` (None: a tombstone) is replicated at ``log_offset``."""
        self._apply(key, snap, log_offset)

    # -- the rules of the requests ---------------------------------------------------------
    def _next(self, key: ShareKey, state: ShareState, leader_epoch: int) -> Snapshot:
        current = self.snapshots.get(key)
        epoch = 0 if current is None else (current.snapshot_epoch + 1) & 0xFFFF
        return Snapshot(state, leader_epoch, epoch)

    def read(self, key: ShareKey, leader_epoch: int) -> Decision:
        """ReadShareGroupState: the stored state (None: never initialized); a higher leader
        epoch is stored first (it fences the previous leader)."""
        current = self.snapshots.get(key)
        if current is None:
            return Decision(ErrorCode.NONE)
        if leader_epoch < current.leader_epoch:
            return Decision(ErrorCode.FENCED_LEADER_EPOCH,
                            message=f"leader epoch {leader_epoch} < {current.leader_epoch}")
        if leader_epoch > current.leader_epoch:
            snap = self._next(key, current.state, leader_epoch)
            return Decision(ErrorCode.NONE, store=snap, answer=snap)
        return Decision(ErrorCode.NONE, answer=current)

    def write(self, key: ShareKey, state: ShareState, leader_epoch: int) -> Decision:
        """WriteShareGroupState: the whole state of the share partition replaces the stored
        one, unless the writer is fenced."""
        current = self.snapshots.get(key)
        if current is not None:
            if leader_epoch < current.leader_epoch:
                return Decision(ErrorCode.FENCED_LEADER_EPOCH,
                                message=f"leader epoch {leader_epoch} < "
                                        f"{current.leader_epoch}")
            if state.state_epoch < current.state.state_epoch:
                return Decision(ErrorCode.FENCED_STATE_EPOCH,
                                message=f"state epoch {state.state_epoch} < "
                                        f"{current.state.state_epoch}")
        return Decision(ErrorCode.NONE, store=self._next(key, state, leader_epoch))

    def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> Decision:
        """InitializeShareGroupState (see the module's text)."""
        current = self.snapshots.get(key)
        fresh = ShareState(start_offset, start_offset, (), state_epoch)
        if current is None:
            return Decision(ErrorCode.NONE, store=self._next(key, fresh, -1))
        if state_epoch < current.state.state_epoch:
            return Decision(ErrorCode.FENCED_STATE_EPOCH,
                            message=f"state epoch {state_epoch} < "
                                    f"{current.state.state_epoch}")
        if start_offset < 0 or state_epoch == current.state.state_epoch:
            return Decision(ErrorCode.NONE)  # initialized already
        return Decision(ErrorCode.NONE, store=self._next(key, fresh, current.leader_epoch))

    def keys_of(self, group_id: str) -> list[ShareKey]:
        return sorted((k for k in self.snapshots if k[0] == group_id),
                      key=lambda k: (str(k[1]), k[2]))


Batches = Callable[[], Iterable[bytes | memoryview]]


def load_led(core: ShareCoordinator, led: Mapping[int, tuple[int, Batches]],
             num_partitions: int, name: str) -> None:
    """Load the state partitions this broker leads (index -> (leader epoch, its log's
    batches)) that are not loaded at that epoch; forget the ones it no longer leads."""
    for index in [i for i in core.loaded if i not in led]:
        n = core.unload(index, num_partitions)
        log.info("partition %s-%d share coordinator no more: %d share partitions unloaded",
                 name, index, n)
    for index, (leader_epoch, read) in led.items():
        if core.loaded.get(index) == leader_epoch:
            continue
        report = core.load(index, leader_epoch, num_partitions, read())
        log.info("partition %s-%d leader_epoch=%d share coordinator: loaded %d share "
                 "partitions%s", name, index, leader_epoch, report.snapshots,
                 f", {report.unreadable} unreadable records skipped"
                 if report.unreadable else "")
