"""The broker's side of ``replication/produce_order.py`` (a transactional producer's batches
reach a partition's log in the order they arrived, across the coordinator's verification): a
request's turn is an asyncio future, set when the core says its turn came."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from floodmark.replication import OrderKey
from floodmark.replication import ProduceOrder as OrderCore


class ProduceOrder:
    def __init__(self) -> None:
        self._core: OrderCore[asyncio.Future[None]] = OrderCore()

    def holds(self, keys: Iterable[OrderKey]) -> bool:
        """Is a request of these keys still waiting or appending (a new one must then enter)?"""
        return self._core.holds(keys)

    def enter(self, keys: Iterable[OrderKey]
              ) -> tuple[asyncio.Future[None], Callable[[], None]]:
        """Put a request at the end of each key's queue: the future done when its turn comes
        (at once when nothing is ahead), and the function that lets the next ones go (call it
        once, when the request's batches are appended or refused, or it is given up)."""
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._core.enter(turn, keys):
            turn.set_result(None)

        def release() -> None:
            for later in self._core.leave(turn):
                if not later.done():
                    later.set_result(None)

        return turn, release

    def __len__(self) -> int:
        return len(self._core)
