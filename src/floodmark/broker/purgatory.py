"""Delayed operations: fetches parked until data arrives or their wait expires.

Kafka's DelayedFetch (replication-protocol.md §6.2): a fetch that found fewer than
``fetch.min.bytes`` waits on the partitions it asked for; an append or HW change on any of them
wakes it, and it re-reads. Bounded: a waiter lives at most its own ``max_wait_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, list[asyncio.Future[None]]] = {}

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    async def wait(self, partitions: Iterable[TopicPartition], timeout_ms: int) -> None:
        """Return when one of ``partitions`` is touched or ``timeout_ms`` passes."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for key in keys:
            self._waiters.setdefault(key, []).append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_ms / 1000)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                lst = self._waiters.get(key)
                if lst is not None:
                    with contextlib.suppress(ValueError):
                        lst.remove(fut)
                    if not lst:
                        del self._waiters[key]

    def wake(self, key: TopicPartition) -> None:
        lst = self._waiters.pop(key, None)
        if lst:
            for fut in lst:
                if not fut.done():
                    fut.set_result(None)

    def wake_all(self) -> None:
        for key in list(self._waiters):
            self.wake(key)
