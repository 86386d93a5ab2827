"""What a leader keeps waiting, as values: acks=all produces waiting for the high watermark
(Kafka's ``DelayedProduce``) and follower fetches waiting for the leader's next append (its
``DelayedFetch`` for replicas: ``FollowerFetchPurgatory``; the driver asks the core again for
them, ``ReplicaDriver.answer_parked_follower_fetches``).

A parked produce completes, per ``try_complete``:

=====================================================  ==================================
situation                                              error
=====================================================  ==================================
HW >= last offset + 1 and maximal ISR >= min ISR       NONE
HW >= last offset + 1 but maximal ISR < min ISR        NOT_ENOUGH_REPLICAS_AFTER_APPEND
deadline passed first (``expire``)                     REQUEST_TIMED_OUT
leadership lost (``fail_all``)                          NOT_LEADER_OR_FOLLOWER
=====================================================  ==================================

NOT_ENOUGH_REPLICAS (checked before the append, nothing appended) lives in ``partition.py``.
With strict min ISR the HW is frozen while the ISR is below min ISR, so a produce normally
waits and times out (or succeeds once the ISR recovers); AFTER_APPEND only happens in races.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from floodmark.errors import ErrorCode

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DelayedProduce:
    produce_id: int
    base_offset: int
    required_offset: int  # last offset + 1: the HW that commits the whole batch
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class CompleteProduce:
    """Effect: answer produce ``produce_id`` with ``error`` (base offset -1 on errors)."""

    produce_id: int
    error: ErrorCode
    base_offset: int


class ProducePurgatory:
    """Parked acks=all produces of one partition, in arrival order. Bounded by ``max_waiting``."""

    __slots__ = ("_waiting", "max_waiting")

    def __init__(self, max_waiting: int = 100_000) -> None:
        self._waiting: list[DelayedProduce] = []
        self.max_waiting = max_waiting

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, produce: DelayedProduce) -> None:
        if len(self._waiting) >= self.max_waiting:
            raise OverflowError(f"produce purgatory full ({self.max_waiting} waiting)")
        self._waiting.append(produce)

    def try_complete(
        self, high_watermark: int, maximal_isr_size: int, min_insync_replicas: int
    ) -> list[CompleteProduce]:
        done: list[CompleteProduce] = []
        keep: list[DelayedProduce] = []
        for produce in self._waiting:
            if high_watermark >= produce.required_offset:
                error = (
                    ErrorCode.NONE
                    if maximal_isr_size >= min_insync_replicas
                    else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                )
                done.append(CompleteProduce(produce.produce_id, error, produce.base_offset))
            else:
                keep.append(produce)
        self._waiting = keep
        return done

    def expire(self, now_ms: int) -> list[CompleteProduce]:
        done = [
            CompleteProduce(p.produce_id, ErrorCode.REQUEST_TIMED_OUT, -1)
            for p in self._waiting
            if now_ms >= p.deadline_ms
        ]
        if done:
            self._waiting = [p for p in self._waiting if now_ms < p.deadline_ms]
        return done

    def fail_all(self, error: ErrorCode) -> list[CompleteProduce]:
        done = [CompleteProduce(p.produce_id, error, -1) for p in self._waiting]
        self._waiting = []
        return done

    def next_deadline_ms(self) -> int | None:
        return min((p.deadline_ms for p in self._waiting), default=None)


@dataclass(frozen=True, slots=True)
class Parked(Generic[T]):
    """One parked request and when its wait is over."""

    request: T
    deadline_ms: int


class FollowerFetchPurgatory(Generic[T]):
    """Follower fetches parked at a leader, in arrival order, each until the core has an answer
    for it (records, an error, a diverging epoch) or its wait (``replica.fetch.wait.max.ms``)
    is over. ``T``: the fetch with whatever the runner needs to send the answer back. Bounded
    by ``max_waiting``. Which ones to answer is the driver's call
    (``ReplicaDriver.answer_parked_follower_fetches``); this only keeps them."""

    __slots__ = ("_waiting", "max_waiting")

    def __init__(self, max_waiting: int = 10_000) -> None:
        self._waiting: list[Parked[T]] = []
        self.max_waiting = max_waiting

    def __len__(self) -> int:
        return len(self._waiting)

    def park(self, request: T, deadline_ms: int) -> Parked[T]:
        if len(self._waiting) >= self.max_waiting:
            raise OverflowError(f"follower fetch purgatory full ({self.max_waiting} waiting)")
        parked = Parked(request, deadline_ms)
        self._waiting.append(parked)
        return parked

    def release(self, which: Callable[[Parked[T]], bool],
                answered: Callable[[Parked[T]], bool]) -> None:
        """For each parked fetch ``which`` selects, in order: ``answered`` says whether it
        was answered (it leaves) or not (it stays, in its place)."""
        self._waiting = [p for p in self._waiting if not (which(p) and answered(p))]

    def drop(self, which: Callable[[Parked[T]], bool]) -> int:
        """Forget the parked fetches ``which`` selects, unanswered; how many."""
        before = len(self._waiting)
        self._waiting = [p for p in self._waiting if not which(p)]
        return before - len(self._waiting)

    def clear(self) -> None:
        self._waiting = []

    def next_deadline_ms(self) -> int | None:
        return min((p.deadline_ms for p in self._waiting), default=None)
