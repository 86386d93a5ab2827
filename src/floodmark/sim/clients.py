"""Simulated clients: a producer with unique values and a consumer that reads below the HW.

Both learn the leader from the controller's metadata (a MetadataRequest after any error) and
talk to brokers over the simulated network. Every outcome is recorded for the checker:
``acked_all`` (values an acks=all producer was told are written, with their offsets), acks=1
acknowledgements separately, and definite/indefinite failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from floodmark.errors import ErrorCode
from floodmark.replication.election import NO_LEADER
from floodmark.replication.partition import ACKS_ALL, ACKS_LEADER, ACKS_NONE
from floodmark.sim import messages as m

if TYPE_CHECKING:
    from floodmark.sim.cluster import Cluster


@dataclass(slots=True)
class ProduceOutcome:
    value: str
    acks: int
    sent_ms: int
    error: ErrorCode | None = None  # None while unanswered
    offset: int = -1


@dataclass(slots=True)
class Producer:
    cluster: Cluster
    name: str = "producer"
    acks: int = ACKS_ALL
    interval_ms: int = 20
    max_in_flight: int = 5
    timeout_ms: int = 1000
    running: bool = False
    leader: int = NO_LEADER
    next_id: int = 0
    outcomes: dict[int, ProduceOutcome] = field(default_factory=dict)
    in_flight: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.cluster.net.add_node(self.name, self.on_message)

    def start(self) -> None:
        self.running = True
        self.cluster.net.send(self.name, "controller", m.MetadataRequest())
        self.cluster.world.schedule(self.interval_ms, self._tick)

    def stop(self) -> None:
        self.running = False

    def _tick(self) -> None:
        if not self.running:
            return
        if self.leader != NO_LEADER and len(self.in_flight) < self.max_in_flight:
            self.send(f"v{self.next_id + 1}", self.acks)
        self.cluster.world.schedule(self.interval_ms, self._tick)

    def send(self, value: str, acks: int, to: int | None = None) -> int:
        """Send one produce; returns its id. ``to`` overrides the believed leader."""
        self.next_id += 1
        produce_id = self.next_id
        target = self.leader if to is None else to
        world = self.cluster.world
        self.outcomes[produce_id] = ProduceOutcome(value, acks, world.now_ms)
        if acks != ACKS_NONE:
            self.in_flight.add(produce_id)
            world.schedule(self.timeout_ms + 50, self._expire, produce_id)
        world.record(f"{self.name} send {value} acks={acks} to {self.cluster.name_of(target)}")
        self.cluster.net.send(
            self.name,
            self.cluster.name_of(target),
            m.Produce(produce_id, value, acks, self.timeout_ms),
        )
        return produce_id

    def _expire(self, produce_id: int) -> None:
        if produce_id in self.in_flight:
            self.in_flight.discard(produce_id)
            outcome = self.outcomes[produce_id]
            outcome.error = ErrorCode.REQUEST_TIMED_OUT  # indefinite: may or may not be written
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())

    def on_message(self, src: str, message: Any) -> None:
        if isinstance(message, m.Metadata):
            self.leader = message.registration.leader
            return
        if not isinstance(message, m.ProduceReply):
            raise TypeError(f"producer: unexpected {message!r}")
        if message.produce_id not in self.in_flight:
            return
        self.in_flight.discard(message.produce_id)
        outcome = self.outcomes[message.produce_id]
        outcome.error = message.error
        outcome.offset = message.base_offset
        self.cluster.world.record(
            f"{self.name} {outcome.value} -> {message.error.name} offset={message.base_offset}"
        )
        if message.error is ErrorCode.NONE:
            self.cluster.on_acknowledged(outcome)
        else:
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())

    def acknowledged(self, acks: int = ACKS_ALL) -> list[ProduceOutcome]:
        return [o for o in self.outcomes.values() if o.acks == acks and o.error is ErrorCode.NONE]


@dataclass(slots=True)
class Consumer:
    cluster: Cluster
    name: str = "consumer"
    interval_ms: int = 30
    position: int = 0
    leader: int = NO_LEADER
    leader_epoch: int = -1
    running: bool = False
    next_id: int = 0
    inflight: int = 0
    seen: dict[int, tuple[int, str]] = field(default_factory=dict)  # offset -> (epoch, value)

    def __post_init__(self) -> None:
        self.cluster.net.add_node(self.name, self.on_message)

    def start(self) -> None:
        self.running = True
        self.cluster.net.send(self.name, "controller", m.MetadataRequest())
        self.cluster.world.schedule(self.interval_ms, self._tick)

    def stop(self) -> None:
        self.running = False

    def _tick(self) -> None:
        if not self.running:
            return
        if self.leader != NO_LEADER and self.inflight == 0:
            self.next_id += 1
            self.inflight = self.next_id
            self.cluster.net.send(
                self.name,
                self.cluster.name_of(self.leader),
                m.ConsumerFetch(self.next_id, self.position, self.leader_epoch),
            )
            self.cluster.world.schedule(400, self._timeout, self.next_id)
        self.cluster.world.schedule(self.interval_ms, self._tick)

    def _timeout(self, fetch_id: int) -> None:
        if self.inflight == fetch_id:
            self.inflight = 0
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())

    def on_message(self, src: str, message: Any) -> None:
        if isinstance(message, m.Metadata):
            self.leader = message.registration.leader
            self.leader_epoch = message.registration.leader_epoch
            return
        if not isinstance(message, m.ConsumerFetchReply):
            raise TypeError(f"consumer: unexpected {message!r}")
        if message.fetch_id != self.inflight:
            return
        self.inflight = 0
        if message.error is ErrorCode.OFFSET_OUT_OF_RANGE:
            # Our position is past the leader's log: it was truncated under us (KIP-320 would
            # detect this by epoch); reset to the leader's end.
            self.cluster.world.record(
                f"{self.name} position {self.position} out of range, reset to {message.log_end_offset}"
            )
            self.position = message.log_end_offset
            return
        if message.error is not ErrorCode.NONE:
            self.cluster.net.send(self.name, "controller", m.MetadataRequest())
            return
        for offset, epoch, value in message.records:
            if offset != self.position:
                continue
            self.seen.setdefault(offset, (epoch, value))
            self.position = offset + 1


__all__ = ["ACKS_ALL", "ACKS_LEADER", "ACKS_NONE", "Consumer", "ProduceOutcome", "Producer"]
