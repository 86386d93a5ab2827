"""Delayed operations: fetches parked until data arrives or their wait expires.

Kafka's DelayedFetch (replication-protocol.md §6.2): a fetch that found fewer than
``fetch.min.bytes`` waits on the partitions it asked for; an append or HW change on any of them
wakes it, and it re-reads (a replica's Fetch, which names every partition of its fetcher,
re-reads only the partitions that woke it: ``wait`` says which). Bounded: a waiter lives at
most its own ``max_wait_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(eq=False, slots=True)
class _Waiter:
    future: asyncio.Future[None]
    woken: set[TopicPartition] = field(default_factory=set)


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, list[_Waiter]] = {}

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    async def wait(self, partitions: Iterable[TopicPartition],
                   timeout_ms: int) -> set[TopicPartition]:
        """Return when one of ``partitions`` is touched or ``timeout_ms`` passes: the ones
        touched meanwhile (empty: the wait ran out)."""
        waiter = _Waiter(asyncio.get_running_loop().create_future())
        keys = list(partitions)
        for key in keys:
            self._waiters.setdefault(key, []).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), timeout_ms / 1000)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                lst = self._waiters.get(key)
                if lst is not None:
                    with contextlib.suppress(ValueError):
                        lst.remove(waiter)
                    if not lst:
                        del self._waiters[key]
        return waiter.woken

    def wake(self, key: TopicPartition) -> None:
        lst = self._waiters.pop(key, None)
        if lst:
            for waiter in lst:
                waiter.woken.add(key)
                if not waiter.future.done():
                    waiter.future.set_result(None)

    def wake_all(self) -> None:
        for key in list(self._waiters):
            self.wake(key)
