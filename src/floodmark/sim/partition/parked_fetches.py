"""The follower fetches parked at a simulated leader, routed over the simulated network.

No rule lives here: whether a fetch is answered now or waits, when a parked one is asked again
and what it is answered are the node's (``replication.follower_waits.FollowerFetchWaits`` over
``ReplicaDriver.answer_parked_follower_fetches``, the same ``FollowerFetchAnswer.complete`` rule
the broker's replica Fetch waits by). This reads the batches the answer carries, sends it back
to the follower that asked, and wakes the waits at their deadline through the world's timers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from floodmark.replication import (
    FollowerFetch,
    FollowerFetchAnswer,
    FollowerFetchWaits,
    ReplicaDriver,
)
from floodmark.sim.network import Network
from floodmark.sim.partition import messages as m
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.world import World
from floodmark.storage import Log

Timer = Callable[..., None]
"""``SimBroker._timer``: (delay_ms, fn, *args), run in the broker's incarnation."""


@dataclass(frozen=True, slots=True)
class ParkedFetch:
    """A follower fetch parked at this leader, with where its answer goes."""

    src: str
    request: m.FetchRequestMsg

    @property
    def fetch(self) -> FollowerFetch:
        return self.request.fetch


class ParkedFetches:
    """One incarnation's parked follower fetches (they die with the process)."""

    def __init__(self, name: str, world: World, net: Network, config: SimConfig,
                 driver: ReplicaDriver, log: Log, timer: Timer) -> None:
        self.name = name
        self.world = world
        self.net = net
        self.autonomous = config.autonomous
        self.fetch_max_bytes = config.fetch_max_bytes
        self.log = log
        self.timer = timer
        # A scripted world's parked fetches wait until a step releases them.
        self.waits: FollowerFetchWaits[ParkedFetch] = FollowerFetchWaits(
            driver, self._read, self._send,
            config.fetch_wait_max_ms if config.autonomous else None)

    def receive(self, src: str, msg: m.FetchRequestMsg) -> None:
        """A follower's fetch: answered now, or parked until an append, a wake or its wait."""
        now = self.world.now_ms
        deadline = self.waits.receive(ParkedFetch(src, msg), now)
        if deadline is not None and self.autonomous:
            self.timer(deadline - now, self._tick)

    def _tick(self) -> None:
        self.waits.tick(self.world.now_ms)

    def wake(self) -> None:
        """The core said ``WakeFollowerFetches``: asked again at the end of the step."""
        self.waits.wake()

    def after_step(self) -> None:
        self.waits.after_step(self.world.now_ms)

    def release(self, follower_name: str) -> bool:
        """Scenario step: answer the parked fetch of one follower now."""
        return self.waits.answer(self.world.now_ms, lambda p: p.src == follower_name,
                                 force=True) > 0

    def drop(self, follower_name: str) -> None:
        """Scenario step: forget one follower's parked fetch, unanswered."""
        self.waits.drop(lambda p: p.src == follower_name)

    def _read(self, start: int, upto: int) -> bytes:
        return bytes(self.log.read(start, self.fetch_max_bytes, upto).records)

    def _send(self, parked: ParkedFetch, answer: FollowerFetchAnswer) -> None:
        self.net.send(self.name, parked.src, m.FetchReplyMsg(
            parked.request.session, answer.response, bytes(answer.records)))
