"""The follower side of a simulated broker: the node's fetch loop (``replication.fetcher``)
routed over the simulated network, as ``broker/replica_fetcher_thread.py`` routes it over
sockets.

No rule lives here: when to fetch, what to ask (a fetch or an epoch query), when a request has
timed out and what an answer means are the loop's and the driver's (``FetchLoop``,
``ReplicaDriver.on_fetch_response``). This sends what the loop says is due, wakes it at its
next deadline through the world's timers, and hands it the answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from floodmark.replication import (
    APPEND_REJECTED,
    EpochQuery,
    FetchLoop,
    FetchToSend,
    FollowerAction,
    FollowerActionKind,
    ReplicaDriver,
)
from floodmark.sim.network import Network
from floodmark.sim.partition import messages as m
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.partition.replica_view import LogMirror
from floodmark.sim.world import World
from floodmark.spec import decode_entries
from floodmark.storage import Log

Timer = Callable[..., None]
"""``SimBroker._timer``: (delay_ms, fn, *args), run in the broker's incarnation."""


class FollowerSide:
    """One incarnation's fetch loop and its wake-up timer."""

    def __init__(self, name: str, world: World, net: Network, name_of: Callable[[int], str],
                 config: SimConfig, driver: ReplicaDriver, log: Log, mirror: LogMirror,
                 timer: Timer) -> None:
        self.name = name
        self.world = world
        self.net = net
        self.name_of = name_of
        self.autonomous = config.autonomous
        self.log = log
        self.mirror = mirror
        self.timer = timer
        # A scripted world times nothing out: its steps answer or drop requests by hand.
        self.loop = FetchLoop(
            driver,
            request_timeout_ms=(config.request_timeout_ms + config.fetch_wait_max_ms
                                if config.autonomous else None),
            backoff_ms=config.fetch_backoff_ms)
        self._timer_at: int | None = None

    @property
    def inflight(self) -> bool:
        return self.loop.inflight

    def send_now(self) -> bool:
        """Scenario step: send the next fetch (or epoch query) to the leader now; False if
        there is nothing to send (one is in flight, no leader)."""
        return self._send(self.loop.poll(self.world.now_ms, force=True))

    def on_metadata(self) -> None:
        self.loop.on_metadata(self.world.now_ms)
        self.due()

    def due(self) -> None:
        """After an input to the fetch loop: send what it says is due now, and wake it at its
        next deadline (autonomous worlds; a scripted one sends by hand)."""
        if not self.autonomous:
            return
        self._send(self.loop.poll(self.world.now_ms))
        deadline = self.loop.next_deadline_ms()
        if deadline is not None and deadline != self._timer_at:
            self._timer_at = deadline
            self.timer(max(0, deadline - self.world.now_ms), self._tick, deadline)

    def _tick(self, at: int) -> None:
        if at == self._timer_at:
            self._timer_at = None
        self.loop.tick(self.world.now_ms)
        self.due()

    def _send(self, out: FetchToSend | None) -> bool:
        if out is None:
            return False
        leader = self.name_of(out.leader_id)
        request: Any = (m.EpochQueryMsg(out.session, out.request)
                        if isinstance(out.request, EpochQuery)
                        else m.FetchRequestMsg(out.session, out.request))
        self.net.send(self.name, leader, request)
        return True

    def on_epoch_reply(self, msg: m.EpochReplyMsg) -> None:
        if msg.session != self.loop.session or not self.loop.inflight:
            return
        self.world.record(
            f"{self.name} epoch answer e{msg.answer.epoch}@{msg.answer.end_offset} ({msg.error.name})"
        )
        self.loop.on_epoch_answer(msg.session, msg.request_leader_epoch, msg.error, msg.answer,
                                  self.world.now_ms)
        self.due()

    def on_fetch_reply(self, msg: m.FetchReplyMsg) -> FollowerAction | None:
        """The loop's answer to a fetch reply (None: a stale one, ignored)."""
        action = self.loop.on_fetch_answer(msg.session, msg.response, msg.records,
                                           self.world.now_ms)
        if action is None:
            return None
        kind = action.kind
        if action.reason.startswith(APPEND_REJECTED):
            self.world.record(f"{self.name} {action.reason}")
        elif kind is FollowerActionKind.APPEND and msg.records:
            assert len(self.mirror.entries) == self.log.log_end_offset
            new = decode_entries(msg.records)
            self.world.record(
                f"{self.name} fetched {new[0][0]}..{new[-1][0]} (LEO {self.log.log_end_offset}) "
                f"leader HW {msg.response.high_watermark}"
            )
        elif kind in (FollowerActionKind.RETRY, FollowerActionKind.STOP):
            self.world.record(f"{self.name} fetch error {action.reason}")
        self.due()
        return action
