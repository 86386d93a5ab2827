"""The broker's fetch purgatory says which partitions woke a waiter (a replica's Fetch asks only
those again), including wakes that come before the waiter runs again."""

from __future__ import annotations

import asyncio

from floodmark.broker.purgatory import FetchPurgatory


def test_wait_returns_every_partition_woken_meanwhile() -> None:
    async def scenario() -> tuple[set[tuple[str, int]], set[tuple[str, int]], int]:
        purgatory = FetchPurgatory()
        keys = [("t", i) for i in range(5)]
        waiter = asyncio.ensure_future(purgatory.wait(keys, 5000))
        await asyncio.sleep(0)  # the waiter parks
        purgatory.wake(("t", 3))
        purgatory.wake(("t", 1))  # before the waiter resumed: still reported
        purgatory.wake(("other", 0))  # not waited on
        woken = await asyncio.wait_for(waiter, 5)
        timed_out = await purgatory.wait(keys, 10)
        return woken, timed_out, len(purgatory)

    woken, timed_out, left = asyncio.run(scenario())
    assert woken == {("t", 3), ("t", 1)}
    assert timed_out == set()
    assert left == 0
