"""The way a transactional Produce takes to a leader's log when the coordinator must be asked
first (KIP-890): its producer's order, the verification, then the append or the refusal.

The pieces are their own rules (``produce_order``: a producer's requests append in the order
they came; ``txn_verification``: which partition asks under which guard, what a refusal
answers). This is the sequence that puts them together, written once for the broker's Produce
handler (a request of many partitions, over asyncio futures) and the simulator's broker (one
partition, over its messages):

1. A request arrives (:meth:`TxnProduceGate.arrive`) with its partitions' records and the
   partitions already refused (authorization, an unknown topic id). Behind a request of the same
   (topic, partition, producer id) still in the order, it enters the order and waits for its
   turn (``None``). Otherwise each partition whose producer has no open transaction there yet
   takes a guard (``txn_verification.begin``; a refused partition gives its guard back at
   once): with guards the request enters the order, its turn is now, and the coordinator is
   asked (:class:`Ask`); without, it is appended at once (:class:`Append`) and never enters.
2. The coordinator answers (:meth:`TxnProduceGate.answered`): each partition it did not confirm
   is refused (``txn_verification.refuse``), the others are appended with their guards.
3. Once appended (or refused), the request leaves the order (:meth:`TxnProduceGate.done`): the
   ones whose turn came are taken in order, each as in 1 (one ahead may have opened the
   transaction there, so the guards are taken only now).
4. A request given up (no answer before its timeout, the connection closed) gives its guards
   back and leaves the order (:meth:`TxnProduceGate.give_up`).

Sans-I/O: requests are the caller's tokens; the caller asks the coordinator, appends
(``produce.produce_as_leader`` with ``verify_transactions`` and the step's guard) and answers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from floodmark.errors import ErrorCode
from floodmark.replication import txn_verification
from floodmark.replication.partition import Partition
from floodmark.replication.produce_order import OrderKey, ProduceOrder
from floodmark.replication.producer_state import VerificationGuard, batch_metas

T = TypeVar("T", bound=Hashable)
TopicPartition = tuple[str, int]
Records = bytes | memoryview | None


@dataclass(frozen=True, slots=True)
class Ask(Generic[T]):
    """Ask the coordinator whether the producer's transaction has these partitions (one
    question per guard's producer and epoch), then call ``answered``."""

    request: T
    guards: Mapping[TopicPartition, VerificationGuard]


@dataclass(frozen=True, slots=True)
class Append(Generic[T]):
    """Append the request now (``verify_transactions`` on): each partition with its guard if
    it has one; the ``refused`` ones are answered (error, message) instead. Then call
    ``done``."""

    request: T
    guards: Mapping[TopicPartition, VerificationGuard]
    refused: Mapping[TopicPartition, tuple[ErrorCode, str | None]]


Step = Ask[T] | Append[T]


def order_keys(parts: Mapping[TopicPartition, Records]) -> list[OrderKey]:
    """(topic, partition, producer id) of each partition's transactional records."""
    keys: list[OrderKey] = []
    for (topic, index), records in parts.items():
        producer = (txn_verification.needs_verification(batch_metas(records))
                    if records else None)
        if producer is not None:
            keys.append((topic, index, producer[0]))
    return keys


@dataclass(slots=True)
class _Request:
    parts: Mapping[TopicPartition, Records]
    denied: Collection[TopicPartition]
    supports_epoch_bump: bool = False  # a transaction version 2 producer (Produce v12+)
    guards: dict[TopicPartition, VerificationGuard] = field(default_factory=dict)


class TxnProduceGate(Generic[T]):
    """One broker's transactional produces on their way to the log. ``partition``: the core of
    a partition this broker hosts (None: not hosted)."""

    def __init__(self, partition: Callable[[TopicPartition], Partition | None]) -> None:
        self._partition = partition
        self.order: ProduceOrder[T] = ProduceOrder()
        self._requests: dict[T, _Request] = {}  # entered the order, until they leave it

    def arrive(self, request: T, parts: Mapping[TopicPartition, Records],
               denied: Collection[TopicPartition] = (), *,
               supports_epoch_bump: bool = False) -> Step[T] | None:
        """A transactional Produce to verify: its first step, or None while it waits behind
        an earlier request of its producer (its step comes from a ``done`` or ``give_up``).
        ``supports_epoch_bump``: its producer runs transaction version 2 (Produce v12+)."""
        keys = order_keys(parts)
        held = _Request(parts, denied, supports_epoch_bump)
        if self.order.holds(keys):
            self.order.enter(request, keys)
            self._requests[request] = held
            return None
        step = self._take(request, held)
        if isinstance(step, Ask):
            self.order.enter(request, keys)  # nothing ahead: its turn is now
            self._requests[request] = held
        return step

    def waiting(self, request: T) -> bool:
        """Is ``request`` in the order, its turn still to come?"""
        return self.order.waiting(request)

    def asking(self, request: T) -> bool:
        """Is the coordinator's answer to ``request``'s ``Ask`` still to come?"""
        held = self._requests.get(request)
        return held is not None and bool(held.guards)

    def answered(self, request: T, errors: Mapping[TopicPartition, ErrorCode]
                 ) -> Append[T] | None:
        """The coordinator's answer to the request's ``Ask`` (a partition it names no error
        for is confirmed). None: the request was given up meanwhile."""
        held = self._requests.get(request)
        if held is None or not held.guards:
            return None
        refused: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        for tp, error in errors.items():
            if error is ErrorCode.NONE:
                continue
            core = self._partition(tp)
            guard = held.guards.get(tp)
            refused[tp] = (txn_verification.refuse(core, guard, error)
                           if core is not None and guard is not None
                           else txn_verification.produce_refusal(error))
        guards = {tp: g for tp, g in held.guards.items() if tp not in refused}
        held.guards = {}  # appended with them or given back: nothing more to give up
        return Append(request, guards, refused)

    def done(self, request: T) -> list[Step[T]]:
        """The request is appended or refused: it leaves the order, and the first steps of
        those whose turn came, in order (an ``Append`` among them is followed by its own
        ``done``)."""
        self._requests.pop(request, None)
        steps: list[Step[T]] = []
        for turn in self.order.leave(request):
            held = self._requests[turn]
            steps.append(self._take(turn, held))
        return steps

    def give_up(self, request: T) -> list[Step[T]]:
        """No answer will come for the request (its timeout, its connection closed): its
        guards are given back, and it leaves the order (``done``)."""
        held = self._requests.get(request)
        if held is not None:
            for tp, guard in held.guards.items():
                core = self._partition(tp)
                if core is not None:
                    txn_verification.abandon(core, guard)
            held.guards = {}
        return self.done(request)

    def _take(self, request: T, held: _Request) -> Step[T]:
        """The request's turn: a guard for each partition whose transaction is not open there
        yet (a refused partition gives its back), then ask, or append when none is needed."""
        guards: dict[TopicPartition, VerificationGuard] = {}
        for tp, records in held.parts.items():
            core = self._partition(tp)
            guard = None if core is None else txn_verification.begin(
                core, records, held.supports_epoch_bump)
            if guard is None or core is None:
                continue
            if tp in held.denied:
                txn_verification.abandon(core, guard)
            else:
                guards[tp] = guard
        held.guards = guards
        if guards:
            return Ask(request, guards)
        return Append(request, {}, {})
