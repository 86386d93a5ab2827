"""A simulated cluster: one partition replicated on N brokers, a controller, clients, a checker.

``Cluster`` wires a ``World``, a ``Network``, ``SimBroker``s (real storage on a
``MemoryFileSystem`` each), a ``SimController``, a ``Producer`` and a ``Consumer``, and runs the
invariant ``Checker`` after every event. Scenario scripts (``scenarios.py``) call the step
helpers below; the explorer (``explore.py``) lets the timers run and injects faults.
"""

from __future__ import annotations

from typing import Any

from floodmark.constants import ACKS_ALL, NO_LEADER
from floodmark.sim.network import Network
from floodmark.sim.partition.broker import SimBroker
from floodmark.sim.partition.checker import Checker
from floodmark.sim.partition.clients import Consumer, ProduceOutcome, Producer
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.partition.controller import SimController
from floodmark.sim.partition.follower_reads import FollowerReadCheck
from floodmark.sim.partition.txn_coordinator import SimTxnCoordinator
from floodmark.sim.world import World


class Cluster:
    def __init__(
        self, config: SimConfig, seed: int = 0, names: tuple[str, ...] | None = None
    ) -> None:
        self.config = config
        self.world = World(seed)
        self.net = Network(self.world, config.network)
        count = config.replicas
        self.names = names or tuple(f"b{i}" for i in range(1, count + 1))
        if len(self.names) != count:
            raise ValueError("one name per replica")
        ids = tuple(range(1, count + 1))
        self._by_id = dict(zip(ids, self.names, strict=True))
        self.checker = Checker(self)
        self.controller = SimController(self, ids)
        self.brokers = [SimBroker(self, i, self._by_id[i]) for i in ids]
        self.producer = Producer(
            self,
            timeout_ms=config.produce_timeout_ms,
            delivery_timeout_ms=config.delivery_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        self.consumer = Consumer(self)
        self.check_every_event = True
        self._txn_coordinator: SimTxnCoordinator | None = None
        self.racks: dict[int, str] = {}
        """broker.rack by broker id with replica.selector.class set (KIP-392); empty: unset."""
        self.follower_reads: FollowerReadCheck | None = None
        """Checks what followers serve consumers (``follower_reads``), when a run asks."""

    @property
    def has_txn_coordinator(self) -> bool:
        return self._txn_coordinator is not None

    def txn_coordinator(self, first_producer_id: int = 5001) -> SimTxnCoordinator:
        """The transaction coordinator (the broker's core), made on first use so runs without
        transactions schedule nothing more."""
        if self._txn_coordinator is None:
            self._txn_coordinator = SimTxnCoordinator(
                self, first_producer_id=first_producer_id,
                request_timeout_ms=self.config.produce_timeout_ms,
                retry_backoff_ms=self.config.retry_backoff_ms,
                cleanup_interval_ms=200 if self.config.autonomous else 0,
                transaction_version=self.config.transaction_version)
        return self._txn_coordinator

    # -- naming ---------------------------------------------------------------------------------
    def name_of(self, broker_id: int) -> str:
        if broker_id == NO_LEADER:
            return "-"
        return self._by_id.get(broker_id, f"#{broker_id}")

    def broker(self, name: str) -> SimBroker:
        for broker in self.brokers:
            if broker.name == name:
                return broker
        raise KeyError(name)

    def leader(self) -> SimBroker | None:
        """The broker the controller names leader, if it is alive and acts as leader."""
        leader_id = self.controller.registration.leader
        for broker in self.brokers:
            if (
                broker.broker_id == leader_id
                and broker.alive
                and broker.partition
                and broker.partition.is_leader
            ):
                return broker
        return None

    # -- hooks (called by brokers, controller, clients) ------------------------------------------
    def after_broker_event(self, broker: SimBroker) -> None:
        if self.check_every_event:
            self.checker.check_state()

    def after_controller_event(self) -> None:
        if self.check_every_event:
            self.checker.check_state()

    def on_high_watermark(self, broker: SimBroker, old: int, new: int) -> None:
        self.world.record(f"{broker.name} HW {old}->{new}")
        self.checker.on_leader_high_watermark(broker, old, new)

    def on_truncate(self, broker: SimBroker, new_leo: int, old_leo: int) -> None:
        pass

    def on_become_leader(self, broker: SimBroker, epoch: int) -> None:
        self.checker.on_become_leader(broker, epoch)

    def on_leader_append(self, broker: SimBroker, epoch: int) -> None:
        self.checker.on_leader_append(broker, epoch)

    def on_acknowledged(self, outcome: ProduceOutcome) -> None:
        if outcome.acks == ACKS_ALL:
            self.checker.on_acknowledged(outcome.offset, outcome.value)

    def on_transactional_send(self, value: str, producer_id: int) -> None:
        self.checker.on_transactional_send(value, producer_id)

    def start_txn_coordinator(self) -> str:
        return self.txn_coordinator().name

    def on_transaction_decided(self, producer_id: int, committed: bool) -> None:
        self.checker.on_transaction_decided(producer_id, committed)

    def on_consumer_read(
        self, broker: SimBroker, records: tuple[tuple[int, int, str], ...], hw: int,
        last_stable_offset: int, isolation_level: int, read: tuple[int, int],
    ) -> None:
        self.checker.on_served(broker, records, hw, last_stable_offset, isolation_level, read)
        if self.follower_reads is not None:
            self.follower_reads.on_served(self, broker, records)

    # -- running ----------------------------------------------------------------------------------
    def boot(self) -> None:
        """Start every broker and let registration and the first election settle."""
        for broker in self.brokers:
            broker.start()
        self.world.run_until_idle(50) if not self.config.autonomous else self.world.run_until(
            self.world.now_ms + 100
        )

    def settle(self) -> None:
        """Scenario mode: deliver everything in flight (no timers run in this mode)."""
        self.world.run_until_idle(100)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return {b.name: b.snapshot() for b in self.brokers}
