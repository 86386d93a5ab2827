"""The share coordinator's shell: ``share_coordinator``'s decisions carried out, one request
at a time per share partition, each record appended to its ``__share_group_state`` partition
through an acks=all port and applied (and answered) only once replicated.

Both the wire handlers (``handlers.share_state_apis``) and this broker's own share-partition
leaders (``persister``, when the coordinator of a key is this broker) call it, so the rules are
in one place whoever asks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from floodmark.broker.share_group.partition import ShareState
from floodmark.broker.share_group.share_coordinator import ShareCoordinator
from floodmark.broker.share_group.state_records import (
    ShareKey,
    Snapshot,
    encode_key,
    encode_value,
)
from floodmark.errors import ErrorCode

# (state partition index, key, value or None) -> (error, log offset of the record), answered
# once the record is replicated to the ISR
AppendReplicated = Callable[[int, bytes, bytes | None], Awaitable[tuple[ErrorCode, int]]]


class ShareStateService:
    def __init__(self, core: ShareCoordinator, num_partitions: Callable[[], int],
                 leader_epoch_of: Callable[[int], int | None],
                 append: AppendReplicated) -> None:
        """``num_partitions``: of ``__share_group_state`` (0: no topic yet);
        ``leader_epoch_of(index)``: the leader epoch this broker leads the state partition
        at, None when it does not lead it."""
        self.core = core
        self._num_partitions = num_partitions
        self._leader_epoch_of = leader_epoch_of
        self._append = append
        self._locks: dict[ShareKey, asyncio.Lock] = {}

    def error_for(self, key: ShareKey) -> ErrorCode:
        """NONE when this broker coordinates ``key`` and has loaded its partition;
        COORDINATOR_LOAD_IN_PROGRESS while loading; NOT_COORDINATOR otherwise."""
        n = self._num_partitions()
        if n <= 0:
            return ErrorCode.NOT_COORDINATOR
        index = self.core.partition_of(key, n)
        epoch = self._leader_epoch_of(index)
        if epoch is None:
            return ErrorCode.NOT_COORDINATOR
        if self.core.loaded.get(index) != epoch:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    @asynccontextmanager
    async def _one_at_a_time(self, key: ShareKey) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and self._locks.get(key) is lock:
                del self._locks[key]

    async def _store(self, key: ShareKey, snap: Snapshot | None) -> ErrorCode:
        index = self.core.partition_of(key, self._num_partitions())
        err, offset = await self._append(index, encode_key(key),
                                         None if snap is None else encode_value(snap))
        if err is ErrorCode.NONE:
            self.core.written(key, snap, offset)
        return err

    async def read(self, key: ShareKey, leader_epoch: int
                   ) -> tuple[ErrorCode, Snapshot | None, str | None]:
        async with self._one_at_a_time(key):
            err = self.error_for(key)
            if err is not ErrorCode.NONE:
                return err, None, None
            d = self.core.read(key, leader_epoch)
            if d.error is ErrorCode.NONE and d.store is not None:
                err = await self._store(key, d.store)
                if err is not ErrorCode.NONE:
                    return err, None, None
            return d.error, d.answer, d.message

    def summary(self, key: ShareKey) -> tuple[ErrorCode, Snapshot | None]:
        """The stored state, no fencing (DescribeShareGroupOffsets)."""
        err = self.error_for(key)
        return err, (self.core.snapshots.get(key) if err is ErrorCode.NONE else None)

    async def write(self, key: ShareKey, state: ShareState, leader_epoch: int
                    ) -> tuple[ErrorCode, str | None]:
        async with self._one_at_a_time(key):
            err = self.error_for(key)
            if err is not ErrorCode.NONE:
                return err, None
            d = self.core.write(key, state, leader_epoch)
            if d.error is not ErrorCode.NONE or d.store is None:
                return d.error, d.message
            return await self._store(key, d.store), None

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int
                         ) -> tuple[ErrorCode, str | None]:
        async with self._one_at_a_time(key):
            err = self.error_for(key)
            if err is not ErrorCode.NONE:
                return err, None
            d = self.core.initialize(key, state_epoch, start_offset)
            if d.error is not ErrorCode.NONE or d.store is None:
                return d.error, d.message
            return await self._store(key, d.store), None

    async def delete(self, key: ShareKey) -> ErrorCode:
        async with self._one_at_a_time(key):
            err = self.error_for(key)
            if err is not ErrorCode.NONE:
                return err
            if key not in self.core.snapshots:
                return ErrorCode.NONE
            return await self._store(key, None)
