"""The broker's side of ``replication/txn_produce_gate.py`` (a transactional Produce's way to
the log through KIP-890's verification, in its producer's order): a request's next step is an
asyncio future, set when the gate says its turn came."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Mapping

from floodmark.errors import ErrorCode
from floodmark.replication import (
    Append,
    Partition,
    Records,
    Step,
    TopicPartition,
    TxnProduceGate,
)


class TxnProduces:
    def __init__(self, partition: Callable[[TopicPartition], Partition | None]) -> None:
        self.gate: TxnProduceGate[int] = TxnProduceGate(partition)
        self._next_token = 0
        self._turns: dict[int, asyncio.Future[Step[int]]] = {}  # requests waiting their turn

    def arrive(self, parts: Mapping[TopicPartition, Records], denied: Collection[TopicPartition],
               *, supports_epoch_bump: bool = False
               ) -> tuple[int, Step[int] | asyncio.Future[Step[int]]]:
        """A transactional Produce to verify: its token and its first step, or the future of
        that step while it waits behind an earlier request of its producer. Every request but
        one answered ``Append`` at once ends with ``give_up`` (after its append, or when it is
        given up: its guards go back, the next ones go)."""
        self._next_token += 1
        token = self._next_token
        step = self.gate.arrive(token, parts, denied, supports_epoch_bump=supports_epoch_bump)
        if step is not None:
            return token, step
        turn: asyncio.Future[Step[int]] = asyncio.get_running_loop().create_future()
        self._turns[token] = turn
        return token, turn

    def answered(self, token: int, errors: Mapping[TopicPartition, ErrorCode]
                 ) -> Append[int] | None:
        return self.gate.answered(token, errors)

    def give_up(self, token: int) -> None:
        """The request is appended or refused, or given up: the ones whose turn comes go.
        Idempotent."""
        self._turns.pop(token, None)
        self._deliver(self.gate.give_up(token))

    def _deliver(self, steps: Iterable[Step[int]]) -> None:
        for step in steps:
            turn = self._turns.pop(step.request, None)
            if turn is not None and not turn.done():
                turn.set_result(step)
            else:  # its task is gone: it leaves in its turn
                self.give_up(step.request)

    def __len__(self) -> int:
        """Requests in the producers' order (waiting or in their turn)."""
        return len(self.gate.order)
