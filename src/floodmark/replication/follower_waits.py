"""Follower fetches waiting at a leader, one partition's, for a runner whose follower fetches
name one partition each (the simulator): Kafka's DelayedFetch for replicas, sans-I/O.

A follower's fetch that the leader has nothing for yet (no records, no error, no diverging
epoch: ``FollowerFetchAnswer.complete``) waits for the leader's next append, at most
``replica.fetch.wait.max.ms``. The rules around that wait are here, once: answer at once or
park; after a step in which the core said ``WakeFollowerFetches`` ask every parked fetch again
(``ReplicaDriver.answer_parked_follower_fetches``, the same question as on arrival; the step's
own answers, a produce's, go first); a fetch whose wait is over is answered with what the leader
has then. The wait's end is a timer the runner reads from ``next_deadline_ms()`` and fires
with ``tick(now_ms)``. The runner gives the read (its fetch size) and the send (its network).

The broker's Fetch names many partitions, so a whole request waits in the broker's purgatory
and each wake re-asks its partitions through ``ReplicaDriver.answer_follower_fetch`` by the
same ``complete`` rule (``broker.replica_fetcher``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic

from floodmark.replication.driver import F, FollowerFetchAnswer, ReadBatches, ReplicaDriver
from floodmark.replication.purgatory import FollowerFetchPurgatory

UNTIL_RELEASED_MS = 1 << 62
"""The deadline of a fetch that waits until released by hand (``wait_ms`` None)."""


@dataclass(eq=False, slots=True)
class FollowerFetchWaits(Generic[F]):
    """The parked follower fetches of one leader partition. ``wait_ms``: how long a fetch
    waits for an append (``replica.fetch.wait.max.ms``; None: until released, a scripted
    world's steps release them)."""

    driver: ReplicaDriver
    read: ReadBatches
    send: Callable[[F, FollowerFetchAnswer], None]
    wait_ms: int | None
    parked: FollowerFetchPurgatory[F] = field(default_factory=FollowerFetchPurgatory)
    woken: bool = False

    def receive(self, request: F, now_ms: int) -> int | None:
        """A follower's fetch: answered now when the core has an answer for it, else parked.
        Returns the parked fetch's deadline (None: answered)."""
        answer = self.driver.answer_follower_fetch(request.fetch, now_ms, self.read)
        if answer.complete:
            self.send(request, answer)
            return None
        deadline = UNTIL_RELEASED_MS if self.wait_ms is None else now_ms + self.wait_ms
        self.parked.park(request, deadline)
        return deadline

    def wake(self) -> None:
        """The core said ``WakeFollowerFetches``: ask the parked fetches again after the step."""
        self.woken = True

    def after_step(self, now_ms: int) -> None:
        """End of a step: if the core woke them, every parked fetch is asked again; those it
        now has an answer for are answered."""
        if self.woken:
            self.woken = False
            self.answer(now_ms)

    def answer(self, now_ms: int, which: Callable[[F], bool] | None = None, *,
               force: bool = False) -> int:
        """Ask the parked fetches ``which`` selects again (``force``: answer each whatever
        the core says, a scenario's release); how many were answered."""
        if not self.parked:
            return 0
        return self.driver.answer_parked_follower_fetches(
            self.parked, now_ms, self.read, self.send, which=which, force=force)

    def next_deadline_ms(self) -> int | None:
        deadline = self.parked.next_deadline_ms()
        return None if deadline is None or deadline >= UNTIL_RELEASED_MS else deadline

    def tick(self, now_ms: int) -> None:
        """The fetches whose wait is over are answered with what the leader has now."""
        if self.parked:
            self.driver.answer_parked_follower_fetches(
                self.parked, now_ms, self.read, self.send, due_only=True)

    def drop(self, which: Callable[[F], bool]) -> int:
        """Forget the parked fetches ``which`` selects, unanswered (their answer is lost)."""
        return self.parked.drop(lambda p: which(p.request))
