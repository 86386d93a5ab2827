"""A transactional producer's batches reach a partition's log in the order they arrived.

A transactional Produce whose producer has no open transaction on a partition yet waits for the
transaction coordinator (KIP-890's verification, or the implicit add of transaction version 2)
before it is appended. A producer pipelines its requests (up to five in flight), so while its
first batch waits, its next ones arrive: without an order they would be appended as soon as the
first one had opened the transaction, ahead of a batch still waiting, and that batch's successor
would be refused OUT_OF_ORDER_SEQUENCE_NUMBER, which is fatal to the producer. (Kafka keeps the
order by reading nothing more from a connection while one of its requests is in progress.)

So a request that must wait, or that arrives behind one that waits, for the same (topic,
partition, producer id) takes its place at the end of that key's queue and is appended only
after every request before it has been appended or refused. Requests with nothing ahead of them
and nothing to verify go straight to the log, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

OrderKey = tuple[str, int, int]
"""(topic, partition, producer id)."""


class ProduceOrder:
    def __init__(self) -> None:
        self._tails: dict[OrderKey, asyncio.Future[None]] = {}

    def ahead(self, keys: Iterable[OrderKey]) -> list[asyncio.Future[None]]:
        """The requests still waiting ahead of a new one for these keys (each key's last)."""
        tails = self._tails
        out: list[asyncio.Future[None]] = []
        for key in keys:
            tail = tails.get(key)
            if tail is not None and tail not in out:
                out.append(tail)
        return out

    def enter(self, keys: Iterable[OrderKey]) -> Callable[[], None]:
        """Put a request at the end of each key's queue; the function it returns lets the next
        one go (call it once the request's batches are appended or refused)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        mine = list(dict.fromkeys(keys))
        for key in mine:
            self._tails[key] = done

        def release() -> None:
            if not done.done():
                done.set_result(None)
            for key in mine:
                if self._tails.get(key) is done:
                    del self._tails[key]

        return release

    def __len__(self) -> int:
        return len(self._tails)
