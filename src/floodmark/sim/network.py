"""A message network between simulated nodes: delay, request-level loss, partitions.

Messages are whole requests or responses (never stream bytes). Per directed link delivery is FIFO,
as over one TCP connection. A partition between two nodes is either

* ``HOLD``: messages wait and are delivered when the partition heals (a stalled connection), or
* ``RESET``: messages are dropped, as when both ends see the connection die; senders time out
  and retry (verification.md section 3.2 rule 6).

A message to or from a node whose incarnation changed since it was sent (the node crashed or
restarted) is dropped: the connection it travelled on is gone. A paused node receives nothing
until it resumes (the messages wait in its socket buffers).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from floodmark.sim.world import World

Handler = Callable[[str, Any], None]


class PartitionMode(enum.Enum):
    HOLD = "hold"
    RESET = "reset"


@dataclass(slots=True)
class NodeInfo:
    handler: Handler
    incarnation: int = 0
    up: bool = True
    paused: bool = False
    waiting: list[tuple[str, Any]] = field(default_factory=list)  # delivered while paused


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    min_delay_ms: int = 1
    max_delay_ms: int = 3
    loss_probability: float = 0.0


class Network:
    def __init__(self, world: World, config: NetworkConfig | None = None) -> None:
        self.world = world
        self.config = config or NetworkConfig()
        self.nodes: dict[str, NodeInfo] = {}
        self.cuts: dict[tuple[str, str], PartitionMode] = {}
        self.held: dict[tuple[str, str], list[Any]] = {}
        self._link_clock: dict[tuple[str, str], int] = {}
        self.sent = 0
        self.dropped = 0

    def add_node(self, name: str, handler: Handler) -> None:
        self.nodes[name] = NodeInfo(handler)

    # -- node lifecycle -----------------------------------------------------------------------
    def node_down(self, name: str) -> None:
        node = self.nodes[name]
        node.up = False
        node.incarnation += 1
        node.waiting.clear()
        node.paused = False

    def node_up(self, name: str) -> None:
        node = self.nodes[name]
        node.up = True
        node.incarnation += 1

    def pause(self, name: str) -> None:
        self.nodes[name].paused = True

    def resume(self, name: str) -> None:
        node = self.nodes[name]
        node.paused = False
        waiting, node.waiting = node.waiting, []
        for src, message in waiting:
            self.world.schedule(0, self._deliver_now, src, name, node.incarnation, message)

    # -- partitions ---------------------------------------------------------------------------
    def cut(self, a: str, b: str, mode: PartitionMode) -> None:
        """Cut both directions between ``a`` and ``b``."""
        self.cuts[(a, b)] = mode
        self.cuts[(b, a)] = mode

    def heal(self, a: str | None = None, b: str | None = None) -> None:
        """Heal one link (both directions) or, without arguments, every link."""
        links = list(self.cuts) if a is None else [(a, b or ""), (b or "", a)]
        for link in links:
            if link in self.cuts:
                del self.cuts[link]
                for message in self.held.pop(link, []):
                    self._transmit(link[0], link[1], message)

    def is_cut(self, a: str, b: str) -> bool:
        return (a, b) in self.cuts

    # -- sending ------------------------------------------------------------------------------
    def send(self, src: str, dst: str, message: Any) -> None:
        self.sent += 1
        source = self.nodes[src]
        if not source.up:
            self.dropped += 1
            return
        mode = self.cuts.get((src, dst))
        if mode is PartitionMode.HOLD:
            self.held.setdefault((src, dst), []).append((source.incarnation, message))
            return
        if mode is PartitionMode.RESET:
            self.dropped += 1
            return
        self._transmit(src, dst, (source.incarnation, message))

    def _transmit(self, src: str, dst: str, envelope: tuple[int, Any]) -> None:
        src_incarnation, message = envelope
        if self.nodes[src].incarnation != src_incarnation:
            self.dropped += 1
            return
        cfg = self.config
        if cfg.loss_probability > 0 and self.world.rng.random() < cfg.loss_probability:
            self.dropped += 1
            return
        delay = self.world.rng.randint(cfg.min_delay_ms, cfg.max_delay_ms)
        link = (src, dst)
        when = max(self.world.now_ms + delay, self._link_clock.get(link, 0))
        self._link_clock[link] = when
        dst_node = self.nodes[dst]
        self.world.schedule(
            when - self.world.now_ms,
            self._deliver,
            src,
            dst,
            src_incarnation,
            dst_node.incarnation,
            message,
        )

    def _deliver(self, src: str, dst: str, src_inc: int, dst_inc: int, message: Any) -> None:
        if self.nodes[src].incarnation != src_inc:
            self.dropped += 1  # the sender crashed: its connection is gone
            return
        self._deliver_now(src, dst, dst_inc, message)

    def _deliver_now(self, src: str, dst: str, dst_inc: int, message: Any) -> None:
        node = self.nodes[dst]
        if not node.up or node.incarnation != dst_inc:
            self.dropped += 1
            return
        if self.cuts.get((src, dst)) is PartitionMode.RESET:
            self.dropped += 1  # cut while in flight
            return
        if node.paused:
            node.waiting.append((src, message))
            return
        node.handler(src, message)
