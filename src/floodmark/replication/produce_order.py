"""A transactional producer's batches reach a partition's log in the order they arrived.

A transactional Produce whose producer has no open transaction on a partition yet waits for the
transaction coordinator (KIP-890's verification, or the implicit add of transaction version 2)
before it is appended. A producer pipelines its requests (up to five in flight), so while its
first batch waits, its next ones arrive: without an order they would be appended as soon as the
first one had opened the transaction, ahead of a batch still waiting, and be refused
OUT_OF_ORDER_SEQUENCE_NUMBER, which is fatal to the producer (librdkafka's "sequence
desynchronization"). Kafka keeps the order by reading nothing more from a connection while one
of its requests is in progress (the channel is muted until the answer is sent).

The rule, which ``txn_produce_gate.TxnProduceGate`` follows for the broker and the simulator
alike (the broker's ``broker/produce_order.py`` over asyncio futures, the simulator's broker over
its messages): a request that must wait, or
that arrives behind one that waits, for the same (topic, partition, producer id) *enters* the
order at the end of that key's queue; it *takes its turn* once every request that was ahead of
it has *left* (appended or refused), and it leaves in its turn. A request with nothing ahead of
it and nothing to verify does not enter at all: it goes straight to the log, as before.

Sans-I/O: the items are the caller's tokens (a future, a request id); :meth:`leave` returns the
ones whose turn came, in the order they entered.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

OrderKey = tuple[str, int, int]
"""(topic, partition, producer id)."""

T = TypeVar("T", bound=Hashable)


class ProduceOrder(Generic[T]):
    def __init__(self) -> None:
        self._queues: dict[OrderKey, list[T]] = {}  # each key's entered requests, in order
        self._keys: dict[T, list[OrderKey]] = {}  # every entered request, until it leaves
        self._ahead: dict[T, set[T]] = {}  # a waiting request -> those still ahead of it
        self._behind: dict[T, list[T]] = {}  # a request -> those waiting for it, in entry order

    def holds(self, keys: Iterable[OrderKey]) -> bool:
        """Is a request of any of these keys still in the order (a new one must then enter)?"""
        return any(key in self._queues for key in keys)

    def enter(self, item: T, keys: Iterable[OrderKey]) -> bool:
        """Put ``item`` at the end of each key's queue. True: it waits (its turn comes from a
        :meth:`leave`); False: nothing is ahead of it, its turn is now."""
        assert item not in self._keys, "a request enters the order once"
        mine = list(dict.fromkeys(keys))
        ahead = {self._queues[key][-1] for key in mine if key in self._queues}
        self._keys[item] = mine
        for key in mine:
            self._queues.setdefault(key, []).append(item)
        if not ahead:
            return False
        self._ahead[item] = ahead
        for earlier in ahead:
            self._behind.setdefault(earlier, []).append(item)
        return True

    def leave(self, item: T) -> list[T]:
        """``item`` is appended or refused (or given up): the requests whose turn comes now, in
        the order they entered. Leaving twice, or without having entered, changes nothing."""
        keys = self._keys.pop(item, None)
        if keys is None:
            return []
        for key in keys:
            queue = self._queues[key]
            queue.remove(item)  # a handful at most: a producer's requests in flight
            if not queue:
                del self._queues[key]
        behind = self._behind.pop(item, [])
        still_ahead = self._ahead.pop(item, set())
        for earlier in still_ahead:
            self._behind[earlier].remove(item)
        turns: list[T] = []
        for later in behind:
            ahead = self._ahead[later]
            ahead.discard(item)
            # One that leaves before its turn (given up while it waited) hands what was ahead
            # of it to those behind it: nobody jumps the queue.
            for earlier in still_ahead - ahead:
                ahead.add(earlier)
                self._behind[earlier].append(later)
            if not ahead:
                del self._ahead[later]
                turns.append(later)
        return turns

    def waiting(self, item: T) -> bool:
        """Has ``item`` entered and is its turn still to come?"""
        return item in self._ahead

    def __len__(self) -> int:
        """Requests in the order (waiting or in their turn)."""
        return len(self._keys)
